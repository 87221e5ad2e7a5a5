"""The user's recent edits of one document, as a next-edit prompt shows them.

The history sees the document's whole text after every change (an editor's didChange, in
incremental or full sync alike: the text it leaves is what counts) and keeps events of whole
lines. A burst of typing in one place is one event: a change within MERGE_S of the last one that
touches the lines the last event wrote (or the lines next to them) extends that event, which
then runs from the text before the burst to the text now. Events the budget cannot hold go,
oldest first; so does an event that changed nothing in the end (typed, then undone).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from .base import RecentEdit

MERGE_S = 1.0  # a pause in typing longer than this ends a burst
NEAR_LINES = 1  # a change this many lines beside the burst's lines still belongs to it
BUDGET_CHARS = 1600  # the events' old and new lines together: about 400 tokens of the prompt


def changed_stretch(before: list[str], after: list[str]) -> tuple[int, int, int]:
    """The lines that differ between two versions: [start, end) of `before`, and the end of their
    replacement in `after` (the shared lines at both ends left out)."""
    prefix = 0
    limit = min(len(before), len(after))
    while prefix < limit and before[prefix] == after[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and before[-1 - suffix] == after[-1 - suffix]:
        suffix += 1
    return prefix, len(before) - suffix, len(after) - suffix


def _lines(text: str) -> list[str]:
    """Whole lines, each ending in a newline (a last line without one is given one)."""
    return [line if line.endswith("\n") else line + "\n" for line in text.splitlines(keepends=True)]


@dataclass
class _Burst:
    """The event being typed: the text before it began, and when and where it was last changed."""

    base: str
    last_change: float
    lines: tuple[int, int]  # the lines it wrote, [start, end), in the text now


class EditHistory:
    """The recent edits of one document (`path`), oldest first, within `budget_chars`."""

    def __init__(self, path: str, text: str, budget_chars: int = BUDGET_CHARS,
                 clock: Callable[[], float] = time.monotonic):
        self.path = path
        self.text = text  # the document as last seen
        self.budget_chars = budget_chars
        self.clock = clock
        self.done: list[RecentEdit] = []  # the events before the burst, oldest first
        self.burst: _Burst | None = None

    def changed(self, text: str) -> None:
        """The document is now `text`."""
        if text == self.text:
            return
        now = self.clock()
        before, after = _lines(self.text), _lines(text)
        start, end, new_end = changed_stretch(before, after)
        burst = self.burst
        if burst is not None and (now - burst.last_change > MERGE_S
                                  or start > burst.lines[1] + NEAR_LINES or end < burst.lines[0] - NEAR_LINES):
            self._close_burst()
            burst = None
        if burst is None:
            burst = self.burst = _Burst(self.text, now, (start, new_end))
        else:  # the burst's lines, moved by this change, and this change's own
            growth = new_end - end
            burst.lines = (min(burst.lines[0], start), max(burst.lines[1] + growth, new_end))
            burst.last_change = now
        self.text = text

    def events(self) -> tuple[RecentEdit, ...]:
        """The edits, oldest first: the newest that fit in the budget, the burst being typed included."""
        events = list(self.done)
        if self.burst is not None and (current := self._event(self.burst.base, self.text)) is not None:
            events.append(current)
        kept: list[RecentEdit] = []
        room = self.budget_chars
        for event in reversed(events):
            size = len(event.before) + len(event.after)
            if size > room:
                break
            kept.append(event)
            room -= size
        return tuple(reversed(kept))

    def _close_burst(self) -> None:
        assert self.burst is not None
        event = self._event(self.burst.base, self.text)
        if event is not None:
            self.done.append(event)
            while sum(len(e.before) + len(e.after) for e in self.done) > self.budget_chars:
                self.done.pop(0)
        self.burst = None

    def _event(self, base: str, text: str) -> RecentEdit | None:
        """The edit from `base` to `text` in whole lines; None when they hold the same lines."""
        before, after = _lines(base), _lines(text)
        start, end, new_end = changed_stretch(before, after)
        if start == end == new_end:
            return None
        return RecentEdit(self.path, start, "".join(before[start:end]), "".join(after[start:new_end]))
