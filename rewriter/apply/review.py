"""`rewriter apply --interactive`: each hunk of a file's rewrite is shown and asked about, as
`git add -p` asks, and only the accepted hunks reach the file.

The answers come from standard input, one a line, so a script can give them. A hunk is one hunk
of the unified diff (changes closer than twice the context are one hunk); the accepted hunks
applied to the original give the text that batch.py's deliver writes, atomically, as --write
writes. A hunk left unanswered (standard input ended) is rejected: nothing is kept unasked.
"""
from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from ..edits.hunks import Hunk, apply_hunks
from .diffs import colorize, unified_diff

CONTEXT_LINES = 3  # as unified_diff shows them, so each hunk asked about is one hunk of the diff
HELP = """y - apply this hunk
n - do not apply this hunk
a - apply this hunk and every later hunk in this file
d - do not apply this hunk or any later hunk in this file
q - quit: do not apply this hunk or any later one, in this file or the next; the hunks
    already accepted are written
? - print this help
"""
ANSWERS = {"y": "y", "yes": "y", "n": "n", "no": "n", "a": "a", "all": "a", "d": "d", "q": "q", "quit": "q"}


@dataclass(frozen=True)
class ReviewedFile:
    """What the review of one file kept: the text to write and how many of its hunks were accepted."""

    text: str
    accepted: int
    hunks: int
    not_asked: str = ""  # why the file's hunks were not asked about (the review had stopped)

    @property
    def note(self) -> str:
        """For the file's status: empty when every hunk was accepted."""
        if self.not_asked:
            return f"not asked about ({self.not_asked}); left as it was"
        if self.accepted == self.hunks:
            return ""
        if not self.accepted:
            return f"no hunk accepted ({self.hunks} rejected); left as it was"
        return f"{self.accepted} of {self.hunks} hunks accepted"


class Review:
    """Asks about every hunk of every file in turn, reading the answers from `answers`.

    `stopped` says why no more hunks are asked about (q, or the answers ended); `ran_out` is set
    when hunks were left unanswered because the answers ended.
    """

    def __init__(self, answers: TextIO | None, out: TextIO, say: Callable[[str], None]):
        self.answers = answers
        self.out = out
        self.say = say
        self.stopped = ""
        self.ran_out = False
        self.answered = 0

    def cannot_ask(self) -> str:
        """Why no answer can come at all (checked before any model loads), or "" when one may."""
        if self.answers is None:
            return "--interactive reads its answers from standard input, and it is closed; nothing changed"
        if _is_terminal(self.answers):
            return ""
        try:
            found = os.fstat(self.answers.fileno())
        except (OSError, ValueError):  # not a file (a test's buffer): whether it has answers shows when read
            return ""
        if stat.S_ISCHR(found.st_mode) or (stat.S_ISREG(found.st_mode) and found.st_size == 0):
            return ("--interactive reads an answer for each hunk from standard input, which is not a terminal "
                    "and gives none (empty, or a device like /dev/null); nothing changed. Run it in a terminal "
                    "or give the answers on standard input, one a line (y, n, a, d or q)")
        return ""

    def decide(self, display: str, original: str, new: str) -> ReviewedFile:
        """Show each hunk of `original` -> `new` and ask about it; the original with the accepted hunks."""
        before, after = original.splitlines(keepends=True), new.splitlines(keepends=True)
        groups = list(difflib.SequenceMatcher(None, before, after).get_grouped_opcodes(CONTEXT_LINES))
        hunks = [_hunk(group, after) for group in groups]
        diff = unified_diff(original, new, display)
        header, shown = _split_hunks(diff)
        assert len(shown) == len(hunks)  # unified_diff groups the lines the same way
        if self.stopped:
            return ReviewedFile(original, 0, len(hunks), not_asked=self.stopped)
        self._show(header)
        accepted: list[Hunk] = []
        for number, hunk in enumerate(hunks, 1):
            self._show(shown[number - 1])
            answer = self._ask(f"({number}/{len(hunks)}) Apply this hunk to {display} [y,n,a,d,q,?]? ")
            if answer is None:
                self._ran_out(display, number, len(hunks))
                break
            if answer in ("y", "a"):
                accepted.append(hunk)
            if answer == "a":
                accepted += hunks[number:]
                break
            if answer == "d":
                break
            if answer == "q":
                self.stopped = "review quit (q)"
                break
        return ReviewedFile(apply_hunks(original, accepted), len(accepted), len(hunks))

    def _show(self, text: str) -> None:
        self.out.write(colorize(text) if self.out.isatty() else text)

    def _ask(self, prompt: str) -> str | None:
        """One of y, n, a, d, q; None when the answers ended. Anything else shows the help and asks again."""
        assert self.answers is not None  # cannot_ask refused a closed standard input
        while True:
            self.out.write(prompt)
            self.out.flush()
            line = self.answers.readline()
            if not _is_terminal(self.answers):  # a transcript that shows what was answered
                self.out.write(line if line.endswith("\n") else line + "\n")
            if not line:
                return None
            answer = ANSWERS.get(line.strip().lower())
            if answer is not None:
                self.answered += 1
                return answer
            self.out.write(HELP)

    def _ran_out(self, display: str, number: int, hunks: int) -> None:
        self.stopped, self.ran_out = "standard input ended", True
        if not self.answered:
            self.say("--interactive: standard input gave no answers, so no hunk was accepted and no file "
                     "changed; give one answer a line (y, n, a, d or q), or run it in a terminal")
        else:
            self.say(f"standard input ended before hunk {number}/{hunks} of {display} was answered: it and "
                     "every later hunk are rejected (the hunks accepted before are written)")


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except ValueError:  # closed
        return False


def _hunk(group: list[tuple[str, int, int, int, int]], after: list[str]) -> Hunk:
    """The change of one diff hunk, from its first changed line to its last (context left out)."""
    changes = [opcode for opcode in group if opcode[0] != "equal"]
    first, last = changes[0], changes[-1]
    return Hunk(first[1], last[2], tuple(after[first[3]:last[4]]))


def _split_hunks(diff: str) -> tuple[str, list[str]]:
    """A unified diff's file header, and its hunks, each from its `@@` line."""
    header, hunks = "", []
    for line in diff.splitlines(keepends=True):
        if line.startswith("@@"):
            hunks.append(line)
        elif hunks:
            hunks[-1] += line
        else:
            header += line
    return header, hunks
