"""The lines around the cursor a next-edit model may rewrite: the window, which is also its
prediction (the answer when it changes nothing).

Whole lines, clipped to the document; where the cursor is near either end, the lines the window
cannot take on that side go to the other, so the window keeps its size in any document that has
the lines. Fewer lines above the cursor than below: the next edit is more often further on (the
next use of a renamed name, the next argument to change) than behind.
"""
from __future__ import annotations

LINES_ABOVE = 8  # the window's lines above the cursor's line
LINES_BELOW = 11  # ... and below it: 20 lines in all, the cursor's own included


def line_count(text: str) -> int:
    """Lines of `text` as an editor numbers them: after a final newline comes one more, empty."""
    return text.count("\n") + 1


def choose_window(text: str, cursor_line: int, above: int = LINES_ABOVE, below: int = LINES_BELOW) -> tuple[int, int]:
    """Lines [start, end) around `cursor_line` (0-based), clipped to the document."""
    count = line_count(text)
    if not 0 <= cursor_line < count:
        raise ValueError(f"the cursor's line {cursor_line} is outside the document's {count} lines")
    start = cursor_line - above
    end = cursor_line + below + 1
    if start < 0:
        end, start = end - start, 0
    if end > count:
        start, end = max(0, start - (end - count)), count
    return start, end
