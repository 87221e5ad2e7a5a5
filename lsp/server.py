"""The language server: its state, the rewrites it runs, and one handler per LSP method. What the
code actions offer is in lsp/code_actions.py; the commands are in lsp/rewrite_commands.py and
lsp/proposal_commands.py.

Handlers stay cheap; a rewrite runs as an EditorRewrite (lsp/editor_rewrite.py) whose engine decodes in a
worker thread, so the server keeps answering while it runs. The server's job tables are written here only.
"""
from __future__ import annotations

import asyncio
import logging
import sys
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from rewriter import package_version
from rewriter.engine import instruction_is_empty
from rewriter.prompt import language_for

from .arguments import invalid
from .code_actions import ACTION_KIND, code_actions
from .documents import ClientProtocol
from .editor_rewrite import EditorRewrite, Outcome
from .engine_choice import EngineError, make_engine, suggestion_engine_options
from .engine_load import EngineLoad
from .next_edits import NextEdits
from .open_documents import is_open
from .open_reviews import Reviews
from .options import InitializationOptions, parse_options
from .prefill_ahead import PrefillAhead
from .proposal import Proposal
from .proposal_commands import register_proposal_commands
from .rewrite_commands import register_rewrite_commands
from .statuses import RewriteStatus
from .targets import document_target

log = logging.getLogger(__name__)

KEEP_OUTCOMES = 32  # finished rewrites whose outcome rewriter.wait can still give


