"""A model's merge of a snippet must hold what the snippet says stays: every code line the snippet
shows, and every line of the original that the snippet leaves alone.

A small model asked to merge "only what changes" sometimes drops a line the snippet shows as
context (a closing `return None`), or rewrites code that a marker (`# ... existing code ...`)
stands for. Neither loses a whole definition, so the integrity check lets them through; this
check refuses them, naming the first missing lines.

Which original lines the snippet leaves alone is read from its anchors, found by patience
matching in the file's lines around the region: lines that occur once on each side, in their
common order, grown to the equal lines next to them, then the same between each two. Lines are
matched with their indentation (a line of one block does not anchor its copy in another) and
counted without it or runs of spaces. Between two anchors, or an anchor and an end, the snippet
shows either
- only markers (blank lines aside): the file's lines there stay, but where a hunk's blank
  context stands next to the marker, the lines between that anchor and the file's blank lines
  went (a removal at the end of a hunk);
- nothing: nothing there is required (between anchors a removal; at an end the snippet does not say);
- lines of its own (new code, with or without markers): they replace what stood there, so
  nothing there is required; the snippet's lines are. Where the snippet's lines do not pin
  their place (repeated around the region), nothing anchors and only its lines are required.

Holding the lines is not enough where their place is not pinned: a model that writes a hunk's
new lines into the wrong one of two alike loops keeps every line the snippet shows, yet loses a
line the snippet never pointed at. So a merge must also show each stretch of a snippet with
markers (its lines between two markers, blank ones inside it included) as the snippet does: as
one run of the merged file's lines, the stretches in the snippet's order. A blank line at a
stretch's edge counts only where it tells places apart: in those two loops, the blank line
before the second is all that tells it from the first. The reference merges of every marker
style in `rewriter bench --snippets` hold.
"""
from __future__ import annotations

from collections import Counter

from ..in_order import in_order
from ..markers import ELLIPSES, is_marker

SHOWN_MISSING = 3  # lines named in the reason


def normal(line: str) -> str:
    return " ".join(line.split())


def merge_omissions(text: str, start: int, end: int, snippet: str, merged: str) -> list[str]:
    """The code lines (normalized) that merging `snippet` into the file `text`'s characters
    [start, end) (whole lines: the region it goes in) should have kept and their new text `merged`
    does not hold (as many times as required); empty when nothing is missing. The snippet is
    placed in the file's lines around the region: its blank context and its markers at the ends
    may reach past it."""
    lines = text.splitlines(keepends=True)
    first = text.count("\n", 0, start)
    last = first + len(text[start:end].splitlines())
    shown = _shown_lines(snippet, lines)
    required = Counter(normal(line) for line in shown if line is not None)
    # Placed around the region only: a line the file repeats elsewhere (another test's setup)
    # still anchors here.
    margin = len(shown)
    window = max(0, first - margin)
    for index in _left_alone(lines[window:last + margin], shown):
        if first <= window + index < last:
            required[normal(lines[window + index])] += 1
    line_start = text.rfind("\n", 0, start) + 1
    line_end = end if end == len(text) or text[end - 1] == "\n" else _end_of_line(text, end)
    # the merge as whole lines: a region may start or end inside a line (a node in a long expression)
    have = Counter(normal(line) for line in (text[line_start:start] + merged + text[end:line_end]).splitlines())
    return [line for line, count in required.items() if line and have[line] < count]


def _shown_lines(snippet: str, file_lines: list[str]) -> list[str | None]:
    """The snippet's lines, None for each marker: a marker-like comment the file holds is code."""
    held = {normal(line) for line in file_lines}
    return [None if is_marker(line) and normal(line) not in held or line.strip() in ELLIPSES else line
            for line in snippet.splitlines()]


def unshown_stretch(text: str, merged_file: str, snippet: str) -> list[str]:
    """The first stretch of a snippet with markers (its lines between two markers, normalized;
    see the module's docstring) that `merged_file`, the file `text` with the merge in it, does
    not show as one run of lines after the stretches before it; empty when it shows them all,
    or when the snippet has no markers (then blank lines may stand for the gaps). A blank line
    at a stretch's edge counts only where it tells places apart (`_placing_blanks`), and may
    stand at the file's start or end."""
    stretches: list[list[str]] = [[]]
    for line in _shown_lines(snippet, text.splitlines()):
        if line is None:
            stretches.append([])
        else:
            stretches[-1].append(normal(line))
    if len(stretches) == 1:
        return []
    edge = max(len(stretch) for stretch in stretches)  # blank lines enough to stand for the file's ends
    lines = [""] * edge + [normal(line) for line in merged_file.splitlines()] + [""] * edge
    original = [""] + [normal(line) for line in text.splitlines()] + [""]
    at = 0
    for stretch in (_placing_blanks(stretch, original) for stretch in stretches if any(stretch)):
        found = next((start for start in range(at, len(lines) - len(stretch) + 1)
                      if lines[start:start + len(stretch)] == stretch), None)
        if found is None:
            return stretch
        at = found + len(stretch)
    return []


