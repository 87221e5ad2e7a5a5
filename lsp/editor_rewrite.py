"""One rewrite of one region of one open document, streamed into the editor.

The region's edit session (rewriter/edits/session.py) runs in a worker thread; its events come
here, on the server's event loop. Each settled hunk (in the region's original line numbering)
is moved to the document's current numbering and sent as a versioned `workspace/applyEdit`.
Before the next edit we wait until the client's didChange shows our edit, so every edit names
the version it applies to.

Never clobber: a change in the document that is not ours and touches the region stops the
rewrite; nothing more is applied and the user is told. A rejected edit is reported, not retried.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

from lsprotocol import types
from pygls.progress import Progress as ProgressReporter
from pygls.workspace import Workspace

from rewriter.edits.hunks import Hunk
from rewriter.edits.integrity import STRIPPED
from rewriter.edits.pipeline import grammar_of
from rewriter.edits.session import Delta, EditSession, Finished
from rewriter.engine import Engine
from rewriter.prompt import NoCodeBlock, SourceText
from rewriter.results import RewriteError, ServiceError

from .options import Options
from .regions import Region

log = logging.getLogger(__name__)

APPLY_ANYWAY, DISCARD = "Apply anyway", "Discard"  # the choices offered for a refused edit
_offers: set[asyncio.Task] = set()  # offers awaiting the user's answer (the loop keeps weak references)
REPORT_INTERVAL_S = 0.25
_ids = itertools.count(1)


class RewriteHost(Protocol):
    """What a rewrite needs from the language server (lsp/server.py), named here so this module
    does not import it."""

    options: Options
    decode_lock: asyncio.Lock
    jobs_by_token: dict

    async def get_engine(self, report) -> Engine: ...

    def language_of(self, document) -> str: ...

    def supports_progress(self) -> bool: ...

    def versioned_edits(self) -> bool: ...

    def supports_message_actions(self) -> bool: ...

    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None: ...

    # from pygls's LanguageServer
    @property
    def workspace(self) -> Workspace: ...

    @property
    def work_done_progress(self) -> ProgressReporter: ...

    def window_show_message(self, params: types.ShowMessageParams) -> None: ...

    async def window_show_message_request_async(
            self, params: types.ShowMessageRequestParams) -> types.MessageActionItem | None: ...

    async def workspace_apply_edit_async(
            self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult: ...


class Conflict(Exception):
    """The user changed the region while it was being rewritten."""


@dataclass
class _Failure:
    message: str


_DONE = object()


def changed_lines(before: list[str], after: list[str]) -> tuple[int, int, int]:
    """The lines [start, end) of `before` that differ from `after`, and the change in line count."""
    prefix = 0
    limit = min(len(before), len(after))
    while prefix < limit and before[prefix] == after[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and before[-1 - suffix] == after[-1 - suffix]:
        suffix += 1
    return prefix, len(before) - suffix, len(after) - len(before)


@dataclass
class Outcome:
    status: str  # done, unchanged, cancelled, conflict, rejected, refused (integrity), error
    message: str
    edits: int = 0
    stats: dict = field(default_factory=dict)
    refused_text: str | None = None  # the region's text the integrity check refused

    def as_dict(self) -> dict:
        refused = {"refused_text": self.refused_text} if self.refused_text is not None else {}
        return {"status": self.status, "message": self.message, "edits": self.edits, "stats": self.stats, **refused}


class EditorRewrite:
    """A rewrite the editor asked for: its region's session, streamed into the open document."""

    def __init__(self, server: RewriteHost, uri: str, region: Region, instruction: str, stream: bool,
                 announce_end: bool = False):
        self.id = next(_ids)
        self.announce_end = announce_end  # nobody waits for the outcome: say every ending
        self.server = server
        self.uri = uri
        self.region = region
        self.instruction = instruction
        self.stream_edits = stream
        self.cancelled = threading.Event()  # read by the worker thread
        self.stopped = asyncio.Event()  # the same, for the event loop
        self.conflict: str | None = None
        self.queue: asyncio.Queue = asyncio.Queue()
        self.loop = asyncio.get_running_loop()
        self.token: str | None = None
        self.edits = 0
        # The document as we believe it is, and as it will be once our edit in flight lands.
        self.expected = server.workspace.get_text_document(uri).source
        self.pending: str | None = None
        self.sent_version: int | None = None  # the document version our edit in flight was made for
        self.answered = False  # the client has accepted our edit in flight
        self.synced = asyncio.Event()
        self.start = region.start  # the region's first line in the current document
        self.delta = 0  # lines our applied hunks added to the region

    # --- the user's side -------------------------------------------------------------------

    def cancel(self) -> None:
        self.cancelled.set()
        self.loop.call_soon_threadsafe(self.stopped.set)
        self.loop.call_soon_threadsafe(self.queue.put_nowait, _DONE)

    def document_changed(self, text: str) -> None:
        """Called after every didChange of our document (already applied by pygls)."""
        if self.pending is not None:
            if text == self.pending:
                self.expected, self.pending = text, None
                self.synced.set()
            elif self.answered:
                # The client took our edit and reports more than it (the user typed too): judge
                # the rest against our edit, by content, however late the report comes.
                pending, self.pending = self.pending, None
                self._judge(pending, text)
                self.synced.set()
            return  # before the answer, anything else is judged once the client has answered
        self._judge(self.expected, text)

    def _judge(self, base: str, text: str) -> None:
        """Accept a change of `base` into `text` outside the region; a change inside is a conflict."""
        if text == base:
            return
        start, end, growth = changed_lines(base.splitlines(keepends=True), text.splitlines(keepends=True))
        if Region(self.start, self.start + len(self.region_lines_now())).overlaps(start, end) or self.conflict:
            self.conflict = f"lines {start + 1}-{max(end, start + 1)} were edited while the rewrite ran"
            self.cancel()
            return
        if end <= self.start:
            self.start += growth
        self.expected = text

    def region_lines_now(self) -> range:
        return range(self.region.end - self.region.start + self.delta)

    # --- the work ----------------------------------------------------------------------------

    async def run(self) -> Outcome:
        server = self.server
        document = server.workspace.get_text_document(self.uri)
        lines = document.lines
        source = SourceText.from_text("".join(lines[self.region.start:self.region.end]))
        self.source = source  # the region's line endings, for every edit sent back
        # The region's way through the model, in the document as it was at the start (LF line
        # endings); the whole document goes along as context when it is small enough.
        document_text = document.source.replace("\r\n", "\n")
        offset = len("".join(lines[:self.region.start]).replace("\r\n", "\n"))
        whole = self.region.start == 0 and self.region.end >= len(lines)
        self.context = document.source if not whole and len(document.source) <= server.options.context_chars else None
        language = server.language_of(document)
        self.span = (document_text, offset, offset + len(source.code), language)
        await self._begin_progress()
        try:
            outcome = await self._run(source)
        except Exception as error:  # never let a rewrite take the server down
            log.exception("rewrite %s failed", self.id)
            outcome = Outcome("error", f"rewrite failed: {error}")
        outcome.edits = self.edits
        self._end_progress(outcome.message)
        if outcome.refused_text is not None and server.supports_message_actions():
            # the command answers now; the user decides later (a cut answer comes without a text)
            offer = asyncio.ensure_future(self._offer(outcome, outcome.refused_text))
            _offers.add(offer)
            offer.add_done_callback(_offers.discard)
        elif outcome.status not in ("done", "unchanged", "cancelled"):
            server.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Warning if outcome.status != "error" else types.MessageType.Error,
                message=f"rewriter: {outcome.message}"))
        elif self.announce_end:
            server.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Info, message=f"rewriter: {outcome.message}"))
        return outcome

    async def _run(self, source: SourceText) -> Outcome:
        server = self.server
        # Loading the model, or waiting for another rewrite to finish, must not delay a cancel.
        ready, engine = await self._unless_stopped(server.get_engine(self._report), cancel=False)
        if not ready:
            return self._stopped()
        lock = server.decode_lock if not engine.concurrent else None
        if lock is not None:
            if lock.locked():
                self._report("waiting for another rewrite to finish")
            acquired, _ = await self._unless_stopped(lock.acquire(), cancel=True)
            if not acquired:
                return self._stopped()
        try:
            if self.cancelled.is_set():
                return self._stopped()
            document_text, start, end, language = self.span
            session = EditSession(engine, document_text, start, end, self.instruction, language,
                                  grammar=grammar_of(language, document_text),
                                  max_new_tokens=server.options.max_new_tokens, context=self.context)
            worker = threading.Thread(target=self._work, name=f"rewrite-{self.id}", daemon=True, args=(session,))
            worker.start()
            try:
                return await self._consume(source)
            finally:
                self.cancelled.set()
                await asyncio.to_thread(worker.join)
        finally:
            if lock is not None:
                lock.release()

    async def _unless_stopped(self, awaitable, cancel: bool):
        """(True, result) once `awaitable` is done, or (False, None) as soon as the job is stopped."""
        task = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(self.stopped.wait())
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if task.done():
            return True, task.result()  # the caller checks for a stop (and releases what it got)
        if cancel:
            task.cancel()
        else:  # let it finish in the background (a model being loaded stays loaded)
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return False, None

    def _work(self, session: EditSession) -> None:
        put = lambda item: self.loop.call_soon_threadsafe(self.queue.put_nowait, item)  # noqa: E731
        # No context (window 0) unless the document goes along whole (self.context).
        events = session.run(context_window=0, stopped=self.cancelled.is_set)
        try:
            for event in events:
                put(event)
        except (RewriteError, NoCodeBlock, ServiceError) as error:  # a request the engine cannot serve
            put(_Failure(str(error)))
        except Exception as error:
            log.exception("rewrite %s: the engine failed", self.id)
            put(_Failure(f"the engine failed: {error}"))
        finally:
            events.close()  # stops decoding at once
            put(_DONE)

    async def _consume(self, source: SourceText) -> Outcome:
        held: list[Hunk] = []  # hunks not yet sent (all of them when the client takes one edit only)
        answered = 0  # characters of the answer so far
        last_report = 0.0
        expected_chars = len(source.code) + 16
        while True:
            event = await self.queue.get()
            if self.conflict:
                return Outcome("conflict", f"stopped: {self.conflict}; nothing more was applied there")
            if event is _DONE:
                return self._stopped()
            if isinstance(event, _Failure):
                return Outcome("error", event.message)
            if isinstance(event, Delta):
                answered += len(event.text)
                now = time.monotonic()
                if now - last_report >= REPORT_INTERVAL_S:
                    last_report = now
                    self._report(stats_message(event.stats), min(99, 100 * answered // expected_chars))
                held.extend(event.hunks)
                if self.stream_edits and held:
                    await self._apply(held)
                    held = []
                continue
            assert isinstance(event, Finished)
            return await self._conclude(event, source, held)

    async def _conclude(self, finished: Finished, source: SourceText, held: list[Hunk]) -> Outcome:
        stats, verdict = finished.result.stats, finished.decision
        self.result_stats = stats.as_dict()
        if finished.restart:
            # The streamed edits showed an answer that is not what may be applied: put the
            # region back as it was, then apply the stripped answer in one edit (or nothing).
            if self.edits:
                await self._restore(source.code)
            held = list(finished.hunks)
        else:
            held.extend(finished.hunks)
        if held:
            await self._apply(held)
        if verdict.refused and not self.conflict:
            # A cut answer is not offered: nothing applies half an answer.
            return Outcome("refused", f"not applied: {verdict.reason}", stats=self.result_stats,
                           refused_text=verdict.refused_text if verdict.may_force else None)
        if self.conflict:
            return Outcome("conflict", f"stopped: {self.conflict}; nothing more was applied there")
        status = "done" if self.edits else "unchanged"
        summary = stats_message(stats) + (f"; {verdict.reason}" if verdict.status == STRIPPED else "")
        return Outcome(status, ("rewrote" if self.edits else "no changes") + f": {summary}",
                       stats=self.result_stats)

    async def _offer(self, outcome: Outcome, refused_text: str) -> None:
        """Ask whether to apply a refused edit anyway; apply it if the region is still as it was."""
        server = self.server
        before = server.workspace.get_text_document(self.uri).source
        try:
            choice = await server.window_show_message_request_async(types.ShowMessageRequestParams(
                type=types.MessageType.Warning, message=f"rewriter: {outcome.message}",
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
        end = self.start + self.region.end - self.region.start
        edit = types.TextEdit(range=line_range(lines, self.start, end, document.position_codec), new_text=text)
        result = await server.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(
            edit=self._workspace_edit(document, [edit]), label=f"rewriter: {self.instruction}"))
        if not result.applied:
            server.show(f"the editor rejected the edit ({result.failure_reason or 'no reason given'})",
                        types.MessageType.Warning)

    async def _restore(self, original: str) -> None:
        """Replace the region, as our streamed edits left it, by its original lines."""
        lines = tuple(original.splitlines(keepends=True))
        current = len(lines) + self.delta
        self.delta = 0
        await self._apply([Hunk(0, current, lines)])
        self.delta = 0

    def _stopped(self) -> Outcome:
        if self.conflict:
            return Outcome("conflict", f"stopped: {self.conflict}; nothing more was applied there")
        applied = f"; {self.edits} edit(s) already applied stay" if self.edits else ""
        return Outcome("cancelled", f"cancelled{applied}")

    async def _apply(self, hunks: list[Hunk]) -> None:
        """Send the hunks as one edit and wait until the client shows it; raise nothing, flag trouble."""
        if self.conflict or self.cancelled.is_set():
            return
        document = self.server.workspace.get_text_document(self.uri)
        if document.source != self.expected:
            self._judge(self.expected, document.source)
            if self.conflict:
                return
        lines = list(document.lines)
        codec = document.position_codec
        edits = []
        after = list(lines)
        shift = 0  # how the hunks before this one moved lines, within this one edit
        for hunk in hunks:
            start = self.start + hunk.start + self.delta
            end = self.start + hunk.end + self.delta
            text = self.source.native(hunk.text)
            edits.append(types.TextEdit(range=line_range(lines, start, end, codec), new_text=text))
            after[start + shift:end + shift] = text.splitlines(keepends=True)
            shift += len(hunk.lines) - (hunk.end - hunk.start)
        edit = self._workspace_edit(document, edits)
        self.pending = "".join(after)
        self.sent_version, self.answered = document.version, False
        self.synced.clear()
        try:
            # Neovim prints a label on every edit: name only an edit that comes whole.
            label = None if self.stream_edits else f"rewriter: {self.instruction}"
            result = await self.server.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(
                edit=edit, label=label))
        except Exception as error:
            self.pending = None
            self._reject(f"the editor failed to apply the edit: {error}")
            return
        if not result.applied:
            self.pending = None
            self._reject(f"the editor rejected the edit ({result.failure_reason or 'no reason given'})")
            return
        self.edits += 1
        self.delta += shift
        self.answered = True
        if self.pending is not None:
            now = self.server.workspace.get_text_document(self.uri)
            if now.source == self.pending or now.version != self.sent_version:
                self.document_changed(now.source)  # reported already, maybe with more than our edit
            else:  # not reported yet: wait, with no timer (a slow client is not a conflict)
                await self._unless_stopped(self.synced.wait(), cancel=True)

    def _reject(self, reason: str) -> None:
        self.conflict = reason
        self.cancel()

    def _workspace_edit(self, document, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
        if self.server.versioned_edits():
            return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=self.uri, version=document.version),
                edits=edits)])
        return types.WorkspaceEdit(changes={self.uri: edits})

    # --- progress ----------------------------------------------------------------------------

    async def _begin_progress(self) -> None:
        if not self.server.supports_progress():
            return
        token = f"rewriter/{self.id}"
        self.server.jobs_by_token[token] = self  # before asking: a cancel may come at once
        try:
            await self.server.work_done_progress.create_async(token)
        except Exception as error:
            log.info("no progress: %s", error)
            self.server.jobs_by_token.pop(token, None)
            return
        self.token = token
        self.server.work_done_progress.begin(token, types.WorkDoneProgressBegin(
            title=f"Rewrite: {self.instruction}", cancellable=True, message="starting", percentage=0))

    def _report(self, message: str, percentage: int | None = None) -> None:
        if self.token:
            self.server.work_done_progress.report(self.token, types.WorkDoneProgressReport(
                message=message, percentage=percentage, cancellable=True))

    def _end_progress(self, message: str) -> None:
        if self.token:
            self.server.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message))
            self.server.jobs_by_token.pop(self.token, None)
            self.token = None  # nothing may report into an ended progress (a model still loading, say)


def stats_message(stats) -> str:
    return (f"{stats.output_tokens} tokens, {stats.tokens_per_s:.1f} tok/s, prediction "
            f"{stats.accepted_prediction_tokens} accepted / {stats.rejected_prediction_tokens} rejected")


def line_range(lines: list[str], start: int, end: int, codec) -> types.Range:
    """Lines [start, end) as a range; past a last line without newline, the range ends at its end."""
    def position(line: int) -> types.Position:
        if line >= len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
            return types.Position(len(lines) - 1, codec.client_num_units(lines[-1]))
        return types.Position(line, 0)

    return types.Range(start=position(start), end=position(end))
