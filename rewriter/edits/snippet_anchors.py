"""Which of a snippet's lines stand for which of the file's, between two matched definitions:
patience matching, so that a line the file holds more than once anchors only where the lines
next to it make the place unique, and otherwise the merge says it is unclear."""
from __future__ import annotations

from bisect import bisect_left
from collections import Counter

from .snippet_lines import DEF, MARKER, Item, Unclear


def line_pairs(items: list[Item], mine: list[int], file_items: list[Item], theirs: list[int],
                around: tuple[tuple[int, int], tuple[int, int]]) -> list[tuple[int, int]]:
    """The snippet's lines `mine` matched to the file's lines `theirs` (both in order, between
    two matched items). A line anchors where its text occurs once on both sides of the stretch
    still open, or next to an anchor with no marker (no definition, in the file) in between;
    a line left over whose text the file still holds there could be either copy: unclear."""
    pairs: list[tuple[int, int]] = []
    _anchor(items, mine, file_items, theirs, around, pairs)
    pairs.sort()
    bounds = [(-1, -1), *pairs, (len(items), len(file_items))]
    for (at, file_at), (to, file_to) in zip(bounds, bounds[1:]):
        open_lines = {file_items[i].key for i in theirs if file_at < i < file_to}
        for i in mine:
            if at < i < to and items[i].key in open_lines:
                raise Unclear(f"line {items[i].line + 1} of the snippet occurs more than once in the file "
                               "there: which copy it stands for is unclear")
    return pairs


def _anchor(items: list[Item], mine: list[int], file_items: list[Item], theirs: list[int],
            around: tuple[tuple[int, int], tuple[int, int]], pairs: list[tuple[int, int]]) -> None:
    """Patience matching between the matched items `around` (snippet, file): the lines unique on
    both sides, in their longest common order, and the lines that follow on from an anchor with
    no marker (no definition, in the file) between; then the same again between each two."""
    counts = Counter(items[i].key for i in mine)
    file_counts = Counter(file_items[i].key for i in theirs)
    where = {file_items[i].key: f for f, i in enumerate(theirs) if file_counts[file_items[i].key] == 1}
    anchors = _in_order([(k, where[items[i].key]) for k, i in enumerate(mine)
                         if counts[items[i].key] == 1 and items[i].key in where])

    def item(k: int, f: int) -> tuple[int, int]:  # positions -> item indices, `around` outside
        return ((around[0][0] if k < 0 else around[1][0] if k == len(mine) else mine[k]),
                (around[0][1] if f < 0 else around[1][1] if f == len(theirs) else theirs[f]))

    def follows(k: int, f: int, step: int) -> bool:  # (k + step, f + step) goes on from (k, f)
        (a, fa), (b, fb) = item(k, f), item(k + step, f + step)
        return (items[b].key == file_items[fb].key and _joined(items, min(a, b), max(a, b), MARKER)
                and _joined(file_items, min(fa, fb), max(fa, fb), DEF))

    points = [(-1, -1), *anchors, (len(mine), len(theirs))]
    matched: list[tuple[int, int]] = []
    for (k0, f0), (k1, f1) in zip(points, points[1:]):
        while k0 + 1 < k1 and f0 + 1 < f1 and follows(k0, f0, 1):
            k0, f0 = k0 + 1, f0 + 1
            matched.append((k0, f0))
        while k1 - 1 > k0 and f1 - 1 > f0 and follows(k1, f1, -1):
            k1, f1 = k1 - 1, f1 - 1
            matched.append((k1, f1))
    matched = sorted(matched + anchors)
    if not matched:
        return
    pairs += [(mine[k], theirs[f]) for k, f in matched]
    points = [(-1, -1), *matched, (len(mine), len(theirs))]
    for (k0, f0), (k1, f1) in zip(points, points[1:]):
        if k1 - k0 > 1 and f1 - f0 > 1:
            _anchor(items, mine[k0 + 1:k1], file_items, theirs[f0 + 1:f1], (item(k0, f0), item(k1, f1)), pairs)


def _in_order(candidates: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest run of (snippet, file) positions increasing on both sides (patience sorting)."""
    tails: list[int] = []  # tails[n]: the candidate that ends the best run of length n + 1
    ends: list[int] = []  # its file position
    before: list[int] = []
    for at, (_, f) in enumerate(candidates):
        n = bisect_left(ends, f)
        before.append(tails[n - 1] if n else -1)
        tails[n:n + 1], ends[n:n + 1] = [at], [f]
    run, at = [], tails[-1] if tails else -1
    while at >= 0:
        run.append(candidates[at])
        at = before[at]
    return run[::-1]


def _joined(items: list[Item], first: int, second: int, breaker: str) -> bool:
    """No `breaker` item (a marker in the snippet, a definition in the file) stands between."""
    return all(items[i].kind != breaker for i in range(first + 1, second))
