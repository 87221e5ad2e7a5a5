"""One rewrite of one target of one open document, streamed into the editor: the running part.

The target's edit session (rewriter/edits/session.py) runs in a worker thread; its events come
here, on the server's event loop. Each settled hunk (in the target's original line numbering)
goes to the EditApplier (lsp/edit_applier.py), which sends it as a versioned
`workspace/applyEdit` where the DocumentSync (lsp/document_sync.py) says the target's lines are
now, and waits until the client's didChange shows it.

Never clobber: a change in the document that is not ours and touches the target stops the
rewrite; nothing more is applied and the user is told.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from dataclasses import dataclass, field

from lsprotocol import types

from rewriter.answer import NoCodeBlock
from rewriter.edits.checks.integrity import Status
from rewriter.edits.hunks import Hunk
from rewriter.edits.pipeline import grammar_of
from rewriter.edits.session import Delta, EditSession, Finished
from rewriter.edits.target import Target
from rewriter.engine import Engine, Turn
from rewriter.prompt import SourceText
from rewriter.results import RewriteError, ServiceError

from .document_sync import DocumentSync
from .edit_applier import EditApplier
from .host import RewriteHost
from .open_reviews import ProposalCollector, Reviews
from .options import InitializationOptions
from .proposal import Asked, Proposal
from .statuses import RewriteStatus
from .targets import document_context, document_target

log = logging.getLogger(__name__)

REPORT_INTERVAL_S = 0.25
NO_CANDIDATES = ("this engine offers no other candidates: only the local model, decoding greedily, "
                 "decodes the branches where it hesitated")
_ids = itertools.count(1)


@dataclass
class _Failure:
    message: str


_DONE = object()


@dataclass
class Outcome:
    status: RewriteStatus
    message: str
    edits: int = 0
    stats: dict = field(default_factory=dict)
    refused_text: str | None = None  # the target's text the integrity check refused
    proposal: str | None = None  # with review on: the proposal's id ("proposed": its hunks are `edits`)

    def as_dict(self) -> dict:
        refused = {"refused_text": self.refused_text} if self.refused_text is not None else {}
        proposed = {"proposal": self.proposal, "hunks": self.edits} if self.proposal is not None else {}
        return {"status": self.status, "message": self.message, "edits": self.edits, "stats": self.stats,
                **refused, **proposed}


class RewriteProgress:
    """The rewrite's `$/progress`, cancellable from the editor, when the client shows progress."""

    def __init__(self, server: RewriteHost, job: EditorRewrite):
        self.server = server
        self.job = job
        self.token: str | None = None  # set while the progress is shown

    async def begin(self) -> None:
        if not self.server.supports_progress():
            return
        token = f"rewriter/{self.job.id}"
        self.server.progress_started(token, self.job)  # before asking: a cancel may come at once
        try:
            await self.server.work_done_progress.create_async(token)
        except Exception as error:
            log.info("no progress: %s", error)
            self.server.progress_ended(token)
            return
        self.token = token
        self.server.work_done_progress.begin(token, types.WorkDoneProgressBegin(
            title=f"Rewrite: {self.job.instruction}", cancellable=True, message="starting", percentage=0))

    def report(self, message: str, percentage: int | None = None) -> None:
        if self.token:
            self.server.work_done_progress.report(self.token, types.WorkDoneProgressReport(
                message=message, percentage=percentage, cancellable=True))

    def end(self, message: str) -> None:
        if self.token:
            self.server.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message))
            self.server.progress_ended(self.token)
            self.token = None  # nothing may report into an ended progress (a model still loading, say)


def rewrite_session(engine: Engine, target: Target, instruction: str, language: str,
                    options: InitializationOptions, context: str | None, **kwargs) -> EditSession:
    """The session of a rewrite of `target` in an open document (and what a prefill ahead of one
    computes the prompt of: lsp/prefill_ahead.py)."""
    return EditSession(engine, target, instruction, language, grammar=grammar_of(language, target.text),
                       max_new_tokens=options.max_new_tokens, context=context, branches=options.branches, **kwargs)