class RewriterServer(LanguageServer):
    def __init__(self):
        super().__init__("rewriter", package_version(), protocol_cls=ClientProtocol)
        self.options = InitializationOptions()
        self.option_warnings: list[str] = []
        self.rewrites = EngineLoad(lambda: make_engine(self.options.engine))
        self.suggestions: EngineLoad | None = None  # chosen at the first suggestion (suggestion_load)
        self.suggestions_ahead: asyncio.Task | None = None  # their load at the first document (load_suggestions_ahead)
        self.suggestion_options = self.options.engine
        self.decode_lock = asyncio.Lock()  # in-process decoding runs one rewrite at a time
        self.jobs: dict[int, EditorRewrite] = {}
        self.jobs_by_token: dict[str, EditorRewrite] = {}
        self.runs: dict[int, asyncio.Task] = {}  # job id -> its run, kept after the end for rewriter.wait
        self.reviews = Reviews(self)  # with the review option on: the proposals under review
        self.prefill_ahead = PrefillAhead(self)  # the prompt of the document worked on, computed before it is asked
        self.next_edits = NextEdits(self)  # suggestions of the next edit, and each document's recent edits

    # --- what the client can do ----------------------------------------------------------------

    def _capability(self, *path, default=None):
        node = self.client_capabilities
        for name in path:
            node = getattr(node, name, None) if node is not None else None
        return default if node is None else node

    def supports_progress(self) -> bool:
        return bool(self._capability("window", "work_done_progress", default=False))

    def versioned_edits(self) -> bool:
        declared = bool(self._capability("workspace", "workspace_edit", "document_changes", default=False))
        return declared or self.options.stream_edits == "always"

    def streams(self) -> bool:
        if self.options.stream_edits == "never":
            return False
        return self.versioned_edits()

    def supports_message_actions(self) -> bool:
        """Whether window/showMessageRequest may offer choices ("Apply anyway" / "Discard")."""
        return self._capability("window", "show_message", default=None) is not None

    def notify(self, method: str, params: dict) -> None:
        self.protocol.notify(method, params)

    def language_of(self, document) -> str:
        path = unquote(urlparse(document.uri).path)
        return language_for(path) or (document.language_id or "")

    # --- the engine ------------------------------------------------------------------------------

    @property
    def rewrite_engine(self):
        """The rewrites' engine where it is loaded; None before."""
        return self.rewrites.ready

    async def get_engine(self, report):
        """The rewrites' engine, made and loaded once, in a thread, with progress (lsp/engine_load.py)."""
        if self.rewrites.ready is None:
            self.next_edits.preempt()  # its load would wait on the kept thread for the suggestion's end
        return await self.rewrites.get(report)

    def suggestion_load(self) -> EngineLoad:
        """Where next-edit suggestions get their engine: one of their own where `nextEditModel`
        makes one (lsp/engine_choice.py), else the rewrites'. Chosen once, at the first use."""
        if self.suggestions is None:
            own = suggestion_engine_options(self.options)
            self.suggestion_options = own or self.options.engine
            self.suggestions = self.rewrites if own is None else EngineLoad(lambda: make_engine(own))
        return self.suggestions

    @property
    def suggestion_engine(self):
        """The suggestions' engine where it is loaded; None before."""
        return self.suggestion_load().ready

    @property
    def suggestion_model(self) -> str | None:
        """The model that suggests, as the options name it (None: the default)."""
        self.suggestion_load()
        return self.suggestion_options.model

    async def get_suggestion_engine(self, report):
        return await self.suggestion_load().get(report)

    def load_suggestions_ahead(self) -> None:
        """Suggestions come unasked, so the first should not wait for a model's load: where they
        are on and the client shows them (it declares textDocument/inlineCompletion), their engine
        loads from the first document opened. A failed load is logged, and the next suggestion
        tries again."""
        if self.suggestions_ahead is not None or not self.options.next_edits:
            return
        if self._capability("text_document", "inline_completion") is None:
            return
        self.suggestions_ahead = asyncio.ensure_future(self._load_suggestions())

    async def _load_suggestions(self) -> None:
        try:
            await self.get_suggestion_engine(lambda message: log.info("suggestions: %s", message))
        except Exception as error:  # background work: never the user's request's failure
            log.warning("loading the suggestions' model ahead failed: %s", error)
            return
        latest = self.prefill_ahead.latest
        if latest is not None:
            self.prefill_ahead.touched(latest)  # its stable prompt, now that a model can compute it

    # --- rewrites --------------------------------------------------------------------------------

    def progress_started(self, token: str, job: EditorRewrite) -> None:
        self.jobs_by_token[token] = job

    def progress_ended(self, token: str) -> None:
        self.jobs_by_token.pop(token, None)

    async def start_rewrite(self, uri: str, lines: range, instruction: str, wait: bool = False, *,
                            refine: Proposal | None = None, another: Proposal | None = None,
                            judged_instruction: str | None = None, snippet: str | None = None) -> dict:
        """Start a rewrite and answer at once ({status: "started", job}); the end comes through
        progress and window/showMessage. With `wait` (or rewriter.wait), answer with its outcome.
        With review on, the rewrite becomes a proposal; `refine` rewrites one's proposed text;
        `another` asks its request again for a candidate it has not shown (try another)."""
        if not is_open(self.workspace, uri):
            raise invalid(f"{uri} is not open in the editor")
        if instruction_is_empty(instruction):
            raise invalid("the instruction is empty")
        if not self._capability("workspace", "apply_edit", default=False):
            raise invalid("this editor does not accept workspace/applyEdit, so a rewrite cannot be applied")
        if len(lines) > self.options.max_rewrite_lines:
            message = (f"the region has {len(lines)} lines, more than maxRewriteLines "
                       f"({self.options.max_rewrite_lines}); select a smaller part")
            self.show(message, types.MessageType.Warning)
            return {"status": RewriteStatus.REFUSED, "message": message, "edits": 0, "stats": {}}
        if any(job.uri == uri for job in self.jobs.values()):
            message = "a rewrite is already running in this document; cancel it first (rewriter.cancel)"
            self.show(message, types.MessageType.Warning)
            return {"status": RewriteStatus.BUSY, "message": message, "edits": 0, "stats": {}}
        review: dict = {}
        if refine is not None:
            refine.instruction = instruction.strip()
            base = document_target(refine.proposed_text(), refine.proposed_region())
            review = {"reviews": self.reviews, "proposal": refine, "base": base, "conversation": refine.conversation}
        elif another is not None:
            asked = another.asked
            assert asked is not None  # rewriter.tryAnother asks again only what the model answered
            review = {"reviews": self.reviews, "proposal": another, "base": asked.target,
                      "conversation": asked.conversation, "other_than": asked.shown}
        elif self.options.review:
            review = {"reviews": self.reviews, "proposal": self.reviews.open(uri, lines, instruction.strip())}
        job = EditorRewrite(self, uri, lines, instruction.strip(), self.streams(), announce_end=not wait,
                            judged_instruction=judged_instruction, snippet=snippet, **review)
        self.jobs[job.id] = job
        self.runs[job.id] = asyncio.ensure_future(self._run(job))
        for old in list(self.runs)[:-KEEP_OUTCOMES]:
            if self.runs[old].done():
                del self.runs[old]
        if wait:
            return await self.wait_for(job.id)
        return {"status": RewriteStatus.STARTED, "message": f"rewriting ({instruction.strip()})", "edits": 0,
                "stats": {}, "job": job.id}

    async def _run(self, job: EditorRewrite) -> dict:
        try:
            outcome = await job.run()
        except EngineError as error:
            self.show(str(error), types.MessageType.Error)
            outcome = Outcome(RewriteStatus.ERROR, str(error))
        finally:
            self.jobs.pop(job.id, None)
        return {**outcome.as_dict(), "job": job.id}

    async def wait_for(self, job_id: int) -> dict:
        run = self.runs.get(job_id)
        if run is None:
            raise invalid(f"no rewrite {job_id} (finished rewrites are kept for a while only)")
        return await asyncio.shield(run)  # a client giving up on waiting does not stop the rewrite

    def cancel_jobs(self, uri: str | None = None, job_id: int | None = None) -> int:
        matched = [j for j in self.jobs.values()
                   if (uri is None or j.uri == uri) and (job_id is None or j.id == job_id)]
        for job in matched:
            job.cancel()
        return len(matched)

    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=f"rewriter: {message}"))


server = RewriterServer()


PROTOCOL_LOGGER = "pygls.protocol"


