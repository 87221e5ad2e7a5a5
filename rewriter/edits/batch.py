"""Batch rewrites: find the files, plan what to rewrite in each, run the engine, review or write.

One file goes through: collect (walk, .gitignore, skip reasons) -> plan (scopes: the whole
file, a line range or every node of a kind) -> rewrite each span (the span is the prediction,
the rest of the file the context; too large: less context, then smaller spans), its answer
judged by pipeline.py as every front end's is -> reassemble (the whole file must still parse)
-> diff -> atomic write. Files are written one at a time, each in one
rename, so an interrupted run leaves every file untouched or fully rewritten.
"""
from __future__ import annotations

import glob
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ..prompt import NoCodeBlock, language_for
from ..results import ContextTooLarge, RewriteError, ServiceError, Stats
from .diffs import colorize, unified_diff
from .files import FileError, SourceFile, atomic_write, read_source
from .integrity import FileIntegrity
from .node_kinds import tree_language
from .pipeline import CUT, INTEGRITY
from .scopes import (
    ScopeError,
    Span,
    SyntaxTree,
    expand_to_nodes,
    line_span,
    select_nodes,
    split_span,
)
from .session import EditSession, Finished

MAX_FILE_BYTES = 1 << 20  # larger files are generated or data, not code to rewrite by model
EXCLUDED_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv",
                 ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
# Directory walks take source code only; data and prose files are rewritten when named.
NOT_CODE = {"", "json", "yaml", "toml", "markdown"}
# How much of the file around a span goes along as context: all of it first, then less when
# the request is too large for the model, down to none.
CONTEXT_WINDOWS = (None, 12_000, 3_000, 600, 0)


class BatchError(ValueError):
    """The command cannot run as given (a missing path, a bad scope); the message says why."""


class Interrupted(Exception):
    """The run was cancelled (Ctrl-C) while this request was decoding."""


@dataclass
class Options:
    instruction: str
    lines: tuple[int, int] | None = None
    expand: bool = False
    each: str | None = None
    write: bool = False
    check: bool = False
    allow_syntax_errors: bool = False
    max_new_tokens: int | None = None
    force: bool = False  # apply answers the integrity check refuses
    show_refused: bool = False  # print the diff of each refused answer


@dataclass
class Unit:
    """One rewrite request: a span of the file and what became of it."""

    span: Span
    status: str = "pending"  # unchanged, changed, failed, refused (by the syntax or integrity guard)
    reason: str = ""
    text: str | None = None  # the span's new text
    refused_text: str | None = None  # a refused answer, kept to show (--show-refused) or apply (--force)
    refused_diff: str = ""  # the file's diff had the refused answer been applied
    stats: Stats | None = None
    part_of: str = ""  # the scope this span was cut from to fit the model's context


@dataclass
class FileJob:
    path: Path  # read and written here (a symlink inside the tree is followed)
    display: str
    status: str = "pending"  # skipped, unchanged, changed, written, failed, interrupted
    reason: str = ""
    source: SourceFile | None = None
    language: str = ""
    grammar: str | None = None
    had_errors: bool = False
    units: list[Unit] = field(default_factory=list)
    new_text: str | None = None
    diff: str = ""
    notes: list[str] = field(default_factory=list)  # what planning changed about the scope, for stderr
    seconds: float = 0.0

    def skip(self, reason: str) -> FileJob:
        self.status, self.reason = "skipped", reason
        return self

    @property
    def failed_units(self) -> list[Unit]:
        return [u for u in self.units if u.status in ("failed", "refused")]


# ---- finding files -------------------------------------------------------------------------

class Ignores:
    """.gitignore rules from every directory between a path and its repository root."""

    def __init__(self):
        self._specs: dict[Path, object] = {}

    def _spec(self, directory: Path):
        if directory not in self._specs:
            import pathspec

            lines: list[str] = []
            for name in (".gitignore", ".git/info/exclude"):
                try:
                    lines += (directory / name).read_text(encoding="utf-8", errors="replace").splitlines()
                except OSError:
                    pass
            self._specs[directory] = pathspec.GitIgnoreSpec.from_lines(lines) if lines else None
        return self._specs[directory]

    def ignored(self, path: Path, is_dir: bool) -> bool:
        path = path.absolute()
        if is_dir and path.name in EXCLUDED_DIRS:
            return True
        bases = []
        for base in path.parents:
            bases.append(base)
            if (base / ".git").exists():
                break
        for base in bases:
            spec = self._spec(base)
            if spec is None:
                continue
            relative = path.relative_to(base).as_posix() + ("/" if is_dir else "")
            if spec.match_file(relative):
                return True
        return False