class EditorRewrite:
    """A rewrite the editor asked for: its target's session, run in a worker thread and streamed
    into the open document, or, given `reviews` and a `proposal`, into the proposal (then `base`,
    when given, is what the model rewrites instead of the document's lines: a refine's proposed
    text). `judged_instruction` is what the integrity check reads (a snippet merge's hint), and
    `snippet` what a snippet merge must keep.
    `other_than`: try another, a candidate other than these texts of the target."""

    def __init__(self, server: RewriteHost, uri: str, lines: range, instruction: str, stream: bool,
                 announce_end: bool = False, *, reviews: Reviews | None = None, proposal: Proposal | None = None,
                 base: Target | None = None, judged_instruction: str | None = None,
                 conversation: tuple[Turn, ...] = (), other_than: tuple[str, ...] | None = None,
                 snippet: str | None = None):
        self.id = next(_ids)
        self.other_than = other_than
        self.decided: str | None = None  # the target's text the answer gave, once decided
        self.conversation = conversation  # a refine: the proposal's turns so far
        self.turn: Turn | None = None  # this rewrite's own turn, once its session is made
        self.announce_end = announce_end  # nobody waits for the outcome: say every ending
        self.server = server
        self.uri = uri
        self.instruction = instruction
        self.cancelled = threading.Event()  # read by the worker thread
        self.stopped = asyncio.Event()  # the same, for the event loop
        self.queue: asyncio.Queue = asyncio.Queue()
        self.loop = asyncio.get_running_loop()
        document = server.workspace.get_text_document(uri)
        # The target in the document as it is now (LF line endings); the whole document goes
        # along as context when it is small enough.
        self.target = base or document_target(document.source, lines)
        self.judged_instruction = judged_instruction
        self.snippet = snippet
        self.language = server.language_of(document)
        self.context = document_context(document.source, lines, len(document.lines), server.options.context_chars)
        self.region_text = "".join(document.lines[lines.start:lines.stop])
        source = SourceText.from_text(self.region_text)  # its line endings
        self.sync = DocumentSync(document.source, lines, on_conflict=self.cancel)
        self.applier: EditApplier | ProposalCollector
        if reviews is not None and proposal is not None:
            self.applier = ProposalCollector(reviews, proposal, self.sync, source, self.target, refine=base is not None)
        else:
            self.applier = EditApplier(server, uri, instruction, stream, self.sync, source,
                                       wait=self._wait_unless_stopped, stopped=self.cancelled.is_set)
        self.progress = RewriteProgress(server, self)

    # --- the user's side -------------------------------------------------------------------

    def cancel(self) -> None:
        self.cancelled.set()
        self.loop.call_soon_threadsafe(self.stopped.set)
        self.loop.call_soon_threadsafe(self.queue.put_nowait, _DONE)

    def stop(self, reason: str) -> None:
        """Stop with a conflict: `reason` says why (the document was closed, say)."""
        self.sync.stop(reason)

    def document_changed(self, text: str) -> None:
        self.sync.document_changed(text)

    # --- the work ----------------------------------------------------------------------------

    async def run(self) -> Outcome:
        await self.progress.begin()
        try:
            outcome = await self._run()
        except Exception as error:  # never let a rewrite take the server down
            log.exception("rewrite %s failed", self.id)
            outcome = Outcome(RewriteStatus.ERROR, f"rewrite failed: {error}")
        outcome.edits = self.applier.edits
        if isinstance(self.applier, ProposalCollector):
            outcome = self._proposed(outcome, self.applier)
        self.progress.end(outcome.message)
        server = self.server
        if outcome.refused_text is not None and server.supports_message_actions():
            # the command answers now; the user decides later (a cut answer comes without a text)
            self.applier.offer(outcome.message, outcome.refused_text)
        elif outcome.status not in (RewriteStatus.DONE, RewriteStatus.UNCHANGED, RewriteStatus.CANCELLED,
                                    RewriteStatus.PROPOSED):
            server.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Warning if outcome.status != RewriteStatus.ERROR else types.MessageType.Error,
                message=f"rewriter: {outcome.message}"))
        elif self.announce_end:
            server.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Info, message=f"rewriter: {outcome.message}"))
        return outcome

    async def _run(self) -> Outcome:
        server = self.server
        # Loading the model, or waiting for another rewrite to finish, must not delay a cancel.
        ready, engine = await self._unless_stopped(server.get_engine(self.progress.report), cancel=False)
        if not ready:
            return self._stopped()
        lock = server.decode_lock if not engine.concurrent else None
        if lock is not None:
            server.prefill_ahead.preempt()  # work done ahead gives way within a fraction of a pass
            server.next_edits.preempt()  # as does a suggestion in flight, within a pass
            preempted = server.prefill_ahead.running or server.next_edits.running
            if lock.locked() and not preempted:
                self.progress.report("waiting for another rewrite to finish")
            asked = time.perf_counter()
            acquired, _ = await self._unless_stopped(lock.acquire(), cancel=True)
            if not acquired:
                return self._stopped()
            if preempted:
                waited_ms = 1000 * (time.perf_counter() - asked)
                log.info("rewrite %s: the prefill ahead gave way in %.0f ms", self.id, waited_ms)
        try:
            if self.cancelled.is_set():
                return self._stopped()
            session = rewrite_session(engine, self.target, self.instruction, self.language, server.options,
                                      self.context, judged_instruction=self.judged_instruction,
                                      conversation=self.conversation, snippet=self.snippet)
            self.turn = session.turn()
            if self.other_than is not None and not session.offers_candidates():
                return Outcome(RewriteStatus.REFUSED, NO_CANDIDATES)
            worker = threading.Thread(target=self._work, name=f"rewrite-{self.id}", daemon=True, args=(session,))
            worker.start()
            try:
                return await self._consume()
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

    async def _wait_unless_stopped(self, awaitable) -> None:
        await self._unless_stopped(awaitable, cancel=True)

    def _work(self, session: EditSession) -> None:
        put = lambda item: self.loop.call_soon_threadsafe(self.queue.put_nowait, item)  # noqa: E731
        # No context (window 0) unless the document goes along whole (self.context).
        events = session.run(context_window=0, stopped=self.cancelled.is_set, other_than=self.other_than)
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

    async def _consume(self) -> Outcome:
        held: list[Hunk] = []  # hunks not yet sent (all of them when the client takes one edit only)
        answered = 0  # characters of the answer so far
        last_report = 0.0
        expected_chars = len(self.target.code) + 16
        while True:
            event = await self.queue.get()
            if self.sync.conflict:
                return self._conflict()
            if event is _DONE:
                return self._stopped()
            if isinstance(event, _Failure):
                return Outcome(RewriteStatus.ERROR, event.message)
            if isinstance(event, Delta):
                answered += len(event.text)
                now = time.monotonic()
                if now - last_report >= REPORT_INTERVAL_S:
                    last_report = now
                    self.progress.report(stats_message(event.stats), min(99, 100 * answered // expected_chars))
                held.extend(event.hunks)
                if self.applier.stream_edits and held:
                    await self.applier.apply(held)
                    held = []
                continue
            assert isinstance(event, Finished)
            return await self._conclude(event, held)

    async def _conclude(self, finished: Finished, held: list[Hunk]) -> Outcome:
        stats, verdict = finished.result.stats, finished.decision
        result_stats = stats.as_dict()
        if finished.restart:
            # The streamed edits showed an answer that is not what may be applied: put the
            # target back as it was, then apply the stripped answer in one edit (or nothing).
            if self.applier.edits:
                await self.applier.restore(self.applier.source.code)
            held = list(finished.hunks)
        else:
            held.extend(finished.hunks)
        if held:
            await self.applier.apply(held)
        if verdict.refused and not self.sync.conflict:
            # A cut answer is not offered: nothing applies half an answer.
            return Outcome(RewriteStatus.REFUSED, f"not applied: {verdict.reason}", stats=result_stats,
                           refused_text=verdict.refused_text if verdict.may_force else None)
        if self.sync.conflict:
            return self._conflict()
        self.decided = verdict.text
        edits = self.applier.edits
        if self.other_than is not None and not edits:
            return Outcome(RewriteStatus.UNCHANGED, f"no other candidate passed the checks ({finished.candidates} "
                           "decoded); the proposal stays as it was", stats=result_stats)
        status = RewriteStatus.DONE if edits else RewriteStatus.UNCHANGED
        summary = stats_message(stats) + (f"; {verdict.reason}" if verdict.status == Status.STRIPPED else "")
        if self.other_than is not None:
            found = f"sampled ({finished.candidates} decoded)" if finished.sampled else f"branch {finished.branch}"
            summary += f"; {found}"
        elif finished.after_refusals:
            summary += f"; refused twice, branch {finished.branch} of the first answer passed every check"
        return Outcome(status, ("rewrote" if edits else "no changes") + f": {summary}", stats=result_stats)

    def _proposed(self, outcome: Outcome, collector: ProposalCollector) -> Outcome:
        """The outcome with review on: the proposal's hunks are under review, nothing was applied."""
        hunks = collector.conclude(outcome.status, outcome.message, outcome.stats)
        if self.other_than is not None and outcome.status != RewriteStatus.DONE:
            outcome.edits = 0  # no other candidate: the proposal stays as it was
            return outcome
        if outcome.status not in (RewriteStatus.DONE, RewriteStatus.UNCHANGED) or not hunks:
            if outcome.status == RewriteStatus.DONE:  # nothing left to review (a new rewrite superseded it)
                return Outcome(RewriteStatus.UNCHANGED, "no changes to review", stats=outcome.stats)
            outcome.edits = 0
            return outcome
        if self.turn is not None:  # a refine of this proposal goes on from this turn
            collector.proposal.conversation = (*self.conversation, self.turn)
        if self.decided is not None:
            shown = (*(self.other_than or ()), self.decided)
            collector.proposal.asked = Asked(self.target, self.instruction, self.judged_instruction,
                                             self.conversation, self.region_text, shown, self.snippet)
        message = f"proposed {hunks} change(s) for review: " + outcome.message.partition(": ")[2]
        return Outcome(RewriteStatus.PROPOSED, message, hunks, outcome.stats, proposal=collector.proposal.id)

    def _conflict(self) -> Outcome:
        return Outcome(RewriteStatus.CONFLICT, f"stopped: {self.sync.conflict}; nothing more was applied there")

    def _stopped(self) -> Outcome:
        if self.sync.conflict:
            return self._conflict()
        edits = self.applier.edits if isinstance(self.applier, EditApplier) else 0  # a proposal applies none
        applied = f"; {edits} edit(s) already applied stay" if edits else ""
        return Outcome(RewriteStatus.CANCELLED, f"cancelled{applied}")


def stats_message(stats) -> str:
    return (f"{stats.output_tokens} tokens, {stats.tokens_per_s:.1f} tok/s, prediction "
            f"{stats.accepted_prediction_tokens} accepted / {stats.rejected_prediction_tokens} rejected")
