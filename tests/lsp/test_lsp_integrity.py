"""The language server's integrity checks, with the test editor of tests/helpers/lsp.py: no rewrite
without a scope, no clamped ranges, and a refused answer put back and offered, never applied."""
from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio
from lsprotocol import types

from tests.helpers.lsp import NVIM, VSCODE, Editor, lines_range
from tests.helpers.samples import SHAPES

pytestmark = pytest.mark.asyncio

URI = "file:///project/shapes.py"
BODY = SHAPES[SHAPES.index("    def __init__"): SHAPES.index("\n\n\ndef unit")]
DOCSTRING = '    """A circle, with its radius and area."""'
SCRIPT = {
    "delay_s": 0.002, "chunk_chars": 6,
    "rules": [
        # What the embedded model did with the "Add docstrings" preset on a small class.
        {"instruction": "Add docstrings", "replace": [[BODY, DOCSTRING]]},
        {"instruction": "Invent", "replace": [["\n", "\ndef invented():\n    return 42\n"]]},
    ],
}
REFUSED = SHAPES.replace(BODY, DOCSTRING)


class Offers:
    """The editor's side of window/showMessageRequest: records each offer, picks `choice`."""

    def __init__(self, editor: Editor, choice: str | None):
        self.requests: list[types.ShowMessageRequestParams] = []
        self.choice = choice
        self.answered = asyncio.Event()
        self.edits_before: list[int] = []  # the edits the editor had been sent when each offer came

        def answer(params: types.ShowMessageRequestParams):
            self.requests.append(params)
            self.edits_before.append(len(editor.edits))
            self.answered.set()
            return types.MessageActionItem(title=choice) if choice else None

        editor.client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)(answer)


@pytest_asyncio.fixture
async def vscode(tmp_path):
    editor = await Editor.start(VSCODE, SCRIPT, tmp_path)
    yield editor
    await editor.stop()


async def test_an_empty_range_outside_any_function_is_refused(vscode):
    vscode.open(URI, SHAPES)
    blank = {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 0}}
    result = await vscode.execute("rewriter.rewrite", {"uri": URI, "range": blank, "instruction": "Invent", "wait": True})
    assert result["status"] == "refused" and "no function or class around line 3" in result["message"]
    assert not vscode.edits and vscode.text(URI) == SHAPES


async def test_ranges_outside_the_document_are_invalid_params_not_clamped(vscode):
    vscode.open(URI, SHAPES)
    lines = SHAPES.count("\n")
    for bad in (lines_range(lines - 1, lines + 3), lines_range(-2, 1),
                {"start": {"line": lines, "character": 4}, "end": {"line": lines, "character": 4}}):
        with pytest.raises(Exception, match="outside the document") as error:
            await vscode.execute("rewriter.rewrite", {"uri": URI, "range": bad, "instruction": "Invent", "wait": True})
        assert getattr(error.value, "code", None) == -32602  # InvalidParams
    assert not vscode.edits and vscode.text(URI) == SHAPES


async def test_a_refused_streamed_answer_is_put_back_and_discarded(vscode):
    offers = Offers(vscode, "Discard")
    vscode.open(URI, SHAPES)
    result = await vscode.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add docstrings", "wait": True})
    assert result["status"] == "refused"
    assert "it would lose method Circle.__init__, method Circle.area" in result["message"]
    assert len(vscode.edits) == 2  # the class body streamed in, then the region was put back
    assert vscode.text(URI) == SHAPES
    await asyncio.wait_for(offers.answered.wait(), 10)
    assert [a.title for a in offers.requests[0].actions] == ["Apply anyway", "Discard"]
    await asyncio.sleep(0.3)
    assert vscode.text(URI) == SHAPES


async def test_apply_anyway_applies_the_refused_answer(tmp_path):
    editor = await Editor.start(NVIM, SCRIPT, tmp_path, reply_before_change=True)
    try:
        offers = Offers(editor, "Apply anyway")
        editor.open(URI, SHAPES)
        on_class = {"start": {"line": 3, "character": 2}, "end": {"line": 3, "character": 2}}
        result = await editor.execute("rewriter.rewrite", {"uri": URI, "range": on_class,
                                                           "instruction": "Add docstrings", "wait": True})
        assert result["status"] == "refused"
        await asyncio.wait_for(offers.answered.wait(), 10)
        # One edit at the end: none was sent before the offer (the answer may overtake the result).
        assert offers.edits_before == [0]
        await asyncio.wait_for(editor.edit_applied.wait(), 10)
        assert editor.text(URI) == REFUSED
    finally:
        await editor.stop()