def collect(paths: list[str]) -> list[FileJob]:
    """Files to rewrite from files, directories (recursive, honouring .gitignore) and globs."""
    ignores = Ignores()
    jobs: list[FileJob] = []
    seen: set[Path] = set()
    cwd = Path.cwd()

    def add(path: Path, root: Path) -> None:
        job = FileJob(path=path, display=_display(path, cwd))
        if path.is_symlink():
            target = path.resolve()
            if not target.exists():
                jobs.append(job.skip(f"broken symlink to {target}"))
                return
            if not target.is_relative_to(root.resolve()):
                jobs.append(job.skip(f"symlink to {target}, outside {root}"))
                return
            job.path = target  # write through the link, keeping the link itself
        key = job.path.resolve()
        if key in seen:
            return
        seen.add(key)
        if not job.path.is_file():
            jobs.append(job.skip("not a regular file"))
            return
        jobs.append(job)

    for argument in paths:
        path = Path(argument)
        if path.exists() or path.is_symlink():
            matches, from_glob = [path], False
        elif glob.has_magic(argument):
            matches, from_glob = [Path(m) for m in sorted(glob.glob(argument, recursive=True))], True
            if not matches:
                raise BatchError(f"{argument}: no files match")
        else:
            raise BatchError(f"{argument}: no such file or directory")
        for match in matches:
            if match.is_dir() and not match.is_symlink():
                for found in _walk(match, ignores):
                    add(found, match)
            elif not from_glob or not ignores.ignored(match, False):
                add(match, cwd)
    return jobs


def _display(path: Path, cwd: Path) -> str:
    """The path as the user would type it: relative to the current directory when inside it."""
    try:
        return str(path.absolute().relative_to(cwd))
    except ValueError:
        return str(path)


def _walk(root: Path, ignores: Ignores):
    """Source files under root, sorted, leaving out ignored paths and files of no known language."""
    for directory, dirnames, filenames in os.walk(root):
        here = Path(directory)
        dirnames[:] = sorted(d for d in dirnames if not ignores.ignored(here / d, True))
        for name in sorted(filenames):
            path = here / name
            if language_for(path) not in NOT_CODE and not ignores.ignored(path, False):
                yield path


# ---- planning ------------------------------------------------------------------------------

def plan(job: FileJob, options: Options) -> FileJob:
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
            first, last = options.lines
            spans = [s for s in spans if s.start_line <= last and s.end_line >= first]
        if not spans:
            where = f" in lines {options.lines[0]}-{options.lines[1]}" if options.lines else ""
            return job.skip(f"no '{options.each}' nodes{where}")
    elif options.lines:
        try:
            span = line_span(text, *options.lines)
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
            if (whole.start_line, whole.end_line) != (span.start_line, span.end_line):
                job.notes.append(f"lines {span.start_line}-{span.end_line} cut a syntax node in two; "
                                 f"rewriting lines {whole.start_line}-{whole.end_line} instead")
                span = whole
        spans = [span]
    else:
        spans = [Span(0, len(text), 1, max(1, text.count("\n") + (not text.endswith("\n"))), "file")]
    job.units = [Unit(span) for span in spans]
    return job


# ---- rewriting -----------------------------------------------------------------------------