class EditorLog(logging.Handler):
    """Log records go to the editor as window/logMessage once it is connected: Neovim files
    every line a server writes on stderr as an [ERROR]. Until then, and if sending fails, stderr."""

    LEVELS = ((logging.ERROR, types.MessageType.Error), (logging.WARNING, types.MessageType.Warning),
              (logging.INFO, types.MessageType.Info), (logging.NOTSET, types.MessageType.Log))

    def __init__(self, fallback: logging.Handler):
        super().__init__()
        self.fallback = fallback
        self.loop: asyncio.AbstractEventLoop | None = None  # set once the client has initialized

    def emit(self, record: logging.LogRecord) -> None:
        # pygls's protocol logs every message it sends (at INFO, "Sending data"): sent to the
        # editor, each of those would be a message that logs itself again, without end.
        if self.loop is None or self.loop.is_closed() or record.name.startswith(PROTOCOL_LOGGER):
            self.fallback.handle(record)
            return
        kind = next(kind for level, kind in self.LEVELS if record.levelno >= level)
        params = types.LogMessageParams(type=kind, message=self.format(record))
        self.loop.call_soon_threadsafe(self._send, params, record)  # records come from worker threads too

    def _send(self, params: types.LogMessageParams, record: logging.LogRecord) -> None:
        try:
            server.window_log_message(params)
        except Exception:
            self.fallback.handle(record)


def editor_log() -> EditorLog | None:
    return next((h for h in logging.getLogger().handlers if isinstance(h, EditorLog)), None)


@server.feature(types.INITIALIZE)
def initialize(ls: RewriterServer, params: types.InitializeParams) -> None:
    handler = editor_log()
    if handler is not None:
        handler.loop = asyncio.get_running_loop()
    ls.options, ls.option_warnings = parse_options(params.initialization_options)
    for warning in ls.option_warnings:
        log.warning("initializationOptions: %s", warning)


@server.feature(types.INITIALIZED)
def initialized(ls: RewriterServer, params: types.InitializedParams) -> None:
    if ls.option_warnings:
        ls.show("some initializationOptions were ignored: " + "; ".join(ls.option_warnings),
                types.MessageType.Warning)


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: RewriterServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.next_edits.opened(params.text_document.uri)
    ls.prefill_ahead.touched(params.text_document.uri)
    ls.load_suggestions_ahead()


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: RewriterServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.next_edits.changed(uri)
    for job in list(ls.jobs.values()):
        if job.uri == uri:
            job.document_changed(ls.workspace.get_text_document(uri).source)
    ls.reviews.document_changed(uri)
    ls.prefill_ahead.touched(uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: RewriterServer, params: types.DidCloseTextDocumentParams) -> None:
    for job in list(ls.jobs.values()):
        if job.uri == params.text_document.uri:
            job.stop("the document was closed")
    ls.reviews.closed(params.text_document.uri)
    ls.prefill_ahead.closed(params.text_document.uri)
    ls.next_edits.closed(params.text_document.uri)


@server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
def progress_cancelled(ls: RewriterServer, params: types.WorkDoneProgressCancelParams) -> None:
    job = ls.jobs_by_token.get(str(params.token))
    if job is not None:
        job.cancel()


@server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(code_action_kinds=[ACTION_KIND]))
def code_action(ls: RewriterServer, params: types.CodeActionParams):
    literal = ls._capability("text_document", "code_action", "code_action_literal_support") is not None
    return code_actions(ls, params, literal)


@server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def inline_completion(ls: RewriterServer, params: types.InlineCompletionParams):
    return await ls.next_edits.inline_completion(params)


register_rewrite_commands(server)
register_proposal_commands(server)


@server.feature(types.SHUTDOWN)
async def shutdown(ls: RewriterServer, params) -> None:
    # Our rewrites end first, so that pygls, cancelling the requests still open, finds none of ours.
    ls.prefill_ahead.preempt()
    ls.next_edits.preempt()
    ls.cancel_jobs()
    runs = [run for run in ls.runs.values() if not run.done()]
    if runs:
        await asyncio.wait(runs, timeout=5)
    for _ in range(3):  # let the answers to waited-for commands go out
        await asyncio.sleep(0)


def serve(tcp: str | None = None, log_level: str = "WARNING") -> int:
    """Run the server on stdio, or on a TCP socket given as HOST:PORT."""
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(logging.Formatter("rewriter-lsp %(levelname)s %(name)s: %(message)s"))
    handler = EditorLog(stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=log_level.upper(), handlers=[handler])
    if tcp:
        host, _, port = tcp.rpartition(":")
        if not host or not port.isdigit():
            print(f"rewriter: --tcp wants HOST:PORT, got {tcp!r}", file=sys.stderr)
            return 2
        server.start_tcp(host, int(port))
    else:
        server.start_io()
    # As LSP asks: 0 after shutdown then exit, 1 when the client left without a shutdown.
    return 0 if server.protocol._shutdown else 1


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="rewriter lsp", description="The rewriter language server.")
    parser.add_argument("--tcp", metavar="HOST:PORT", help="listen on a TCP socket instead of stdio")
    parser.add_argument("--log-level", default="WARNING", help="stderr log level (DEBUG, INFO, ...)")
    args = parser.parse_args(argv)
    return serve(args.tcp, args.log_level)
