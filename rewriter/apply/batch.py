"""Batch rewrites (`rewriter apply`): plan what to rewrite in each file, run the engine, review or write.

One file goes through: collect (collect.py: walk, .gitignore, skip reasons) -> plan (scopes: the whole
file, a line range or every node of a kind) -> rewrite each span (the span is the prediction,
the rest of the file the context; too large: less context, then smaller spans), its answer
judged by pipeline.py as every front end's is -> reassemble (the whole file must still parse)
-> diff -> atomic write. Files are written one at a time, each in one
rename, so an interrupted run leaves every file untouched or fully rewritten. Progress, the
summary and the JSON report: report.py. With --test, testgate.py keeps a file's edit only when
the user's tests pass with it, and asks the model again with their output when they do not.
"""
from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from functools import partial
from typing import TextIO

from ..answer import NoCodeBlock
from ..edits.checks.integrity import FileIntegrity
from ..edits.node_kinds import tree_language
from ..edits.pipeline import CUT, SYNTAX
from ..edits.scopes import (
    ScopeError,
    SyntaxTree,
    expand_to_nodes,
    select_nodes,
    split_span,
)
from ..edits.session import EditSession, Feedback, Finished
from ..edits.target import Target, numbered_lines
from ..engine import Engine, instruction_is_empty
from ..prompt import language_for, merge_instruction
from ..results import ContextTooLarge, RewriteError, ServiceError
from .collect import collect
from .diffs import colorize, unified_diff
from .files import FileError, SourceFile, atomic_write, read_source
from .plans import BatchError, FilePlan, Options, Unit
from .report import Report, TerminalReport, exit_code, json_report, plural, summary_table
from .testgate import CommandRun, EditGate, check_baseline

MAX_FILE_BYTES = 1 << 20  # larger files are generated or data, not code to rewrite by model
# How much of the file around a span goes along as context: all of it first, then less when
# the request is too large for the model, down to none.
CONTEXT_WINDOWS = (None, 12_000, 3_000, 600, 0)


class Interrupted(Exception):
    """The run was cancelled (Ctrl-C) while this request was decoding."""


# ---- planning ------------------------------------------------------------------------------

def plan(job: FilePlan, options: Options) -> FilePlan:
    """Read the file and decide its spans, or mark it skipped with the reason."""
    if job.status != "pending":
        return job
    try:
        size = job.path.stat().st_size
    except OSError as error:
        return job.skip(f"cannot read: {error.strerror}")
    if size > MAX_FILE_BYTES:
        return job.skip(f"larger than {MAX_FILE_BYTES >> 20} MiB ({size} bytes)")
    try:
        job.source = read_source(job.path)
    except FileError as error:
        return job.skip(str(error).removeprefix(f"{job.path}: "))
    text = job.source.text
    if not text.strip():
        return job.skip("empty file")
    job.language = language_for(job.path)
    job.grammar = tree_language(job.path)
    tree = SyntaxTree(text, job.grammar) if job.grammar else None
    job.had_errors = bool(tree and tree.has_errors())

    if options.each:
        if tree is None:
            return job.skip(f"no syntax tree for this file type, so no '{options.each}' nodes")
        try:
            spans = select_nodes(tree, options.each)
        except ScopeError as error:
            return job.skip(str(error))
        if options.lines:
            lines = numbered_lines(*options.lines)
            spans = [s for s in spans if s.lines.start < lines.stop and lines.start < s.lines.stop]
        if not spans:
            where = f" in lines {options.lines[0]}-{options.lines[1]}" if options.lines else ""
            return job.skip(f"no '{options.each}' nodes{where}")
    elif options.lines:
        try:
            span = Target.of_lines(text, numbered_lines(*options.lines))
        except ScopeError as error:
            raise BatchError(f"{job.display}: {error}") from error
        if options.expand:
            if tree is None:
                raise BatchError(f"{job.display}: --expand needs a syntax tree, and this file type has none")
            span = expand_to_nodes(tree, span)
        elif tree is not None and not job.had_errors:
            # A range that cuts a node in two makes the model complete the node: the lines after
            # the range would then appear twice. Whole nodes only.
            whole = expand_to_nodes(tree, span)
            if whole.lines != span.lines:
                job.notes.append(f"lines {'-'.join(map(str, span.shown_lines))} cut a syntax node in two; "
                                 f"rewriting lines {'-'.join(map(str, whole.shown_lines))} instead")
                span = whole
        spans = [span]
    else:
        spans = [Target.whole(text)]
    job.units = [Unit(span) for span in spans]
    return job


