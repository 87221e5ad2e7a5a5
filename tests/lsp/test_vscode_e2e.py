"""The VS Code extension end to end, in a real VS Code: code-server with the packaged .vsix,
driven by headless Chromium (lsp/editors/vscode/e2e/drive.js). "Rewriter: Rewrite Selection…" on
the function at the cursor streams the rewrite in while the status bar shows its progress, the
status bar's Cancel stops a rewrite, and a refused edit is applied with "Apply anyway" (review off);
with review on, the rewrite is a proposal: one hunk rejected, one refined and accepted, screenshots
of the review saved beside the report; next-edit suggestions as the user types, shown in each of
their three ways and accepted with Tab.

Needs what lsp/editors/vscode/e2e/install.sh installs (code-server, puppeteer-core), the
extension's own node_modules (npm ci) and Chromium (Debian: chromium). The engine is the scripted
test engine (tests/helpers/scripted.py).
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

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = ROOT / "lsp" / "editors" / "vscode"
E2E = EXTENSION / "e2e"
CODE_SERVER = E2E / "node_modules" / ".bin" / "code-server"
CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
NPX = shutil.which("npx")

missing = [what for what, there in (
    ("code-server (bash lsp/editors/vscode/e2e/install.sh)", (E2E / ".installed").exists()),
    ("Chromium (Debian: chromium)", CHROMIUM is not None),
    ("the extension's node_modules (npm ci in lsp/editors/vscode)", (EXTENSION / "node_modules").is_dir()),
    ("npx", NPX is not None),
) if not there]
pytestmark = pytest.mark.skipif(bool(missing), reason="needs " + ", ".join(missing))

PERIMETER = "\n    def perimeter(self):\n        return 2 * math.pi * self.r\n"
SCRIPT = {"delay_s": 0.05, "chunk_chars": 4, "rules": [
    {"instruction": "Square", "replace": [["self.r * self.r", "self.r ** 2"]]},
    # Slow, and its change is on the last line: nothing streams before the Cancel.
    {"instruction": "Slowly double", "delay_s": 0.3, "replace": [["2 * math.pi * self.r", "math.tau * self.r"]]},
    # Drops a method: the integrity check refuses it.
    {"instruction": "Tidy up", "replace": [[PERIMETER, "\n"]]},
]}


REVIEW_SCRIPT = {"delay_s": 0.05, "chunk_chars": 4, "rules": [
    {"instruction": "Modernize", "replace": [["self.r * self.r", "self.r ** 2"], ["2 * math.pi * self.r", "math.tau * self.r"]]},
    {"instruction": "Add a docstring", "replace": [["    def area(self):\n", '    def area(self):\n        """The area."""\n']]},
]}

# Next edits (tests/helpers/scripted.py: the first rule whose `when` is in the prompt): the area
# squared by hand is followed by the perimeter's tau; `self.d` typed on a new line is completed.
NEXT_EDIT_SCRIPT = {"rules": [], "next_edits": [
    {"when": "self.r ** 2", "replace": [["2 * math.pi * self.r", "math.tau * self.r"]], "delay_s": 0.04, "chunk_chars": 4},
    {"when": "self.d", "replace": [["        self.d\n", "        self.d = 2 * r\n"]], "delay_s": 0.02, "chunk_chars": 8},
]}


def drive(tmp_path: Path, script: dict, scenario: str, settings: dict) -> dict:
    """Runs drive.js's `scenario` in code-server with the packaged extension; its report."""
    vsix = tmp_path / "rewriter.vsix"
    subprocess.run([NPX, "tsc", "-p", "."], cwd=EXTENSION, check=True, timeout=300)
    subprocess.run([NPX, "vsce", "package", "--skip-license", "--allow-missing-repository", "--out", str(vsix)],
                   cwd=EXTENSION, check=True, timeout=300, capture_output=True)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "circle.py").write_text(SAMPLE)
    script_file = tmp_path / "script.json"
    script_file.write_text(json.dumps(script))
    report_file = tmp_path / "report.json"
    settings = {
        "rewriter.server.interpreter": sys.executable,  # started as `python -m lsp`
        "workbench.startupEditor": "none",
        "security.workspace.trust.enabled": False,
        "extensions.autoCheckUpdates": False,
        "extensions.autoUpdate": False,
        **settings,
    }
    env = {
        **os.environ,
        **scripted_env(script_file),
        "E2E_CODE_SERVER": str(CODE_SERVER),
        "E2E_CHROMIUM": CHROMIUM,
        "E2E_VSIX": str(vsix),
        "E2E_DIR": str(tmp_path),
        "E2E_WORKSPACE": str(workspace),
        "E2E_SETTINGS": json.dumps(settings),
        "E2E_REPORT": str(report_file),
        "E2E_SCENARIO": scenario,
        "HOME": str(tmp_path / "home"),  # code-server and Chromium keep their state there
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    completed = subprocess.run(["node", str(E2E / "drive.js")], env=env, cwd=EXTENSION, capture_output=True,
                               text=True, timeout=500, check=False)
    assert report_file.exists(), f"no report (rc {completed.returncode}): {completed.stderr[-3000:]}"
    report = json.loads(report_file.read_text())
    assert report["status"] == "finished", (report, completed.stdout[-3000:], f"screenshot: {tmp_path / 'failure.png'}")
    return report


def test_rewrite_selection_progress_cancel_and_apply_anyway_in_code_server(tmp_path):
    report = drive(tmp_path, SCRIPT, "direct", {"rewriter.review": False})

    squared = SAMPLE.replace("self.r * self.r", "self.r ** 2")
    assert report["afterRewrite"] == squared  # only the function at the cursor changed
    assert any(text.startswith("Rewrite: Square the radius") for text in report["statusBarDuringRewrite"])
    assert "Cancel" in report["statusBarDuringRewrite"]

    assert report["cancelClicked"] and report["progressGone"]
    assert "rewriter: cancelled" in report["afterCancelNotifications"]
    assert "math.tau" not in report["afterCancel"]
    assert "Rewrite: Add docstrings" in report["codeActions"] and "Rewrite: Simplify" in report["codeActions"]

    assert "not applied: it would lose method Circle.perimeter" in report["refusedOffer"]
    assert "Apply anyway" in report["refusedOffer"] and "Discard" in report["refusedOffer"]
    assert report["afterApplyAnyway"] == squared[:squared.index(PERIMETER)]  # the method is gone


def test_review_reject_refine_accept_in_code_server(tmp_path):
    """Review on (the extension's default): the class at the cursor rewritten as a proposal; one
    hunk rejected from its lens, the rest refined once, the refined hunk accepted from its lens."""
    report = drive(tmp_path, REVIEW_SCRIPT, "review", {})

    # Proposed: nothing in the document yet, the two hunks shown with Accept | Reject above each.
    assert [lens.split(" | ")[:2] for lens in report["proposedLenses"]] == [["Accept", "Reject"]] * 2
    assert "Refine…" in report["proposedLenses"][0] and "Accept All" in report["proposedLenses"][0]
    assert "self.r * self.r" in report["proposedShown"]["struck"] and "2 * math.pi" in report["proposedShown"]["struck"]
    assert any("self.r ** 2" in text for text in report["proposedShown"]["after"])
    assert any("math.tau" in text for text in report["proposedShown"]["after"])
    assert report["savedDuringReview"] == SAMPLE  # a save writes nothing under review

    # Rejected: the perimeter's hunk is gone from the view; refined: the area gains a docstring.
    assert not any("math.tau" in text for text in report["afterRejectShown"]["after"])
    assert len(report["refinedLenses"]) == 1
    assert any("The area" in text for text in report["refinedShown"]["after"])

    # Accepted: exactly the accepted text, no trace of the rejected hunk, no review UI left.
    expected = SAMPLE.replace("self.r * self.r", "self.r ** 2").replace(
        "    def area(self):\n", '    def area(self):\n        """The area."""\n')
    assert report["afterAccept"] == expected
    assert report["leftOver"] == {"lenses": [], "shown": {"struck": "", "after": []}}
    assert report["afterUndo"] == SAMPLE  # the accept was one undo step
    for name in ("review-proposed.png", "review-refined.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG"), name


def test_next_edit_suggestions_as_ghost_text_marker_and_inline_diff_in_code_server(tmp_path):
    """Typing brings the next edit: an insertion at the cursor as VS Code's ghost text, accepted
    with Tab; an edit three lines away as a marker that Esc dismisses and "Trigger Inline
    Suggestion" (Alt+\\) brings back, Tab jumps to (an inline diff there) and Tab accepts."""
    # VS Code shows no ghost text that does not extend the suggest widget's pick, and its word
    # suggestions open the widget as `self.d` is typed (as Copilot's ghost text, ours waits for it).
    quiet = {"editor.quickSuggestions": {"other": "off", "comments": "off", "strings": "off"},
             "editor.suggestOnTriggerCharacters": False}
    report = drive(tmp_path, NEXT_EDIT_SCRIPT, "nextEdit", quiet)
    with_diameter = SAMPLE.replace("        self.r = r\n", "        self.r = r\n        self.d = 2 * r\n")
    squared = with_diameter.replace("self.r * self.r", "self.r ** 2")

    assert "= 2 * r" in report["ghostText"]
    assert report["afterGhostTab"] == with_diameter  # the ghost text, and nothing else

    assert "Tab: next edit at line 13" in report["hint"]  # the perimeter's line, 3 below the cursor
    assert any("Next edit" in text for text in report["statusBarWhilePredicting"])
    assert report["afterEscape"] == {"struck": "", "after": []}  # dismissed: nothing shown ...
    assert "math.tau" not in report["textAfterEscape"]  # ... nothing applied
    assert "Tab: next edit at line 13" in report["hintAgain"]

    assert report["cursorLine"] == 13  # Tab jumped to the edit
    assert report["diffShown"]["struck"] == "2 * math.pi"
    assert any("math.tau" in text for text in report["diffShown"]["after"])
    assert report["afterAccept"] == squared.replace("2 * math.pi * self.r", "math.tau * self.r")
    assert report["leftOver"] == {"struck": "", "after": []}
    for name in ("next-edit-ghost.png", "next-edit-marker.png", "next-edit-diff.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG"), name
