"""The open documents as the client has them: lines ended where LSP ends them, changes placed by
its rules.

pygls reads a document's lines with str.splitlines, which also breaks at a form feed, U+2028 and
other characters LSP counts as text, and it moves a position past a line's end to before the
line's last character (on a CRLF line, between its \\r and \\n): an incremental change then lands
elsewhere than the client made it, and the server's copy of the document is no longer the
client's. The protocol here keeps pygls's handlers and gives them documents that follow LSP:
lines end at \\r\\n, \\r or \\n; a position past a line's end stands for the line's end, one past
the last line for the document's end (the specification's rules for Position).
"""
from __future__ import annotations

from lsprotocol import types
from pygls.protocol import LanguageServerProtocol
from pygls.workspace import TextDocument, Workspace

from .document_sync import document_lines


class ClientDocument(TextDocument):
    """An open document whose lines and incremental changes follow LSP (see the module's docstring)."""

    @property
    def lines(self) -> tuple[str, ...]:
        return tuple(document_lines(self.source))

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        lines = document_lines(self.source)
        start, end = (self._offset(lines, change.range.start), self._offset(lines, change.range.end))
        source = self.source
        self._source = source[:start] + change.text + source[max(start, end):]

    def _offset(self, lines: list[str], position: types.Position) -> int:
        """The offset of a client's position in the source; past the line's end: the line's end."""
        if position.line >= len(lines):
            return sum(len(line) for line in lines)
        line = lines[position.line]
        text = line.rstrip("\r\n")
        offset, counted = 0, 0
        while offset < len(text) and counted < position.character:
            counted += self.position_codec.client_num_units(text[offset])
            offset += 1
        return sum(len(before) for before in lines[:position.line]) + offset


class ClientWorkspace(Workspace):
    """pygls's workspace, its text documents ClientDocuments."""

    def _create_text_document(self, doc_uri: str, source: str | None = None, version: int | None = None,
                              language_id: str | None = None) -> TextDocument:
        return ClientDocument(doc_uri, source=source, version=version, language_id=language_id,
                              sync_kind=self._sync_kind, position_codec=self.position_codec)


class ClientProtocol(LanguageServerProtocol):
    """pygls's protocol, the workspace it makes at `initialize` a ClientWorkspace."""

    @property
    def _workspace(self) -> Workspace | None:
        return self._client_workspace

    @_workspace.setter
    def _workspace(self, workspace: Workspace | None) -> None:
        if workspace is not None and not isinstance(workspace, ClientWorkspace):
            folders = list(workspace.folders.values())
            workspace = ClientWorkspace(workspace.root_uri, workspace._sync_kind, folders, workspace.position_encoding)
        self._client_workspace = workspace