# ---- rewriting -----------------------------------------------------------------------------

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
        if job.status != "pending" and not failed_check:
            return job
        started = time.perf_counter()
        job.status, job.new_text = "running", None
        assert job.source is not None  # planning read every pending file
        text = job.source.text
        tree = SyntaxTree(text, job.grammar) if job.grammar else None
        integrity = FileIntegrity(text, job.grammar)
        done: list[Unit] = []
        for unit in job.units:
            if not failed_check:
                done += self._rewrite_unit(job, text, tree, integrity, unit.target, part_of="")
                self.report.span_done(job)
            elif unit.status == "changed" and unit.text is not None:
                done += self._rewrite_unit(job, text, tree, integrity, unit.target, unit.part_of,
                                           Feedback(unit.text, failed_check))
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
                self.report.unit_done(job, unit)
                return [unit]
            except Interrupted:
                raise
            except Exception as error:  # noqa: BLE001 - one request's failure is not the run's
                if not isinstance(error, ContextTooLarge):
                    unit = Unit(span, "failed", _describe(error), part_of=part_of)
                    self.report.unit_done(job, unit)
                    return [unit]
        if self.options.snippet is not None:  # merged into the whole file: never into pieces of it
            unit = Unit(span, "failed", "the file and the snippet do not fit the model's context together")
            self.report.unit_done(job, unit)
            return [unit]
        pieces = split_span(span, tree)
        if not pieces:
            unit = Unit(span, "failed", f"{span.label()} does not fit the model's context even without "
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
        session = EditSession(self.engine, span, instruction, job.language, integrity=integrity,
                              max_new_tokens=self.options.max_new_tokens,
                              judged_instruction=self.options.instruction)
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
            return Unit(span, "failed", _describe(error), stats=stats)
        assert finished is not None  # the session ends with a Finished or raises
        decision, stats = finished.decision, finished.result.stats
        if decision.refusal == CUT:  # never applied, not even with --force
            return Unit(span, "failed", f"{decision.reason}; not applied", stats=stats)
        if decision.refused:
            override = "--allow-syntax-errors" if decision.refusal == SYNTAX else "--force"
            return Unit(span, "refused", f"{decision.reason}; not applied ({override} applies it anyway)",
                        refused_text=decision.refused_text, stats=stats)
        reason = f"applied with --force although {decision.reason}" if decision.forced else decision.reason
        return Unit(span, "changed" if decision.text != session.original else "unchanged", reason,
                    text=decision.text, stats=stats)

    def _assemble(self, job: FilePlan, text: str, integrity: FileIntegrity) -> None:
        new = text
        for unit in sorted(job.units, key=lambda u: u.target.start, reverse=True):
            if unit.status == "changed" and unit.text is not None:
                new = new[: unit.target.start] + unit.text + new[unit.target.end:]
        if new != text and not self.options.allow_syntax_errors:
            problem = integrity.syntax.problem(0, len(text), new)
            if problem is not None:  # each span parsed alone, but not all of them together
                job.status = "failed"
                job.reason = f"the rewritten file does not parse ({problem.describe()}); not applied"
                return
        job.new_text = new
        failed = job.failed_units
        if failed and new == text:
            job.status, job.reason = "failed", failed[0].reason if len(failed) == 1 else \
                f"{len(failed)} of {len(job.units)} spans failed; first: {failed[0].reason}"
            return
        job.status = "changed" if new != text else "unchanged"
        if failed:
            job.reason = f"{len(failed)} of {len(job.units)} spans not applied: {failed[0].reason}"


def _describe(error: Exception) -> str:
    if isinstance(error, NoCodeBlock):
        return str(error) if "nothing changed" in str(error) else f"{error}; nothing changed"
    if isinstance(error, (RewriteError, ServiceError, FileError, ValueError)):
        return str(error)  # says what went wrong in the user's words
    return f"{type(error).__name__}: {error}"


# ---- the whole run -------------------------------------------------------------------------

def run(jobs: list[FilePlan], engine: Engine, options: Options, report: Report, workers: int = 1,
        diff_out: TextIO | None = None, tests_before: CommandRun | None = None) -> bool:
    """Rewrite every planned file; writes (with --write) happen here, one file at a time.
    `tests_before`: --test's run before any edit, which the edits' runs are judged against.

    Returns False when interrupted (Ctrl-C); every file is then untouched or fully written, and
    its status says which.
    """

    cancel = threading.Event()
    runner = Runner(engine, options, report, cancel)
    gate = EditGate(options, tests_before) if options.test else None
    if gate is not None:
        workers = 1  # the tests see one edit at a time
    pending = [job for job in jobs if job.status == "pending"]
    report.start(jobs)

    try:
        if workers <= 1:
            for job in pending:
                if options.review is not None and options.review.stopped:  # no model time for unasked files
                    job.skip(f"not rewritten: {options.review.stopped}")
                    continue
                runner.rewrite_file(job)
                if gate is not None:  # writes the edit only if the tests pass with it
                    gate.keep_or_put_back(job, partial(runner.rewrite_file, job))
                deliver(job, options, report, diff_out)
        else:
            pool = ThreadPoolExecutor(max_workers=workers)
            try:
                futures = {pool.submit(runner.rewrite_file, job): job for job in pending}
                for future in as_completed(futures):
                    future.result()
                    deliver(futures[future], options, report, diff_out)
            finally:
                cancel.set()  # no-op after a full run; stops the workers after Ctrl-C
                try:
                    pool.shutdown(wait=True, cancel_futures=True)
                except KeyboardInterrupt:
                    pass  # a second Ctrl-C: stop waiting; no worker writes files
    except (KeyboardInterrupt, Interrupted):
        cancel.set()
        for job in pending:
            if job.status in ("pending", "running"):
                job.status, job.reason = "interrupted", "untouched"
            elif job.status == "changed" and options.write:
                job.reason = "before it was written; untouched"
                job.status = "interrupted"
        report.close()
        return False
    report.close()
    return True


def deliver(job: FilePlan, options: Options, report: Report, diff_out: TextIO | None) -> None:
    """Show the file's diff (and its refused answers' with --show-refused); write it with --write."""
    assert job.source is not None  # planning read every pending file
    text = job.source.text
    if job.new_text is not None and job.new_text != text:
        if options.review is not None:
            report.clear()
            verdict = options.review.decide(job.display, text, job.new_text)  # shows each hunk and asks
            job.new_text = verdict.text
            job.reason = "; ".join(filter(None, (job.reason, verdict.note)))
        job.diff = unified_diff(text, job.new_text, job.display)  # "" when no hunk was accepted
        if diff_out is not None and options.review is None:  # the review showed it hunk by hunk
            report.clear()
            diff_out.write(colorize(job.diff) if diff_out.isatty() else job.diff)
            diff_out.flush()
        if options.write and job.status == "changed" and job.new_text != text:  # not yet written by the test gate
            _write(job, job.source, job.new_text)
    for unit in job.units:
        if unit.refused_text is not None:
            unit.refused_diff = unified_diff(
                text, text[: unit.target.start] + unit.refused_text + text[unit.target.end:], job.display)
            if options.show_refused and diff_out is not None:
                report.clear()
                diff_out.write(f"# refused, not applied: {job.display}: {unit.target.label()}: {unit.reason}\n")
                diff_out.write(colorize(unit.refused_diff) if diff_out.isatty() else unit.refused_diff)
                diff_out.flush()
    report.file_done(job)


def _write(job: FilePlan, source: SourceFile, new_text: str) -> None:
    try:
        atomic_write(source, new_text)
        job.status = "written"
    except FileError as error:
        job.status, job.reason = "failed", str(error).removeprefix(f"{source.path}: ")
    except OSError as error:
        job.status, job.reason = "failed", f"cannot write: {error.strerror or error}"
    except KeyboardInterrupt:
        # atomic_write either renamed the new text into place or left the old file alone.
        try:
            on_disk = job.path.read_bytes()
        except OSError:
            on_disk = b""
        expected = new_text.encode("utf-8")
        job.status = "written" if on_disk.endswith(expected) and on_disk != source.raw else "changed"
        raise


# ---- the command ---------------------------------------------------------------------------

def apply_command(paths: list[str], options: Options, make_engine: Callable[[], Engine], *,
                  workers: int = 1, json_output: bool = False, quiet: bool = False,
                  say: Callable[[str], None] = lambda m: print(f"rewriter: {m}", file=sys.stderr),
                  stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """`rewriter apply PATHS...`: the exit code (0 fine, 1 changes under --check or failures,
    2 bad usage or nothing to rewrite, 130 interrupted)."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    if instruction_is_empty(options.instruction):
        raise BatchError("the instruction is empty: say what to change with -i")
    check_options(options)
    jobs = collect(paths)
    if options.lines and not options.each and len([j for j in jobs if j.status == "pending"]) > 1:
        raise BatchError("--lines applies to one file; name a single file")
    if not jobs:
        raise BatchError("no source files found under " + ", ".join(paths))
    plan_all(jobs, options, say)
    started = time.perf_counter()
    # before the model loads: what fails already is said first
    tests_before = check_baseline(options, say) if options.test else None
    engine = make_engine()
    # Files decode in threads while one is reviewed: no progress bar drawn over the questions.
    report = progress_report(stderr, quiet or (options.review is not None and workers > 1), json_output)
    try:
        completed = run(jobs, engine, options, report, workers=workers,
                        diff_out=None if json_output else stdout, tests_before=tests_before)
    finally:
        engine.close()
    return conclude(jobs, options, completed, time.perf_counter() - started, json_output=json_output,
                    quiet=quiet, say=say, stdout=stdout, stderr=stderr)


def check_options(options: Options) -> None:
    if options.test is not None:
        if options.check:
            raise BatchError("--test writes each edit its tests pass with; it cannot be combined with --check")
        if not options.test.strip():
            raise BatchError("--test needs a command, e.g. --test 'pytest -x -q'")
        if options.tries < 1 or options.test_timeout <= 0:
            raise BatchError("--tries must be at least 1 and --test-timeout above 0")
    if options.review is not None and options.check:
        raise BatchError("--check writes nothing, and --interactive writes the hunks you accept; drop one")
    if options.review is not None and options.test is not None:
        raise BatchError("--test keeps or puts back a file's whole edit; it cannot be combined with --interactive")
    if options.write and options.check:
        raise BatchError("--check reports what would change and writes nothing; drop --write or --check")
    if options.review is not None and (why := options.review.cannot_ask()):
        raise BatchError(why)
    if options.expand and not options.lines:
        raise BatchError("--expand grows a --lines range; give --lines too")


def plan_all(jobs: list[FilePlan], options: Options, say: Callable[[str], None]) -> None:
    """Plan every file; BatchError when none is left to rewrite."""
    for job in jobs:
        plan(job, options)
        for note in job.notes:
            say(f"{job.display}: {note}")
    if not any(job.status == "pending" for job in jobs):
        for job in jobs:
            say(f"{job.display}: skipped: {job.reason}")
        raise BatchError("nothing to rewrite")


def progress_report(stderr: TextIO, quiet: bool, json_output: bool) -> Report:
    """A progress bar on an interactive stderr; otherwise nothing shown while the run goes."""
    return TerminalReport(stderr) if stderr.isatty() and not quiet and not json_output else Report()


def conclude(jobs: list[FilePlan], options: Options, completed: bool, seconds: float, *, json_output: bool,
             quiet: bool, say: Callable[[str], None], stdout: TextIO, stderr: TextIO) -> int:
    """The run's report (the JSON one, or the summary table and what became of each file) and its exit code."""
    code = exit_code(jobs, options, completed)
    if json_output:
        stdout.write(json_report(jobs, options, seconds, code) + "\n")
        stdout.flush()
        return code
    if not quiet:
        stderr.write(summary_table(jobs, options, seconds) + "\n")
    for job in jobs:
        if job.status == "written":
            say(f"wrote {job.display}")
        elif job.status == "failed" or job.failed_units:
            say(f"{job.display}: {job.reason}")
            if job.test_tail:
                stderr.write("".join(f"    {line}\n" for line in job.test_tail.splitlines()))
    if not completed:
        written = [j.display for j in jobs if j.status == "written"]
        say(f"interrupted; {plural(len(written), 'file')} written" + (f" ({', '.join(written)})" if written else "")
            + ", every other file untouched")
    elif code == 0 and not any(j.status in ("changed", "written") for j in jobs) and not quiet:
        say("no changes")
    elif options.check and code == 1:
        say("changes would be made (--check)")
    return code
