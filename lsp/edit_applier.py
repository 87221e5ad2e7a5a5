"""Applying a rewrite's hunks to the open document: versioned `workspace/applyEdit`s, one at a
time, each waiting until the client's didChange shows it; putting the target back when the
streamed edits are void; offering a refused edit ("Apply anyway" / "Discard").

A rejected edit is reported (the rewrite stops), not retried.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from lsprotocol import types

from rewriter.edits.hunks import Hunk
from rewriter.prompt import SourceText

from .document_sync import DocumentSync, document_lines
from .host import RewriteHost

log = logging.getLogger(__name__)

APPLY_ANYWAY, DISCARD = "Apply anyway", "Discard"  # the choices offered for a refused edit
_offers: set[asyncio.Task] = set()  # offers awaiting the user's answer (the loop keeps weak references)


def line_range(lines: list[str], start: int, end: int, codec) -> types.Range:
    """Lines [start, end) as a range; past a last line without newline, the range ends at its end."""
    def position(line: int) -> types.Position:
        if line >= len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
            return types.Position(len(lines) - 1, codec.client_num_units(lines[-1]))
        return types.Position(line, 0)

    return types.Range(start=position(start), end=position(end))


class EditApplier:
    """Sends one rewrite's hunks into the document at `uri`, where `sync` says its lines are now.

    `source` holds the target's own line endings, which every edit keeps; `wait` awaits until
    done or the rewrite is stopped; `stopped` says whether it is."""

    def __init__(self, server: RewriteHost, uri: str, instruction: str, stream_edits: bool, sync: DocumentSync,
                 source: SourceText, wait: Callable[[Awaitable], Awaitable], stopped: Callable[[], bool]):
        self.server = server
        self.uri = uri
        self.instruction = instruction
        self.stream_edits = stream_edits
        self.sync = sync
        self.source = source
        self.wait = wait
        self.stopped = stopped
        self.edits = 0  # edits the client has taken

    async def apply(self, hunks: list[Hunk]) -> None:
        """Send the hunks as one edit and wait until the client shows it; raise nothing, flag trouble."""
        sync = self.sync
        if sync.conflict or self.stopped():
            return
        document = self.server.workspace.get_text_document(self.uri)
        if document.source != sync.expected:
            sync.judge(sync.expected, document.source)
            if sync.conflict:
                return
        lines = list(document.lines)
        codec = document.position_codec
        edits = []
        after = list(lines)
        shift = 0  # how the hunks before this one moved lines, within this one edit
        for hunk in hunks:
            place = sync.place(hunk)
            text = self.source.native(hunk.text)
            edits.append(types.TextEdit(range=line_range(lines, place.start, place.stop, codec), new_text=text))
            after[place.start + shift:place.stop + shift] = document_lines(text)
            shift += len(hunk.lines) - (hunk.end - hunk.start)
        edit = self._workspace_edit(document, edits)
        sync.sending("".join(after), document.version)
        try:
            # Neovim prints a label on every edit: name only an edit that comes whole.
            label = None if self.stream_edits else f"rewriter: {self.instruction}"
            result = await self.server.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(
                edit=edit, label=label))
        except Exception as error:
            sync.failed()
            sync.stop(f"the editor failed to apply the edit: {error}")
            return
        if not result.applied:
            sync.failed()
            sync.stop(f"the editor rejected the edit ({result.failure_reason or 'no reason given'})")
            return
        self.edits += 1
        sync.accepted(shift)
        now = self.server.workspace.get_text_document(self.uri)
        if sync.must_wait(now.source, now.version):
            await self.wait(sync.synced.wait())

    async def restore(self, original: str) -> None:
        """Replace the target, as our streamed edits left it, by its original lines."""
        lines = tuple(document_lines(original))
        current = len(lines) + self.sync.delta
        self.sync.restored()
        await self.apply([Hunk(0, current, lines)])
        self.sync.restored()

    def offer(self, message: str, refused_text: str) -> None:
        """Ask, without waiting for the answer, whether to apply a refused edit anyway."""
        offer = asyncio.ensure_future(self._offer(message, refused_text))
        _offers.add(offer)
        offer.add_done_callback(_offers.discard)

    async def _offer(self, message: str, refused_text: str) -> None:
        """Apply the refused edit if the user says so and the target is still as it was."""
        server = self.server
        before = server.workspace.get_text_document(self.uri).source
        try:
            choice = await server.window_show_message_request_async(types.ShowMessageRequestParams(
                type=types.MessageType.Warning, message=f"rewriter: {message}",
                actions=[types.MessageActionItem(APPLY_ANYWAY), types.MessageActionItem(DISCARD)]))
        except Exception as error:  # the editor went away or does not answer
            log.info("no answer to the refused-edit offer: %s", error)
            return
        if choice is None or choice.title != APPLY_ANYWAY:
            return
        document = server.workspace.get_text_document(self.uri)
        if document.source != before:
            server.show("the document changed meanwhile; the refused edit was not applied", types.MessageType.Warning)
            return
        lines = list(document.lines)
        text = self.source.native(refused_text)
        end = self.sync.start + self.sync.original_length
        edit = types.TextEdit(range=line_range(lines, self.sync.start, end, document.position_codec), new_text=text)
        result = await server.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(
            edit=self._workspace_edit(document, [edit]), label=f"rewriter: {self.instruction}"))
        if not result.applied:
            server.show(f"the editor rejected the edit ({result.failure_reason or 'no reason given'})",
                        types.MessageType.Warning)

    def _workspace_edit(self, document, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
        return workspace_edit(self.server, self.uri, document.version, edits)


def workspace_edit(server: RewriteHost, uri: str, version: int | None,
                   edits: list[types.TextEdit]) -> types.WorkspaceEdit:
    """Edits of the document at `uri`, for its `version` when the client takes versioned edits."""
    if server.versioned_edits():
        return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
            edits=edits)])
    return types.WorkspaceEdit(changes={uri: edits})
