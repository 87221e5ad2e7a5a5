"""End-to-end tests of the language server with pytest-lsp: the server runs as a subprocess
(`rewriter lsp`, with a scripted engine where determinism matters) and the test is the editor.

The test editor is pytest-lsp's client plus a document model.
It behaves like a real editor: it applies `workspace/applyEdit` requests to its copy of the
document (refusing a versioned edit for a stale version, as VS Code does), sends the change back
with didChange, and answers. Tests can type into the document meanwhile.
"""
from __future__ import annotations

import asyncio
import json
import sys
import time

import pytest
import pytest_asyncio
from lsprotocol import types
from pytest_lsp import client_capabilities

from tests.helpers.lsp import (
    DOCSTRINGS,
    HINTS,
    NVIM,
    ROOT,
    SAMPLE,
    SCRIPT,
    URI,
    VSCODE,
    Editor,
    expected,
    lines_range,
    whole,
)

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def nvim(tmp_path):
    editor = await Editor.start(NVIM, SCRIPT, tmp_path, reply_before_change=True)
    yield editor
    await editor.stop()


@pytest_asyncio.fixture
async def vscode(tmp_path):
    editor = await Editor.start(VSCODE, SCRIPT, tmp_path)
    yield editor
    await editor.stop()


async def test_code_actions_for_a_selection_and_the_enclosing_function(nvim):
    nvim.open(URI, SAMPLE)
    actions = await nvim.code_actions(URI, (3, 0), (5, 0))  # def area ... its return line
    titles = [a.title for a in actions]
    assert titles == ["Rewrite: Add docstrings", "Rewrite: Add type hints", "Rewrite: Simplify"]
    args = actions[0].command.arguments[0]
    assert actions[0].kind == "refactor.rewrite" and actions[0].command.command == "rewriter.rewrite"
    assert args == {"uri": URI, "range": lines_range(3, 5), "instruction": "Add docstrings"}

    # No selection: the function around the cursor, found by tree-sitter.
    actions = await nvim.code_actions(URI, (8, 6), (8, 6))
    assert actions[0].command.arguments[0]["range"] == lines_range(7, 9)

    # A diagnostic in the request's context adds the fix action, built from its message.
    diagnostic = types.Diagnostic(range=types.Range(types.Position(8, 4), types.Position(8, 10)),
                                  message="perimeter is never negative", source="lint")
    actions = await nvim.code_actions(URI, (8, 6), (8, 6), [diagnostic])
    fix = [a for a in actions if a.title == "Rewrite: Fix the diagnostic here"]
    assert len(fix) == 1 and "perimeter is never negative" in fix[0].command.arguments[0]["instruction"]
    assert list(fix[0].diagnostics) == [diagnostic]

    # A `# rewrite:` comment in the function offers its instruction first.
    actions = await nvim.code_actions(URI, (13, 4), (13, 4))
    assert actions[0].title == "Rewrite from comment: use an f-string with two decimals"
    assert actions[0].command.arguments[0]["range"] == lines_range(11, 14)


async def test_streamed_versioned_edits_give_the_expected_text(vscode):
    vscode.open(URI, SAMPLE)
    result = await vscode.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add docstrings"})
    assert result["status"] == "done", result
    assert vscode.text(URI) == expected(SAMPLE, DOCSTRINGS)
    # Several edits arrived while decoding, each for the version it was computed on.
    assert len(vscode.edits) >= 2 and result["edits"] == len(vscode.edits)
    versions = [e.edit.document_changes[0].text_document.version for e in vscode.edits]
    assert versions == list(range(1, len(versions) + 1))

    reports = vscode.progress()
    assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].cancellable
    assert isinstance(reports[-1], types.WorkDoneProgressEnd)
    assert any("accepted" in (r.message or "") and "tok/s" in (r.message or "") for r in reports[1:-1])


