"""Batch rewrites (`rewriter apply`): plan what to rewrite in each file, run the engine, review or write.

One file goes through: collect (collect.py: walk, .gitignore, skip reasons) -> plan (scopes: the whole
file, a line range or every node of a kind) -> rewrite each span and put the file together
(runner.py) -> diff -> atomic write. Files are written one at a time, each in one
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
from typing import TextIO, cast

from ..edits.node_kinds import tree_language
from ..edits.scopes import ScopeError, SyntaxTree, expand_to_nodes, select_nodes
from ..edits.target import Target, numbered_lines
from ..engine import Engine, instruction_is_empty
from ..prompt import language_for
from .collect import collect
from .diffs import ReaderOutput, colorize, unified_diff
from .files import FileError, SourceFile, atomic_write, read_source
from .plans import BatchError, FilePlan, FileStatus, Options, Unit
from .report import Report, TerminalReport, exit_code, json_report, plural, summary_table
from .runner import Interrupted, Runner
from .testgate import CommandRun, EditGate, check_baseline

MAX_FILE_BYTES = 1 << 20  # larger files are generated or data, not code to rewrite by model


# ---- planning ------------------------------------------------------------------------------

def plan(job: FilePlan, options: Options) -> FilePlan:
    """Read the file and decide its spans, or mark it skipped with the reason."""
    if job.status != FileStatus.PENDING:
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
    pending = [job for job in jobs if job.status == FileStatus.PENDING]
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
            if job.status in (FileStatus.PENDING, FileStatus.RUNNING):
                job.status, job.reason = FileStatus.INTERRUPTED, "untouched"
            elif job.status == FileStatus.CHANGED and options.write:
                job.reason = "before it was written; untouched"
                job.status = FileStatus.INTERRUPTED
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
            reviewed = options.review.decide(job.display, text, job.new_text)  # shows each hunk and asks
            job.new_text = reviewed.text
            job.reason = "; ".join(filter(None, (job.reason, reviewed.note)))
        job.diff = unified_diff(text, job.new_text, job.display)  # "" when no hunk was accepted
        if diff_out is not None and options.review is None:  # the review showed it hunk by hunk
            report.clear()
            diff_out.write(colorize(job.diff) if diff_out.isatty() else job.diff)
            diff_out.flush()
        # not yet written by the test gate
        if options.write and job.status == FileStatus.CHANGED and job.new_text != text:
            _write(job, job.source, job.new_text)
    for unit in job.units:
        if unit.refused_text is not None:
            unit.refused_diff = unified_diff(
                text, unit.target.replaced_by(unit.refused_text), job.display)
            if options.show_refused and diff_out is not None:
                report.clear()
                diff_out.write(f"# refused, not applied: {job.display}: {unit.target.label()}: {unit.reason}\n")
                diff_out.write(colorize(unit.refused_diff) if diff_out.isatty() else unit.refused_diff)
                diff_out.flush()
    report.file_done(job)


def _write(job: FilePlan, source: SourceFile, new_text: str) -> None:
    try:
        atomic_write(source, new_text)
        job.status = FileStatus.WRITTEN
    except FileError as error:
        job.status, job.reason = FileStatus.FAILED, str(error).removeprefix(f"{source.path}: ")
    except OSError as error:
        job.status, job.reason = FileStatus.FAILED, f"cannot write: {error.strerror or error}"
    except KeyboardInterrupt:
        # atomic_write either renamed the new text into place or left the old file alone.
        try:
            on_disk = job.path.read_bytes()
        except OSError:
            on_disk = b""
        expected = new_text.encode("utf-8")
        job.status = FileStatus.WRITTEN if on_disk.endswith(expected) and on_disk != source.raw else FileStatus.CHANGED
        raise


# ---- the command ---------------------------------------------------------------------------

def apply_command(paths: list[str], options: Options, make_engine: Callable[[], Engine], *,
                  workers: int = 1, json_output: bool = False, quiet: bool = False,
                  say: Callable[[str], None] = lambda m: print(f"rewriter: {m}", file=sys.stderr),
                  stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """`rewriter apply PATHS...`: the exit code (0 fine, 1 changes under --check or failures,
    2 bad usage or nothing to rewrite, 130 interrupted)."""
    shown = ReaderOutput(stdout or sys.stdout)
    stdout = cast(TextIO, shown)
    stderr = stderr or sys.stderr
    if instruction_is_empty(options.instruction):
        raise BatchError("the instruction is empty: say what to change with -i")
    check_options(options)
    jobs = collect(paths)
    if options.lines and not options.each and len([j for j in jobs if j.status == FileStatus.PENDING]) > 1:
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
    code = conclude(jobs, options, completed, time.perf_counter() - started, json_output=json_output,
                    quiet=quiet, say=say, stdout=stdout, stderr=stderr)
    return reader_gone(shown, code, say)


def reader_gone(stdout: ReaderOutput, code: int, say: Callable[[str], None]) -> int:
    """The exit code once standard output's reader went away (1 at least: not all was shown)."""
    if not stdout.closed_by_reader:
        return code
    say("standard output was closed before all of it was written; the files were written as asked")
    return code or 1


def check_options(options: Options) -> None:
    if options.edit.branches < 0:
        raise BatchError("--branches takes a number of branches, 0 or more")
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
    if not any(job.status == FileStatus.PENDING for job in jobs):
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
        if job.status == FileStatus.WRITTEN:
            say(f"wrote {job.display}")
        elif job.status == FileStatus.FAILED or job.failed_units:
            say(f"{job.display}: {job.reason}")
            if job.test_tail:
                stderr.write("".join(f"    {line}\n" for line in job.test_tail.splitlines()))
    if not completed:
        written = [j.display for j in jobs if j.status == FileStatus.WRITTEN]
        say(f"interrupted; {plural(len(written), 'file')} written" + (f" ({', '.join(written)})" if written else "")
            + ", every other file untouched")
    elif code == 0 and not any(j.status in (FileStatus.CHANGED, FileStatus.WRITTEN) for j in jobs) and not quiet:
        say("no changes")
    elif options.check and code == 1:
        say("changes would be made (--check)")
    return code