class Runner:
    """Runs the spans of one file after another on an engine, reporting progress."""

    def __init__(self, engine, options: Options, report: Report, cancel: threading.Event):
        self.engine = engine
        self.options = options
        self.report = report
        self.cancel = cancel

    def rewrite_file(self, job: FileJob) -> FileJob:
        if job.status != "pending":
            return job
        started = time.perf_counter()
        job.status = "running"
        assert job.source is not None  # planning read every pending file
        text = job.source.text
        tree = SyntaxTree(text, job.grammar) if job.grammar else None
        integrity = FileIntegrity(text, job.grammar)
        done: list[Unit] = []
        for unit in job.units:
            done += self._rewrite_unit(job, text, tree, integrity, unit.span, part_of="")
            self.report.span_done(job)
        job.units = done
        self._assemble(job, text, integrity)
        job.seconds = time.perf_counter() - started
        return job

    def _rewrite_unit(self, job: FileJob, text: str, tree, integrity: FileIntegrity, span: Span,
                      part_of: str) -> list[Unit]:
        whole_file = span.start == 0 and span.end == len(text)
        self.report.unit_started(job, span)
        for window in ((0,) if whole_file else CONTEXT_WINDOWS):
            try:
                unit = self._request(job, text, integrity, span, window)
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
        pieces = split_span(text, span, tree)
        if not pieces:
            unit = Unit(span, "failed", f"{span.label()} does not fit the model's context even without "
                        "the rest of the file; choose a smaller scope (--each method, --each function, "
                        f"or --lines with fewer than {span.end_line - span.start_line + 1} lines)",
                        part_of=part_of)
            self.report.unit_done(job, unit)
            return [unit]
        self.report.split(job, span, len(pieces))
        units: list[Unit] = []
        for piece in pieces:
            units += self._rewrite_unit(job, text, tree, integrity, piece, part_of or span.label())
        return units

    def _request(self, job: FileJob, text: str, integrity: FileIntegrity, span: Span,
                 window: int | None) -> Unit:
        session = EditSession(self.engine, text, span.start, span.end, self.options.instruction, job.language,
                              integrity=integrity, max_new_tokens=self.options.max_new_tokens)
        finished = None
        stats = None
        try:
            for event in session.run(window, force=self.options.force,
                                     allow_syntax_errors=self.options.allow_syntax_errors):
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
            override = "--force" if decision.refusal == INTEGRITY else "--allow-syntax-errors"
            return Unit(span, "refused", f"{decision.reason}; not applied ({override} applies it anyway)",
                        refused_text=decision.refused_text, stats=stats)
        reason = f"applied with --force although {decision.reason}" if decision.forced else decision.reason
        return Unit(span, "changed" if decision.text != session.original else "unchanged", reason,
                    text=decision.text, stats=stats)

    def _assemble(self, job: FileJob, text: str, integrity: FileIntegrity) -> None:
        new = text
        for unit in sorted(job.units, key=lambda u: u.span.start, reverse=True):
            if unit.status == "changed" and unit.text is not None:
                new = new[: unit.span.start] + unit.text + new[unit.span.end:]
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

def run(jobs: list[FileJob], engine, options: Options, report: Report, workers: int = 1,
        diff_out: TextIO | None = None) -> bool:
    """Rewrite every planned file; writes (with --write) happen here, one file at a time.

    Returns False when interrupted (Ctrl-C); every file is then untouched or fully written, and
    its status says which.
    """

    cancel = threading.Event()
    runner = Runner(engine, options, report, cancel)
    pending = [job for job in jobs if job.status == "pending"]
    report.start(jobs)

    def finish(job: FileJob) -> None:
        assert job.source is not None  # planning read every pending file
        text = job.source.text
        if job.new_text is not None and job.new_text != text:
            job.diff = unified_diff(text, job.new_text, job.display)
            if diff_out is not None:
                report.clear()
                diff_out.write(colorize(job.diff) if diff_out.isatty() else job.diff)
                diff_out.flush()
            if options.write:
                _write(job, job.source, job.new_text)
        for unit in job.units:
            if unit.refused_text is not None:
                unit.refused_diff = unified_diff(
                    text, text[: unit.span.start] + unit.refused_text + text[unit.span.end:], job.display)
                if options.show_refused and diff_out is not None:
                    report.clear()
                    diff_out.write(f"# refused, not applied: {job.display}: {unit.span.label()}: {unit.reason}\n")
                    diff_out.write(colorize(unit.refused_diff) if diff_out.isatty() else unit.refused_diff)
                    diff_out.flush()
        report.file_done(job)

    try:
        if workers <= 1:
            for job in pending:
                runner.rewrite_file(job)
                finish(job)
        else:
            pool = ThreadPoolExecutor(max_workers=workers)
            try:
                futures = {pool.submit(runner.rewrite_file, job): job for job in pending}
                for future in as_completed(futures):
                    future.result()
                    finish(futures[future])
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


def _write(job: FileJob, source: SourceFile, new_text: str) -> None:
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


# ---- reporting -----------------------------------------------------------------------------

