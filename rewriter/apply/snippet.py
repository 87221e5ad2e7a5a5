"""`rewriter apply FILE --snippet PATH`: merge a chat model's snippet (the changed code, with markers
such as `# ... existing code ...` for what stays) into one file.

The deterministic merges (edits/snippets/merge.py) go first and need no model: Merged gives the
file's new text at once (judged as any edit is: integrity, syntax, lint); Refused (a snippet
that is not text, or only markers) leaves the file alone with the reason. Whatever they are not
sure of (ToModel) loads the model, which merges it as any rewrite of a span goes (batch.py's
run: the region the snippet goes in, edits/snippets/region.py, is the target and the prediction,
the whole file where that cannot be told; the snippet rides in the instruction, the answer is
judged by the one edit pipeline, and --force applies what only the lint check refused). Either way the result is shown,
written or checked, and reported, as `rewriter apply -i` does it. With --test, the merge is
written only if the user's tests pass with it (testgate.py); the model's merge that fails them
is asked again with their output, a deterministic one is put back (it would come out the same).
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO, TextIO, cast

from ..edits.snippets.merge import Merged, Refused, ToModel, merge_snippet
from ..edits.snippets.region import snippet_region
from ..engine import Engine
from .batch import MAX_FILE_BYTES, check_options, conclude, deliver, plan_all, progress_report, reader_gone, run
from .collect import collect
from .diffs import ReaderOutput
from .plans import BatchError, FilePlan, FileStatus, MergePath, Options, Unit, UnitStatus
from .report import Report
from .testgate import EditGate, check_baseline


def read_snippet(where: str, stdin: BinaryIO | None = None) -> bytes:
    """The snippet's bytes from a file, or from standard input for `-` (decoded by the merge,
    which refuses what is not UTF-8 text)."""
    if where == "-":
        return (stdin or sys.stdin.buffer).read(MAX_FILE_BYTES + 1)  # one byte more: too large is seen
    try:
        return Path(where).read_bytes()
    except OSError as error:
        raise BatchError(f"--snippet {where}: cannot read it ({error.strerror or error})") from error


def snippet_command(paths: list[str], snippet: bytes, options: Options, make_engine: Callable[[], Engine], *,
                    json_output: bool = False, quiet: bool = False,
                    say: Callable[[str], None] = lambda m: print(f"rewriter: {m}", file=sys.stderr),
                    stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """The exit code, as `apply_command`'s: 0 merged (or nothing to change), 1 refused or failed, or
    changes under --check; 2 bad usage; 130 interrupted."""
    shown = ReaderOutput(stdout or sys.stdout)
    stdout = cast(TextIO, shown)
    stderr = stderr or sys.stderr
    if options.lines or options.each or options.expand:
        raise BatchError("--snippet merges into the whole file; leave out --lines, --expand and --each")
    if len(snippet) > MAX_FILE_BYTES:
        raise BatchError(f"the snippet is larger than {MAX_FILE_BYTES >> 20} MiB")
    check_options(options)
    jobs = collect(paths)
    if len(paths) != 1 or len(jobs) != 1:
        raise BatchError("--snippet merges into one file; name a single file")
    plan_all(jobs, options, say)
    job = jobs[0]
    assert job.source is not None  # planned
    started = time.perf_counter()
    outcome = merge_snippet(job.source.text, snippet, job.language, options.instruction)
    job.seconds = outcome.seconds
    completed = True
    if isinstance(outcome, Merged):
        _merged(job, outcome.text, outcome.path)
        if not quiet:
            say(f"{job.display}: merged without a model, by {outcome.path}, in {1000 * outcome.seconds:.0f} ms")
        completed = _delivered(job, options, say, None if json_output else stdout)
    elif isinstance(outcome, ToModel):
        job.merge, job.merge_reason = MergePath.MODEL, outcome.reason
        say(f"{job.display}: {outcome.reason}; the model merges the snippet")
        # before the model loads: what fails already is said first
        tests_before = check_baseline(options, say) if options.test else None
        model_options = replace(options, snippet=snippet.decode("utf-8"))  # the merge decoded it already
        job.units = [Unit(snippet_region(job.source.text, model_options.snippet or "", job.grammar))]
        engine = make_engine()
        try:
            completed = run(jobs, engine, model_options, progress_report(stderr, quiet, json_output),
                            diff_out=None if json_output else stdout, tests_before=tests_before)
        finally:
            engine.close()
    else:
        _refused(job, outcome, options, None if json_output else stdout)
    code = conclude(jobs, options, completed, time.perf_counter() - started, json_output=json_output,
                    quiet=quiet, say=say, stdout=stdout, stderr=stderr)
    return reader_gone(shown, code, say)


def _merged(job: FilePlan, text: str, path: str) -> None:
    """The file's plan done by a deterministic merge (`path`: which), as a rewrite of the whole
    file would leave it."""
    assert job.source is not None
    unit = job.units[0]
    unit.status = UnitStatus.CHANGED if text != job.source.text else UnitStatus.UNCHANGED
    unit.new_text = text
    job.new_text, job.status = text, FileStatus(unit.status)
    job.merge, job.merge_reason = MergePath.DETERMINISTIC, f"merged by {path}"


def _delivered(job: FilePlan, options: Options, say: Callable[[str], None], diff_out: TextIO | None) -> bool:
    """The deterministic merge shown, written or checked; with --test, written only if the tests
    pass with it. False when interrupted (the file is then as it was, or the merge that passed)."""
    tests_before = check_baseline(options, say) if options.test and job.status == FileStatus.CHANGED else None
    try:
        if tests_before is not None:
            # One try: there is no model to ask again, and the merge would come out the same.
            EditGate(replace(options, tries=1), tests_before).keep_or_put_back(job, lambda why: None)
            if job.status == FileStatus.FAILED and job.test_tries:
                job.reason += " (a merge without a model is not tried again: it would come out the same)"
        deliver(job, options, Report(), diff_out)
    except KeyboardInterrupt:
        if job.status == FileStatus.CHANGED:
            job.status, job.reason = FileStatus.INTERRUPTED, "untouched"
        return False
    return True


def _refused(job: FilePlan, outcome: Refused, options: Options, diff_out: TextIO | None) -> None:
    """The file left alone with the reason."""
    job.merge, job.merge_reason = MergePath.REFUSED, outcome.reason
    unit = job.units[0]
    unit.status, unit.reason = UnitStatus.REFUSED, outcome.reason
    job.status, job.reason = FileStatus.FAILED, f"snippet not merged: {unit.reason}"
    deliver(job, options, Report(), diff_out)
