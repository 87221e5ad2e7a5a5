"""The language server reads and edits only documents the editor opened: a URI it did not open
(outside the workspace, `..`, a device) is refused or ignored, never read from disk; an opened
URI written with percent escapes is the same document. The engine is the scripted one."""
from __future__ import annotations

import asyncio

import pytest
from pygls.exceptions import JsonRpcException

from tests.helpers.lsp import DOCSTRINGS, SAMPLE, SCRIPT, VSCODE, Editor, expected

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("uri", ["file:///etc/passwd", "file:///project/../etc/passwd", "file:///dev/zero",
                                 "file:///project/circle.py"])
async def test_a_uri_the_editor_did_not_open_is_never_read(tmp_path, uri):
    """/dev/zero read from disk would never end: every request must come back at once."""
    editor = await Editor.start(VSCODE, SCRIPT, tmp_path)
    try:
        actions = await asyncio.wait_for(editor.code_actions(uri, (0, 0), (0, 0)), 10)
        assert not actions
        for command, arguments in [
            ("rewriter.rewriteFile", {"uri": uri, "instruction": "Add docstrings"}),
            ("rewriter.rewrite", {"uri": uri, "instruction": "Add docstrings",
                                  "range": {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}}),
        ]:
            with pytest.raises(JsonRpcException, match="is not open in the editor"):
                await asyncio.wait_for(editor.execute(command, arguments), 10)
        assert not editor.edits
    finally:
        await editor.stop()


async def test_a_document_opened_with_percent_escapes_is_rewritten_by_its_uri(tmp_path):
    uri = "file:///project/my%20circle.py"  # as VS Code writes a path with a space
    editor = await Editor.start(VSCODE, SCRIPT, tmp_path)
    try:
        editor.open(uri, SAMPLE)
        outcome = await asyncio.wait_for(
            editor.execute("rewriter.rewriteFile", {"uri": uri, "instruction": "Add docstrings"}), 60)
        assert outcome["status"] == "done", outcome
        assert editor.text(uri) == expected(SAMPLE, DOCSTRINGS)
        assert await asyncio.wait_for(editor.code_actions(uri, (3, 0), (5, 0)), 10)
    finally:
        await editor.stop()
