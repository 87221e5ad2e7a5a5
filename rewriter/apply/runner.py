"""Rewriting one planned file on an engine: each span is the prediction and the rest of the file
its context; a request too large for the model is sent with less context, then as smaller spans.
Each answer is judged by the edit pipeline (edits/pipeline.py) as every front end's is, and the
spans' new texts are put together into the file's, which must still parse."""
from __future__ import annotations

import threading
import time

from ..answer import NoCodeBlock
from ..edits.checks.integrity import FileIntegrity
from ..edits.pipeline import Refusal
from ..edits.scopes import SyntaxTree, split_span
from ..edits.session import Feedback, Finished, session_for
from ..edits.target import Target
from ..engine import Engine
from ..prompt import merge_instruction
from ..results import ContextTooLarge, RewriteError, ServiceError
from .files import FileError
from .plans import FilePlan, FileStatus, Options, Unit, UnitStatus
from .report import Report

# How much of the file around a span goes along as context: all of it first, then less when
# the request is too large for the model, down to none.
CONTEXT_WINDOWS = (None, 12_000, 3_000, 600, 0)


class Interrupted(Exception):
    """The run was cancelled (Ctrl-C) while this request was decoding."""


class Runner:
    """Runs the spans of one file after another on an engine, reporting progress."""

    def __init__(self, engine: Engine, options: Options, report: Report, cancel: threading.Event):
        self.engine = engine
        self.options = options
        self.report = report
        self.cancel = cancel

    def rewrite_file(self, job: FilePlan, failed_check: str = "") -> FilePlan:
        """Rewrite the planned file. With `failed_check` (why its last edit failed: the tests it
        broke), ask again for each span that edit changed, with that span's answer and the reason."""
        if job.status != FileStatus.PENDING and not failed_check:
            return job
        started = time.perf_counter()
        job.status, job.new_text = FileStatus.RUNNING, None
        assert job.source is not None  # planning read every pending file
        text = job.source.text
        tree = SyntaxTree(text, job.grammar) if job.grammar else None
        integrity = FileIntegrity(text, job.grammar)
        done: list[Unit] = []
        for unit in job.units:
            if not failed_check:
                done += self._rewrite_unit(job, text, tree, integrity, unit.target, part_of="")
                self.report.span_done(job)
            elif unit.status == UnitStatus.CHANGED and unit.new_text is not None:
                done += self._rewrite_unit(job, text, tree, integrity, unit.target, unit.part_of,
                                           Feedback(unit.new_text, failed_check, unit.failed_before))
            else:
                done.append(unit)  # not part of the failed edit
        job.units = done
        self._assemble(job, text, integrity)
        job.seconds += time.perf_counter() - started
        return job

    def _rewrite_unit(self, job: FilePlan, text: str, tree, integrity: FileIntegrity, span: Target,
                      part_of: str, feedback: Feedback | None = None) -> list[Unit]:
        whole_file = span.start == 0 and span.end == len(text)
        self.report.unit_started(job, span)
        for window in ((0,) if whole_file else CONTEXT_WINDOWS):
            try:
                unit = self._request(job, text, integrity, span, window, feedback)
                unit.part_of = part_of
                unit.failed_before = feedback.failed() if feedback is not None else ()
                self.report.unit_done(job, unit)
                return [unit]
            except Interrupted:
                raise
            except Exception as error:  # noqa: BLE001 - one request's failure is not the run's
                if not isinstance(error, ContextTooLarge):
                    unit = Unit(span, UnitStatus.FAILED, _describe(error), part_of=part_of)
                    self.report.unit_done(job, unit)
                    return [unit]
        if self.options.snippet is not None:  # merged into its region as one: never into pieces of it
            unit = Unit(span, UnitStatus.FAILED, "the file and the snippet do not fit the model's context together")
            self.report.unit_done(job, unit)
            return [unit]
        pieces = split_span(span, tree)
        if not pieces:
            unit = Unit(span, UnitStatus.FAILED, f"{span.label()} does not fit the model's context even without "
                        "the rest of the file; choose a smaller scope (--each method, --each function, "
                        f"or --lines with fewer than {len(span.lines)} lines)",
                        part_of=part_of)
            self.report.unit_done(job, unit)
            return [unit]
        self.report.split(job, span, len(pieces))
        units: list[Unit] = []
        for piece in pieces:
            units += self._rewrite_unit(job, text, tree, integrity, piece, part_of or span.label(), feedback)
        return units

    def _request(self, job: FilePlan, text: str, integrity: FileIntegrity, span: Target,
                 window: int | None, feedback: Feedback | None = None) -> Unit:
        instruction = self.options.instruction
        if self.options.snippet is not None:  # the integrity check reads the user's hint alone
            instruction = merge_instruction(self.options.snippet, job.language, self.options.instruction)
        session = session_for(self.engine, span, instruction, job.language, self.options.edit, integrity=integrity,
                              judged_instruction=self.options.instruction, snippet=self.options.snippet)
        finished = None
        stats = None
        try:
            for event in session.run(window, force=self.options.force,
                                     allow_syntax_errors=self.options.allow_syntax_errors, feedback=feedback):
                if self.cancel.is_set():
                    raise Interrupted()
                if isinstance(event, Finished):
                    finished = event
                else:
                    stats = event.stats
                    self.report.progress(job, event.stats)
        except NoCodeBlock as error:
            return Unit(span, UnitStatus.FAILED, _describe(error), stats=stats)
        assert finished is not None  # the session ends with a Finished or raises
        decision, stats = finished.decision, finished.result.stats
        if decision.refusal == Refusal.CUT:  # never applied, not even with --force
            return Unit(span, UnitStatus.FAILED, f"{decision.reason}; not applied", stats=stats)
        if decision.refused:
            override = "--allow-syntax-errors" if decision.refusal == Refusal.SYNTAX else "--force"
            searched = f"; none of {finished.candidates} other answers decoded (branches, samples) passed every check" \
                if finished.candidates else ""
            return Unit(span, UnitStatus.REFUSED,
                        f"{decision.reason}; not applied ({override} applies it anyway){searched}",
                        refused_text=decision.refused_text, stats=stats, retried=finished.retried)
        reason = f"applied with --force although {decision.reason}" if decision.forced else decision.reason
        if finished.another and decision.text != session.original:
            found = f"an answer sampled to the first request ({finished.candidates} decoded)" if finished.sampled \
                else f"branch {finished.branch} of the first answer"
            reason = "; ".join(filter(None, (reason, f"{found}, which no earlier try wrote, passed every check")))
        elif finished.after_refusals:
            reason = "; ".join(filter(None, (reason, f"the answer was refused ({finished.retried}), and so was the "
                                                      f"one asked again; branch {finished.branch} of the first "
                                                      "answer passed every check")))
        elif finished.branch and decision.text != session.original:
            came_back = "unchanged" if feedback is None else "unchanged or as an edit the tests failed"
            reason = "; ".join(filter(None, (reason, f"the answer came back {came_back}; branch {finished.branch} "
                                                      "changed it and passed every check")))
        if finished.self_test is not None:
            reason = "; ".join(filter(None, (reason, finished.self_test.describe())))
        return Unit(span, UnitStatus.CHANGED if decision.text != session.original else UnitStatus.UNCHANGED, reason,
                    new_text=decision.text, stats=stats, candidates=finished.candidates, retried=finished.retried)

    def _assemble(self, job: FilePlan, text: str, integrity: FileIntegrity) -> None:
        new = text
        for unit in sorted(job.units, key=lambda u: u.target.start, reverse=True):
            if unit.status == UnitStatus.CHANGED and unit.new_text is not None:
                new = new[: unit.target.start] + unit.new_text + new[unit.target.end:]
        if new != text and not self.options.allow_syntax_errors:
            problem = integrity.syntax.problem(0, len(text), new)
            if problem is not None:  # each span parsed alone, but not all of them together
                job.status = FileStatus.FAILED
                job.reason = f"the rewritten file does not parse ({problem.describe()}); not applied"
                return
        job.new_text = new
        failed = job.failed_units
        if failed and new == text:
            job.status, job.reason = FileStatus.FAILED, failed[0].reason if len(failed) == 1 else \
                f"{len(failed)} of {len(job.units)} spans failed; first: {failed[0].reason}"
            return
        job.status = FileStatus.CHANGED if new != text else FileStatus.UNCHANGED
        if failed:
            job.reason = f"{len(failed)} of {len(job.units)} spans not applied: {failed[0].reason}"


def _describe(error: Exception) -> str:
    if isinstance(error, NoCodeBlock):
        return str(error) if "nothing changed" in str(error) else f"{error}; nothing changed"
    if isinstance(error, (RewriteError, ServiceError, FileError, ValueError)):
        return str(error)  # says what went wrong in the user's words
    return f"{type(error).__name__}: {error}"
