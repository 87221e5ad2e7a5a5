"""`rewriter apply --test CMD`: the user's tests decide whether a file's edit stays.

CMD runs once before any edit. If it fails then (the usual reason to give it: "fix the bug in
add" with test_add failing), the run says which tests fail and goes on: an edit fixes them or is
put back. Then each file's edit is written and CMD runs on it (a shell command in the current
directory, in its own process group, killed when it outlasts --test-timeout). The edit stays if
CMD passes, or, where CMD is pytest and failed before, if no test fails with the edit that did
not fail before and at least one that failed no longer does (pytest's summary names them all;
the report says which rule kept the edit); otherwise the file's original bytes are put back and,
while tries remain, the model is asked again: with its answer and the last lines of CMD's
output (session.Feedback), then for the first answer's branches (edits/session.py). Writing,
testing and putting back run with Ctrl-C and SIGTERM held (recorded, then raised once the file is
safe), so that an interrupted run leaves every file as it was or as an edit that passed.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from .files import UTF8_BOM, FileError, atomic_write, replace_bytes
from .plans import FilePlan, FileStatus, Options, RunOutcome

TAIL_LINES = 50  # of CMD's output, sent to the model and shown to the user (as Aider's benchmark sends)
TAIL_CHARS = 6_000  # and at most this much of them: the model's context is small
_READ_BACK = 64 * 1024  # bytes read from the end of the output for the tail
_POLL_S = 0.05  # how often a running CMD is checked for a timeout or an interrupt
_GRACE_S = 2.0  # between SIGTERM and SIGKILL for a CMD being stopped


@dataclass(frozen=True)
class CommandRun:
    """One run of the test command."""

    outcome: RunOutcome
    tail: str  # the last lines of its output (stdout and stderr together)
    exit_status: int | None  # None when it was stopped
    seconds: float

    @property
    def passed(self) -> bool:
        return self.outcome == RunOutcome.PASSED

    def describe(self, command: str) -> str:
        if self.outcome == RunOutcome.TIMED_OUT:
            return f"`{command}` ran longer than its time limit ({self.seconds:.0f} s) and was stopped"
        if self.outcome == RunOutcome.INTERRUPTED:
            return f"`{command}` was interrupted"
        return f"`{command}` exited with status {self.exit_status}"


def run_tests(command: str, timeout_s: float, interrupted: Callable[[], bool] = lambda: False) -> CommandRun:
    """Run `command` in a shell in its own process group; stopped (the whole group) when it runs
    past `timeout_s`, when `interrupted()` turns true, or when this call is left by an exception."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(command, shell=True, stdin=subprocess.DEVNULL, stdout=output,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        outcome, status = RunOutcome.INTERRUPTED, None
        try:
            while True:
                try:
                    status = process.wait(timeout=_POLL_S)
                    outcome = RunOutcome.PASSED if status == 0 else RunOutcome.FAILED
                    break
                except subprocess.TimeoutExpired:
                    if interrupted():
                        break
                    if time.perf_counter() - started > timeout_s:
                        outcome = RunOutcome.TIMED_OUT
                        break
        finally:
            if status is None:
                _stop(process)
        return CommandRun(outcome, _tail(output), status, time.perf_counter() - started)


def _stop(process: subprocess.Popen) -> None:
    """End the command and everything it started: SIGTERM to its group, then SIGKILL."""
    killpg = getattr(os, "killpg", None)
    for signal_number in (signal.SIGTERM, getattr(signal, "SIGKILL", signal.SIGTERM)):
        try:
            if killpg is not None:
                killpg(process.pid, signal_number)
            else:  # no process groups (Windows): the shell alone
                process.kill()
        except (ProcessLookupError, PermissionError):
            pass
        try:
            process.wait(timeout=_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(output: IO[bytes]) -> str:
    size = output.seek(0, os.SEEK_END)
    output.seek(max(0, size - _READ_BACK))
    text = output.read().decode("utf-8", errors="replace")
    lines = text.splitlines()
    if size > _READ_BACK and lines:
        lines = lines[1:]  # read from inside a line
    return "\n".join(lines[-TAIL_LINES:])[-TAIL_CHARS:]


# A failed test as pytest's short summary names it ("FAILED tests/test_m.py::test_add - ...").
PYTEST_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)
# pytest's last line: "2 failed, 5 passed in 0.12s", "1 failed, 1 error in 0.30s".
PYTEST_COUNTS = re.compile(r"^=*\s*(?:\d+ \w+, )*\d+ \w+ in [\d.]+s", re.MULTILINE)
PYTEST_COUNT = re.compile(r"(\d+) (failed|errors?)\b")


def pytest_failures(command: str, run: CommandRun) -> frozenset[str] | None:
    """The tests a pytest run failed (errors included), where CMD is pytest and its summary names
    every one of them; None otherwise."""
    words = command.split()
    if "pytest" not in words and "py.test" not in words or run.outcome not in (RunOutcome.PASSED, RunOutcome.FAILED):
        return None
    totals = PYTEST_COUNTS.findall(run.tail)
    if not totals:
        return None
    named = PYTEST_FAILED.findall(run.tail)
    counted = sum(int(number) for number, _ in PYTEST_COUNT.findall(totals[-1]))
    return frozenset(named) if counted == len(named) == len(set(named)) else None


