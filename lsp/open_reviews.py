"""The review on the server (the protocol is in docs/editors.md): the proposals under
review, one per document, their notifications, and the commands that accept or reject hunks.

A rewrite with review on never edits the document: its ProposalCollector takes the hunks the
EditorRewrite would have applied and shows them as `rewriter/proposal`s. An accepted hunk goes
to the client as one versioned `workspace/applyEdit` of the text the proposal expects, and the
command answers once the client's didChange shows it; the proposal (lsp/proposal.py) moves the
other hunks with it, and with the user's typing, or ends the review as stale.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable

from lsprotocol import types

from rewriter.edits.hunks import Hunk, apply_hunks
from rewriter.edits.target import Target
from rewriter.prompt import SourceText

from .document_sync import DocumentSync, document_lines
from .edit_applier import APPLY_ANYWAY, DISCARD, line_range, workspace_edit
from .host import RewriteHost
from .proposal import Proposal
from .statuses import ReviewAnswer, RewriteStatus

log = logging.getLogger(__name__)

PROPOSAL, PROPOSAL_ENDED = "rewriter/proposal", "rewriter/proposalEnded"
LANDING_TIMEOUT_S = 10.0  # how long an accept waits for the client's didChange of the applied hunk
_ids = itertools.count(1)


def answer(status: ReviewAnswer, message: str, proposal: Proposal | None = None) -> dict:
    return {"status": status, "message": message, "remaining": len(proposal.hunks) if proposal else 0}


class Reviews:
    """The proposals under review (one per document) and what the user decides about them."""

    def __init__(self, server: RewriteHost):
        self.server = server
        self.by_uri: dict[str, Proposal] = {}
        self.writing: set[str] = set()  # proposals whose rewrite or refine still runs
        self.locks: dict[str, asyncio.Lock] = {}  # one decision at a time per proposal
        self.landed: dict[str, asyncio.Event] = {}  # set when an accepted edit shows in the document

    # --- proposals ---------------------------------------------------------------------------

    def open(self, uri: str, lines: range, instruction: str) -> Proposal:
        """A new, empty proposal for `lines` of `uri`; one already under review there is superseded."""
        old = self.by_uri.get(uri)
        if old is not None:
            self.end(old, "superseded", "a new rewrite of this document replaced the review")
        document = self.server.workspace.get_text_document(uri)
        proposal = Proposal(str(next(_ids)), uri, instruction, document.source, document.version, lines)
        self.register(proposal)
        return proposal

    def register(self, proposal: Proposal) -> None:
        self.by_uri[proposal.uri] = proposal
        self.locks[proposal.id] = asyncio.Lock()

    def find(self, proposal_id: str) -> Proposal | None:
        return next((p for p in self.by_uri.values() if p.id == proposal_id), None)

    def current(self, proposal: Proposal) -> bool:
        return self.by_uri.get(proposal.uri) is proposal

    def publish(self, proposal: Proposal, final: bool, stats: dict | None = None) -> None:
        document = self.server.workspace.get_text_document(proposal.uri)
        lines = list(document.lines)
        codec = document.position_codec
        hunks = [{"id": h.id, "range": _range(line_range(lines, h.start, h.end, codec)),
                  "oldText": "".join(h.old), "newText": "".join(h.new)} for h in proposal.hunks]
        params: dict[str, object] = {"id": proposal.id, "uri": proposal.uri, "version": proposal.version,
                                     "final": final, "instruction": proposal.instruction, "hunks": hunks}
        if final:
            params["stats"] = stats or {}
        self.server.notify(PROPOSAL, params)

    def end(self, proposal: Proposal, reason: str, message: str) -> None:
        if not self.current(proposal):
            return
        del self.by_uri[proposal.uri]
        self.writing.discard(proposal.id)
        self.locks.pop(proposal.id, None)
        landed = self.landed.pop(proposal.id, None)
        if landed is not None:
            landed.set()  # an accept waiting for its edit answers now
        self.server.notify(PROPOSAL_ENDED, {"id": proposal.id, "uri": proposal.uri, "reason": reason,
                                            "message": message})
        if reason == "stale":
            self.server.show(message, types.MessageType.Warning)

    # --- the document ------------------------------------------------------------------------

    def document_changed(self, uri: str) -> None:
        proposal = self.by_uri.get(uri)
        if proposal is None:
            return
        document = self.server.workspace.get_text_document(uri)
        before = [(h.id, h.start, h.end) for h in proposal.hunks]
        had_pending = proposal.pending is not None
        stale = proposal.document_changed(document.source, document.version)
        if stale:
            self.end(proposal, "stale", stale)
        elif had_pending and proposal.pending is None and proposal.id in self.landed:
            self.landed[proposal.id].set()  # the accept that sent it tells the client
        elif before != [(h.id, h.start, h.end) for h in proposal.hunks] and proposal.id not in self.writing:
            self.publish(proposal, final=True)

    def closed(self, uri: str) -> None:
        proposal = self.by_uri.get(uri)
        if proposal is not None:
            self.end(proposal, "closed", "the document was closed")

    # --- the user's decisions ------------------------------------------------------------------

    def _decidable(self, proposal_id: str, hunk_id: str | None) -> tuple[Proposal | None, dict | None]:
        proposal = self.find(proposal_id)
        if proposal is None:
            return None, answer(ReviewAnswer.UNKNOWN, f"no proposal {proposal_id} is under review")
        if proposal.id in self.writing:
            return None, answer(ReviewAnswer.STALE, "the proposal is still being written; decide once it is final",
                                proposal)
        if hunk_id is not None and proposal.hunk(hunk_id) is None:
            return None, answer(ReviewAnswer.UNKNOWN, f"proposal {proposal_id} has no hunk {hunk_id} under review",
                                proposal)
        return proposal, None

    def _no_longer_under_review(self, proposal: Proposal, hunk_id: str | None) -> dict | None:
        """Checked again under the proposal's lock: a decision that raced this one may have ended it."""
        if not self.current(proposal) or (hunk_id is not None and proposal.hunk(hunk_id) is None):
            return answer(ReviewAnswer.UNKNOWN, "that change is no longer under review", proposal)
        return None

    async def _decide(self, proposal_id: str, hunk_id: str | None,
                      decide: Callable[[Proposal], Awaitable[dict]]) -> dict:
        """`decide` about a proposal still under review (and its hunk, if one is named), under its lock."""
        proposal, refused = self._decidable(proposal_id, hunk_id)
        if proposal is None:
            return refused or {}
        async with self.locks[proposal.id]:
            if (gone := self._no_longer_under_review(proposal, hunk_id)) is not None:
                return gone
            return await decide(proposal)

    async def reject(self, proposal_id: str, hunk_id: str | None) -> dict:
        async def reject(proposal: Proposal) -> dict:
            proposal.reject([h.id for h in proposal.hunks] if hunk_id is None else [hunk_id])
            return self._after_decision(proposal, "rejected")

        return await self._decide(proposal_id, hunk_id, reject)

    async def accept(self, proposal_id: str, hunk_id: str | None) -> dict:
        return await self._decide(proposal_id, hunk_id, lambda proposal: self._accept(proposal, hunk_id))

    async def _accept(self, proposal: Proposal, hunk_id: str | None) -> dict:
        document = self.server.workspace.get_text_document(proposal.uri)
        if (document.version != proposal.version or document.source != proposal.text
                or not proposal.placed()):
            return answer(ReviewAnswer.STALE, "the document changed since the proposal was shown; nothing was "
                          "applied", proposal)
        ids = [h.id for h in proposal.hunks] if hunk_id is None else [hunk_id]
        lines = list(document.lines)
        edits = [types.TextEdit(range=line_range(lines, h.start, h.end, document.position_codec),
                                new_text="".join(h.new)) for h in proposal.hunks if h.id in ids]
        proposal.accept(ids)
        landed = self.landed[proposal.id] = asyncio.Event()
        try:
            result = await self.server.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(
                edit=workspace_edit(self.server, proposal.uri, document.version, edits),
                label=f"rewriter: {proposal.instruction}"))
            applied, reason = result.applied, result.failure_reason
        except Exception as error:
            applied, reason = False, str(error)
        proposal.answered(applied)
        if not applied:
            self.landed.pop(proposal.id, None)
            return answer(ReviewAnswer.STALE, f"the editor did not apply the change "
                          f"({reason or 'no reason given'}); nothing was applied", proposal)
        if proposal.pending is not None:  # its didChange is still to come
            try:
                await asyncio.wait_for(landed.wait(), LANDING_TIMEOUT_S)
            except TimeoutError:
                self.end(proposal, "stale", "the editor did not report the accepted change; the review ended")
        self.landed.pop(proposal.id, None)
        if not self.current(proposal):
            return answer(ReviewAnswer.STALE, "the review ended while the change was applied", None)
        return self._after_decision(proposal, "accepted")

    def _after_decision(self, proposal: Proposal, reason: str) -> dict:
        if not proposal.hunks:
            done = f"{proposal.accepted} change(s) accepted" if proposal.accepted else "every change rejected"
            self.end(proposal, reason if reason == "rejected" and not proposal.accepted else "accepted", done)
        else:
            self.publish(proposal, final=True)
        return answer(ReviewAnswer.OK, f"{reason}; {len(proposal.hunks)} change(s) still under review", proposal)


