"""The commands on proposals under review (accept or reject one hunk or all, refine, try another) and
`rewriter.applySnippet`, which proposes a merged snippet (or, review off, applies it), registered
on the language server by lsp/server.py. The protocol is in docs/editors.md."""
from __future__ import annotations

from typing import Protocol

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from rewriter.edits.hunks import HunkStream
from rewriter.edits.snippets.merge import Merged, ToModel, merge_snippet
from rewriter.engine import instruction_is_empty
from rewriter.prompt import SourceText, merge_instruction

from .arguments import argument, invalid
from .document_sync import document_lines
from .edit_applier import line_range, workspace_edit
from .host import RewriteHost
from .open_documents import is_open
from .open_reviews import Reviews, answer
from .proposal import Proposal
from .statuses import ReviewAnswer, RewriteStatus

ACCEPT_HUNK, REJECT_HUNK = "rewriter.acceptHunk", "rewriter.rejectHunk"
ACCEPT_ALL, REJECT_ALL = "rewriter.acceptAll", "rewriter.rejectAll"
REFINE, APPLY_SNIPPET = "rewriter.refine", "rewriter.applySnippet"
TRY_ANOTHER = "rewriter.tryAnother"
SNIPPET_LABEL = "apply the snippet"


class RewriterServer(RewriteHost, Protocol):
    """The language server (lsp/server.py) as these commands see it."""

    reviews: Reviews
    jobs: dict  # the rewrites running, by id

    async def start_rewrite(self, uri: str, lines: range, instruction: str, wait: bool = False, *,
                            refine: Proposal | None = None, another: Proposal | None = None,
                            judged_instruction: str | None = None, snippet: str | None = None) -> dict: ...


def register_proposal_commands(server: LanguageServer) -> None:
    # The handlers' `ls` goes unannotated: pygls reads handlers' type hints at run time.
    @server.command(ACCEPT_HUNK)
    async def accept_hunk(ls, *args):
        """{proposal, hunk}: apply one hunk (a versioned edit); {status, message, remaining}."""
        return await ls.reviews.accept(argument(args, "proposal", str), argument(args, "hunk", str))

    @server.command(REJECT_HUNK)
    async def reject_hunk(ls, *args):
        return await ls.reviews.reject(argument(args, "proposal", str), argument(args, "hunk", str))

    @server.command(ACCEPT_ALL)
    async def accept_all(ls, *args):
        return await ls.reviews.accept(argument(args, "proposal", str), None)

    @server.command(REJECT_ALL)
    async def reject_all(ls, *args):
        return await ls.reviews.reject(argument(args, "proposal", str), None)

    @server.command(REFINE)
    async def refine(ls, *args):
        """{proposal, instruction, wait?}: rewrite the proposal's text with a follow-up instruction,
        that text as the prediction; the answer is a rewrite's (status "proposed": the same id)."""
        proposal_id = argument(args, "proposal", str)
        instruction = argument(args, "instruction", str)
        wait = bool(argument(args, "wait", bool, required=False))
        proposal, refused = final_proposal(ls.reviews, proposal_id, "refine it once it is final")
        if proposal is None:
            return refused
        return await ls.start_rewrite(proposal.uri, proposal.region, instruction, wait, refine=proposal)

    @server.command(TRY_ANOTHER)
    async def try_another(ls, *args):
        """{proposal, wait?}: ask the request that made the proposal again for a candidate it has not
        shown (the engine's branches); the answer is a rewrite's (status "proposed": the same id)."""
        wait = bool(argument(args, "wait", bool, required=False))
        proposal, refused = final_proposal(ls.reviews, argument(args, "proposal", str), "try another once it is final")
        if proposal is None:
            return refused
        asked, why_not = proposal.asked, proposal.why_not_asked_again()
        if asked is None or why_not is not None:
            return answer(ReviewAnswer.STALE, f"no other candidate for this proposal: {why_not}", proposal)
        return await ls.start_rewrite(proposal.uri, proposal.region, asked.instruction, wait, another=proposal,
                                      judged_instruction=asked.judged_instruction, snippet=asked.snippet)

    @server.command(APPLY_SNIPPET)
    async def apply_snippet(ls, *args):
        """{uri, snippet, instruction?, wait?}: merge a chat model's snippet into the document; the
        deterministic merge first, the model only where it is ambiguous (as `rewriter apply --snippet`)."""
        return await merge_into_document(ls, argument(args, "uri", str), argument(args, "snippet", str),
                                         argument(args, "instruction", str, required=False) or "",
                                         bool(argument(args, "wait", bool, required=False)))


