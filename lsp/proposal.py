"""A rewrite under review: the proposal, its hunks in the document as it is now, and
how they move while the user types and accepted hunks land. No LSP, no server: testable alone.

A proposal's hunks are whole-line replacements in the document's own numbering and line endings.
The document as the proposal last saw it (`text`, `version`) is the base every change is judged
against: a change outside every hunk moves the hunks after it; a change inside one makes the
proposal stale (nothing more of it is applied). An accepted hunk is sent as an edit of the text
the proposal expects; until the client's didChange shows it, that edit is `pending`.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace

from rewriter.edits.target import Target
from rewriter.engine import Turn

from .document_sync import changed_lines, document_lines


@dataclass(frozen=True)
class ReviewHunk:
    """Replace the document's lines [start, end) (`old`, as they are now) with `new`."""

    id: str
    start: int
    end: int
    old: tuple[str, ...]
    new: tuple[str, ...]

    @property
    def growth(self) -> int:
        return len(self.new) - len(self.old)

    def collides(self, start: int, end: int) -> bool:
        """Whether a change of lines [start, end) touches this hunk's lines (or its insertion point)."""
        if start == end:  # lines inserted at `start`
            return self.start < start < self.end or self.start == self.end == start
        if self.start == self.end:  # this hunk inserts at its start
            return start < self.start < end
        return start < self.end and self.start < end


@dataclass
class Pending:
    """Accepted hunks sent to the client, and the document once the client has applied them."""

    hunk_ids: tuple[str, ...]
    after: str
    answered: bool = False  # the client said it applied the edit