def _placing_blanks(stretch: list[str], original: list[str]) -> list[str]:
    """The stretch with its edge blank lines only where they tell places apart: where the file
    (`original`, normalized, one blank line added at each end) has the code line next to them
    both beside a blank line and not. Elsewhere a chat model's blank line next to a marker is
    layout, and the merge need not have it."""
    code = [index for index, line in enumerate(stretch) if line]
    first, last = code[0], code[-1]
    before = {original[index - 1] == "" for index, line in enumerate(original) if line == stretch[first]}
    after = {original[index + 1] == "" for index, line in enumerate(original) if line == stretch[last]}
    return stretch[0 if len(before) == 2 else first:len(stretch) if len(after) == 2 else last + 1]


def _left_alone(lines: list[str], shown: list[str | None]) -> list[int]:
    """Which of the file's lines stay by the snippet's anchors (see the module's docstring)."""
    keys = [line.rstrip() for line in lines]
    shown_keys = [None if line is None else line.rstrip() for line in shown]
    found: list[tuple[int, int]] = []
    _anchor(keys, shown_keys, (-1, -1), (len(keys), len(shown_keys)), found)
    anchors = sorted(found)
    kept: list[int] = []
    for (file_at, shown_at), (file_to, shown_to) in zip([(-1, -1), *anchors], [*anchors, (len(keys), len(shown_keys))]):
        stretch = shown_keys[shown_at + 1:shown_to]
        if any(key is None for key in stretch) and all(not key for key in stretch):
            kept += _between_blank_context(keys, file_at + 1, file_to, stretch)
    return kept


def _anchor(keys: list[str], shown: list[str | None], low: tuple[int, int], high: tuple[int, int],
            anchors: list[tuple[int, int]]) -> None:
    """Patience matching of the file's lines and the snippet's strictly between `low` and `high`
    ((file, snippet) positions): the lines that occur once on each side, in their longest common
    order, each grown to the equal lines next to it (blank ones too, no marker crossed); then
    the same between each two. Lines are compared with their indentation, so that a line of
    one block does not anchor its copy in another; blank lines never anchor alone."""
    file_range, shown_range = range(low[0] + 1, high[0]), range(low[1] + 1, high[1])
    file_counts = Counter(keys[i] for i in file_range)
    shown_counts = Counter(shown[j] for j in shown_range)
    where = {keys[i]: i for i in file_range if keys[i] and file_counts[keys[i]] == 1}
    candidates = [(j, where[key]) for j in shown_range if (key := shown[j]) and shown_counts[key] == 1 and key in where]
    unique = [(i, j) for j, i in in_order(candidates)]
    if not unique:
        return
    grown: set[tuple[int, int]] = set()
    for i, j in unique:
        grown.add((i, j))
        for step in (1, -1):
            a, b = i + step, j + step
            while (low[0] < a < high[0] and low[1] < b < high[1] and shown[b] is not None and keys[a] == shown[b]
                   and (a, b) not in grown):
                grown.add((a, b))
                a, b = a + step, b + step
    found = sorted(grown)
    anchors += found
    for (i0, j0), (i1, j1) in zip([low, *found], [*found, high]):
        if i1 - i0 > 1 and j1 - j0 > 1:
            _anchor(keys, shown, (i0, j0), (i1, j1), anchors)


def _between_blank_context(keys: list[str], start: int, end: int, stretch: list[str | None]) -> range:
    """The file's lines [start, end) that a stretch of markers and blank lines keeps: all of them,
    but those before the file's first blank line there where the stretch begins with a blank line,
    and those after its last where it ends with one."""
    blanks = [index for index in range(start, end) if not keys[index]]
    if stretch[0] == "":
        start = blanks[0] if blanks else end
    if stretch[-1] == "":
        end = blanks[-1] + 1 if blanks else start
    return range(start, max(start, end))


def _end_of_line(text: str, at: int) -> int:
    newline = text.find("\n", at)
    return len(text) if newline < 0 else newline


def unshown_reason(stretch: list[str]) -> str:
    code = [line for line in stretch if line]
    more = f" and the {len(code) - 1} code lines after it" if len(code) > 1 else ""
    return (f"the merge does not show the snippet's lines as it does: {code[0]!r}{more}, up to the next marker, "
            "are not one run of lines in the file after the lines before them")


def omission_reason(missing: list[str]) -> str:
    named = ", ".join(repr(line) for line in missing[:SHOWN_MISSING])
    more = f" and {len(missing) - SHOWN_MISSING} more" if len(missing) > SHOWN_MISSING else ""
    return f"the merge leaves out code the snippet keeps: {named}{more}"
