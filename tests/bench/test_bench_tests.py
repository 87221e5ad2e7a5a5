"""`rewriter bench --tests`: each answer's outcome, the summary, and the command line."""
import json

import pytest

from rewriter.bench.bench import integrity_refusal, judge_answer
from rewriter.bench.cases import Case, load_cases
from rewriter.bench.summary import summarize_tests
from rewriter.weights.cpu_choice import CANDIDATES
from rewriter.weights.quantize import INT8_KINDS
from tests.helpers.bench_cases import AFTER, INSTRUCTION, MEAN, MINIMAL_CASE, TOTAL, fenced, row, run_bench, write_cases
from tests.helpers.cli import assert_clean_failure, run_cli

BEFORE = MEAN
CASE = Case("t/1", "python", BEFORE, INSTRUCTION, "assert mean([1, 2, 3]) == 2\nassert mean([]) == 0.0\n")


def test_a_right_edit_passes_and_a_wrong_one_fails_with_its_output():
    assert judge_answer(CASE, fenced(AFTER))["outcome"] == "passed"
    wrong = judge_answer(CASE, fenced(AFTER.replace("0.0", "1.0")))
    assert wrong["outcome"] == "failed" and "AssertionError" in wrong["test_output"]


def test_the_original_handed_back_is_unchanged_even_when_its_tests_would_pass():
    lenient = Case("t/2", "python", BEFORE, "Rename nothing.", "assert mean([2]) == 2\n")
    assert judge_answer(lenient, fenced(BEFORE))["outcome"] == "unchanged"
    assert judge_answer(lenient, "Here it is:\n" + fenced(BEFORE) + "\nNothing needed changing.")["outcome"] == "unchanged"


def test_no_code_block_refused_and_timed_out():
    assert judge_answer(CASE, AFTER)["outcome"] == "no_code_block"
    refused = judge_answer(CASE, fenced(AFTER), refusal=lambda case, edited: "a definition was lost")
    assert refused["outcome"] == "refused" and refused["reason"] == "a definition was lost"
    accepted = judge_answer(CASE, fenced(AFTER), refusal=lambda case, edited: None)
    assert accepted["outcome"] == "passed"
    hanging = Case("t/3", "python", BEFORE, "x", "while True:\n    pass\n")
    assert judge_answer(hanging, fenced(AFTER), timeout_s=1.0)["outcome"] == "timed_out"


def test_the_integrity_guard_refuses_a_lost_definition_and_passes_a_real_edit():
    two = Case("t/4", "python", BEFORE + TOTAL, INSTRUCTION, "assert mean([]) == 0.0\n")
    dropped = judge_answer(two, fenced(AFTER), refusal=integrity_refusal)
    assert dropped["outcome"] == "refused" and "total" in dropped["reason"]
    kept = judge_answer(two, fenced(AFTER + TOTAL), refusal=integrity_refusal)
    assert kept["outcome"] == "passed"


def test_the_bench_judges_with_the_syntax_guard_of_rewriter_apply():
    # Python's compiler refuses what tree-sitter parses: counted as refused, as `rewriter apply` does.
    duplicate = AFTER.replace("def mean(values):", "def mean(values, values):")
    refused = judge_answer(CASE, fenced(duplicate), refusal=integrity_refusal)
    assert refused["outcome"] == "refused" and "duplicate argument 'values'" in refused["reason"], refused
    # The header alone is a lost body for the integrity check first.
    headless = judge_answer(CASE, fenced("def mean(values):\n"), refusal=integrity_refusal)
    assert headless["outcome"] == "refused" and "it would lose the body of function mean" in headless["reason"]


def test_the_summary_counts_every_outcome():
    speed = {"ours_s": 2.0, "ours_tokens_per_s": 5.0, "accepted_prediction_tokens": 8, "rejected_prediction_tokens": 1}
    outcomes = ["passed", "passed", "failed", "timed_out", "unchanged", "no_code_block", "refused"]
    summary = summarize_tests([row(outcome, **speed) for outcome in outcomes])
    assert {key: summary[key] for key in ("cases", "tests_passed", "tests_failed", "timed_out", "unchanged",
                                          "no_code_block", "refused")} == {
        "cases": 7, "tests_passed": 2, "tests_failed": 1, "timed_out": 1, "unchanged": 1, "no_code_block": 1,
        "refused": 1}
    assert summary["pass_rate"] == 2 / 7
    assert summary["tokens_per_s"] == 5.0 and summary["accepted_prediction_tokens"] == 56


def test_cases_keep_their_tests(tmp_path):
    path = write_cases(tmp_path, [MINIMAL_CASE, {"id": "b", "before": "x", "instruction": "y"}])
    assert [case.tests for case in load_cases(path)] == ["pass", None]


