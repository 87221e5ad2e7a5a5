"""Next-edit suggestions through the language server (textDocument/inlineCompletion) on a scripted
engine: the recent edits reach the prompt, the answer comes back trimmed to its change with the
range it replaces, silence when nothing changes, and never in the way: a change of the document,
a newer request, $/cancelRequest and a rewrite each stop the prediction in flight at once, and a
request given up while the model loads leaves the load to the next."""
from __future__ import annotations

import asyncio
import json
import time

import pytest
import pytest_asyncio
from lsprotocol import types
from pytest_lsp import client_capabilities

from tests.helpers.lsp import VSCODE, Editor, apply_text_edits

pytestmark = pytest.mark.asyncio

URI = "file:///project/circle.py"
TEXT = "import math\n\n\ndef area(r):\n    return math.pi * r * r\n\n\ndef perimeter(r):\n    return 2 * math.pi * r\n"
RENAMED = TEXT.replace("def area(r)", "def area(radius)")
NEXT = RENAMED.replace("math.pi * r * r", "math.pi * radius * radius")
SCRIPT = {
    "delay_s": 0.001, "chunk_chars": 16,
    "rules": [{"instruction": "Add type hints", "replace": [["(r):", "(r: float) -> float:"]]}],
    "next_edits": [
        # The rename is in the recent edits: the next edit renames the uses.
        {"when": "+def area(radius):", "replace": [["math.pi * r * r", "math.pi * radius * radius"]]},
        {"when": "slowly", "replace": [["math.pi", "math.tau"]], "delay_s": 0.1, "chunk_chars": 2},
    ],
}


def showing_suggestions(profile: str = VSCODE) -> types.ClientCapabilities:
    """The profile's capabilities, declaring textDocument/inlineCompletion as our VS Code extension does."""
    capabilities = client_capabilities(profile)
    assert capabilities.text_document is not None
    capabilities.text_document.inline_completion = types.InlineCompletionClientCapabilities(dynamic_registration=False)
    return capabilities


def rename(editor: Editor, uri: str = URI) -> None:
    editor.change(uri, [types.TextEdit(types.Range(types.Position(3, 9), types.Position(3, 10)), "radius")])


def ask(editor: Editor, line: int, character: int, uri: str = URI, msg_id: str | None = None,
        trigger=types.InlineCompletionTriggerKind.Invoked):
    params = types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line, character),
        context=types.InlineCompletionContext(trigger_kind=trigger))
    return editor.client.protocol.send_request_async(types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id)


def accepted(text: str, answer) -> str:
    assert answer is not None and len(answer.items) == 1
    item = answer.items[0]
    return apply_text_edits(text, [types.TextEdit(item.range, item.insert_text)])


@pytest_asyncio.fixture
async def editor(tmp_path):
    editor = await Editor.start(VSCODE, SCRIPT, tmp_path)
    yield editor
    await editor.stop()


async def test_the_next_edit_follows_the_recent_edit_and_replaces_only_what_changes(editor):
    assert editor.server_capabilities.inline_completion_provider is not None
    editor.open(URI, TEXT)
    assert await ask(editor, 3, 12) is None  # no recent edit: the model changes nothing, silence
    rename(editor)
    answer = await ask(editor, 3, 15)
    item = answer.items[0]
    assert item.range.start.line == item.range.end.line == 4 and item.range.start.character > 20
    assert accepted(editor.text(URI), answer) == NEXT


async def test_a_change_while_predicting_drops_the_answer_and_is_handled_at_once(editor):
    slow = TEXT.replace("import math\n", "import math  # slowly\n")
    editor.open(URI, slow)
    pending = asyncio.ensure_future(ask(editor, 4, 4))
    await asyncio.sleep(0.3)
    rename(editor)
    started = time.perf_counter()
    await editor.code_actions(URI, (4, 0), (4, 0))  # answered after the didChange before it
    assert time.perf_counter() - started < 3  # the prediction itself would take 8 s
    assert await pending is None


async def test_a_newer_request_or_a_cancel_stops_the_prediction_within_a_pass(editor):
    slow = TEXT.replace("import math\n", "import math  # slowly\n")
    editor.open(URI, slow)
    first = asyncio.ensure_future(ask(editor, 4, 4))
    await asyncio.sleep(0.3)
    started = time.perf_counter()
    second = asyncio.ensure_future(ask(editor, 4, 4, msg_id="second"))
    assert await first is None  # superseded
    assert time.perf_counter() - started < 3  # it gave way within a pass of 0.1 s, not after 8 s
    await asyncio.sleep(0.3)
    editor.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="second"))
    with pytest.raises(Exception, match="cancel"):
        await second
    # The decoding lock is free again at once: a rewrite does not wait for the cancelled prediction.
    started = time.perf_counter()
    outcome = await editor.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add type hints"})
    assert outcome["status"] == "done" and time.perf_counter() - started < 3


async def test_a_request_given_up_while_the_model_loads_leaves_the_load_to_the_next(tmp_path):
    """Typing on while the model loads gives up the request that started the load, not the load:
    the next request, an automatic one as typing asks, waits for that same load (a second load at
    once fails the scripted engine) and gets its suggestion as soon as the model is ready."""
    editor = await Editor.start(VSCODE, {**SCRIPT, "load_s": 1.5}, tmp_path)
    try:
        editor.open(URI, TEXT)
        rename(editor)
        first = asyncio.ensure_future(ask(editor, 3, 15, msg_id="first"))
        await asyncio.sleep(0.3)
        editor.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="first"))
        with pytest.raises(Exception, match="cancel"):
            await first
        answer = await ask(editor, 3, 15, trigger=types.InlineCompletionTriggerKind.Automatic)
        assert accepted(editor.text(URI), answer) == NEXT
    finally:
        await editor.stop()


