"""`rewriter bench CASES --tests --self-test`: the self-test's choice beside today's, from one run,
and how well the model's tests tell the candidates that pass the case's tests from those that fail.

Each case's row (as_apply.py) holds today's choice (what the session decides without the
self-test) judged by the case's tests, and every other candidate with how many of the model's
tests it passed and its outcome on the case's tests. Blind rules, none of which sees the case's
tests:

- `today`: the session's choice without the self-test;
- `most_tests`: the self-test's, the candidate that passes most of the model's tests, today's on a
  tie (the row's own outcome);
- `agreed_behaviour`: the candidate whose results on the model's tests (which pass, which fail)
  most candidates share, today's first on a tie;
- `fewest_findings`: the candidate whose file has the fewest pyflakes findings of any kind (style
  warnings too; every candidate already has no error-class one), today's first on a tie; it needs
  the candidates decoded, not the model's tests.

`any_candidate` is no rule: the cases where some candidate passes, the most any rule could reach.
"""
from __future__ import annotations

from collections import Counter

from ..edits.checks.lint import finding_count

RULES = ("today", "most_tests", "agreed_behaviour", "fewest_findings")


def _pool(test: dict) -> list[dict]:
    """Today's choice where it was an edit or the original (not refused), then the other candidates."""
    today = test["today"]
    first = [{**today, "origin": "today"}] if today["passed"] is not None else []
    return first + test["candidates"]


def _agreed(pool: list[dict]) -> dict:
    behaviours = Counter(frozenset(candidate["passed_tests"]) for candidate in pool)
    return max(pool, key=lambda c: (behaviours[frozenset(c["passed_tests"])], -pool.index(c)))


def _fewest_findings(pool: list[dict]) -> dict | None:
    """The edit (a candidate with its file kept) with the fewest findings, the earlier on a tie;
    None where no candidate's file was kept (a row from before they were)."""
    counted = [(count, index) for index, candidate in enumerate(pool) if candidate.get("edited") is not None
               and (count := finding_count(candidate["edited"])) is not None]
    return pool[min(counted)[1]] if counted else None


def rule_outcomes(row: dict) -> dict[str, str]:
    """Each rule's outcome for one case; all the row's own where the model wrote no tests that ran."""
    test = row.get("self_test")
    if not test or test.get("tests") is None:
        return {**{name: row["outcome"] for name in RULES}, "any_candidate": row["outcome"]}
    pool = _pool(test)
    fewest = _fewest_findings(pool)
    return {"today": test["today"]["outcome"], "most_tests": row["outcome"],
            "agreed_behaviour": _agreed(pool)["outcome"] if pool else test["today"]["outcome"],
            "fewest_findings": fewest["outcome"] if fewest is not None else test["today"]["outcome"],
            "any_candidate": "passed" if any(c["outcome"] == "passed" for c in pool) else row["outcome"]}


def auc(scored: list[tuple[float, bool]]) -> float | None:
    """The chance that a passing candidate scores above a failing one (ties count half); None
    without both kinds."""
    passing = [score for score, passed in scored if passed]
    failing = [score for score, passed in scored if not passed]
    if not passing or not failing:
        return None
    wins = sum((p > f) + 0.5 * (p == f) for p in passing for f in failing)
    return wins / (len(passing) * len(failing))


def summarize_self_test(rows: list[dict]) -> dict:
    """Passes under each rule, what became of today's unchanged and refused answers, the AUC of the
    model's tests (the share a candidate passes) against the case's, and seconds per passing edit."""
    outcomes = [rule_outcomes(row) for row in rows]
    written = [row["self_test"] for row in rows if row.get("self_test", {}).get("tests") is not None]
    scored = [(c["passed"] / max(len(test["names"]), 1), c["outcome"] == "passed")
              for test in written for c in _pool(test) if c["outcome"] not in ("unchanged", "refused")]
    all_s = sum(row["ours_s"] for row in rows)
    tests = [row.get("self_test", {}) for row in rows]
    self_test_s = sum(test.get("seconds", 0.0) for test in tests)
    today_s = all_s - self_test_s
    writing_s = sum(test.get("writing_seconds", 0.0) for test in tests)
    testing_s = sum(test.get("testing_seconds", 0.0) for test in tests)
    passed = {name: sum(o[name] == "passed" for o in outcomes) for name in (*RULES, "any_candidate")}
    candidates_s = self_test_s - writing_s - testing_s
    # What each rule costs: today's the session without the self-test; the model's tests' rules the
    # whole session; the findings' today's and the other candidates' decoding.
    seconds = {"today": today_s, "most_tests": all_s, "agreed_behaviour": all_s,
               "fewest_findings": today_s + candidates_s}
    return {
        "cases_with_tests": len(written),
        "tests_written": sum(len(test["names"]) for test in written),
        "passed_by_rule": passed,
        "unchanged": {name: sum(o[name] == "unchanged" for o in outcomes) for name in RULES},
        "refused": {name: sum(o[name] == "refused" for o in outcomes) for name in RULES},
        "choices_changed": sum(test["chosen"] is not None for test in written),
        "candidates_scored": len(scored),
        "auc": auc(scored),
        "seconds": seconds,
        # The self-test's own seconds: the model's answer with its tests, running them, and the
        # rest, decoding the other candidates.
        "self_test_seconds": {"writing": writing_s, "testing": testing_s, "candidates": candidates_s},
        "seconds_per_passing_edit": {name: seconds[name] / passed[name] if passed[name] else None for name in RULES},
    }


def format_self_test(summary: dict) -> str:
    passed = ", ".join(f"{name} {count}" for name, count in summary["passed_by_rule"].items())
    per = summary["seconds_per_passing_edit"]
    cost = ", ".join(f"{name} {'-' if s is None else f'{s:.1f} s'}" for name, s in per.items())
    auc_text = "-" if summary["auc"] is None else f"{summary['auc']:.2f}"
    parts = ", ".join(f"{name} {s:.1f} s" for name, s in summary["self_test_seconds"].items())
    return (f"self-test: the model wrote tests for {summary['cases_with_tests']} cases "
            f"({summary['tests_written']} tests); passed by rule: {passed}; unchanged {summary['unchanged']}, "
            f"refused {summary['refused']}; {summary['choices_changed']} choices changed; AUC of the model's "
            f"tests against the case's over {summary['candidates_scored']} candidates {auc_text}; "
            f"seconds per passing edit: {cost}; the self-test's seconds: {parts}")
