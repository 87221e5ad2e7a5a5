"""The language server as a rewrite sees it (lsp/editor_rewrite.py, lsp/edit_applier.py)."""
from __future__ import annotations

import asyncio
from typing import Protocol

from lsprotocol import types
from pygls.progress import Progress as ProgressReporter
from pygls.workspace import Workspace

from rewriter.engine import Engine

from .options import InitializationOptions


class BackgroundWork(Protocol):
    """Work done ahead of rewrites (lsp/prefill_ahead.py), which gives way to one."""

    running: bool  # it holds the decode lock now

    def preempt(self) -> None: ...


class RewriteHost(Protocol):
    """What a rewrite needs from the language server (lsp/server.py), named here so that the
    rewrite's modules do not import it."""

    options: InitializationOptions
    decode_lock: asyncio.Lock
    prefill_ahead: BackgroundWork
    next_edits: BackgroundWork  # the suggestion in flight (lsp/next_edits.py) gives way to a rewrite too

    async def get_engine(self, report) -> Engine: ...

    def language_of(self, document) -> str: ...

    def supports_progress(self) -> bool: ...

    def versioned_edits(self) -> bool: ...

    def supports_message_actions(self) -> bool: ...

    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None: ...

    def progress_started(self, token: str, job) -> None: ...

    def progress_ended(self, token: str) -> None: ...

    def notify(self, method: str, params: dict) -> None: ...

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
