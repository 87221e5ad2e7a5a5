"""The prompt of the document being worked on, computed before a rewrite is asked for
(Rewriter.prefill): the rewrite then prefills only its instruction.

What is computed: the stable part of the next-edit suggestion's prompt at the line last changed
(lsp/next_edits.py), where suggestions are on; and for the lines a code action was last asked for
(the editor asks as the cursor moves), the rewrite's whole prompt up to its instruction;
otherwise, when the document goes along as context (contextChars), the prompt up to the code.
Low priority by construction: it starts once the model is loaded and the document has been idle
for IDLE_S, only while no rewrite runs; it holds the decode lock as a rewrite does, and a rewrite
or a suggestion that starts preempts it, which takes a fraction of a pass. What it computed stays
in the engine's prefix cache (engine.prefixCacheMb), so after a change only what follows the
change is computed again.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Protocol

from pygls.workspace import Workspace

from rewriter.engine import EditRequest
from rewriter.next_edit.base import NextEditPrompt

from .editor_rewrite import rewrite_session
from .open_documents import is_open
from .options import InitializationOptions
from .targets import document_context, document_target
from .threads import in_daemon_thread

log = logging.getLogger(__name__)

IDLE_S = 0.75  # after an open, a change or a code action: typing goes on in bursts shorter than this
# What the prompt holds after the part computed ahead: any text does, as it is not computed.
INSTRUCTION_PLACEHOLDER = "(the instruction comes with the rewrite)"


class PrefillHost(Protocol):
    """What prefilling needs from the language server (lsp/server.py)."""

    options: InitializationOptions
    decode_lock: asyncio.Lock
    rewrite_engine: object | None  # the rewrites' where it is loaded
    suggestion_engine: object | None  # the suggestions' where it is loaded (the same one, or one of their own)
    jobs: dict

    @property
    def next_edits(self) -> NextEditPrompts: ...

    def language_of(self, document) -> str: ...

    @property
    def workspace(self) -> Workspace: ...


class NextEditPrompts(Protocol):
    """The next-edit suggestions' side (lsp/next_edits.py): the prompt whose stable part to compute."""

    def stable_prompt(self, uri: str) -> NextEditPrompt | None: ...


class PrefillAhead:
    def __init__(self, host: PrefillHost):
        self.host = host
        self.pointed: dict[str, range] = {}  # uri -> the lines a code action was last asked for
        self.latest: str | None = None  # the document touched last: the one computed
        self.running = False  # a prefill holds the decode lock
        self._stop = threading.Event()
        self._timer: asyncio.TimerHandle | None = None

    def touched(self, uri: str, lines: range | None = None) -> None:
        """The document was opened or changed, or a code action was asked for its `lines`: compute
        its prompt once it has been idle a while. A prefill of what it was before stops."""
        if not self.host.options.prefill_ahead:
            return
        if lines is not None:
            self.pointed[uri] = lines
        if lines is not None or uri != self.latest or self.running:
            self._stop.set()
        self.latest = uri
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(IDLE_S, self._start)

    def closed(self, uri: str) -> None:
        self.pointed.pop(uri, None)
        if self.latest == uri:
            self.latest = None
            self._stop.set()

    def preempt(self) -> None:
        """A rewrite is about to start: a prefill running stops now (keeping what it computed), and
        none starts until the next change."""
        self._stop.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _start(self) -> None:
        self._timer = None
        asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        host, uri = self.host, self.latest
        rewrites, suggestions = host.rewrite_engine, host.suggestion_engine
        if uri is None or (rewrites is None and suggestions is None):
            return
        if host.jobs or host.decode_lock.locked():
            return  # a rewrite runs; it will change the document, which brings the next prefill
        prefill, prefill_prompt = getattr(rewrites, "prefill", None), getattr(suggestions, "prefill_prompt", None)
        planned = self._request(rewrites, uri) if prefill is not None else None
        suggestion = host.next_edits.stable_prompt(uri) if prefill_prompt is not None else None
        if planned is None and suggestion is None:
            return
        async with host.decode_lock:
            self._stop.clear()
            self.running = True
            start = time.perf_counter()
            try:
                if planned is not None:
                    request, code_known = planned
                    kept = await in_daemon_thread("prefill-ahead", prefill, request, self._stop.is_set, code_known)
                    log.info("prefill ahead: %d prompt tokens of %s kept (%s), %.2f s", kept, uri,
                             "to the instruction" if code_known else "to the code", time.perf_counter() - start)
                if suggestion is not None and not self._stop.is_set():
                    kept = await in_daemon_thread("prefill-ahead", prefill_prompt, suggestion, self._stop.is_set)
                    log.info("prefill ahead: %d prompt tokens of the next edit in %s kept, %.2f s", kept, uri,
                             time.perf_counter() - start)
            except Exception:  # background work: a failure is the log's, never the user's rewrite's
                log.exception("prefill ahead of %s failed", uri)
            finally:
                self.running = False

    def _request(self, engine, uri: str) -> tuple[EditRequest, bool] | None:
        """What a rewrite in the document would send, and whether its code is known; None when
        there is nothing worth computing."""
        workspace, options = self.host.workspace, self.host.options
        if not is_open(workspace, uri):
            return None
        document = workspace.get_text_document(uri)
        count = len(document.lines)
        lines = self.pointed.get(uri)
        code_known = lines is not None and lines.stop <= count and len(lines) <= options.max_rewrite_lines
        if not code_known:
            if count < 2:
                return None
            lines = range(0, 1)  # any part: only what precedes the code is computed
        assert lines is not None
        context = document_context(document.source, lines, count, options.context_chars)
        if context is None and not code_known:
            return None  # the prompt before the code is the system message alone
        target = document_target(document.source, lines)
        session = rewrite_session(engine, target, INSTRUCTION_PLACEHOLDER, self.host.language_of(document),
                                  options, context)
        return session.request(context_window=0), code_known