async def test_a_rewrite_preempts_the_prediction(editor):
    slow = TEXT.replace("import math\n", "import math  # slowly\n")
    editor.open(URI, slow)
    pending = asyncio.ensure_future(ask(editor, 4, 4))
    await asyncio.sleep(0.3)
    started = time.perf_counter()
    outcome = await editor.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add type hints"})
    assert outcome["status"] == "done" and time.perf_counter() - started < 3
    assert await pending is None  # stopped, and its document changed meanwhile


async def test_a_rewrite_whose_model_must_load_stops_the_suggestion_first(tmp_path):
    """Suggestions from a model of their own decode where models load, in turn (lsp/threads.py): a
    rewrite whose model is not loaded yet stops the suggestion in flight, so that its load need
    not wait for that answer's end (a scripted load of load_s, a suggestion of several seconds)."""
    load_s = 1.0
    editor = await Editor.start(VSCODE, {**SCRIPT, "load_s": load_s}, tmp_path, {"nextEditModel": "a-smaller-model"})
    try:
        editor.open(URI, TEXT.replace("import math\n", "import math  # slowly\n"))
        pending = asyncio.ensure_future(ask(editor, 4, 4))
        await asyncio.sleep(load_s + 0.5)  # the suggestions' model has loaded, and it decodes
        started = time.perf_counter()
        outcome = await editor.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add type hints"})
        assert outcome["status"] == "done" and time.perf_counter() - started < load_s + 3
        assert await pending is None
    finally:
        await editor.stop()


async def test_suggestions_can_be_turned_off(tmp_path):
    editor = await Editor.start(VSCODE, SCRIPT, tmp_path, {"nextEdits": False})
    try:
        editor.open(URI, TEXT)
        rename(editor)
        assert await ask(editor, 3, 15) is None
    finally:
        await editor.stop()


async def test_the_stable_part_of_the_next_prompt_is_computed_ahead_once_the_document_is_idle(tmp_path):
    log = tmp_path / "prefilled.jsonl"
    editor = await Editor.start(VSCODE, {**SCRIPT, "prefill_log": str(log)}, tmp_path)
    try:
        uri = (tmp_path / "circle.py").as_uri()
        editor.open(uri, TEXT)
        assert await ask(editor, 3, 12, uri=uri) is None  # the model loads
        rename(editor, uri)
        await asyncio.sleep(2)  # idle (prefill_ahead.IDLE_S)
        stable = [json.loads(line) for line in log.read_text().splitlines()]
        # The path and the lines around the window at the line changed last, and nothing after them.
        assert stable and stable[-1].startswith("File: circle.py\n") and "My recent edits" not in stable[-1]
    finally:
        await editor.stop()


@pytest.mark.parametrize("options, own_engine", [({}, False), ({"nextEditModel": "a-smaller-model"}, True)])
async def test_a_model_named_for_suggestions_loads_in_an_engine_of_its_own(tmp_path, options, own_engine):
    """After a rewrite has loaded its engine, a suggestion from the same engine comes at once; one
    from a model of its own waits for that model's load (a scripted load of load_s)."""
    load_s = 2.0
    after_hints = {"when": "+def area(radius: float)", "replace": [["math.pi * r * r", "math.pi * radius * radius"]]}
    script = {**SCRIPT, "load_s": load_s, "next_edits": [after_hints]}
    editor = await Editor.start(VSCODE, script, tmp_path, options)
    try:
        editor.open(URI, TEXT)
        outcome = await editor.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add type hints"})
        assert outcome["status"] == "done"
        typed = editor.text(URI).replace("def area(r: float)", "def area(radius: float)")
        editor.change(URI, [types.TextEdit(types.Range(types.Position(0, 0), types.Position(len(typed), 0)), typed)])
        started = time.perf_counter()
        answer = await ask(editor, 3, 15)
        waited = time.perf_counter() - started
        assert accepted(editor.text(URI), answer) == typed.replace("math.pi * r * r", "math.pi * radius * radius")
        assert (waited >= load_s) if own_engine else (waited < load_s), waited
    finally:
        await editor.stop()


@pytest.mark.parametrize("declared", [True, False])
async def test_a_client_that_shows_suggestions_has_their_model_loaded_from_the_first_open(tmp_path, declared):
    """Where the client declares inline completions, the first suggestion finds its model loaded
    (a scripted load of load_s); where it does not, nothing loads until asked."""
    load_s = 2.0
    editor = await Editor.start(VSCODE, {**SCRIPT, "load_s": load_s}, tmp_path,
                                capabilities=showing_suggestions() if declared else None)
    try:
        editor.open(URI, TEXT)
        await asyncio.sleep(load_s + 1)
        rename(editor)
        started = time.perf_counter()
        answer = await ask(editor, 3, 15)
        waited = time.perf_counter() - started
        assert accepted(editor.text(URI), answer) == NEXT
        assert (waited < load_s / 2) if declared else (waited >= load_s), waited
    finally:
        await editor.stop()
