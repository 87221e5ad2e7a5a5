"""The real CLI in many short-lived processes, each forked from one that imported it already.

A fresh `python -m rewriter.cli` spends about a second importing before it does anything; a
test that kills hundreds of runs would spend most of its time there. `ForkedCli` keeps one
single-threaded process that has imported the CLI, and forks it for each run: the child calls
`rewriter.cli.main(argv)` in its own process, which the test may SIGKILL at any moment.

Protocol (JSON lines): the test writes {"argv": [...], "cwd": "..."}, and the server answers
{"pid": N} once the child runs; the test writes {"wait": true}, and the server answers
{"status": S} when the child has ended (S: its exit code, or minus the signal that killed it).
The child is reaped only then, so its pid stays its own (a zombie at worst) until the test has
killed it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository


def serve() -> None:
    """The forking side: runs in its own process (`python -m tests.helpers.forked_cli`)."""
    import rewriter.apply.batch  # noqa: F401 - what `apply --endpoint` imports, loaded once
    import rewriter.cli
    import rewriter.remote  # noqa: F401

    pid = 0  # the child running now
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("wait"):
            _, status = os.waitpid(pid, 0)
            print(json.dumps({"status": os.waitstatus_to_exitcode(status)}), flush=True)
            continue
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.chdir(request["cwd"])
                quiet = os.open(os.devnull, os.O_WRONLY)
                os.dup2(quiet, 1)
                os.dup2(quiet, 2)
                code = rewriter.cli.main(request["argv"])
            finally:
                os._exit(code)
        print(json.dumps({"pid": pid}), flush=True)


class ForkedCli:
    """The test's side: `start(argv, cwd)` runs the CLI and returns its pid; `wait()`, its status."""

    def __init__(self):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen([sys.executable, "-m", "tests.helpers.forked_cli"], cwd=ROOT, env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def start(self, argv: list[str], cwd: Path) -> int:
        self._send({"argv": argv, "cwd": str(cwd)})
        return self._answer()["pid"]

    def wait(self) -> int:
        self._send({"wait": True})
        return self._answer()["status"]

    def _send(self, request: dict) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()

    def _answer(self) -> dict:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the forking process exited with {self.process.wait()}")
        return json.loads(line)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)

    def __enter__(self) -> ForkedCli:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


if __name__ == "__main__":
    serve()
