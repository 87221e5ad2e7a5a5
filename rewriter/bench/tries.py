"""`rewriter bench CASES --tests --tries N`: each case as `rewriter apply --test --tries N` takes it.

The first answer is the blind one (branched where `--branches` is given). While it fails the
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

import time

from ..answer import NoCodeBlock
from ..edits.checks.integrity import FileIntegrity
from ..edits.node_kinds import grammar_for
from ..edits.session import EditSession, Feedback, Finished
from ..edits.target import Target
from ..engine import Engine
from ..prompt import SourceText
from ..results import RewriteError
from .cases import Case
from .feedback import output_tail
from .testrun import run_tests

FAILED = ("failed", "timed_out")  # the outcomes after which `apply --test` asks again


def failure_reason(verdict: dict, timeout_s: float) -> str:
    """What the next try is told, worded as `apply --test` words a failed test command."""
    if verdict["outcome"] == "timed_out":
        said = f"the tests ran longer than their time limit ({timeout_s:g} s) and were stopped"
    else:
        said = "the tests failed"
    return f"{said}. The last lines of their output:\n{verdict.get('test_output', '')}\n"


def later_tries(engine: Engine, case: Case, first: dict, tries: int, branches: int, max_new_tokens: int | None,
                timeout_s: float) -> list[dict]:
    """The answers after `first` (the judged blind answer, with its "edited" text), one per try
    while the last failed its tests; each judged with its tests, its seconds and try number."""
    source = SourceText.from_text(case.before)
    answers: list[dict] = []
    last = first
    for attempt in range(2, tries + 1):
        if last["outcome"] not in FAILED:
            break
        session = _session(engine, case, source, branches, max_new_tokens)
        feedback = Feedback(SourceText.from_text(last["edited"]).code, failure_reason(last, timeout_s),
                            tuple(SourceText.from_text(answer["edited"]).code for answer in [first, *answers][:-1]))
        last = {"try": attempt, **_judged(session, feedback, source, case, timeout_s)}
        answers.append(last)
    return answers


def asked_again(engine: Engine, case: Case, first: dict, branches: int, max_new_tokens: int | None,
                timeout_s: float) -> dict:
    """A refused blind answer (`first`, judged) taken on as `rewriter apply` takes it: asked again
    with the reason, then, refused again, the first answer's branches (edits/session.py); judged
    with the tests. `tried`: the answers decoded after the first; `seconds`: what they cost (the
    session decodes the first answer again, which `first` counts already)."""
    source = SourceText.from_text(case.before)
    verdict = _judged(_session(engine, case, source, branches, max_new_tokens), None, source, case, timeout_s)
    return {**verdict, "tried": int(bool(verdict.get("retried"))) + verdict["candidates"],
            "seconds": max(verdict["seconds"] - first.get("ours_s", 0.0), 0.0)}


def _session(engine: Engine, case: Case, source: SourceText, branches: int, max_new_tokens: int | None) -> EditSession:
    """The whole file's edit session, as `rewriter apply` opens it for the case."""
    grammar = grammar_for(case.language)
    return EditSession(engine, Target.whole(source.code), case.instruction, case.language, grammar=grammar,
                       integrity=FileIntegrity(source.code, grammar), max_new_tokens=max_new_tokens,
                       branches=branches)


def _judged(session: EditSession, feedback: Feedback | None, source: SourceText, case: Case,
            timeout_s: float) -> dict:
    """One later try decided by the session (its decoding seconds), then tested; a refused answer's
    tests run too, to tell a false refusal (`refused_tests_passed`) from a catch."""
    began = time.perf_counter()
    try:
        finished = [event for event in session.run(feedback=feedback) if isinstance(event, Finished)][-1]
    except (NoCodeBlock, RewriteError) as error:
        return {"outcome": "no_code_block", "reason": str(error), "seconds": time.perf_counter() - began,
                "candidates": 0}
    decision, stats = finished.decision, finished.result.stats
    told = {"seconds": time.perf_counter() - began, "output_tokens": stats.output_tokens,
            "finish_reason": stats.finish_reason, "retried": finished.retried, "candidates": finished.candidates,
            "another": finished.another, "after_refusals": finished.after_refusals}
    if decision.refused:
        if decision.refused_text is None:
            return {**told, "outcome": "refused", "reason": decision.reason}
        run = run_tests(source.restore(decision.refused_text), case.tests or "", timeout_s)
        return {**told, "outcome": "refused", "reason": decision.reason, "refused_tests_passed": run.passed}
    if decision.text == source.code:
        return {**told, "outcome": "unchanged"}
    edited = source.restore(decision.text)
    run = run_tests(edited, case.tests or "", timeout_s)
    verdict = {**told, "outcome": "passed" if run.passed else "timed_out" if run.timed_out else "failed",
               "edited": edited, "test_s": run.seconds}
    if not run.passed:
        verdict["test_output"] = output_tail(run.output)
    return verdict


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
    answers = sum(1 + row.get("branched", {}).get("tried", 0) + sum(1 + later["candidates"] for later in row["tries"])
                  for row in rows)
    ended = [row["tries"][-1]["outcome"] if row["tries"] else row.get("after_branches", row["outcome"])
             for row in rows]
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
    spent = row["ours_s"] + row.get("branched", {}).get("seconds", 0.0)
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