def line_hunks(old: list[str], new: list[str], first: int = 0) -> list[tuple[int, int, tuple[str, ...]]]:
    """The line changes that take `old` to `new`, as (start, end, new lines), `first` added to the lines."""
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    return [(first + i1, first + i2, tuple(new[j1:j2]))
            for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


@dataclass(frozen=True)
class Asked:
    """The request that made a proposal's text, as "try another" asks it again."""

    target: Target  # what the model rewrote: the document's lines, or a refine's proposed text
    instruction: str
    judged_instruction: str | None
    conversation: tuple[Turn, ...]  # the turns before it
    region_text: str  # the region's lines in the document then: edited since, there is no asking again
    shown: tuple[str, ...]  # the target's texts the candidates shown so far gave
    snippet: str | None = None  # a snippet merge's snippet, which the merge must keep


@dataclass
class Proposal:
    """The hunks of one rewrite of `uri` still under review, over the lines `region` of the document."""

    id: str
    uri: str
    instruction: str
    text: str  # the document as the proposal last saw it
    version: int | None
    region: range  # the lines the rewrite covers, where they are now
    hunks: list[ReviewHunk] = field(default_factory=list)
    pending: Pending | None = None
    accepted: int = 0  # hunks the user accepted so far
    # The requests that made the proposed text, first to last: a refine asks the model as their next turn.
    conversation: tuple[Turn, ...] = ()
    asked: Asked | None = None  # None: not the model's answer (a merged snippet, a refused answer applied anyway)
    _ids: int = 0

    # --- building -------------------------------------------------------------------------

    def propose(self, changes: list[tuple[int, int, tuple[str, ...]]]) -> None:
        """The hunks under review become `changes` (start, end, new lines) in the document as it is;
        a hunk identical to one already under review keeps its id."""
        lines = document_lines(self.text)
        known = {(h.start, h.end, h.new): h.id for h in self.hunks}
        hunks = []
        for start, end, new in changes:
            if not 0 <= start <= end <= len(lines):
                raise ValueError(f"hunk {start}-{end} is outside the document ({len(lines)} lines)")
            hunk_id = known.get((start, end, new))
            if hunk_id is None:
                self._ids += 1
                hunk_id = str(self._ids)
            hunks.append(ReviewHunk(hunk_id, start, end, tuple(lines[start:end]), new))
        self.hunks = hunks

    def propose_region(self, new_region: list[str]) -> None:
        """The region's lines should read `new_region`: its hunks are the difference."""
        lines = document_lines(self.text)
        self.propose(line_hunks(lines[self.region.start:self.region.stop], new_region, self.region.start))

    def proposed_text(self) -> str:
        """The document with every hunk under review applied."""
        lines = document_lines(self.text)
        for hunk in reversed(self.hunks):
            lines[hunk.start:hunk.end] = hunk.new
        return "".join(lines)

    def proposed_region(self) -> range:
        """The region's lines in `proposed_text`."""
        return range(self.region.start, self.region.stop + sum(h.growth for h in self.hunks))

    def region_text(self) -> str:
        """The region's lines in the document as the proposal last saw it."""
        return "".join(document_lines(self.text)[self.region.start:self.region.stop])

    def why_not_asked_again(self) -> str | None:
        """Why try another may not ask the request that made the proposal again; None: it may."""
        if self.asked is None:
            return "it is not the model's answer (a merged snippet, or a refused answer applied anyway)"
        if self.accepted or self.pending is not None:
            return "a change of it was accepted already"
        if self.region_text() != self.asked.region_text:
            return "its lines were edited since it was made"
        return None

    def hunk(self, hunk_id: str) -> ReviewHunk | None:
        return next((h for h in self.hunks if h.id == hunk_id), None)

    # --- the user's decisions ------------------------------------------------------------

    def reject(self, hunk_ids: list[str]) -> None:
        self.hunks = [h for h in self.hunks if h.id not in hunk_ids]

    def placed(self) -> bool:
        """Whether every hunk's old lines are still where it says (the last guard before an edit)."""
        lines = document_lines(self.text)
        return all(tuple(lines[h.start:h.end]) == h.old for h in self.hunks)

    def accept(self, hunk_ids: list[str]) -> str:
        """The document once the hunks are applied: send it, then `landed` when the client shows it."""
        lines = document_lines(self.text)
        for hunk in reversed(self.hunks):
            if hunk.id in hunk_ids:
                lines[hunk.start:hunk.end] = hunk.new
        self.pending = Pending(tuple(hunk_ids), "".join(lines))
        return self.pending.after

    def answered(self, applied: bool) -> None:
        """The client's answer to the accepted hunks' edit."""
        if self.pending is None:
            return  # its didChange came first and landed it
        if applied:
            self.pending.answered = True
        else:
            self.pending = None

    def document_changed(self, text: str, version: int | None) -> str | None:
        """Judge a didChange: None when every hunk still has its place (moved along), else why not."""
        pending = self.pending
        if pending is not None and (text == pending.after or pending.answered):
            self._landed(pending)
        stale = self._judge(text)
        self.version = version
        return stale

    def _landed(self, pending: Pending) -> None:
        shift = 0
        kept = []
        for hunk in self.hunks:
            if hunk.id in pending.hunk_ids:
                shift += hunk.growth
                self.accepted += 1
            else:
                kept.append(replace(hunk, start=hunk.start + shift, end=hunk.end + shift))
        self.hunks = kept
        self.region = range(self.region.start, self.region.stop + shift)
        self.text, self.pending = pending.after, None

    def _judge(self, text: str) -> str | None:
        if text == self.text:
            return None
        start, end, growth = changed_lines(document_lines(self.text), document_lines(text))
        self.text = text
        for hunk in self.hunks:
            if hunk.collides(start, end):
                return (f"lines {start + 1}-{max(end, start + 1)} were edited where a change was under review; "
                        "the review ended and nothing more of it was applied")
        # Not colliding, a hunk lies wholly before the change or wholly after it (then it moves).
        self.hunks = [h if h.end <= start else replace(h, start=h.start + growth, end=h.end + growth)
                      for h in self.hunks]
        region = self.region
        if end <= region.start:
            self.region = range(region.start + growth, region.stop + growth)
        elif start < region.stop:
            self.region = range(min(region.start, start), max(region.stop, end) + growth)
        if not self.placed():  # a repeated line can fool the diff: never guess
            return "the document changed around the changes under review; the review ended"
        return None
