"""What to rewrite: one type for every front end, and the line conversions, written once.

The words (docs/architecture.md has the glossary):
- span: character offsets [start, end) into the file's text, as Python strings count them;
- lines: 0-based line numbers, end exclusive, as a `range` (lines are counted at "\\n");
- a line range (`--lines 34-40`, "lines 3-10" in messages) is the user's notation: 1-based, last
  line included; it is converted here on the way in and out, nowhere else.
Text given here has LF line endings: front ends with CRLF documents convert before they build a
target. Imports nothing heavy: the language server and the service build targets without torch.
"""
from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field

from .node_kinds import ScopeError


@dataclass(frozen=True)
class Target:
    """text[start:end], the span to rewrite, on `lines` of the file `text`.

    `kind` and `name` say what the span is ("function", "area"; "lines" for a plain selection),
    for messages and reports. Build one with `of_span` or `of_lines`: they keep span and lines
    consistent."""

    text: str = field(repr=False)
    start: int
    end: int
    lines: range
    kind: str = "lines"
    name: str = ""

    @classmethod
    def of_span(cls, text: str, start: int, end: int, kind: str = "lines", name: str = "") -> Target:
        """The target text[start:end], on the lines it touches (an empty span: its own line)."""
        first = text.count("\n", 0, start)
        last = first + text.count("\n", start, max(start, end - 1))
        return cls(text, start, end, range(first, last + 1), kind, name)

    @classmethod
    def of_lines(cls, text: str, lines: range) -> Target:
        """Whole lines of `text`; a range running past the last line stops there."""
        total = line_count(text)
        if lines.step != 1 or lines.start < 0 or lines.stop <= lines.start:
            raise ScopeError(f"bad lines {lines}")
        if lines.start >= max(total, 1):
            raise ScopeError(f"line {lines.start + 1} is past the end of the file ({total} lines)")
        starts = line_starts(text)
        stop = min(lines.stop, max(total, 1))
        end = starts[stop] if stop < len(starts) else len(text)
        return cls(text, starts[lines.start], end, range(lines.start, stop))

    @classmethod
    def whole(cls, text: str) -> Target:
        return cls.of_span(text, 0, len(text), "file")

    @property
    def code(self) -> str:
        """The text of the span."""
        return self.text[self.start:self.end]

    def replaced_by(self, new: str) -> str:
        """The file's text with the span's replaced by `new`."""
        return self.text[:self.start] + new + self.text[self.end:]

    @property
    def shown_lines(self) -> tuple[int, int]:
        """The lines as people number them: 1-based, the last one included."""
        return self.lines.start + 1, self.lines.stop

    def label(self) -> str:
        first, last = self.shown_lines
        where = f"lines {first}-{last}"
        return f"{self.kind} {self.name} ({where})" if self.name else f"{self.kind} ({where})"


def line_starts(text: str) -> list[int]:
    """The offset each line starts at; after a final newline, one more (the empty last line)."""
    return [0] + [match.end() for match in re.finditer("\n", text)]


def line_count(text: str) -> int:
    """Lines in `text`: a final newline ends the last line, it does not start another."""
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def line_of(text: str, offset: int) -> int:
    """The 0-based line that the character at `offset` is on."""
    return bisect_right(line_starts(text), offset) - 1


def touches(lines: range, start: int, end: int) -> bool:
    """Whether a change of lines [start, end) touches `lines` (an insertion at either edge counts)."""
    return start <= lines.stop and end >= lines.start


def numbered_lines(first: int, last: int) -> range:
    """Lines `first` to `last` as people number them (1-based, `last` included), as lines."""
    if first < 1 or last < first:
        raise ScopeError(f"bad line range {first}-{last}")
    return range(first - 1, last)


def parse_line_range(value: str) -> tuple[int, int]:
    """The user's `FIRST-LAST` (or `LINE`): 1-based, LAST included (numbered_lines converts it)."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:[-:]\s*(\d+)\s*)?", value)
    if not match:
        raise ScopeError(f"--lines takes FIRST-LAST (like 10-40), not {value!r}")
    first = int(match.group(1))
    last = int(match.group(2) or first)
    if first < 1 or last < first:
        raise ScopeError(f"--lines {value}: the range must start at 1 or later and not run backwards")
    return first, last
