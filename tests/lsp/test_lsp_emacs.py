"""A real Emacs end to end: `emacs --batch` loads the eglot snippet of docs/editors.md and rewrites
the function at point through the language server (the scripted engine, tests/helpers/scripted.py).

Emacs in batch mode reports applied edits back late (seconds), so this also checks that a slow
report of our own edit is not taken for the user's typing, and that a command answering at once
leaves eglot nothing to time out on.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.scripted import scripted_env

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
EMACS = shutil.which("emacs")


def _eglot_available() -> bool:
    if EMACS is None:
        return False
    probe = subprocess.run([EMACS, "--batch", "--eval", "(progn (require 'package) (package-initialize) (require 'eglot))"],
                           capture_output=True, timeout=60)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _eglot_available(),
                                reason="emacs with eglot is not installed (Debian: apt-get install emacs-nox elpa-eglot)")

SAMPLE = """import math


def area(r):
    return math.pi * r * r


def perimeter(r):
    return 2 * math.pi * r
"""
HINTS = [["def area(r):", "def area(r: float) -> float:"]]


def readme_snippet(python: str) -> str:
    readme = (ROOT / "docs" / "editors.md").read_text()
    section = readme[readme.index("### Emacs (eglot)"):]
    snippet = section[section.index("```elisp\n") + len("```elisp\n"):]
    snippet = snippet[:snippet.index("```")]
    # The docs start `rewriter lsp`; the test starts this checkout's server the same way.
    assert '("rewriter" "lsp" ' in snippet
    return snippet.replace('("rewriter" "lsp" ', f'("{python}" "-m" "lsp" ')


def test_the_readme_eglot_setup_rewrites_the_function_at_point(tmp_path):
    source = tmp_path / "circle.py"
    source.write_text(SAMPLE)
    setup = tmp_path / "init.el"
    setup.write_text(readme_snippet(sys.executable))
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"delay_s": 0.01, "chunk_chars": 6,
                                  "rules": [{"instruction": "type hints", "replace": HINTS}]}))
    out = tmp_path / "out.json"
    env = {**os.environ, **scripted_env(script),
           "REWRITER_EMACS_OUT": str(out), "REWRITER_EMACS_FILE": str(source),
           "REWRITER_EMACS_SETUP": str(setup), "REWRITER_EMACS_LINE": "4",
           "REWRITER_EMACS_INSTRUCTION": "Add type hints"}
    done = subprocess.run([EMACS, "--batch", "-l", str(HERE / "emacs" / "rewrite.el")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=180)
    assert out.exists(), done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["status"] == "finished", report
    assert report["text"] == SAMPLE.replace(*HINTS[0]), report
    messages = "\n".join(report["messages"])
    assert "rewriter: rewrote" in messages and "edited while" not in messages, messages
    assert "Timed out" not in messages, messages
