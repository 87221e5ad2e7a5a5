"""`rewriter bench --tests --self-test`: today's rule and the self-test's side by side from one run,
the agreed behaviour, the AUC of the model's tests, and seconds per passing edit."""
from rewriter.bench.blind_rules import auc, rule_outcomes, summarize_self_test
from rewriter.bench.summary import format_tests_summary, summarize_tests
from tests.helpers.bench_cases import row


def candidate(origin: str, passed: list[str], outcome: str, of: int = 3, edited: str | None = None) -> dict:
    return {"origin": origin, "passed": len(passed), "passed_tests": passed, "timed_out": False, "of": of,
            "outcome": outcome, "edited": edited}


def self_tested(outcome: str, today: dict, candidates: list[dict], chosen: int | None, seconds: float = 2.0,
                **more) -> dict:
    return row(outcome, ours_s=3.0, **more, self_test={"tests": "...", "names": ["a", "b", "c"], "seconds": seconds,
                                                       "writing_seconds": seconds / 2, "testing_seconds": seconds / 4,
                                                       "today": today, "candidates": candidates, "chosen": chosen})


def test_each_rule_picks_from_todays_choice_and_the_candidates():
    taken = self_tested("passed", {"outcome": "failed", "passed": 1, "passed_tests": ["a"]},
                        [candidate("branch 1", ["a"], "failed"), candidate("branch 2", ["a", "b", "c"], "passed")], 1)
    assert rule_outcomes(taken) == {"today": "failed", "most_tests": "passed", "agreed_behaviour": "failed",
                                    "fewest_findings": "failed", "any_candidate": "passed"}  # no files: today's
    refused = self_tested("refused", {"outcome": "refused", "passed": None, "passed_tests": None},
                          [candidate("sample 1", ["b"], "failed")], None)
    assert rule_outcomes(refused)["today"] == "refused" and rule_outcomes(refused)["agreed_behaviour"] == "failed"
    assert rule_outcomes(row("unchanged")) == dict.fromkeys(("today", "most_tests", "agreed_behaviour",
                                                             "fewest_findings", "any_candidate"), "unchanged")


SLOPPY = "import os\n\n\ndef f():\n    unused = 1\n    return 2\n"  # 2 findings: os and unused
CLEAN = "def f():\n    return 2\n"


def test_the_fewest_findings_rule_takes_the_cleanest_file_and_today_on_a_tie():
    def today(edited: str) -> dict:
        return {"outcome": "failed", "passed": 0, "passed_tests": [], "edited": edited}

    cleaner = self_tested("failed", today(SLOPPY), [candidate("branch 1", [], "failed", edited="def f(:\n"),
                                                    candidate("branch 2", [], "passed", edited=CLEAN)], None)
    assert rule_outcomes(cleaner)["fewest_findings"] == "passed"  # one that does not compile counts for none
    tie = self_tested("failed", today(CLEAN), [candidate("branch 1", [], "passed", edited=CLEAN.replace("2", "3"))],
                      None)
    assert rule_outcomes(tie)["fewest_findings"] == "failed"


def test_the_auc_counts_ties_half_and_needs_both_kinds():
    assert auc([(1.0, True), (0.0, False)]) == 1.0
    assert auc([(0.5, True), (0.5, False), (1.0, False)]) == 0.25
    assert auc([(1.0, True)]) is None


def test_the_summary_sets_the_rules_side_by_side_with_their_seconds():
    rows = [self_tested("passed", {"outcome": "failed", "passed": 1, "passed_tests": ["a"]},
                        [candidate("branch 1", ["a", "b", "c"], "passed")], 0),
            self_tested("passed", {"outcome": "passed", "passed": 3, "passed_tests": ["a", "b", "c"]}, [], None),
            row("failed", ours_s=3.0, self_test={"tests": None, "written": "", "seconds": 1.0})]
    summary = summarize_self_test(rows)
    assert summary["passed_by_rule"] == {"today": 1, "most_tests": 2, "agreed_behaviour": 1, "fewest_findings": 1,
                                         "any_candidate": 2}
    assert summary["cases_with_tests"] == 2 and summary["choices_changed"] == 1
    assert summary["candidates_scored"] == 3 and summary["auc"] == 1.0
    assert summary["self_test_seconds"] == {"writing": 2.0, "testing": 1.0, "candidates": 5.0 - 3.0}
    assert summary["seconds"] == {"today": 9.0 - 5.0, "most_tests": 9.0, "agreed_behaviour": 9.0,
                                  "fewest_findings": 4.0 + 2.0}
    assert summary["seconds_per_passing_edit"] == {"today": 4.0, "most_tests": 4.5, "agreed_behaviour": 9.0,
                                                   "fewest_findings": 6.0}
    report = format_tests_summary(summarize_tests(rows))
    assert "passed by rule: today 1, most_tests 2" in report
    assert "the self-test's seconds: writing 2.0 s, testing 1.0 s, candidates 2.0 s" in report
