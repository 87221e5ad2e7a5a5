"""A file and the user's tests for it, and an engine, as `rewriter apply --test` tests use them."""
from __future__ import annotations

import sys

from rewriter.results import Progress, RewriteResult, Stats

# A BOM and CRLF line endings: "put back byte for byte" must hold for both.
ORIGINAL = "\ufeffdef add(a, b):\r\n    return a + b\r\n\r\n\r\ndef double(x):\r\n    return x * 2\r\n".encode()
# The user's tests: add and double must still work.
CHECK = ("import importlib.util, sys\n"
         "spec = importlib.util.spec_from_file_location('m', 'm.py'); m = importlib.util.module_from_spec(spec)\n"
         "spec.loader.exec_module(m)\n"
         "assert m.add(2, 3) == 5, f'add(2, 3) returned {m.add(2, 3)}'\n"
         "assert m.double(4) == 8, f'double(4) returned {m.double(4)}'\n"
         "print('all good')\n")
TEST = f"{sys.executable} check.py"


class AnsweringEngine:
    """Answers each request with `answer(request)` (the code); records every request."""

    def __init__(self, answer):
        self.answer = answer
        self.requests = []

    def stream(self, request):
        self.requests.append(request)
        stats = Stats(output_tokens=4, total_s=0.01, finish_reason="stop")
        yield Progress("```\n", stats)
        yield RewriteResult(text=self.answer(request), answer="", stats=stats)

    def close(self):
        pass


def retried(request) -> bool:
    return "Your previous answer:" in request.instruction


def make_project(tmp_path, monkeypatch):
    """m.py and its tests, check.py, in `tmp_path`, made the current directory."""
    (tmp_path / "m.py").write_bytes(ORIGINAL)
    (tmp_path / "check.py").write_text(CHECK)
    monkeypatch.chdir(tmp_path)
    return tmp_path
