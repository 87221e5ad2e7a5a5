"""The language server under awkward clients: commands that answer at once, shutdown and exit
mid-rewrite, bad arguments, late edit reports, a model loading while rewrites come and go, and
where the server's log lines go. The engine is the scripted one (tests/helpers/scripted.py)."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.helpers.lsp import DOCSTRINGS, HINTS, NVIM, ROOT, SAMPLE, SCRIPT, URI, VSCODE, Editor, expected, lines_range

pytestmark = pytest.mark.asyncio


async def test_a_rewrite_command_answers_at_once_and_reports_its_end(tmp_path):
    editor = await Editor.start(VSCODE, SCRIPT, tmp_path)
    try:
        editor.open(URI, SAMPLE)
        started = await asyncio.wait_for(
            editor.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add docstrings slowly"}, wait=False), 2)
        assert started["status"] == "started" and isinstance(started["job"], int)
        outcome = await asyncio.wait_for(editor.execute("rewriter.wait", {"job": started["job"]}), 60)
        assert outcome["status"] == "done" and outcome["job"] == started["job"]
        assert editor.text(URI) == expected(SAMPLE, DOCSTRINGS)
        for _ in range(50):  # the notification may trail the answer
            if any(m.message.startswith("rewriter: rewrote") for m in editor.client.messages):
                break
            await asyncio.sleep(0.05)
        ends = [m for m in editor.client.messages if m.message.startswith("rewriter: rewrote")]
        assert len(ends) == 1 and ends[0].type == types.MessageType.Info
        assert isinstance(editor.progress()[-1], types.WorkDoneProgressEnd)
        # The outcome stays available for a while.
        assert (await editor.execute("rewriter.wait", {"job": started["job"]}))["status"] == "done"
    finally:
        await editor.stop()


async def test_at_log_level_info_the_log_sent_to_the_editor_does_not_feed_on_itself(tmp_path):
    # pygls logs every message it sends at INFO; sent to the editor, each would log itself again.
    editor = await Editor.start(VSCODE, SCRIPT, tmp_path, command=("-m", "lsp", "--log-level", "INFO"))
    try:
        editor.open(URI, SAMPLE)
        outcome = await asyncio.wait_for(editor.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add docstrings"}), 60)
        assert outcome["status"] == "done"
        await asyncio.sleep(1)
        count = len(editor.client.log_messages)
        await asyncio.sleep(1)
        assert len(editor.client.log_messages) == count < 200  # quiet once the work is done
        assert not any("Sending data" in m.message for m in editor.client.log_messages)
    finally:
        await editor.stop()


async def test_shutdown_while_a_rewrite_runs_answers_cleanly(tmp_path):
    editor = await Editor.start(VSCODE, SCRIPT, tmp_path)
    editor.open(URI, SAMPLE)
    waiting = asyncio.ensure_future(editor.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add docstrings slowly"}))
    await asyncio.wait_for(editor.edit_applied.wait(), 30)
    await asyncio.wait_for(editor.client.shutdown_async(None), 10)  # raises on an error answer
    assert (await asyncio.wait_for(waiting, 10))["status"] == "cancelled"
    editor.client.exit(None)
    await editor.client.stop()


@pytest.mark.parametrize("command, argument, words", [
    ("rewriter.rewriteFile", {"uri": "file:///nowhere.py", "instruction": "x"}, "not open"),
    ("rewriter.rewriteFile", {"uri": 7, "instruction": "x"}, "'uri' must be a str"),
    ("rewriter.rewrite", {"uri": URI, "range": [1, 2], "instruction": "x"}, "'range' must be a dict"),
    ("rewriter.rewrite", {"uri": URI, "range": {"start": 1}, "instruction": "x"}, "LSP range"),
    ("rewriter.rewrite", "just a string", "one object argument"),
    ("rewriter.wait", {"job": "1"}, "'job' must be a int"),
    ("rewriter.wait", {"job": 99999}, "no rewrite 99999"),
])
async def test_bad_arguments_are_invalid_params_with_one_line(vscode_editor, command, argument, words):
    with pytest.raises(JsonRpcException) as raised:
        await vscode_editor.execute(command, argument)
    error = raised.value
    assert error.code == types.ErrorCodes.InvalidParams, error
    assert words in error.message and "\n" not in error.message and not error.data


@pytest_asyncio.fixture
async def vscode_editor(tmp_path):
    editor = await Editor.start(VSCODE, SCRIPT, tmp_path)
    editor.open(URI, SAMPLE)
    yield editor
    await editor.stop()


def lsp_message(payload: dict) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", **payload}).encode()
    return f"Content-Length: {len(body)}\r\n\r\n".encode() + body


@pytest.mark.parametrize("shutdown, code", [(True, 0), (False, 1)])
async def test_exit_code_says_whether_shutdown_came_first(shutdown, code):
    messages = [{"id": 1, "method": "initialize", "params": {"capabilities": {}, "processId": None}},
                {"method": "initialized", "params": {}}]
    if shutdown:
        messages.append({"id": 2, "method": "shutdown"})
    messages.append({"method": "exit"})
    server = subprocess.run([sys.executable, "-m", "lsp"], input=b"".join(map(lsp_message, messages)),
                            capture_output=True, timeout=60, cwd=ROOT)
    assert server.returncode == code, server.stderr.decode()


async def test_a_late_report_of_our_own_edit_is_not_a_conflict(tmp_path):
    # Emacs in batch mode reports an applied edit seconds later; only content decides a conflict.
    editor = await Editor.start(NVIM, SCRIPT, tmp_path, {"streamEdits": "always"}, reply_before_change=True,
                                report_delay_s=3.5)
    try:
        editor.open(URI, SAMPLE)
        result = await asyncio.wait_for(editor.execute(
            "rewriter.rewrite", {"uri": URI, "range": lines_range(3, 5), "instruction": "Add type hints"}), 30)
        assert result["status"] == "done", result
        assert editor.text(URI) == expected(SAMPLE, HINTS, (3, 5))
    finally:
        await editor.stop()


async def test_model_loading_progress_goes_to_the_rewrites_still_waiting(tmp_path):
    script = {**SCRIPT, "load_s": 2.0}
    editor = await Editor.start(VSCODE, script, tmp_path)
    other = "file:///project/other.py"
    try:
        editor.open(URI, SAMPLE)
        editor.open(other, SAMPLE)
        first = await editor.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add type hints"}, wait=False)
        second = await editor.execute("rewriter.rewriteFile", {"uri": other, "instruction": "Add type hints"}, wait=False)
        await asyncio.sleep(0.5)
        await editor.execute("rewriter.cancel", {"job": first["job"]})
        assert (await editor.execute("rewriter.wait", {"job": first["job"]}))["status"] == "cancelled"
        assert (await asyncio.wait_for(editor.execute("rewriter.wait", {"job": second["job"]}), 30))["status"] == "done"
        reports = editor.client.progress_reports
        first_token, second_token = f"rewriter/{first['job']}", f"rewriter/{second['job']}"
        # Nothing after an end; the waiting rewrite saw the load.
        assert isinstance(reports[first_token][-1], types.WorkDoneProgressEnd)
        assert any("loading weights" in (r.message or "") for r in reports[second_token][1:-1])
        assert editor.text(other) == expected(SAMPLE, HINTS) and editor.text(URI) == SAMPLE
    finally:
        await editor.stop()


async def test_log_lines_go_to_the_editor_not_to_stderr(tmp_path, capfd):
    editor = await Editor.start(VSCODE, SCRIPT, tmp_path, {"maxRewriteLines": -3})
    try:
        for _ in range(50):
            if editor.client.log_messages:
                break
            await asyncio.sleep(0.05)
        assert any("maxRewriteLines" in m.message and m.type == types.MessageType.Warning
                   for m in editor.client.log_messages)
    finally:
        await editor.stop()
    assert "rewriter-lsp" not in capfd.readouterr().err


async def test_the_embedded_engine_hides_transformers_progress_bars():
    done = subprocess.run([sys.executable, "-c", (
        "import logging\n"
        "from rewriter.weights.models import hide_progress_bars\n"
        "from transformers.utils import logging as hf_logging\n"
        "seen = []\n"
        "handler = logging.Handler()\n"
        "handler.emit = lambda record: seen.append(record.getMessage())\n"
        "logging.getLogger().addHandler(handler)  # as the language server's EditorLog\n"
        "hide_progress_bars(route_warnings=True)\n"
        "hf_logging.get_logger('transformers.x').warning('routed')\n"
        "print(hf_logging.is_progress_bar_enabled(), seen)\n")],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.strip() == "False ['routed']" and "routed" not in done.stderr, done.stderr
