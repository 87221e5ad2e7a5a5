"""A real editor end to end: headless Neovim runs a rewrite code action against the server.

Neovim 0.7 (Debian's) declares no versioned document changes but applies them, checking the
buffer version; with streamEdits=always the edits stream into its buffer, and each must name the
version Neovim has (it drops stale ones), so this also checks that the server waits for each
edit's didChange. The engine is the scripted test engine (tests/helpers/scripted.py).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.nvim import SAMPLE
from tests.helpers.scripted import scripted_env

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NVIM = shutil.which("nvim")


def _nvim_version() -> tuple[int, ...] | None:
    if NVIM is None:
        return None
    first = subprocess.run([NVIM, "--version"], capture_output=True, text=True, timeout=60).stdout.split("\n")[0]
    digits = first.removeprefix("NVIM v").split("-")[0].split(".")
    return tuple(int(d) for d in digits if d.isdigit())


VERSION = _nvim_version()
pytestmark = [
    pytest.mark.skipif(NVIM is None, reason="nvim is not installed (Debian: apt-get install neovim); "
                                            "the headless-editor tests need it"),
    pytest.mark.skipif(VERSION is not None and VERSION < (0, 7),
                       reason=f"nvim {VERSION} is older than 0.7 (vim.lsp.start_client with user commands)"),
]

DOCSTRINGS = [
    ["class Circle:\n", 'class Circle:\n    """A circle."""\n\n'],
    ["def area(self):\n", 'def area(self):\n        """The area."""\n'],
    # A documentation request changes no code (the integrity check refuses that): a comment here.
    ["        return 2 * math.pi * self.r\n", "        # two pi r\n        return 2 * math.pi * self.r\n"],
]


def run_nvim(tmp_path: Path, script_name: str, options: dict, **settings: str) -> dict:
    source = tmp_path / "circle.py"
    source.write_text(SAMPLE)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"delay_s": 0.01, "chunk_chars": 5,
                                  # its one branch is the answer itself: no other candidate
                                  "rules": [{"instruction": "Add docstrings", "replace": DOCSTRINGS,
                                             "branches": [DOCSTRINGS]},
                                            {"instruction": "Square", "replace": [["self.r * self.r", "self.r ** 2"]]}]}))
    out = tmp_path / "report.json"
    env = {
        **os.environ,
        **scripted_env(script),
        "REWRITER_NVIM_FILE": str(source),
        "REWRITER_NVIM_OUT": str(out),
        "REWRITER_NVIM_SERVER": json.dumps([sys.executable, "-m", "lsp"]),
        "REWRITER_NVIM_OPTIONS": json.dumps(options),
        "REWRITER_NVIM_SETUP": str(ROOT / "lsp" / "editors" / "nvim.lua"),
        **{f"REWRITER_NVIM_{name.upper()}": value for name, value in settings.items()},
        "XDG_STATE_HOME": str(tmp_path / "state"),  # Neovim's LSP log goes here, not into $HOME
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    completed = subprocess.run(
        [NVIM, "--headless", "--clean", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {HERE / 'nvim' / script_name}"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert out.exists(), f"nvim wrote no report (rc {completed.returncode}): {completed.stderr[-2000:]}"
    return json.loads(out.read_text())


def test_neovim_streams_a_rewrite_code_action_into_its_buffer(tmp_path):
    # The cursor on the class line: the action covers the whole class (tree-sitter).
    report = run_nvim(tmp_path, "rewrite.lua", {"streamEdits": "always"}, action="Rewrite: Add docstrings", line="4")
    assert report["status"] == "finished", report
    assert "Rewrite: Add docstrings" in report["offered"]
    assert report["result"]["status"] == "done", report
    want = SAMPLE
    for old, new in DOCSTRINGS:
        want = want.replace(old, new)
    assert "\n".join(report["lines"]) + "\n" == want
    assert report["applied_edits"] >= 2 and report["result"]["edits"] == report["applied_edits"]
    assert report["progress"] >= 2 and report["progress_end"].startswith("rewrote")


def test_the_readme_setup_rewrite_command_prompts_for_the_instruction(tmp_path):
    # lsp/editors/nvim.lua as docs/editors.md gives it: `:8,9Rewrite` asks for the instruction. The
    # method is sent dedented and its answer indented back.
    report = run_nvim(tmp_path, "command.lua", {}, command="8,9Rewrite", instruction="Square the radius")
    assert report["status"] == "finished", report
    assert report["prompts"] == ["Rewrite: "] and report["result"]["status"] == "done", report
    want = SAMPLE.replace("self.r * self.r", "self.r ** 2")
    assert "\n".join(report["lines"]) + "\n" == want


def test_the_review_previews_a_proposal_and_applies_only_what_is_accepted(tmp_path):
    # lsp/editors/nvim.lua with vim.g.rewriter_review: the proposal shows as virtual lines, the
    # buffer stays as it was; :RewriteTryAnother finds no other candidate, ,a accepts the first
    # change, ,r rejects the next, ,A accepts the rest.
    report = run_nvim(tmp_path, "review.lua", {})
    assert report["status"] == "finished", report
    assert report["result"]["status"] == "proposed" and report["hunks"] == 3, report
    assert report["unchanged_while_proposed"] and report["previews"] == 3
    assert report["decisions"] == ["unchanged", "ok", "ok", "ok"] and report["hunks_after_try"] == 3
    steps = ["\n".join(lines) + "\n" for lines in report["steps"]]
    assert steps[0] == SAMPLE.replace(*DOCSTRINGS[0])
    assert steps[1] == steps[0]  # a reject changes nothing
    assert steps[2] == SAMPLE.replace(*DOCSTRINGS[0]).replace(*DOCSTRINGS[2])
    assert report["ended"]["reason"] == "accepted" and report["marks_left"] == 0
