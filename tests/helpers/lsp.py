"""A test editor for the language server (pytest-lsp's client plus a document model) and its sample."""
from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from lsprotocol import types
from pytest_lsp import ClientServerConfig, client_capabilities

from tests.helpers.scripted import scripted_env

ROOT = Path(__file__).resolve().parents[2]  # the repository


def offset_at(text: str, position: types.Position) -> int:
    """Offset of an LSP position (UTF-16 columns) in text."""
    lines = text.splitlines(keepends=True)
    if position.line >= len(lines):
        return len(text)
    start = sum(len(line) for line in lines[: position.line])
    line = lines[position.line]
    units = 0
    for index, char in enumerate(line):
        if units >= position.character or char in "\r\n":
            return start + index
        units += 2 if ord(char) > 0xFFFF else 1
    return start + len(line)


def apply_text_edits(text: str, edits: list[types.TextEdit]) -> str:
    """Apply edits that all refer to the same text (applied from the end backwards)."""
    spans = sorted(((offset_at(text, e.range.start), offset_at(text, e.range.end), e.new_text) for e in edits),
                   reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


class Editor:
    def __init__(self, client, reply_before_change: bool = False, reject: bool = False, report_delay_s: float = 0.1):
        self.client = client
        self.documents: dict[str, list] = {}  # uri -> [text, version]
        self.edits: list[types.ApplyWorkspaceEditParams] = []
        self.reply_before_change = reply_before_change  # like Neovim: didChange follows the reply
        self.report_delay_s = report_delay_s  # how long after the reply (Emacs in batch mode: seconds)
        self.reject = reject
        self.edit_applied = asyncio.Event()
        self.server_capabilities: types.ServerCapabilities | None = None  # once initialized
        async def apply_edit(params: types.ApplyWorkspaceEditParams):
            return await self._apply_edit(params)

        client.feature(types.WORKSPACE_APPLY_EDIT)(apply_edit)
        # lsprotocol reads any result with a "command" key as a Command, losing CodeActions.
        converter = client.protocol._converter
        converter.register_structure_hook(
            types.Command | types.CodeAction,
            lambda obj, _: converter.structure(
                obj, types.Command if isinstance(obj.get("command"), str) else types.CodeAction))

    @classmethod
    async def start(cls, profile: str, script: dict | None, tmp_path: Path, options: dict | None = None,
                    env: dict | None = None, command: tuple[str, ...] = ("-m", "lsp"),
                    capabilities: types.ClientCapabilities | None = None, **kwargs) -> Editor:
        """The server, initialized by a client of `profile` (or with `capabilities` of its own)."""
        server_env = {**os.environ, **(env or {})}
        if script is not None:
            path = tmp_path / "script.json"
            path.write_text(json.dumps(script))
            server_env.update(scripted_env(path))
        config = ClientServerConfig(server_command=[sys.executable, *command],
                                    server_env=server_env)
        client = await config.start()
        editor = cls(client, **kwargs)
        initialized = await client.initialize_session(types.InitializeParams(
            capabilities=capabilities or client_capabilities(profile), initialization_options=options,
            root_uri=tmp_path.as_uri()))
        editor.server_capabilities = initialized.capabilities
        return editor

    async def stop(self) -> None:
        await self.client.shutdown_session()
        await self.client.stop()

    def open(self, uri: str, text: str, language: str = "python") -> None:
        self.documents[uri] = [text, 1]
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)))

    def text(self, uri: str) -> str:
        return self.documents[uri][0]

    def change(self, uri: str, edits: list[types.TextEdit]) -> None:
        """The user (or an applied edit) changes the document; the server hears of it."""
        document = self.documents[uri]
        changes = []
        text = document[0]
        for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
            text = apply_text_edits(text, [edit])
            changes.append(types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text))
        document[0] = text
        document[1] += 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=document[1]),
            content_changes=changes))

    async def _apply_edit(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        self.edits.append(params)
        if self.reject:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason="read-only buffer")
        edit = params.edit
        targets: list[tuple[str, list[types.TextEdit]]] = []
        for change in edit.document_changes or []:
            uri, version = change.text_document.uri, change.text_document.version
            if version is not None and version != self.documents[uri][1]:
                return types.ApplyWorkspaceEditResult(applied=False, failure_reason="document version mismatch")
            targets.append((uri, list(change.edits)))
        for uri, edits in (edit.changes or {}).items():
            targets.append((uri, list(edits)))
        if self.reply_before_change:
            asyncio.get_running_loop().call_later(self.report_delay_s, self._apply_all, targets)
        else:
            self._apply_all(targets)
        return types.ApplyWorkspaceEditResult(applied=True)

    def _apply_all(self, targets) -> None:
        for uri, edits in targets:
            self.change(uri, edits)
        self.edit_applied.set()

    def execute(self, command: str, *arguments, wait: bool = True):
        """Run a command; a rewrite's answer is its outcome (wait: true) unless `wait` is False."""
        if wait and command.startswith("rewriter.rewrite") and arguments and isinstance(arguments[0], dict):
            arguments = ({"wait": True, **arguments[0]}, *arguments[1:])
        return self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=command, arguments=list(arguments)))

    async def code_actions(self, uri: str, start: tuple[int, int], end: tuple[int, int],
                           diagnostics: list[types.Diagnostic] | None = None):
        return await self.client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(types.Position(*start), types.Position(*end)),
            context=types.CodeActionContext(diagnostics=diagnostics or [])))

    def progress(self) -> list:
        return [value for values in self.client.progress_reports.values() for value in values]


