"""The language server when its editor vanishes mid-rewrite (crashed, killed): its standard input
ends while a rewrite streams edits nobody answers. The server must exit on its own, promptly and
without a traceback, leaving no rewrite running. Raw JSON-RPC over pipes, the scripted engine."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from tests.helpers.lsp import ROOT, SAMPLE, SCRIPT, URI
from tests.helpers.scripted import scripted_env


def frame(message: dict) -> bytes:
    data = json.dumps({"jsonrpc": "2.0", **message}).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(data), data)


def read_frame(stream) -> dict:
    length = 0
    while (line := stream.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(stream.read(length))


def start_server(tmp_path, script: dict, capabilities: dict) -> subprocess.Popen:
    """The server on pipes, initialized, with SAMPLE open."""
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    env = {**os.environ, **scripted_env(path),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    server = subprocess.Popen([sys.executable, "-m", "lsp"], cwd=tmp_path, env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(frame({"id": 1, "method": "initialize",
                              "params": {"processId": None, "rootUri": tmp_path.as_uri(),
                                         "capabilities": capabilities}}))
    server.stdin.flush()
    while "result" not in (reply := read_frame(server.stdout)) or reply.get("id") != 1:
        pass
    server.stdin.write(frame({"method": "initialized", "params": {}}))
    server.stdin.write(frame({"method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": URI, "languageId": "python", "version": 1, "text": SAMPLE}}}))
    server.stdin.flush()
    return server


def vanish(server: subprocess.Popen) -> None:
    """The editor is gone; the server must exit on its own, promptly, without a traceback."""
    assert server.stdin is not None and server.stdout is not None
    try:
        server.stdin.close()
        server.stdout.close()
        started = time.monotonic()
        code = server.wait(timeout=30)
        seconds = time.monotonic() - started
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    stderr = server.stderr.read().decode() if server.stderr else ""
    assert "Traceback" not in stderr, stderr[-3000:]
    assert seconds < 10, seconds
    assert code in (0, 1), (code, stderr[-2000:])  # LSP's exit code without a shutdown request is 1


def test_the_server_exits_cleanly_when_the_editor_vanishes_mid_rewrite(tmp_path):
    capabilities = {"workspace": {"applyEdit": True, "workspaceEdit": {"documentChanges": True}}}
    server = start_server(tmp_path, SCRIPT, capabilities)
    assert server.stdin is not None and server.stdout is not None
    try:
        server.stdin.write(frame({"id": 2, "method": "workspace/executeCommand", "params": {
            "command": "rewriter.rewriteFile", "arguments": [{"uri": URI, "instruction": "Add docstrings slowly"}]}}))
        server.stdin.flush()
        while read_frame(server.stdout).get("method") != "workspace/applyEdit":
            pass  # the rewrite streams: its first edit waits for an answer that never comes
    finally:
        vanish(server)


def test_the_server_exits_cleanly_when_the_editor_vanishes_while_the_model_loads(tmp_path):
    """The suggestions' model loads from the first open (the client shows inline completions): an
    editor closed meanwhile does not wait for the load."""
    capabilities = {"textDocument": {"inlineCompletion": {"dynamicRegistration": False}}}
    server = start_server(tmp_path, {**SCRIPT, "load_s": 60}, capabilities)
    time.sleep(1)  # the load has begun
    vanish(server)