def check_baseline(options: Options, say: Callable[[str], None]) -> CommandRun:
    """CMD on the files as they are. Failing, it is what the edit is to fix: the run goes on, and
    says which tests fail (pytest's names where its summary gives them, else its output's end)."""
    assert options.test is not None
    say(f"running the tests before any edit: {options.test}")
    run = run_tests(options.test, options.test_timeout)
    if not run.passed:
        failing = PYTEST_FAILED.findall(run.tail)
        which = (f"failing: {', '.join(failing)}" if failing
                 else f"the last lines of their output:\n{run.tail}")
        rule = ("only if they pass with it, or if it fixes some of these and no other test fails"
                if pytest_failures(options.test, run) else "only if they pass with it")
        say(f"the tests fail before any edit ({run.describe(options.test)}); an edit is kept {rule}; {which}")
    return run


class HeldSignals:
    """While entered (in the main thread), Ctrl-C and SIGTERM are recorded instead of raised."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.previous: dict[int, object] = {}

    def __enter__(self) -> HeldSignals:
        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGINT, signal.SIGTERM):
                self.previous[number] = signal.signal(number, self._record)
        return self

    def _record(self, number: int, frame) -> None:
        self.received = number

    def __exit__(self, *exc) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)  # type: ignore[arg-type]  # what signal.signal returned


class EditGate:
    """Keeps a file's edit only if the test command passes with it written, or, for pytest,
    fixes failures of `before` (CMD's run before any edit) and brings none."""

    def __init__(self, options: Options, before: CommandRun | None = None):
        assert options.test is not None
        self.command = options.test
        self.tries = options.tries
        self.timeout_s = options.test_timeout
        self.failing_before = pytest_failures(self.command, before) if before is not None and not before.passed \
            else None

    def kept_by(self, run: CommandRun) -> str:
        """The rule that keeps an edit after `run`, in words; "" when none does."""
        if run.passed:
            return f"`{self.command}` passed"
        failing = pytest_failures(self.command, run)
        if self.failing_before is None or failing is None or not failing < self.failing_before:
            return ""
        fixed = sorted(self.failing_before - failing)
        return (f"pytest: {', '.join(fixed)} failed before and pass now, and no test fails that passed before "
                f"({len(failing)} still failing: {', '.join(sorted(failing))})")

    def keep_or_put_back(self, job: FilePlan, ask_again: Callable[[str], object]) -> None:
        """Write the job's edit and test it; on failure put the original back and `ask_again(why)`
        while tries remain. The job ends "written" (passed), "failed" (put back) or as the model
        left it (no edit to test); KeyboardInterrupt once the file is safe."""
        run: CommandRun | None = None
        for attempt in range(1, self.tries + 1):
            if job.status != FileStatus.CHANGED:  # nothing (more) to test: unchanged, or the answer failed
                break
            job.test_tries = attempt
            run = self._try(job)
            if run is None or job.status == FileStatus.WRITTEN:
                return
            if attempt < self.tries:
                ask_again(self.feedback(run))
        if run is not None:  # the last tested edit failed, and is not on disk
            after = f"with the edit of try {job.test_tries}"
            if job.status != FileStatus.CHANGED:  # the next answer left nothing to test
                after += f" (try {job.test_tries + 1}: {job.reason or 'it changed nothing'})"
            job.status, job.new_text = FileStatus.FAILED, None
            job.reason = f"{run.describe(self.command)} {after}; put back as it was"

    def feedback(self, run: CommandRun) -> str:
        """What the model is told about the failure."""
        return f"{run.describe(self.command)}. The last lines of its output:\n{run.tail}\n"

    def _try(self, job: FilePlan) -> CommandRun | None:
        """One edit written, tested and kept or put back; None when it could not be written."""
        source, new_text = job.source, job.new_text
        assert source is not None and new_text is not None
        edited = (UTF8_BOM if source.bom else b"") + new_text.encode("utf-8")
        run = None
        with HeldSignals() as held:
            wrote = False
            try:
                atomic_write(source, new_text)
                wrote = True
                run = run_tests(self.command, self.timeout_s, lambda: held.received is not None)
            except (FileError, OSError) as error:
                job.status = FileStatus.FAILED
                job.reason = str(error).removeprefix(f"{source.path}: ")
            finally:
                rule = self.kept_by(run) if run is not None and held.received is None else ""
                if rule:  # the rule is said where it is not that CMD passed
                    job.status, job.test_rule = FileStatus.WRITTEN, "" if run is not None and run.passed else rule
                elif wrote or _bytes_of(job) == edited:
                    _put_back(job)
        if run is not None:
            job.test_outcome, job.test_tail = run.outcome, ("" if run.passed else run.tail)
        if held.received is not None:
            if job.status != FileStatus.FAILED:  # a failed put-back's reason stays
                job.status, job.reason = FileStatus.INTERRUPTED, "interrupted while its tests ran; put back as it was"
            job.test_outcome = RunOutcome.INTERRUPTED
            raise KeyboardInterrupt
        return run


def _bytes_of(job: FilePlan) -> bytes | None:
    try:
        return job.path.read_bytes()
    except OSError:
        return None


def _put_back(job: FilePlan) -> None:
    assert job.source is not None
    try:
        replace_bytes(job.path, job.source.raw)
    except OSError as error:
        job.status = FileStatus.FAILED
        job.reason = f"its tests failed and the original could not be put back: {error.strerror or error}"