class Watched:
    """The editor and the review notifications the server sent it."""

    def __init__(self, editor: Editor):
        self.editor = editor
        self.proposals: list[dict] = []
        self.ended: list[dict] = []
        client = editor.client
        client.feature("rewriter/proposal")(lambda params: self.proposals.append(_plain(params)))
        client.feature("rewriter/proposalEnded")(lambda params: self.ended.append(_plain(params)))

    @property
    def messages(self) -> list[str]:
        return [m.message for m in self.editor.client.messages]

    def last(self) -> dict:
        return self.proposals[-1]

    async def settle(self) -> None:
        await asyncio.sleep(0.3)  # notifications after a command's answer


def _plain(params) -> dict:
    """A notification's params as plain JSON (pygls hands them over as namespaces)."""
    if hasattr(params, "_asdict"):  # pygls's namedtuples
        params = params._asdict()
    if isinstance(params, dict):
        return {key: _plain(value) for key, value in params.items()}
    if isinstance(params, (list, tuple)):
        return [_plain(p) for p in params]  # type: ignore[return-value]
    return params


NVIM = "neovim@v0.7.0"  # no versioned document changes declared: one edit at the end
VSCODE = "visual-studio-code@v1.65.2"  # versioned document changes: edits stream in
URI = "file:///project/circle.py"
SAMPLE = """import math


def area(r):
    return math.pi * r * r


def perimeter(r):
    return 2 * math.pi * r


def describe(r):
    # rewrite: use an f-string with two decimals
    return "circle of radius " + str(r)
"""


DOCSTRINGS = [
    ["def area(r):\n", 'def area(r):\n    """The area of a circle of radius r."""\n'],
    ["def perimeter(r):\n", 'def perimeter(r):\n    """The perimeter of a circle of radius r."""\n'],
    ["def describe(r):\n", 'def describe(r):\n    """A short description."""\n'],
]


HINTS = [["(r):", "(r: float) -> float:"]]
SCRIPT = {
    "delay_s": 0.005, "chunk_chars": 6,
    "rules": [
        {"instruction": "Add docstrings", "replace": DOCSTRINGS},
        {"instruction": "Add type hints", "replace": HINTS},
        {"instruction": "slowly", "replace": DOCSTRINGS, "delay_s": 0.15, "chunk_chars": 4},
        {"instruction": "Explode", "error": "the model refused"},
        {"instruction": "use an f-string", "replace": [['"circle of radius " + str(r)', 'f"circle of radius {r:.2f}"']]},
    ],
}


def expected(text: str, replacements, lines: tuple[int, int] | None = None) -> str:
    parts = text.splitlines(keepends=True)
    start, end = lines or (0, len(parts))
    region = "".join(parts[start:end])
    for old, new in replacements:
        region = region.replace(old, new)
    return "".join(parts[:start]) + region + "".join(parts[end:])


def whole(line_count: int) -> dict:
    return {"start": {"line": 0, "character": 0}, "end": {"line": line_count, "character": 0}}


def lines_range(start: int, end: int) -> dict:
    return {"start": {"line": start, "character": 0}, "end": {"line": end, "character": 0}}
