"""`rewriter bench --tests`: false refusals counted, the second try after feedback, and the cascade."""
import json

from rewriter.bench.bench import integrity_refusal, judge_answer
from rewriter.bench.cases import Case
from rewriter.bench.feedback import feedback_message, feedback_prompt, output_tail
from rewriter.bench.summary import cascade, format_cascade, format_tests_summary, summarize_tests
from tests.helpers.bench_cases import AFTER, INSTRUCTION, MEAN, MINIMAL_CASE, TOTAL, fenced, row, run_bench, write_cases
from tests.helpers.cli import assert_clean_failure, run_cli

BEFORE = MEAN + TOTAL
CASE = Case("t/1", "python", BEFORE, INSTRUCTION, "assert mean([]) == 0.0\n")


def test_a_refused_answer_is_no_pass_but_its_tests_tell_a_false_refusal_from_a_catch():
    # Dropping `total` is refused; the tests do not call it, so the refusal cost a right edit.
    right = judge_answer(CASE, fenced(AFTER), refusal=integrity_refusal)
    assert right["outcome"] == "refused" and "total" in right["reason"] and right["refused_tests_passed"] is True
    wrong = judge_answer(CASE, fenced(AFTER.replace("0.0", "1.0")), refusal=integrity_refusal)
    assert wrong["outcome"] == "refused" and wrong["refused_tests_passed"] is False
    assert "AssertionError" in wrong["test_output"]


def test_the_summary_counts_false_refusals_apart_from_passes():
    rows = [row("passed"), row("refused", refused_tests_passed=True), row("refused", refused_tests_passed=False)]
    summary = summarize_tests(rows)
    assert (summary["tests_passed"], summary["refused"], summary["false_refusals"]) == (1, 2, 1)
    assert "refused: 2 (false refusals, whose tests pass: 1)" in format_tests_summary(summary)


def second(outcome: str, **more) -> dict:
    return {"outcome": outcome, "output_tokens": 7, "ours_s": 0.5, **more}


def test_the_summary_sets_the_outcomes_after_feedback_beside_the_blind_ones():
    rows = [row("passed", after_feedback="passed"),
            row("failed", feedback=second("passed"), after_feedback="passed"),
            row("unchanged", feedback=second("unchanged"), after_feedback="unchanged"),
            row("refused", feedback=second("refused", refused_tests_passed=True), after_feedback="refused")]
    summary = summarize_tests(rows)
    after = summary["feedback"]
    assert summary["tests_passed"] == 1 and after["passed"] == 2 and after["second_tries"] == 3
    assert after["outcomes"]["unchanged"] == 1 and after["false_refusals"] == 1 and after["output_tokens"] == 21
    assert "passed 2 (50.0%) against 1 blind" in format_tests_summary(summary)


def test_the_model_is_told_what_became_of_its_answer_and_never_sees_the_tests():
    failed = judge_answer(CASE, fenced(AFTER.replace("0.0", "1.0") + "\n\ndef total(values):\n    return 1\n"))
    assert failed["outcome"] == "failed"
    told = feedback_message(failed, CASE.instruction, 30)
    assert "The tests failed" in told and "AssertionError" in told and "Return 0.0 for an empty list." in told
    assert "assert mean([]) == 0.0" not in told.replace(failed["test_output"], "")
    refused = feedback_message({"outcome": "refused", "reason": "it would lose function total"}, "x", 30)
    assert "refused" in refused and "it would lose function total" in refused
    assert "unchanged" in feedback_message({"outcome": "unchanged"}, "x", 30)
    assert "no code block" in feedback_message({"outcome": "no_code_block"}, "x", 30)
    assert "within 5 seconds" in feedback_message({"outcome": "timed_out", "test_output": ""}, "x", 5)
    prompt = feedback_prompt(CASE, "my first answer", failed, 30)
    assert [m["role"] for m in prompt.messages] == ["system", "user", "assistant", "user"]
    assert prompt.messages[2]["content"] == "my first answer" and BEFORE in prompt.messages[1]["content"]
    assert output_tail("\n".join(map(str, range(80))), 50).splitlines() == [str(n) for n in range(30, 80)]


def test_the_cascade_goes_on_to_the_next_model_only_where_the_tests_did_not_pass():
    small = {"model": "small", "cases": [row("passed", id="a", after_feedback="passed"),
                                         row("failed", id="b", after_feedback="passed"),
                                         row("unchanged", id="c", after_feedback="unchanged"),
                                         row("refused", id="d", after_feedback="failed")]}
    large = {"model": "large", "cases": [row("failed", id="a", after_feedback="failed"),
                                         row("passed", id="b", after_feedback="passed"),
                                         row("failed", id="c", after_feedback="passed"),
                                         row("refused", id="d", after_feedback="refused")]}
    result = cascade([small, large])
    assert result["passed"] == 2 and result["passed_by"] == [1, 1] and result["decoded_by"] == [4, 3]
    assert result["passed_after_feedback"] == 3  # a and b by the small model, c by the large one's second try
    assert "passed 2/4 blind (1 + 1), after feedback 3/4" in format_cascade(result)


def test_the_command_gives_each_answer_that_did_not_pass_a_second_try(tmp_path, tiny_checkpoint):
    cases = write_cases(tmp_path, [{"id": "q/1", "language": "python", "before": "x = 1\n", "instruction": "Set x to 2.",
                                    "tests": "assert x == 2\n"}])
    report = tmp_path / "report.json"
    result = run_bench(cases, report, tiny_checkpoint, "--tests", "--feedback", "--max-new-tokens", "16",
                       "--compare", f"{tiny_checkpoint}:float32")
    assert result.returncode == 0, result.stderr
    data = json.loads(report.read_text())
    for run in data["runs"]:
        (case,) = run["cases"]
        assert case["outcome"] != "passed"  # a tiny random model does not set x to 2
        assert case["feedback"]["prompt_tokens"] > case["prompt_tokens"]  # the first answer and the feedback too
        assert case["after_feedback"] == case["feedback"]["outcome"]
        assert run["summary"]["feedback"]["second_tries"] == 1
    assert data["cascade"]["decoded_by"] == [1, 1]
    assert "after feedback" in result.stdout and "cascade (" in result.stdout


def test_feedback_is_for_tests(tmp_path):
    cases = write_cases(tmp_path, [MINIMAL_CASE])
    assert_clean_failure(run_cli("bench", str(cases), "--feedback"), "--feedback is for --tests")