def final_proposal(reviews: Reviews, proposal_id: str, doing: str) -> tuple[Proposal | None, dict]:
    """The proposal under review, final; else None and the answer that says why not."""
    proposal = reviews.find(proposal_id)
    if proposal is None:
        return None, answer(ReviewAnswer.UNKNOWN, f"no proposal {proposal_id} is under review")
    if proposal.id in reviews.writing:
        return None, answer(ReviewAnswer.STALE, f"the proposal is still being written; {doing}",
                            proposal)
    return proposal, {}


async def merge_into_document(ls: RewriterServer, uri: str, snippet: str, hint: str, wait: bool) -> dict:
    if not is_open(ls.workspace, uri):
        raise invalid(f"{uri} is not open in the editor")
    if instruction_is_empty(snippet):
        raise invalid("the snippet is empty")
    if any(job.uri == uri for job in ls.jobs.values()):
        message = "a rewrite is already running in this document; cancel it first (rewriter.cancel)"
        ls.show(message, types.MessageType.Warning)
        return {"status": RewriteStatus.BUSY, "message": message, "edits": 0, "stats": {}}
    document = ls.workspace.get_text_document(uri)
    language = ls.language_of(document)
    text = document.source.replace("\r\n", "\n")
    whole = range(0, max(len(document.lines), 1))
    outcome = merge_snippet(text, snippet, language, hint)
    if isinstance(outcome, ToModel):
        ls.show(f"{outcome.reason}; the model merges the snippet")
        return await ls.start_rewrite(uri, whole, merge_instruction(snippet, language, hint), wait,
                                      judged_instruction=hint, snippet=snippet)
    if not isinstance(outcome, Merged):
        message = f"the snippet was not merged: {outcome.reason}; the document is unchanged"
        ls.show(message, types.MessageType.Warning)
        return {"status": RewriteStatus.REFUSED, "message": message, "edits": 0, "stats": {}}
    if outcome.text == text:
        return {"status": RewriteStatus.UNCHANGED, "message": "the snippet changes nothing", "edits": 0, "stats": {}}
    new_text = SourceText.from_text(document.source).native(outcome.text)
    if ls.options.review:
        proposal = ls.reviews.open(uri, whole, SNIPPET_LABEL)
        proposal.propose_region(document_lines(new_text))
        ls.reviews.publish(proposal, final=True)
        return {"status": RewriteStatus.PROPOSED, "message": f"proposed {len(proposal.hunks)} change(s) for review, "
                f"merged by {outcome.path} without a model",
                "edits": len(proposal.hunks), "stats": {}, "proposal": proposal.id, "hunks": len(proposal.hunks)}
    # Review off: one versioned edit of the document the merge read, as a rewrite's final edit.
    lines = list(document.lines)
    edits = [types.TextEdit(range=line_range(lines, h.start, h.end, document.position_codec), new_text=h.text)
             for h in HunkStream(document.source).feed(new_text, final=True)]
    result = await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(
        edit=workspace_edit(ls, uri, document.version, edits), label=f"rewriter: {SNIPPET_LABEL}"))
    if not result.applied:
        message = f"the editor did not apply the merge ({result.failure_reason or 'no reason given'})"
        ls.show(message, types.MessageType.Warning)
        return {"status": RewriteStatus.CONFLICT, "message": message, "edits": 0, "stats": {}}
    return {"status": RewriteStatus.DONE, "message": f"merged the snippet by {outcome.path} without a model",
            "edits": 1, "stats": {}}
