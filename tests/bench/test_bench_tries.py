"""`rewriter bench --tests --tries N`: later tries asked as `apply --test` asks, and passes within 1..N tries."""
from rewriter.bench.bench import judge_answer
from rewriter.bench.cases import Case
from rewriter.bench.summary import format_tests_summary, summarize_tests
from rewriter.bench.tries import later_tries, passed_on_try
from rewriter.edits.options import EditOptions
from rewriter.results import RewriteResult, Stats
from tests.helpers.bench_cases import AFTER, INSTRUCTION, MEAN, MINIMAL_CASE, fenced, row, write_cases
from tests.helpers.cli import assert_clean_failure, run_cli

CASE = Case("t/1", "python", MEAN, INSTRUCTION, "assert mean([1, 2, 3]) == 2\nassert mean([]) == 0.0\n")
WRONG = AFTER.replace("0.0", "1.0")  # changed, and fails the tests
OPTIONS = EditOptions(branches=0)  # the engines here have no branches


class Answering:
    """An engine that answers the requests, in order, with `texts`, and keeps the requests."""

    def __init__(self, texts: list[str]):
        self.texts = list(texts)
        self.requests = []

    def stream(self, request):
        self.requests.append(request)
        text = self.texts.pop(0)
        yield RewriteResult(text=text, answer=fenced(text), stats=Stats())


def test_a_failed_answer_is_asked_again_with_its_code_and_the_failing_output_until_one_passes():
    first = judge_answer(CASE, fenced(WRONG))
    engine = Answering([WRONG, AFTER])
    later = later_tries(engine, CASE, first, 4, OPTIONS, 30.0)
    assert [answer["outcome"] for answer in later] == ["failed", "passed"]
    assert [answer["try"] for answer in later] == [2, 3]
    told = engine.requests[0].instruction
    assert told.startswith(INSTRUCTION) and "if not values:\n        return 1.0" in told
    assert "the tests failed" in told and "AssertionError" in told
    assert passed_on_try(first["outcome"], later) == 3


def test_the_tries_stop_where_apply_stops_them():
    assert later_tries(Answering([]), CASE, judge_answer(CASE, fenced(AFTER)), 4, OPTIONS, 30.0) == []
    unchanged = later_tries(Answering([MEAN, AFTER]), CASE, judge_answer(CASE, fenced(WRONG)), 4, OPTIONS, 30.0)
    assert [answer["outcome"] for answer in unchanged] == ["unchanged"]
    spent = later_tries(Answering([WRONG, WRONG, AFTER]), CASE, judge_answer(CASE, fenced(WRONG)), 2, OPTIONS, 30.0)
    assert [answer["outcome"] for answer in spent] == ["failed"]
    assert passed_on_try("failed", spent) is None


def later(try_: int, outcome: str, seconds: float = 1.0) -> dict:
    return {"try": try_, "outcome": outcome, "seconds": seconds, "candidates": 0}


def test_the_summary_gives_passes_within_each_count_of_tries_and_their_cost():
    rows = [row("passed", tries=[], passed_on_try=1, tries_allowed=4),
            row("failed", tries=[later(2, "passed")], passed_on_try=2, tries_allowed=4),
            row("failed", tries=[later(2, "failed"), later(3, "failed"), later(4, "passed")], passed_on_try=4,
                tries_allowed=4),
            row("failed", tries=[later(2, "unchanged")], passed_on_try=None, tries_allowed=4)]
    summary = summarize_tests(rows)["tries"]
    assert summary["passed_within"] == {"1": 1, "2": 2, "3": 2, "4": 3}
    assert summary["ended"] == {"passed": 3, "unchanged": 1}
    assert summary["later_tries"] == 5 and summary["answers_per_case"] == 9 / 4
    first_answers = sum(r["ours_s"] for r in rows)
    assert summary["seconds_within"]["1"] == first_answers
    assert summary["seconds_within"]["4"] == first_answers + 5
    assert "passed within N tries (1: 1, 2: 2, 3: 2, 4: 3)" in format_tests_summary(summarize_tests(rows))


def test_tries_are_for_tests(tmp_path):
    cases = write_cases(tmp_path, [MINIMAL_CASE])
    assert_clean_failure(run_cli("bench", str(cases), "--tries", "2"), "--tries")
    assert_clean_failure(run_cli("bench", str(cases), "--tests", "--tries", "0"), "--tries")
