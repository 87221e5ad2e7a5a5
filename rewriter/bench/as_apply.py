"""`rewriter bench CASES --tests`: each case's file rewritten as `rewriter apply FILE -i INSTRUCTION`
rewrites it, then judged by the case's tests.

The case's file is one whole-file target, opened through the same function and with the same
options object as apply's (edits/session.py's `session_for`, edits/options.py): the session
decides the answer (the retry after a refusal, the branches of an unchanged answer, with
`--self-test` the model's own tests) and the bench only tests what it decided. With the self-test,
today's choice (what the run gives without it) and each other candidate are tested too, so that
one run sets both rules side by side.
"""
from __future__ import annotations

import time

from ..answer import NoCodeBlock
from ..edits.checks.integrity import FileIntegrity
from ..edits.node_kinds import grammar_for
from ..edits.options import EditOptions
from ..edits.self_test import SelfTestReport
from ..edits.session import EditSession, Feedback, Finished, session_for
from ..edits.target import Target
from ..edits.testrun import run_tests
from ..engine import Engine
from ..prompt import SourceText
from ..results import RewriteError, Stats
from .cases import Case
from .feedback import output_tail


def case_session(engine: Engine, case: Case, options: EditOptions) -> EditSession:
    """The whole file's edit session, as `rewriter apply` opens it for the case's file."""
    grammar = grammar_for(case.language)
    source = SourceText.from_text(case.before)
    return session_for(engine, Target.whole(source.code), case.instruction, case.language, options,
                       grammar=grammar, integrity=FileIntegrity(source.code, grammar))


def judged(session: EditSession, case: Case, timeout_s: float, feedback: Feedback | None = None) -> dict:
    """One answer decided by the session (its seconds, its answer's stats), then tested; a refused
    answer's tests run too, to tell a false refusal (`refused_tests_passed`) from a catch."""
    source = SourceText.from_text(case.before)
    began = time.perf_counter()
    try:
        finished = [event for event in session.run(feedback=feedback) if isinstance(event, Finished)][-1]
    except (NoCodeBlock, RewriteError) as error:
        return {"outcome": "no_code_block", "reason": str(error), "seconds": time.perf_counter() - began,
                "candidates": 0, **_stats_fields(Stats())}
    decision, stats = finished.decision, finished.result.stats
    told = {"seconds": time.perf_counter() - began, "answer": finished.result.answer, **_stats_fields(stats),
            "retried": finished.retried, "candidates": finished.candidates, "branch": finished.branch,
            "another": finished.another, "after_refusals": finished.after_refusals}
    if finished.self_test is not None:
        told["self_test"] = self_test_row(finished.self_test, source, case, timeout_s)
    if decision.refused:
        verdict = {**told, "outcome": "refused", "reason": decision.reason}
        if decision.refused_text is not None:
            verdict["refused_tests_passed"] = run_tests(source.restore(decision.refused_text), case.tests or "",
                                                        timeout_s).passed
        return verdict
    return {**told, **tested(source, decision.text, case, timeout_s)}


def _stats_fields(stats: Stats) -> dict:
    """The decided answer's own figures (its decoding, not the branches' or the self-test's)."""
    return {"prompt_tokens": stats.prompt_tokens, "output_tokens": stats.output_tokens,
            "forward_passes": stats.forward_passes, "accepted_prediction_tokens": stats.accepted_prediction_tokens,
            "rejected_prediction_tokens": stats.rejected_prediction_tokens, "ttft_s": stats.ttft_s,
            "finish_reason": stats.finish_reason}


def tested(source: SourceText, text: str, case: Case, timeout_s: float) -> dict:
    """The case's tests on the span's text `text` (the whole file here): passed, failed, timed out,
    or unchanged (the original; its tests are not run)."""
    if text == source.code:
        return {"outcome": "unchanged"}
    edited = source.restore(text)
    run = run_tests(edited, case.tests or "", timeout_s)
    verdict = {"outcome": "passed" if run.passed else "timed_out" if run.timed_out else "failed",
               "edited": edited, "test_s": run.seconds}
    if not run.passed:
        verdict["test_output"] = output_tail(run.output)
    return verdict


def self_test_row(report: SelfTestReport, source: SourceText, case: Case, timeout_s: float) -> dict:
    """The self-test's tests and choice, with today's choice and every candidate also judged by the
    case's tests (what a blind rule is measured by)."""
    seconds = {"seconds": report.seconds, "writing_seconds": report.writing_seconds,
               "testing_seconds": report.testing_seconds}
    if report.tests is None:
        return {"tests": None, "written": report.written, **seconds}
    total = len(report.tests.names)
    today = ({"outcome": "refused"} if report.today_text is None
             else tested(source, report.today_text, case, timeout_s))
    candidates = []
    for origin, text, scored in report.candidates:
        verdict = tested(source, text, case, timeout_s)
        candidates.append({"origin": origin, "passed": scored.count, "passed_tests": list(scored.passed),
                           "timed_out": scored.timed_out, "of": total, "outcome": verdict["outcome"],
                           "edited": verdict.get("edited")})
    # Each candidate's file is kept (None where it is the original), so that a later blind rule
    # can be judged on a run's rows without decoding them again.
    return {
        "tests": report.tests.source, "names": list(report.tests.names), **seconds,
        "today": {"outcome": today["outcome"], "passed": report.today.count if report.today else None,
                  "passed_tests": list(report.today.passed) if report.today else None,
                  "edited": today.get("edited")},
        "candidates": candidates,
        "chosen": report.chosen,
    }
