"""--self-test: the model's own tests choose among the candidates; today's choice wins a tie, and
the tests run in a temporary directory with a time limit, never where the user works."""
from __future__ import annotations

import pytest

from rewriter.edits import self_test
from rewriter.edits.checks.integrity import FileIntegrity
from rewriter.edits.self_test import MARK, ModelTests, best, score
from rewriter.edits.session import EditSession, Finished
from rewriter.edits.target import Target
from rewriter.results import RewriteResult, Stats
from tests.helpers.gated import AnsweringEngine

FILE = "def mean(values):\n    return sum(values) / len(values)\n"
RIGHT = "def mean(values):\n    if not values:\n        return 0.0\n    return sum(values) / len(values)\n"
WRONG = RIGHT.replace("0.0", "1.0")  # changed, and wrong
HALF = "def mean(values):\n    if not values:\n        return 0.0\n    return sum(values) // len(values)\n"
TESTS = ("def test_empty():\n    assert mean([]) == 0.0\n\n\ndef test_two():\n    assert mean([1, 2]) == 1.5\n\n\n"
         "def test_one():\n    assert mean([4]) == 4\n")


class SelfTesting(AnsweringEngine):
    """Answers the edit with `answer`, the request for tests with the code and `tests` after it;
    its branches are `branch_texts`; sampled answers are the original (they qualify for nothing)."""

    def __init__(self, answer: str, branch_texts: list[str], tests: str = TESTS):
        super().__init__(lambda request: request.code + "\n\n" + tests if "test functions" in request.instruction
                         else FILE if request.sampling is not None else answer)
        self.branch_texts = branch_texts

    def branches(self, request, count):
        for text in self.branch_texts[:count]:
            yield RewriteResult(text=text, answer="", stats=Stats(output_tokens=4, finish_reason="stop"))


def finish(engine, self_tested: bool = True, branches: int = 4) -> Finished:
    session = EditSession(engine, Target.whole(FILE), "Return 0.0 for an empty list.", "python", branches=branches,
                          integrity=FileIntegrity(FILE, "python"), self_test=self_tested)
    (finished,) = [event for event in session.run() if isinstance(event, Finished)]
    return finished


def test_the_candidate_passing_most_of_the_models_tests_is_taken_over_todays_choice():
    finished = finish(SelfTesting(WRONG, [HALF, RIGHT]))
    assert finished.decision.text == RIGHT and finished.restart  # what streamed was today's choice
    report = finished.self_test
    assert report.tests.names == ("test_empty_1", "test_two_1", "test_one_1")
    assert report.today.passed == ("test_two_1", "test_one_1") and report.today_text == WRONG
    assert [(origin, scored.passed) for origin, _, scored in report.candidates] == [
        ("branch 1", ("test_empty_1", "test_one_1")), ("branch 2", ("test_empty_1", "test_two_1", "test_one_1"))]
    assert report.chosen == 1 and "branch 2 passed 3 of the model's 3 tests, the usual choice 2" in report.describe()
    # Its seconds in parts: the answer with the tests, then running them on each candidate (3 runs).
    assert 0 < report.writing_seconds and report.writing_seconds + report.testing_seconds <= report.seconds
    runs = [report.today.seconds] + [scored.seconds for _, _, scored in report.candidates]
    assert report.testing_seconds == pytest.approx(sum(runs)) and all(run > 0 for run in runs)


def test_without_the_self_test_or_on_a_tie_todays_choice_stays():
    assert finish(SelfTesting(WRONG, [HALF, RIGHT]), self_tested=False).decision.text == WRONG
    tie = finish(SelfTesting(HALF, [WRONG, HALF.replace("//", "// ")]))  # 2 of 3 passed by each
    assert tie.decision.text == HALF and tie.self_test.chosen is None and not tie.restart
    no_tests = finish(SelfTesting(WRONG, [RIGHT], tests="print('no tests here')\n"))
    assert no_tests.decision.text == WRONG and no_tests.self_test.tests is None


def test_an_unchanged_answer_is_replaced_only_by_a_candidate_passing_more_than_the_original():
    # The original passes test_two and test_one (2 of 3), as WRONG does; only RIGHT passes more.
    assert finish(SelfTesting(FILE, [WRONG])).decision.text == WRONG  # today's rule: the first branch
    assert finish(SelfTesting(FILE, [], tests=TESTS), branches=0).decision.text == FILE
    picked = finish(SelfTesting(FILE, [WRONG, RIGHT]))
    assert picked.self_test.today_text == WRONG and picked.decision.text == RIGHT


def test_the_tests_run_in_a_temporary_directory_and_stop_at_the_time_limit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    writes = ModelTests("def test_writes():\n    open('written.txt', 'w').write('x')\n", ("test_writes",))
    assert score(FILE, writes).passed == ("test_writes",) and not (tmp_path / "written.txt").exists()
    monkeypatch.setattr(self_test, "TIMEOUT_S", 2.0)
    hanging = self_test.tests_from("def test_quick():\n    assert True\n\n\ndef test_hangs():\n    while True:\n"
                                   "        pass\n    assert False\n")
    scored = score(FILE + "if __name__ == '__main__':\n    raise SystemExit(1)\n", hanging)
    assert scored.timed_out and scored.passed == ("test_quick_1",)  # the file's main block does not run
    assert MARK not in FILE


@pytest.mark.parametrize("answer", ["def test_x(:\n", "x = 1\n", "def test_takes(a):\n    assert a\n",
                                    "def test_nothing():\n    pass\n"])
def test_an_answer_without_runnable_tests_gives_none(answer):
    assert self_test.tests_from(answer) is None


def test_each_assert_is_a_test_of_its_own_and_a_cut_answer_keeps_what_it_finished():
    answer = ("import math\n\n\ndef test_many():\n    values = [1, 2]\n    assert mean(values) == 1.5\n"
              "    assert mean([]) == 0.0\n    assert math.isclose(mean([4, 5]),\n")  # cut at the budget here
    tests = self_test.tests_from(answer)
    assert tests.names == ("test_many_1", "test_many_2")
    assert tests.source.startswith("import math\n\ndef test_many_1():\n    values = [1, 2]\n")
    assert "def test_many_2():\n    values = [1, 2]\n    assert mean([]) == 0.0" in tests.source
    assert score(FILE, tests).passed == ("test_many_1",) and score(RIGHT, tests).count == 2


def test_best_needs_more_passes_than_today_and_takes_the_earlier_on_a_tie():
    def passing(count: int):
        return self_test.Score(tuple(f"test_{n}" for n in range(count)), False, 0.1)

    assert best([passing(1), passing(2), passing(2)], passing(1)) == 1
    assert best([passing(1), passing(1)], passing(1)) is None
    assert best([passing(1)], None) == 0 and best([passing(0)], None) is None and best([], None) is None