@pytest.mark.parametrize("baselines", [False, True])
def test_the_command_runs_the_tests_and_writes_the_report(tmp_path, tiny_checkpoint, baselines):
    cases = write_cases(tmp_path, [
        {"id": "q/1", "language": "python", "before": "x = 1\n", "instruction": "y", "tests": "assert x == 2\n"},
        {"id": "q/2", "language": "python", "before": "x = 1\n", "instruction": "y"},
        {"id": "q/3", "language": "python", "before": "x = 1\n", "instruction": "y", "tests": "assert x == 3\n"}])
    report = tmp_path / "bench-tests.json"
    result = run_bench(cases, report, tiny_checkpoint, "--tests", "--max-new-tokens", "24", "--every", "2",
                       *(["--baselines"] if baselines else []))
    assert result.returncode == 0, result.stderr
    assert "1 cases without tests left out" in result.stderr
    data = json.loads(report.read_text())
    assert data["summary"]["cases"] == 1  # q/2 has no tests; of q/1 and q/3, every 2nd from the first
    for key in ("tests_passed", "unchanged", "no_code_block", "refused", "timed_out", "tokens_per_s"):
        assert key in data["summary"]
    (case,) = data["cases"]
    assert case["id"] == "q/1"
    assert case["outcome"] in {"passed", "failed", "timed_out", "unchanged", "no_code_block"}
    # Only ours decodes unless --baselines; with them, ours is still plain greedy's text.
    assert case.get("identical_to_greedy", "not compared") == (True if baselines else "not compared")
    assert "tests passed: " in result.stdout


def test_tests_refuse_sampling_options(tmp_path):
    cases = write_cases(tmp_path, [MINIMAL_CASE])
    assert_clean_failure(run_cli("bench", str(cases), "--tests", "--temperature", "0.7"), "greedy")
    assert_clean_failure(run_cli("bench", str(cases), "--tests", "--every", "0"), "at least 1")


@pytest.mark.parametrize("dtype", INT8_KINDS)
def test_the_speed_bench_in_int8_runs_float32_greedy_as_the_reference(tmp_path, tiny_checkpoint, dtype):
    cases = write_cases(tmp_path, [{"id": f"s/{i}", "language": "python", "before": f"def f{i}(x):\n    return x + {i}\n",
                                    "instruction": "Rename x to y."} for i in range(2)])
    report = tmp_path / "bench.json"
    result = run_bench(cases, report, tiny_checkpoint, "--max-new-tokens", "16", "--dtype", dtype)
    assert result.returncode == 0, result.stderr
    summary = json.loads(report.read_text())["summary"]
    assert summary["dtype"] == dtype and summary["cases"] == 2
    assert summary["identical_to_greedy"] == 2  # ours equals the same model's greedy, token for token
    assert summary["median_speedup_vs_float32_greedy"] > 0
    assert 0 <= summary["identical_to_float32_greedy"] <= 2
    assert "float32 greedy (the reference)" in result.stdout
    # The CPU paths' pass costs, timed on the float32 reference, and what auto picks from them.
    costs = summary["pass_costs"]
    assert set(costs["ms"]) == set(CANDIDATES) and costs["auto_choice"] in costs["ms"]
    # The timed prompt stays within the model's context (256 positions here).
    assert "pass costs (ms, 1/16/64/256 tokens): float32 " in result.stdout and "auto picks" in result.stdout


def test_compare_runs_each_model_and_path_and_ends_with_them_side_by_side(tmp_path, tiny_checkpoint):
    cases = write_cases(tmp_path, [{"id": f"c/{i}", "language": "python", "before": f"x = {i}\n",
                                    "instruction": "Set x to 7.", "tests": "assert x == 7\n"} for i in range(2)])
    report = tmp_path / "compare.json"
    result = run_bench(cases, report, tiny_checkpoint, "--tests", "--max-new-tokens", "16", "--dtype", "float32",
                       "--compare", f"{tiny_checkpoint}:int8-fbgemm", "--compare", f"{tiny_checkpoint}:int8")
    assert result.returncode == 0, result.stderr
    runs = json.loads(report.read_text())["runs"]
    assert [run["summary"]["dtype"] for run in runs] == ["float32", "int8-fbgemm", "int8"]
    assert all(run["model"] == str(tiny_checkpoint) and len(run["cases"]) == 2 for run in runs)
    table = result.stdout[result.stdout.index("model | path | passed"):].splitlines()
    assert len(table) == 4 and table[1].split(" | ")[1] == "float32" and table[1].endswith(" | -")
    assert table[2].split(" | ")[1] == "int8-fbgemm" and table[2].split(" | ")[2] == \
        f"{runs[1]['summary']['tests_passed']}/2"


def test_compare_is_for_the_tests_and_names_a_model(tmp_path):
    cases = write_cases(tmp_path, [MINIMAL_CASE])
    assert_clean_failure(run_cli("bench", str(cases), "--compare", "embedded:float32"), "--compare is for --tests")
    assert_clean_failure(run_cli("bench", str(cases), "--tests", "--compare", ":float32"), "no model")
