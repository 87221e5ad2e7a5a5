"""Where a rewrite's lines are in the open document, while the user types and our edits land.

The document as we believe it is, the edit in flight and the version it was made for: every
didChange is judged against them. A change outside the target's lines moves them along; a
change that touches them is a conflict (the rewrite stops, nothing more is applied there).
"""
from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

from rewriter.edits.hunks import Hunk
from rewriter.edits.target import touches
from rewriter.next_edit.history import changed_stretch

LINE_BREAK = re.compile("\r\n|\r|\n")  # LSP's line ends: a form feed or U+2028 is text (lsp/documents.py)


def document_lines(text: str) -> list[str]:
    """The lines of `text` as LSP numbers them, each with its line break (an empty last line left out)."""
    lines, start = [], 0
    for match in LINE_BREAK.finditer(text):
        lines.append(text[start:match.end()])
        start = match.end()
    if start < len(text):
        lines.append(text[start:])
    return lines


def changed_lines(before: list[str], after: list[str]) -> tuple[int, int, int]:
    """The lines [start, end) of `before` that differ from `after`, and the change in line count."""
    start, end, _ = changed_stretch(before, after)
    return start, end, len(after) - len(before)


class DocumentSync:
    """The target's lines in the document now, and our edits' way into it."""

    def __init__(self, text: str, lines: range, on_conflict: Callable[[], None]):
        self.expected = text  # the document as we believe it is
        self.pending: str | None = None  # ... and as it will be once our edit in flight lands
        self.sent_version: int | None = None  # the document version our edit in flight was made for
        self.answered = False  # the client has accepted our edit in flight
        self.synced = asyncio.Event()  # the client's didChange has shown our edit in flight
        self.start = lines.start  # the target's first line in the current document
        self.original_length = len(lines)
        self.delta = 0  # lines our applied hunks added to the target
        self.conflict: str | None = None
        self._on_conflict = on_conflict

    def stop(self, reason: str) -> None:
        """Nothing more may be applied: `reason` says why (the user's typing, a refused edit)."""
        self.conflict = reason
        self._on_conflict()

    def lines_now(self) -> range:
        return range(self.start, self.start + self.original_length + self.delta)

    def place(self, hunk: Hunk) -> range:
        """A hunk (in the target's original numbering, after the hunks already applied) in the document now."""
        return range(self.start + hunk.start + self.delta, self.start + hunk.end + self.delta)

    def document_changed(self, text: str) -> None:
        """Called after every didChange of the document (already applied by pygls)."""
        if self.pending is not None:
            if text == self.pending:
                self.expected, self.pending = text, None
                self.synced.set()
            elif self.answered:
                # The client took our edit and reports more than it (the user typed too): judge
                # the rest against our edit, by content, however late the report comes.
                pending, self.pending = self.pending, None
                self.judge(pending, text)
                self.synced.set()
            return  # before the answer, anything else is judged once the client has answered
        self.judge(self.expected, text)

    def judge(self, base: str, text: str) -> None:
        """Accept a change of `base` into `text` outside the target's lines; a change inside is a conflict."""
        if text == base:
            return
        start, end, growth = changed_lines(document_lines(base), document_lines(text))
        if touches(self.lines_now(), start, end) or self.conflict:
            self.stop(f"lines {start + 1}-{max(end, start + 1)} were edited while the rewrite ran")
            return
        if end <= self.start:
            self.start += growth
        self.expected = text

    def sending(self, after: str, version: int | None) -> None:
        """Our edit, which makes the document `after`, goes to the client for `version`."""
        self.pending = after
        self.sent_version, self.answered = version, False
        self.synced.clear()

    def failed(self) -> None:
        """The client did not take our edit in flight."""
        self.pending = None

    def accepted(self, growth: int) -> None:
        """The client took our edit in flight, which added `growth` lines to the target."""
        self.delta += growth
        self.answered = True

    def restored(self) -> None:
        """The target is back to its original lines."""
        self.delta = 0

    def must_wait(self, source: str, version: int | None) -> bool:
        """After the client took our edit: whether its didChange is still to come (no timer: a slow
        client is not a conflict). Otherwise judge what the document (`source`) shows now."""
        if self.pending is None:
            return False
        if source == self.pending or version != self.sent_version:
            self.document_changed(source)  # reported already, maybe with more than our edit
            return False
        return True