def _range(rng: types.Range) -> dict:
    return {"start": {"line": rng.start.line, "character": rng.start.character},
            "end": {"line": rng.end.line, "character": rng.end.character}}


class ProposalCollector:
    """Takes a rewrite's hunks (as the EditApplier would apply them) into its proposal instead.

    `target` is what the model rewrites: the document's lines, or for a refine the proposal's
    text; its new text, diffed with the region's lines in the document now, makes the hunks."""

    stream_edits = True

    def __init__(self, reviews: Reviews, proposal: Proposal, sync: DocumentSync, source: SourceText,
                 target: Target, refine: bool):
        self.reviews = reviews
        self.proposal = proposal
        self.sync = sync
        self.source = source  # the region's own line endings
        self.target = target
        self.refine = refine  # a refine shows its hunks once, at the end: the old ones stay until then
        self.collected: list[Hunk] = []
        reviews.writing.add(proposal.id)

    @property
    def edits(self) -> int:
        """The rewrite's changes so far (none is applied: they are proposed)."""
        return len(self.collected)

    async def apply(self, hunks: list[Hunk]) -> None:
        if self.sync.conflict or not self.reviews.current(self.proposal):
            return
        self.collected.extend(hunks)
        if not self.refine:
            self._propose(self.target.code, self.collected)
            self.reviews.publish(self.proposal, final=False)

    async def restore(self, original: str) -> None:
        self.collected = []

    def _propose(self, code: str, hunks: list[Hunk]) -> None:
        new = self.source.native(apply_hunks(code, hunks))
        self.proposal.propose_region(document_lines(new))

    def conclude(self, status: RewriteStatus, message: str, stats: dict) -> int:
        """The rewrite ended with `status`: publish the final proposal, or end it; its hunk count."""
        reviews, proposal = self.reviews, self.proposal
        reviews.writing.discard(proposal.id)
        if not reviews.current(proposal):
            return 0
        if status == RewriteStatus.DONE:
            self._propose(self.target.code, self.collected)
        if status in (RewriteStatus.DONE, RewriteStatus.UNCHANGED) and proposal.hunks:
            reviews.publish(proposal, final=True, stats=stats)
            return len(proposal.hunks)
        if self.refine and proposal.hunks:  # the refine failed: the proposal stays as it was
            reviews.publish(proposal, final=True)
            return len(proposal.hunks)
        reason = {RewriteStatus.UNCHANGED: "rejected", RewriteStatus.CONFLICT: "stale"}.get(status, "error")
        reviews.end(proposal, reason, "no changes to review" if status == RewriteStatus.UNCHANGED else message)
        return 0

    def offer(self, message: str, refused_text: str) -> None:
        """A refused answer is offered: "Apply anyway" puts it under review, hunk by hunk."""
        asyncio.ensure_future(self._offer(message, refused_text))

    async def _offer(self, message: str, refused_text: str) -> None:
        try:
            choice = await self.reviews.server.window_show_message_request_async(types.ShowMessageRequestParams(
                type=types.MessageType.Warning, message=f"rewriter: {message}",
                actions=[types.MessageActionItem(APPLY_ANYWAY), types.MessageActionItem(DISCARD)]))
        except Exception as error:
            log.info("no answer to the refused-edit offer: %s", error)
            return
        proposal, reviews = self.proposal, self.reviews
        if choice is None or choice.title != APPLY_ANYWAY or self.sync.conflict:
            return
        document = reviews.server.workspace.get_text_document(proposal.uri)
        if document.source != proposal.text or proposal.uri in reviews.by_uri:
            reviews.server.show("the document changed meanwhile; the refused edit was not proposed",
                                types.MessageType.Warning)
            return
        reviews.register(proposal)
        proposal.propose_region(document_lines(self.source.native(refused_text)))
        self.reviews.publish(proposal, final=True)
