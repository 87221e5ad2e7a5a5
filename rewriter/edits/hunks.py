"""Line-based diff hunks that settle while an answer streams in.

An editor applies a hunk as soon as it settles, so a hunk must never change afterwards: once
the output has rejoined the original for `SETTLE_LINES` equal lines after a change, the change
is emitted and the alignment up to there is fixed. Applying every hunk in order to the
original gives the final text exactly.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

SETTLE_LINES = 2


@dataclass(frozen=True)
class Hunk:
    """Replace the original's lines [start, end) (0-based, in the original's numbering) with `lines`."""

    start: int
    end: int
    lines: tuple[str, ...]  # each with its line ending, as in the new text

    @property
    def text(self) -> str:
        return "".join(self.lines)


def apply_hunks(original: str, hunks: list[Hunk]) -> str:
    """Apply hunks (in the original's numbering, in order) to the original text."""
    lines = original.splitlines(keepends=True)
    out: list[str] = []
    position = 0
    for hunk in hunks:
        if hunk.start < position or hunk.end > len(lines) or hunk.start > hunk.end:
            raise ValueError(f"hunk {hunk.start}-{hunk.end} is out of order or out of range")
        out.extend(lines[position:hunk.start])
        out.extend(hunk.lines)
        position = hunk.end
    out.extend(lines[position:])
    return "".join(out)


class HunkStream:
    """Feed the growing new text; get the hunks that have settled since the last call."""

    def __init__(self, original: str):
        self.original = original.splitlines(keepends=True)
        self.orig_done = 0  # original lines before this are fixed
        self.new_done = 0  # new-text lines before this are fixed

    def feed(self, new_text: str, final: bool = False) -> list[Hunk]:
        lines = new_text.splitlines(keepends=True)
        if not final and lines and not lines[-1].endswith(("\n", "\r")):
            lines.pop()  # an unfinished line may still change
        old_rest = self.original[self.orig_done:]
        new_rest = lines[self.new_done:]
        opcodes = difflib.SequenceMatcher(a=old_rest, b=new_rest, autojunk=False).get_opcodes()
        hunks: list[Hunk] = []
        pending: tuple[int, int, int, int] | None = None  # a change not yet followed by enough equal lines
        fixed_old = fixed_new = 0
        for tag, i1, i2, j1, j2 in opcodes:
            if tag != "equal":
                pending = (i1, i2, j1, j2) if pending is None else (pending[0], i2, pending[2], j2)
                continue
            if pending is None:
                fixed_old, fixed_new = i2, j2
            elif final or _substantial(old_rest[i1:i2]) >= SETTLE_LINES:
                hunks.append(self._hunk(pending, new_rest))
                pending = None
                fixed_old, fixed_new = i2, j2
            elif j2 == len(new_rest):
                break  # the change may go on: wait for more text
            else:
                pending = (pending[0], i2, pending[2], j2)  # a short equal run inside a larger change
        if final and pending:
            hunks.append(self._hunk(pending, new_rest))
            fixed_old, fixed_new = len(old_rest), len(new_rest)
        self.orig_done += fixed_old
        self.new_done += fixed_new
        return hunks

    def _hunk(self, span: tuple[int, int, int, int], new_rest: list[str]) -> Hunk:
        i1, i2, j1, j2 = span
        return Hunk(self.orig_done + i1, self.orig_done + i2, tuple(new_rest[j1:j2]))


def _substantial(lines: list[str]) -> int:
    """Lines with content: blank lines and lone brackets rejoin the original by chance."""
    return sum(1 for line in lines if len(line.strip()) > 1)