async def test_code_action_without_versioned_changes_is_one_edit(nvim):
    nvim.open(URI, SAMPLE)
    actions = await nvim.code_actions(URI, (3, 0), (9, 0))
    hints = next(a for a in actions if a.title == "Rewrite: Add type hints")
    result = await nvim.execute(hints.command.command, *hints.command.arguments)
    assert result["status"] == "done", result
    assert len(nvim.edits) == 1 and nvim.edits[0].edit.changes  # one unversioned edit at the end
    assert nvim.text(URI) == expected(SAMPLE, HINTS, (3, 9))  # describe(r) is outside the selection


async def test_streaming_into_neovim_which_reports_changes_after_replying(tmp_path):
    # Neovim applies documentChanges though it does not declare them; streamEdits=always opts in.
    editor = await Editor.start(NVIM, SCRIPT, tmp_path, {"streamEdits": "always"}, reply_before_change=True)
    try:
        editor.open(URI, SAMPLE)
        result = await editor.execute("rewriter.rewrite", {"uri": URI, "range": whole(14), "instruction": "Add docstrings"})
        assert result["status"] == "done", result
        assert len(editor.edits) >= 2
        assert editor.text(URI) == expected(SAMPLE, DOCSTRINGS)
    finally:
        await editor.stop()


async def test_cancel_command_stops_decoding_promptly(vscode):
    vscode.open(URI, SAMPLE)
    started = time.monotonic()
    task = asyncio.ensure_future(vscode.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add docstrings slowly"}))
    await asyncio.wait_for(vscode.edit_applied.wait(), 30)  # the first docstring is in
    cancelled = await vscode.execute("rewriter.cancel", {"uri": URI})
    assert cancelled == {"cancelled": 1}
    result = await asyncio.wait_for(task, 5)
    # The whole answer takes about 100 chunks of 0.15 s; a prompt stop takes a fraction of that.
    assert result["status"] == "cancelled" and time.monotonic() - started < 12
    text = vscode.text(URI)
    assert '"""The area' in text and '"""A short description' not in text
    assert isinstance(vscode.progress()[-1], types.WorkDoneProgressEnd)


async def test_cancelling_the_progress_stops_decoding(vscode):
    vscode.open(URI, SAMPLE)
    task = asyncio.ensure_future(vscode.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add docstrings slowly"}))
    while not vscode.client.progress_reports:
        await asyncio.sleep(0.05)
    token = next(iter(vscode.client.progress_reports))
    vscode.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    result = await asyncio.wait_for(task, 5)
    assert result["status"] == "cancelled"
    assert vscode.text(URI) != expected(SAMPLE, DOCSTRINGS)


async def test_a_change_in_the_region_stops_the_rewrite_and_nothing_more_is_applied(vscode):
    vscode.open(URI, SAMPLE)
    task = asyncio.ensure_future(vscode.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add docstrings slowly"}))
    await asyncio.wait_for(vscode.edit_applied.wait(), 30)
    edits_before = len(vscode.edits)
    line = vscode.text(URI).splitlines().index("def perimeter(r):")
    # The user types inside the region being rewritten.
    vscode.change(URI, [types.TextEdit(range=types.Range(types.Position(line + 1, 4), types.Position(line + 1, 10)),
                                       new_text="return  ")])
    typed = vscode.text(URI)
    result = await asyncio.wait_for(task, 10)
    assert result["status"] == "conflict", result
    assert len(vscode.edits) == edits_before and vscode.text(URI) == typed
    assert any("edited while the rewrite ran" in m.message for m in vscode.client.messages)


async def test_a_change_outside_the_region_moves_the_edits_along(vscode):
    vscode.open(URI, SAMPLE)
    region = lines_range(7, 14)  # perimeter and describe
    task = asyncio.ensure_future(vscode.execute("rewriter.rewrite", {"uri": URI, "range": region, "instruction": "Add docstrings slowly"}))
    await asyncio.wait_for(vscode.edit_applied.wait(), 30)
    # Two new lines at the top of the file, above the region.
    vscode.change(URI, [types.TextEdit(range=types.Range(types.Position(0, 0), types.Position(0, 0)),
                                       new_text="# circles\n# more\n")])
    result = await asyncio.wait_for(task, 60)
    assert result["status"] == "done", result
    assert vscode.text(URI) == "# circles\n# more\n" + expected(SAMPLE, DOCSTRINGS, (7, 14))


async def test_a_rejected_edit_is_reported_not_retried(tmp_path):
    editor = await Editor.start(VSCODE, SCRIPT, tmp_path, reject=True)
    try:
        editor.open(URI, SAMPLE)
        result = await editor.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add docstrings"})
        assert result["status"] == "conflict" and "rejected" in result["message"]
        assert len(editor.edits) == 1 and editor.text(URI) == SAMPLE
        assert any("read-only buffer" in m.message for m in editor.client.messages)
    finally:
        await editor.stop()


async def test_the_server_answers_while_a_rewrite_decodes(vscode):
    other = "file:///project/other.py"
    vscode.open(URI, SAMPLE)
    vscode.open(other, SAMPLE)
    slow = asyncio.ensure_future(vscode.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add docstrings slowly"}))
    await asyncio.wait_for(vscode.edit_applied.wait(), 30)
    started = time.monotonic()
    actions = await vscode.code_actions(other, (3, 0), (5, 0))
    assert actions and time.monotonic() - started < 2
    # A second rewrite in another file is accepted and runs once the first is done (one model).
    second = asyncio.ensure_future(vscode.execute("rewriter.rewriteFile", {"uri": other, "instruction": "Add type hints"}))
    busy = await vscode.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Simplify"})
    assert busy["status"] == "busy"
    await vscode.execute("rewriter.cancel", {"uri": URI})
    assert (await asyncio.wait_for(slow, 10))["status"] == "cancelled"
    assert (await asyncio.wait_for(second, 30))["status"] == "done"
    assert vscode.text(other) == expected(SAMPLE, HINTS)


async def test_engine_errors_and_bad_arguments_are_reported(vscode):
    vscode.open(URI, SAMPLE)
    result = await vscode.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Explode"})
    assert result["status"] == "error" and "the model refused" in result["message"]
    assert any("the model refused" in m.message for m in vscode.client.messages)
    with pytest.raises(Exception, match="instruction"):
        await vscode.execute("rewriter.rewrite", {"uri": URI, "range": whole(3)})
    with pytest.raises(Exception, match="not open"):
        await vscode.execute("rewriter.rewriteFile", {"uri": "file:///nowhere.py", "instruction": "x"})
    assert vscode.text(URI) == SAMPLE and not vscode.edits


async def test_invalid_options_fall_back_to_defaults_with_a_warning(tmp_path):
    options = {"presets": "Add docstrings", "maxRewriteLines": -3, "engine": {"kind": "gpu-cluster"},
               "streamEdits": "sometimes"}
    # Through the `rewriter lsp` command line.
    editor = await Editor.start(NVIM, SCRIPT, tmp_path, options, command=("-m", "rewriter.cli", "lsp"))
    try:
        editor.open(URI, SAMPLE)
        actions = await editor.code_actions(URI, (3, 0), (5, 0))
        assert [a.title for a in actions][:2] == ["Rewrite: Add docstrings", "Rewrite: Add type hints"]
        warning = next(m.message for m in editor.client.messages if "initializationOptions" in m.message)
        for name in ("presets", "maxRewriteLines", "engine.kind", "streamEdits"):
            assert name in warning
    finally:
        await editor.stop()


async def test_presets_and_size_limit_are_configurable(tmp_path):
    options = {"presets": ["Translate comments to English"], "maxRewriteLines": 4}
    editor = await Editor.start(NVIM, SCRIPT, tmp_path, options)
    try:
        editor.open(URI, SAMPLE)
        actions = await editor.code_actions(URI, (3, 0), (5, 0))
        assert [a.title for a in actions] == ["Rewrite: Translate comments to English"]
        assert await editor.code_actions(URI, (0, 0), (12, 0)) is None  # too large to offer
        result = await editor.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add docstrings"})
        assert result["status"] == "refused" and "maxRewriteLines" in result["message"]
    finally:
        await editor.stop()


@pytest.mark.real_model
async def test_embedded_model_end_to_end(tmp_path, embedded_rewriter):
    """The real embedded model through the server gives what the model gives in-process."""
    code = "def add(a, b):\n    return a + b\n"
    editor = await Editor.start(VSCODE, None, tmp_path, {"engine": {"kind": "embedded", "model": "embedded"},
                                                                 "maxNewTokens": 64})
    try:
        editor.open(URI, code)
        result = await editor.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add type hints"})
        assert result["status"] == "done", result
        want = embedded_rewriter.rewrite(code, "Add type hints", "python", max_new_tokens=64).text
        assert editor.text(URI) == want and want != code
        messages = [r.message or "" for r in editor.progress()]
        assert any("loading the model" in m for m in messages)
    finally:
        await editor.stop()


class _FakeOpenAI:
    """An OpenAI-compatible endpoint that streams a fixed edit of whatever code it is sent."""

    def __init__(self, replacements):
        import http.server
        import threading

        fake = self
        self.requests: list[tuple[dict, dict]] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append((dict(self.headers), body))
                answer = body["prediction"]["content"]
                for old, new in replacements:
                    answer = answer.replace(old, new)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for at in range(0, len(answer), 7):
                    chunk = {"choices": [{"index": 0, "delta": {"content": answer[at:at + 7]}}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n')
                self.wfile.write(b"data: [DONE]\n\n")

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()


async def test_an_openai_compatible_endpoint_as_the_engine(tmp_path):
    endpoint = _FakeOpenAI(HINTS)
    options = {"engine": {"kind": "openai", "url": endpoint.url, "model": "coder-7b", "apiKeyEnv": "FAKE_API_KEY"},
               "contextChars": 10000}
    editor = await Editor.start(VSCODE, None, tmp_path, options, env={"FAKE_API_KEY": "sk-test"})
    try:
        editor.open(URI, SAMPLE)
        result = await editor.execute("rewriter.rewrite", {"uri": URI, "range": lines_range(3, 9), "instruction": "Add type hints"})
        assert result["status"] == "done", result
        assert editor.text(URI) == expected(SAMPLE, HINTS, (3, 9))
        headers, body = endpoint.requests[0]
        assert headers["Authorization"] == "Bearer sk-test" and body["model"] == "coder-7b"
        assert "def area(r):" in body["prediction"]["content"] and "describe" not in body["prediction"]["content"]
        # The rest of the file went along as context.
        assert "def describe(r):" in body["messages"][-1]["content"]
    finally:
        await editor.stop()
        endpoint.close()


async def test_rewriter_lsp_over_tcp(tmp_path):
    import socket
    import subprocess

    from pytest_lsp.client import make_test_lsp_client

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "rewriter.cli", "lsp", "--tcp", f"127.0.0.1:{port}"],
                              cwd=ROOT, stderr=subprocess.PIPE)
    client = make_test_lsp_client()
    try:
        for _ in range(300):
            try:
                await client.start_tcp("127.0.0.1", port)
                break
            except OSError:
                assert server.poll() is None, server.stderr.read().decode()
                await asyncio.sleep(0.1)
        else:
            pytest.fail("the server never listened")
        await client.initialize_session(types.InitializeParams(capabilities=client_capabilities(NVIM)))
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=URI, language_id="python", version=1, text=SAMPLE)))
        actions = await client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=URI),
            range=types.Range(types.Position(3, 0), types.Position(5, 0)),
            context=types.CodeActionContext(diagnostics=[])))
        assert len(actions) == 3
        await client.shutdown_async(None)
        client.exit(None)
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.kill()
        await client.stop()
