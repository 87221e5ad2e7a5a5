"""Run tests on edited code (a bench case's, or the model's own: self_test.py): a Python subprocess with a time
limit, in a fresh temporary directory.

The program is the edited code followed by the tests; it passes when it exits 0. What it gets:
its own temporary directory as the working directory, HOME and TMPDIR (deleted afterwards), a
minimal environment, Python's isolated mode (`-I`: no PYTHON* variables, no user site, no script
directory on sys.path), an audit hook that refuses internet sockets, name lookups and new
processes, a memory cap, and a wall-clock limit after which its whole process group is killed.

This keeps honest test code from touching the network or the working tree. It is not a security
sandbox: code that means harm can still open absolute paths, use ctypes, or read the file system.
Run only code you would run yourself.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

DEFAULT_TIMEOUT_S = 30.0
MEMORY_LIMIT_BYTES = 2 * 1024**3
OUTPUT_LIMIT_CHARS = 4000

# Runs before the program, in the child. An audit hook cannot be removed once added, and it sees
# the C-level socket calls too, so replacing socket.socket from the program does not get around it.
_GUARD = """
import resource, runpy, socket, sys
resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))
_LOCAL = {{socket.AF_UNIX}}
_NETWORK_LOOKUPS = {{"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo"}}
_PROCESSES = {{"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
               "pty.spawn"}}
def _guard(event, args):
    if event == "socket.__new__" and args[1] not in _LOCAL:
        raise PermissionError("network access is disabled while running tests")
    if event in _NETWORK_LOOKUPS:
        raise PermissionError("network access is disabled while running tests")
    if event in _PROCESSES:
        raise PermissionError("starting processes is disabled while running tests")
sys.addaudithook(_guard)
del resource, socket
sys.argv = ["program.py"]
runpy.run_path("program.py", run_name={run_name!r})
"""


@dataclass(frozen=True)
class ProgramRun:
    passed: bool  # the program exited 0 within the time limit
    timed_out: bool
    returncode: int | None  # None when it was killed at the time limit
    output: str  # stdout and stderr together, the last OUTPUT_LIMIT_CHARS of it
    seconds: float


def program_text(code: str, tests: str) -> str:
    """The program that is run: the edited code, then the tests."""
    body = code if code.endswith("\n") else code + "\n"
    return f"{body}\n\n{tests}"


def run_tests(code: str, tests: str, timeout_s: float = DEFAULT_TIMEOUT_S,
              python: str = sys.executable, run_name: str = "__main__") -> ProgramRun:
    """The program run once; `run_name` is its `__name__` (another than "__main__" keeps the code's
    `if __name__ == "__main__":` block from running)."""
    with tempfile.TemporaryDirectory(prefix="rewriter-tests-") as scratch:
        Path(scratch, "program.py").write_text(program_text(code, tests), encoding="utf-8")
        env = {
            "PATH": os.defpath, "HOME": scratch, "TMPDIR": scratch, "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0",
        }
        start = time.perf_counter()
        # A session of its own, so a timeout kills the whole process group, not just the child.
        child = subprocess.Popen(
            [python, "-I", "-c", _GUARD.format(memory=MEMORY_LIMIT_BYTES, run_name=run_name)], cwd=scratch, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            output, _ = child.communicate(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:  # the group ended meanwhile
                pass
            output, _ = child.communicate()
            timed_out = True
        seconds = time.perf_counter() - start
    text = output.decode("utf-8", errors="replace")[-OUTPUT_LIMIT_CHARS:]
    returncode = None if timed_out else child.returncode
    return ProgramRun(passed=returncode == 0, timed_out=timed_out, returncode=returncode, output=text,
                   seconds=seconds)
