"""Next-edit suggestions in the editor (`textDocument/inlineCompletion`, LSP 3.18): the model
rewrites a window of lines around the cursor with the window as the prediction, and the changed
stretch comes back as one InlineCompletionItem whose range covers what it replaces (several lines
when it does), or null (rewriter/next_edit/suggest.py says when).

Never in the way:
- one prediction in flight: a newer request stops the one running, as do `$/cancelRequest`, a
  change of its document and a rewrite (each within a pass: the engine asks between passes and
  before every module of the prompt's pass);
- an answer for a document version that is no longer current is dropped;
- the decoding runs in a worker thread, so didChange and every other message are handled meanwhile;
- a request waits for the model to load (the first one starts the load); one given up meanwhile
  leaves the load running for the next, so that the suggestion comes as soon as the model is ready.

Each open document's recent edits (rewriter/next_edit/history.py) are fed from didOpen and
didChange here; the prefill ahead (lsp/prefill_ahead.py) computes the prompt's stable part of the
document touched last (`stable_prompt`), so that a request computes its history and window only.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.workspace import Workspace

from rewriter.next_edit.base import NextEditFormat, NextEditInput, NextEditPrompt
from rewriter.next_edit.formats import choose_format
from rewriter.next_edit.history import EditHistory
from rewriter.next_edit.suggest import Outcome, Suggestion, suggest
from rewriter.next_edit.window import choose_window
from rewriter.prompt import newline_of

from .options import InitializationOptions
from .threads import TORCH_THREAD

log = logging.getLogger(__name__)


class SuggestionHost(Protocol):
    """What suggestions need from the language server (lsp/server.py)."""

    options: InitializationOptions
    decode_lock: asyncio.Lock

    async def get_suggestion_engine(self, report): ...

    @property
    def suggestion_model(self) -> str | None: ...

    def language_of(self, document) -> str: ...

    @property
    def workspace(self) -> Workspace: ...


class _Prediction:
    """The prediction in flight: its document and version, and the flag its decoding watches."""

    def __init__(self, uri: str, version: int | None):
        self.uri = uri
        self.version = version
        self.stop = threading.Event()


class NextEdits:
    def __init__(self, host: SuggestionHost):
        self.host = host
        self.histories: dict[str, EditHistory] = {}
        self.last_line: dict[str, int] = {}  # uri -> the line last changed: where the cursor likely is
        self.current: _Prediction | None = None

    @property
    def enabled(self) -> bool:
        return self.host.options.next_edits

    def form(self) -> NextEditFormat:
        options = self.host.options
        return choose_format(options.next_edit_format, self.host.suggestion_model)

    # --- the documents ----------------------------------------------------------------------------

    def opened(self, uri: str) -> None:
        document = self.host.workspace.get_text_document(uri)
        self.histories[uri] = EditHistory(self._path(uri), _lf(document.source))

    def changed(self, uri: str) -> None:
        """After a didChange (pygls has applied it): the history takes the text, a prediction of
        the document's older version stops."""
        document = self.host.workspace.get_text_document(uri)
        text = _lf(document.source)
        history = self.histories.get(uri)
        if history is None:
            history = self.histories[uri] = EditHistory(self._path(uri), text)
        else:
            before = history.text
            history.changed(text)
            self.last_line[uri] = min(_first_changed_line(before, text), text.count("\n"))
        if self.current is not None and self.current.uri == uri:
            self.current.stop.set()

    def closed(self, uri: str) -> None:
        self.histories.pop(uri, None)
        self.last_line.pop(uri, None)
        if self.current is not None and self.current.uri == uri:
            self.current.stop.set()

    @property
    def running(self) -> bool:
        """A prediction is in flight (it may hold the decode lock)."""
        return self.current is not None

    def preempt(self) -> None:
        """A rewrite or a command is about to decode: the prediction in flight stops."""
        if self.current is not None:
            self.current.stop.set()

    # --- a request ----------------------------------------------------------------------------

    async def inline_completion(self, params: types.InlineCompletionParams) -> types.InlineCompletionList | None:
        uri = params.text_document.uri
        if not self.enabled or uri not in self.host.workspace.text_documents:
            return None
        if self.current is not None:
            self.current.stop.set()  # a newer request: the older answer would be stale
        prediction = self.current = _Prediction(uri, self.host.workspace.get_text_document(uri).version)
        asked = time.perf_counter()
        try:
            engine = await self._engine()
            if engine is None or prediction.stop.is_set():
                return None
            outcome = await self._decode(engine, prediction, params.position)
        finally:
            if self.current is prediction:
                self.current = None
        if outcome is None:
            return None
        document = self.host.workspace.get_text_document(uri)
        if prediction.stop.is_set() or document.version != prediction.version:
            log.info("next edit: dropped, the document changed while it was predicted")
            return None
        log.info("next edit: %s in %.0f ms (%d output tokens, %d cached prompt tokens)",
                 outcome.reason or "suggested", 1000 * (time.perf_counter() - asked), outcome.stats.output_tokens,
                 outcome.stats.cached_prompt_tokens)
        if outcome.suggestion is None:
            return None
        return types.InlineCompletionList(items=[self._item(document, outcome.suggestion)])

    async def _engine(self):
        """The suggestions' engine, loaded first if need be, if it can complete a prompt; None if it
        cannot be loaded."""
        try:
            engine = await self.host.get_suggestion_engine(lambda message: None)  # at once when it is loaded
        except Exception as error:  # a rewrite says why; a suggestion is silent
            log.warning("next edit: no model: %s", error)
            return None
        return engine if hasattr(engine, "complete_prompt") else None

    async def _decode(self, engine, prediction: _Prediction, position: types.Position) -> Outcome | None:
        """The outcome of one prediction, decoded in a worker thread under the decode lock; None
        when it was stopped first. A cancelled request stops it and waits for the thread."""
        host = self.host
        preempt = getattr(getattr(host, "prefill_ahead", None), "preempt", None)
        if preempt is not None:
            preempt()  # work done ahead gives way within a fraction of a pass
        lock = host.decode_lock if not getattr(engine, "concurrent", False) else None
        if lock is not None:
            await lock.acquire()
        try:
            if prediction.stop.is_set():
                return None
            request = self.request_at(prediction.uri, position)
            if request is None:
                return None
            decoding = TORCH_THREAD.run(suggest, engine, self.form(), request, prediction.stop.is_set)
            done = asyncio.ensure_future(decoding)
            try:
                return await asyncio.shield(done)
            except asyncio.CancelledError:  # $/cancelRequest: stop within a pass, and only then let go
                prediction.stop.set()
                await asyncio.wait([done])
                raise
        finally:
            if lock is not None:
                lock.release()

    def request_at(self, uri: str, position: types.Position | None = None) -> NextEditInput | None:
        """What a suggestion at `position` (default: the line last changed) is computed from."""
        document = self.host.workspace.get_text_document(uri)
        text = _lf(document.source)
        if position is None:
            line, column = self.last_line.get(uri, 0), 0
        else:
            at = document.position_codec.position_from_client_units(document.lines, position)
            line, column = at.line, at.character
        try:
            window = choose_window(text, line)
        except ValueError:
            return None  # a position past the document's end: the editor and the server disagree
        history = self.histories.get(uri)
        edits = history.events() if history is not None else ()
        return NextEditInput(self._path(uri), self.host.language_of(document), text, window, (line, column), edits)

    def stable_prompt(self, uri: str) -> NextEditPrompt | None:
        """The next request's prompt in `uri`, for its stable part to be computed ahead."""
        if not self.enabled or uri not in self.host.workspace.text_documents:
            return None
        request = self.request_at(uri)
        return self.form().render(request) if request is not None else None

    def _item(self, document, suggestion: Suggestion) -> types.InlineCompletionItem:
        codec, lines = document.position_codec, document.lines
        start = codec.position_to_client_units(lines, types.Position(*suggestion.start))
        end = codec.position_to_client_units(lines, types.Position(*suggestion.end))
        newline = newline_of(document.source)
        text = suggestion.text.replace("\n", newline) if newline != "\n" else suggestion.text
        return types.InlineCompletionItem(insert_text=text, range=types.Range(start, end))

    def _path(self, uri: str) -> str:
        """The document's path as the user sees it: relative to the workspace where it lies inside."""
        path = Path(unquote(urlparse(uri).path))
        root = self.host.workspace.root_path
        if root:
            try:
                return path.relative_to(root).as_posix()
            except ValueError:
                pass
        return path.as_posix()


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n")


def _first_changed_line(before: str, after: str) -> int:
    """The first line that differs between two texts."""
    line = 0
    for old, new in zip(before.splitlines(), after.splitlines()):
        if old != new:
            return line
        line += 1
    return line