class Report:
    """Progress of a run; the base class shows nothing (quiet and --json modes)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.started = time.perf_counter()
        self.files = self.files_done = self.units = self.units_done = 0
        self.tokens_done = 0
        self.live: dict[int, int] = {}  # thread -> tokens of its running request

    def start(self, jobs: list[FileJob]) -> None:
        self.started = time.perf_counter()
        self.files = sum(1 for j in jobs if j.status == "pending")
        self.units = sum(len(j.units) for j in jobs if j.status == "pending")

    def unit_started(self, job: FileJob, span: Span) -> None:
        with self.lock:
            self.live[threading.get_ident()] = 0
            self.current = f"{job.display}: {span.label()}"
        self.draw()

    def progress(self, job: FileJob, stats: Stats) -> None:
        with self.lock:
            self.live[threading.get_ident()] = stats.output_tokens
        self.draw()

    def unit_done(self, job: FileJob, unit: Unit) -> None:
        with self.lock:
            self.live.pop(threading.get_ident(), None)
            self.tokens_done += unit.stats.output_tokens if unit.stats else 0
        self.draw()

    def span_done(self, job: FileJob) -> None:
        """A planned span is finished (all its pieces, when it had to be cut to fit)."""
        with self.lock:
            self.units_done += 1
        self.draw()

    def split(self, job: FileJob, span: Span, pieces: int) -> None:
        pass

    def file_done(self, job: FileJob) -> None:
        with self.lock:
            self.files_done += 1
        self.draw()

    def tokens_per_s(self) -> float:
        elapsed = time.perf_counter() - self.started
        return (self.tokens_done + sum(self.live.values())) / elapsed if elapsed > 0 else 0.0

    def draw(self) -> None:
        pass

    def clear(self) -> None:
        """Make room for other output on the terminal (the next update redraws)."""

    def close(self) -> None:
        pass


class TerminalReport(Report):
    """A progress bar on stderr, redrawn in place at most ten times a second."""

    def __init__(self, stream: TextIO = sys.stderr, width: int = 24):
        super().__init__()
        self.stream = stream
        self.width = width
        self.last_draw = 0.0
        self.current = ""
        self.shown = False

    def draw(self, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self.last_draw < 0.1:
            return
        self.last_draw = now
        with self.lock:
            done = self.units_done / self.units if self.units else 1.0
            filled = int(done * self.width)
            bar = "#" * filled + "-" * (self.width - filled)
            line = (f"[{bar}] {self.files_done}/{self.files} files, {self.units_done}/{self.units} spans, "
                    f"{self.tokens_per_s():.1f} tok/s  {self.current}")
        columns = _columns(self.stream)
        self.stream.write("\r\033[K" + line[: columns - 1])
        self.stream.flush()
        self.shown = True

    def file_done(self, job: FileJob) -> None:
        super().file_done(job)
        self.draw(force=True)

    def clear(self) -> None:
        with self.lock:
            if self.shown:
                self.stream.write("\r\033[K")
                self.stream.flush()
                self.shown = False

    def close(self) -> None:
        self.clear()


def _columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 100


def add_stats(total: Stats, stats: Stats | None) -> None:
    if stats is None:
        return
    for name in ("prompt_tokens", "cached_prompt_tokens", "output_tokens", "forward_passes",
                 "accepted_prediction_tokens", "rejected_prediction_tokens",
                 "accepted_draft_tokens", "rejected_draft_tokens"):
        setattr(total, name, getattr(total, name) + getattr(stats, name))
    total.total_s += stats.total_s


def file_stats(job: FileJob) -> Stats:
    total = Stats()
    for unit in job.units:
        add_stats(total, unit.stats)
    return total


def _rate(stats: Stats) -> float:
    return stats.output_tokens / stats.total_s if stats.total_s > 0 else 0.0


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def status_text(job: FileJob, options: Options) -> str:
    words = {"changed": "would change" if not options.write else "changed, not written",
             "interrupted": "interrupted"}
    text = words.get(job.status, job.status)
    return f"{text}: {job.reason}" if job.reason else text


def summary_table(jobs: list[FileJob], options: Options, seconds: float) -> str:
    """The table printed at the end: one row per file, then the totals."""
    rows = [("file", "spans", "changed", "prediction acc/rej", "tok/s", "time", "status")]
    total = Stats()
    for job in jobs:
        stats = file_stats(job)
        add_stats(total, stats)
        changed = sum(1 for u in job.units if u.status == "changed")
        has_units = bool(job.units) and job.status != "skipped"
        rows.append((
            job.display,
            str(len(job.units)) if has_units else "-",
            str(changed) if has_units else "-",
            f"{stats.accepted_prediction_tokens}/{stats.rejected_prediction_tokens}" if stats.output_tokens else "-",
            f"{_rate(stats):.1f}" if stats.output_tokens else "-",
            f"{job.seconds:.1f}s" if job.seconds else "-",
            status_text(job, options),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1] for row in rows]
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.status] = counts.get(job.status, 0) + 1
    order = ["written", "changed", "unchanged", "skipped", "failed", "interrupted"]
    parts = [f"{counts[s]} {'would change' if s == 'changed' and not options.write else s}"
             for s in order if counts.get(s)]
    spans = sum(len(j.units) for j in jobs if j.status != "skipped")
    lines.append(
        f"{plural(len(jobs), 'file')} ({', '.join(parts)}), {plural(spans, 'span')}, "
        f"{total.output_tokens} tokens, prediction tokens {total.accepted_prediction_tokens} accepted / "
        f"{total.rejected_prediction_tokens} rejected, {_rate(total):.1f} tok/s, {seconds:.1f}s"
    )
    return "\n".join(lines)


def exit_code(jobs: list[FileJob], options: Options, completed: bool) -> int:
    if not completed:
        return 130
    if any(j.status == "failed" or j.failed_units for j in jobs):
        return 1
    if options.check and any(j.status in ("changed", "written") for j in jobs):
        return 1
    return 0


def _stats_dict(stats: Stats) -> dict:
    return {
        "output_tokens": stats.output_tokens,
        "accepted_prediction_tokens": stats.accepted_prediction_tokens,
        "rejected_prediction_tokens": stats.rejected_prediction_tokens,
        "forward_passes": stats.forward_passes,
        "decoding_s": round(stats.total_s, 3),
        "tokens_per_s": round(_rate(stats), 2),
    }


def json_report(jobs: list[FileJob], options: Options, seconds: float, code: int) -> str:
    files = []
    total = Stats()
    for job in jobs:
        stats = file_stats(job)
        add_stats(total, stats)
        files.append({
            "path": job.display,
            "language": job.language,
            "status": job.status,
            "reason": job.reason,
            "spans": [{
                "kind": u.span.kind, "name": u.span.name,
                "lines": [u.span.start_line, u.span.end_line],
                "status": u.status, "reason": u.reason, "part_of": u.part_of,
                **({"refused_diff": u.refused_diff} if u.refused_diff else {}),
                **({"stats": _stats_dict(u.stats)} if u.stats else {}),
            } for u in job.units] if job.status != "skipped" else [],
            "diff": job.diff,
            "notes": job.notes,
            "stats": _stats_dict(stats),
            "seconds": round(job.seconds, 3),
        })
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.status] = counts.get(job.status, 0) + 1
    return json.dumps({
        "files": files,
        "summary": {"files": len(jobs), **counts, "stats": _stats_dict(total),
                    "seconds": round(seconds, 3), "exit_code": code,
                    "write": options.write, "check": options.check},
    }, indent=2)


# ---- the command ---------------------------------------------------------------------------

def apply_command(paths: list[str], options: Options, make_engine: Callable[[], object], *,
                  workers: int = 1, json_output: bool = False, quiet: bool = False,
                  say: Callable[[str], None] = lambda m: print(f"rewriter: {m}", file=sys.stderr),
                  stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """`rewriter apply PATHS...`: the exit code (0 fine, 1 changes under --check or failures,
    2 bad usage or nothing to rewrite, 130 interrupted)."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    if not options.instruction or not options.instruction.strip():
        raise BatchError("the instruction is empty: say what to change with -i")
    if options.write and options.check:
        raise BatchError("--check reports what would change and writes nothing; drop --write or --check")
    if options.expand and not options.lines:
        raise BatchError("--expand grows a --lines range; give --lines too")
    jobs = collect(paths)
    if options.lines and not options.each and len([j for j in jobs if j.status == "pending"]) > 1:
        raise BatchError("--lines applies to one file; name a single file")
    for job in jobs:
        plan(job, options)
        for note in job.notes:
            say(f"{job.display}: {note}")
    if not jobs:
        raise BatchError("no source files found under " + ", ".join(paths))
    pending = [job for job in jobs if job.status == "pending"]
    if not pending:
        for job in jobs:
            say(f"{job.display}: skipped: {job.reason}")
        raise BatchError("nothing to rewrite")

    started = time.perf_counter()
    engine = make_engine()
    interactive = stderr.isatty() and not quiet and not json_output
    report = TerminalReport(stderr) if interactive else Report()
    try:
        completed = run(jobs, engine, options, report, workers=workers,
                        diff_out=None if json_output else stdout)
    finally:
        close = getattr(engine, "close", None)
        if close:
            close()
    seconds = time.perf_counter() - started
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
    if not completed:
        written = [j.display for j in jobs if j.status == "written"]
        say(f"interrupted; {plural(len(written), 'file')} written" + (f" ({', '.join(written)})" if written else "")
            + ", every other file untouched")
    elif code == 0 and not any(j.status in ("changed", "written") for j in jobs) and not quiet:
        say("no changes")
    elif options.check and code == 1:
        say("changes would be made (--check)")
    return code
