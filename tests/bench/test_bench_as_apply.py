"""`rewriter bench --tests` rewrites each case as `rewriter apply` does: the same options object,
the same session, the same answers. Both run here through the command line's own code on files,
on a scripted model behind the real Rewriter's interface (with branches)."""
from __future__ import annotations

import json

import pytest

from rewriter import cli, engine_factory
from rewriter.bench.as_apply import case_session, judged, self_test_row
from rewriter.bench.cases import Case
from rewriter.edits.options import EditOptions
from rewriter.edits.self_test import ModelTests, Score, SelfTestReport
from rewriter.prompt import SourceText
from rewriter.results import RewriteResult, Stats
from tests.helpers.bench_cases import AFTER, INSTRUCTION, MEAN, TOTAL, fenced, write_cases
from tests.helpers.cli import assert_clean_failure, run_cli
from tests.helpers.scripted_model import ScriptedRewriter

AREA = "def area(w, h):\n    return w * h\n"
HINTED = "def area(w: float, h: float) -> float:\n    return w * h\n"
# Each file's answer and its branches (the scripted model's, where it hesitated), by the code sent.
SCRIPT = {
    MEAN: (AFTER, []),  # answered right at once
    AREA: (AREA, [AREA, HINTED]),  # unchanged: the second branch changes it
    MEAN + TOTAL: (AFTER, [AFTER + TOTAL]),  # loses total, refused twice: the branch keeps it
}
CASES = [
    {"id": "a/mean", "language": "python", "before": MEAN, "instruction": INSTRUCTION,
     "tests": "assert mean([]) == 0.0\n"},
    {"id": "a/area", "language": "python", "before": AREA, "instruction": "Add type hints.",
     "tests": "assert area(2, 3) == 6\n"},
    {"id": "a/both", "language": "python", "before": MEAN + TOTAL, "instruction": INSTRUCTION,
     "tests": "assert mean([]) == 0.0 and total([1]) == 1\n"},
]


class ScriptedBranches(ScriptedRewriter):
    """Answers SCRIPT's answer for the code it is sent, and its branches."""

    def __init__(self, rewriter):
        super().__init__(rewriter, lambda code: SCRIPT[code][0])

    def branches(self, request, count):
        for text in SCRIPT[request.code][1][:count]:
            yield RewriteResult(text=text, answer=fenced(text), stats=Stats(output_tokens=4, finish_reason="stop"))


@pytest.fixture(scope="module")
def tiny_rewriter(tiny_checkpoint):
    return engine_factory.load_rewriter(engine_factory.EngineSettings(model=str(tiny_checkpoint), dtype="float32"),
                                        lambda message: None)


@pytest.fixture
def scripted(monkeypatch, tiny_rewriter):
    def load(settings, progress):  # what --model names is not loaded: the scripted model answers
        return ScriptedBranches(tiny_rewriter)

    monkeypatch.setattr(engine_factory, "load_rewriter", load)


@pytest.mark.parametrize("flags", [[], ["--branches", "0"]])
def test_the_bench_and_apply_give_every_case_the_same_answer(tmp_path, capsys, scripted, flags):
    cases = write_cases(tmp_path, CASES)
    report = tmp_path / "bench.json"
    assert cli.main(["bench", str(cases), "--tests", "--json", str(report), *flags]) == 0
    bench = json.loads(report.read_text())
    capsys.readouterr()
    applied = {}
    for case in CASES:
        path = tmp_path / f"{case['id'].split('/')[1]}.py"
        path.write_text(case["before"])
        cli.main(["apply", str(path), "-i", case["instruction"], "--write", "--json", *flags])
        applied[case["id"]] = (path.read_text(), json.loads(capsys.readouterr().out)["summary"]["edit_options"])
    for row in bench["cases"]:
        text, options = applied[row["id"]]
        assert row.get("edited", next(c["before"] for c in CASES if c["id"] == row["id"])) == text, row["id"]
        assert options == bench["summary"]["edit_options"]
    outcomes = [row["outcome"] for row in bench["cases"]]
    assert outcomes == (["passed", "passed", "passed"] if not flags else ["passed", "unchanged", "refused"])
    assert bench["summary"]["as_apply"].startswith(f"--branches {4 if not flags else 0}, self-test off")


def test_a_refused_answer_is_asked_again_with_the_reason_then_branched():
    engine = ScriptedBranches.__new__(ScriptedBranches)  # no model needed: the session only streams and branches
    engine.requests = []
    case = Case("t/1", "python", MEAN + TOTAL, INSTRUCTION, "assert mean([]) == 0.0\n")

    def stream(request, **decoding):
        engine.requests.append(request)
        yield RewriteResult(text=AFTER, answer=fenced(AFTER), stats=Stats(finish_reason="stop"))

    engine.stream = stream
    verdict = judged(case_session(engine, case, EditOptions()), case, 30.0)
    assert verdict["outcome"] == "passed" and verdict["after_refusals"] and verdict["branch"] == 1
    assert len(engine.requests) == 2 and "would lose function total" in engine.requests[1].instruction
    refused = judged(case_session(engine, case, EditOptions(branches=0)), case, 30.0)
    assert refused["outcome"] == "refused" and refused["refused_tests_passed"] is True  # a false refusal


def test_branches_and_the_self_test_are_for_tests(tmp_path):
    cases = write_cases(tmp_path, [CASES[0]])
    assert_clean_failure(run_cli("bench", str(cases), "--self-test"), "--self-test decide each answer of --tests")
    assert_clean_failure(run_cli("bench", str(cases), "--tests", "--branches", "-1"), "--branches takes a number")


def test_a_self_tested_row_keeps_each_candidates_file_for_later_rules():
    tests = ModelTests("def test_area():\n    assert area(2, 3) == 6\n", ("test_area",))
    report = SelfTestReport(tests, today=Score((), False, 0.1), today_text=AREA.replace("w * h", "w + h"),
                            candidates=[("branch 1", HINTED, Score(("test_area",), False, 0.1)),
                                        ("sample 1", AREA, Score(("test_area",), False, 0.1))], chosen=0)
    case = Case(**CASES[1])
    row = self_test_row(report, SourceText.from_text(AREA), case, 30.0)
    assert row["today"]["outcome"] == "failed" and "w + h" in row["today"]["edited"]
    branch, original = row["candidates"]
    assert branch["outcome"] == "passed" and branch["edited"] == HINTED
    assert original["outcome"] == "unchanged" and original["edited"] is None
