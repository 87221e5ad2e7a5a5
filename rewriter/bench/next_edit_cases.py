"""Next-edit cases cut from real multi-hunk edits (the reference edits: id, before, after).

The edit from `before` to `after` is split into line hunks. For each two hunks in a row whose gap
is at most NEAR_LINES lines, a case: the document with the hunks up to the first applied (the
user's own edits so far), that hunk as the recent edit, the cursor at its end, a window of lines
around the cursor that holds the next hunk; the suggestion is right when the document it gives is
the one with the next hunk applied too (whitespace-normalised: trailing spaces and runs of blank
lines do not count). Plus one no-op case per multi-hunk edit: the finished `after` with its last
hunk as the recent edit, where nothing should be suggested (a suggestion that changes nothing, once
normalised, is quiet too). Deterministic: the cases follow the edits' order, then the hunks'.
Torch-free.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from ..edits.hunks import Hunk, apply_hunks
from ..next_edit.base import NextEditInput, RecentEdit
from .snippet_cases import load_reference_edits, normalized

NEAR_LINES = 10  # the next hunk starts at most this many lines after the first one ends
WINDOW_LINES = 10  # the window: this many lines on each side of the cursor's line


@dataclass(frozen=True)
class NextEditCase:
    id: str  # the edit's id, then `#` and the first hunk's number, or `#no-op`
    request: NextEditInput
    expected: str | None  # the whole document once the next hunk is applied; None: nothing to suggest

    @property
    def no_op(self) -> bool:
        return self.expected is None


def hunks_of(before: str, after: str) -> list[Hunk]:
    """The line hunks that turn `before` into `after`, in `before`'s numbering."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return [Hunk(i1, i2, tuple(new[j1:j2])) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _growth(hunk: Hunk) -> int:
    return len(hunk.lines) - (hunk.end - hunk.start)


def recent_edit(path: str, before: str, hunk: Hunk, shift: int) -> RecentEdit:
    """`hunk` of `before` as the user's edit, in the numbering of the document after it (`shift`:
    what the hunks before it added)."""
    replaced = "".join(before.splitlines(keepends=True)[hunk.start:hunk.end])
    return RecentEdit(path=path, line=hunk.start + shift, before=replaced, after=hunk.text)


def cursor_after(edit: RecentEdit) -> tuple[int, int]:
    """The end of what the edit wrote (its start line for a deletion)."""
    written = edit.after.splitlines()
    if not written:
        return edit.line, 0
    return edit.line + len(written) - 1, len(written[-1])


def window_around(line: int, total: int) -> tuple[int, int]:
    return max(0, line - WINDOW_LINES), min(total, line + WINDOW_LINES + 1)


def _request(path: str, language: str, text: str, edit: RecentEdit) -> NextEditInput:
    cursor = cursor_after(edit)
    total = max(len(text.splitlines(keepends=True)), 1)
    return NextEditInput(path=path, language=language, text=text, window=window_around(cursor[0], total),
                         cursor=cursor, edits=(edit,))


def cases_of(row: dict) -> list[NextEditCase]:
    """The next-edit cases of one reference edit (none when it has fewer than two hunks)."""
    before, after = row["before"], row["after"]
    language = row.get("language", "")
    path = row.get("path") or f"{str(row['id']).replace('/', '_')}.{'py' if language == 'python' else 'txt'}"
    hunks = hunks_of(before, after)
    if len(hunks) < 2:
        return []
    cases, shift = [], 0
    for number, (first, following) in enumerate(zip(hunks, hunks[1:])):
        edit = recent_edit(path, before, first, shift)
        shift += _growth(first)
        if following.start - first.end > NEAR_LINES:
            continue
        request = _request(path, language, apply_hunks(before, hunks[:number + 1]), edit)
        start, end = request.window
        # The next hunk, in the numbering of the document now, must lie inside the window.
        if not start <= following.start + shift <= following.end + shift <= end:
            continue
        cases.append(NextEditCase(f"{row['id']}#{number}", request, apply_hunks(before, hunks[:number + 2])))
    last = hunks[-1]
    quiet = _request(path, language, after, recent_edit(path, before, last, sum(map(_growth, hunks[:-1]))))
    cases.append(NextEditCase(f"{row['id']}#no-op", quiet, None))
    return cases


def make_cases(paths=None) -> list[NextEditCase]:
    """Every reference edit's cases, in order (the files of snippet_cases.reference_edit_paths)."""
    return [case for row in load_reference_edits(paths) for case in cases_of(row)]


def judge(case: NextEditCase, result: str | None) -> str:
    """right, wrong or none for a case with a next hunk; quiet or wrong for a no-op case; `result`:
    the document with the suggestion applied, None when nothing was suggested."""
    if case.expected is None:
        return "quiet" if result is None or normalized(result) == normalized(case.request.text) else "wrong"
    if result is None or normalized(result) == normalized(case.request.text):
        return "none"
    return "right" if normalized(result) == normalized(case.expected) else "wrong"
