"""`rewriter bench CASES --tests --tries N`: each case as `rewriter apply --test --tries N` takes it.

The first answer is the blind one, decided as `apply` decides it (as_apply.py). While it fails the
case's tests and tries remain, the model is asked again the way `apply --test` asks: through the
edit session (edits/session.py), with the earlier answer and the end of the failing tests' output
in the instruction (`Feedback`), the session's own second try after a refusal and its branches
after an unchanged answer included; on its branch tries (`try_kind`: the third, the sixth, ...)
the session takes the blind answer's next branch that passes every check and no try wrote, on
its sample tries (the fourth, the seventh, ...) the first such answer sampled to the first
request ("another" in the try's row). As in `apply`, the tries end at an answer
that passes, one that is refused, one that changes nothing, or one without a code block.

Unlike `--feedback` (one more try in Aider's conversation form, which `apply` does not send),
this measures what a user of `--test` gets.
"""
from __future__ import annotations

from ..edits.options import EditOptions
from ..edits.session import Feedback
from ..engine import Engine
from ..prompt import SourceText
from .as_apply import case_session, judged
from .cases import Case

FAILED = ("failed", "timed_out")  # the outcomes after which `apply --test` asks again


def failure_reason(verdict: dict, timeout_s: float) -> str:
    """What the next try is told, worded as `apply --test` words a failed test command."""
    if verdict["outcome"] == "timed_out":
        said = f"the tests ran longer than their time limit ({timeout_s:g} s) and were stopped"
    else:
        said = "the tests failed"
    return f"{said}. The last lines of their output:\n{verdict.get('test_output', '')}\n"


def later_tries(engine: Engine, case: Case, first: dict, tries: int, options: EditOptions,
                timeout_s: float) -> list[dict]:
    """The answers after `first` (the judged answer, with its "edited" text), one per try while
    the last failed its tests; each judged with its tests, its seconds and try number."""
    answers: list[dict] = []
    last = first
    for attempt in range(2, tries + 1):
        if last["outcome"] not in FAILED:
            break
        feedback = Feedback(SourceText.from_text(last["edited"]).code, failure_reason(last, timeout_s),
                            tuple(SourceText.from_text(answer["edited"]).code for answer in [first, *answers][:-1]))
        last = {"try": attempt, **judged(case_session(engine, case, options), case, timeout_s, feedback)}
        answers.append(last)
    return answers


def passed_on_try(first_outcome: str, later: list[dict]) -> int | None:
    """The try whose answer passed, 1 for the blind answer; None when none did."""
    if first_outcome == "passed":
        return 1
    return next((answer["try"] for answer in later if answer["outcome"] == "passed"), None)


def summarize_tries(rows: list[dict], tries: int) -> dict:
    """Passes within 1, 2, ... `tries` tries; the outcome each case ended with; what the tries cost:
    answers decoded per case (the blind one, its branches, later tries) and seconds per passing edit."""
    within = {str(n): sum(row["passed_on_try"] is not None and row["passed_on_try"] <= n for row in rows)
              for n in range(1, tries + 1)}
    seconds = {str(n): sum(_seconds_until(row, n) for row in rows) for n in range(1, tries + 1)}
    answers = sum(1 + row.get("candidates", 0) + sum(1 + later["candidates"] for later in row["tries"])
                  for row in rows)
    ended = [row["tries"][-1]["outcome"] if row["tries"] else row["outcome"] for row in rows]
    return {
        "tries": tries, "passed_within": within,
        "ended": {outcome: ended.count(outcome) for outcome in sorted(set(ended))},
        "false_refusals": sum(bool(row["tries"] and row["tries"][-1].get("refused_tests_passed")) for row in rows),
        "later_tries": sum(len(row["tries"]) for row in rows),
        "answers_per_case": answers / max(len(rows), 1),
        "seconds_within": seconds,
        "seconds_per_passing_edit": {n: seconds[n] / within[n] if within[n] else None for n in within},
    }


def _seconds_until(row: dict, n: int) -> float:
    """The decoding seconds a case cost when `apply --test --tries n` would stop (tests' time left out)."""
    spent = row["ours_s"]
    for later in row["tries"]:
        if later["try"] > n:
            break
        spent += later["seconds"]
    return spent


def format_tries(summary: dict) -> str:
    within = ", ".join(f"{n}: {count}" for n, count in summary["passed_within"].items())
    costs = ", ".join(f"{n}: {'-' if s is None else f'{s:.1f} s'}"
                      for n, s in summary["seconds_per_passing_edit"].items())
    ended = ", ".join(f"{outcome} {count}" for outcome, count in summary["ended"].items())
    return (f"as `apply --test --tries N`: passed within N tries ({within}); ended {ended} "
            f"({summary['false_refusals']} false refusals); {summary['later_tries']} later tries, "
            f"{summary['answers_per_case']:.2f} answers decoded per case; decoding seconds per passing edit ({costs})")
