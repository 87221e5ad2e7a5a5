"""Which of a snippet's lines stand for which of the file's, between two matched definitions:
patience matching, so that a line the file holds more than once anchors only where the lines
next to it make the place unique, and otherwise the merge says it is unclear."""
from __future__ import annotations

from collections import Counter

from ..in_order import in_order
from .lines import DEF, MARKER, Item, Unclear


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
    anchors = _unique_in_order(items, mine, file_items, theirs)

    def item(k: int, f: int) -> tuple[int, int]:  # positions -> item indices, `around` outside
        return ((around[0][0] if k < 0 else around[1][0] if k == len(mine) else mine[k]),
                (around[0][1] if f < 0 else around[1][1] if f == len(theirs) else theirs[f]))

    def follows(k: int, f: int, step: int) -> bool:  # (k + step, f + step) goes on from (k, f)
        (a, fa), (b, fb) = item(k, f), item(k + step, f + step)
        return (items[b].key == file_items[fb].key and _joined(items, min(a, b), max(a, b), MARKER)
                and _joined(file_items, min(fa, fb), max(fa, fb), DEF))

    def replaced(k: int, f: int, k_end: int, f_end: int, step: int) -> tuple[int, int] | None:
        """Past the snippet's new lines from (k, f) towards (k_end, f_end), the next line that
        the file holds there, at its nearest copy: the file's lines skipped on the way are what
        the new ones replace (none of them in the snippet, no marker or definition crossed)."""
        stretch = {file_items[theirs[g]].key for g in range(min(f, f_end) + 1, max(f, f_end))}
        j = k + step
        while j != k_end and items[mine[j]].key not in stretch:
            j += step
        if j == k_end or j == k + step:
            return None
        g = next(g for g in range(f + step, f_end, step) if file_items[theirs[g]].key == items[mine[j]].key)
        skipped = {file_items[theirs[h]].key for h in range(min(f, g) + 1, max(f, g))}
        (a, fa), (b, fb) = item(k, f), item(j, g)
        if skipped & {items[i].key for i in mine} or not (_joined(items, min(a, b), max(a, b), MARKER)
                                                          and _joined(file_items, min(fa, fb), max(fa, fb), DEF)):
            return None
        return j, g

    points = [(-1, -1), *anchors, (len(mine), len(theirs))]
    matched: list[tuple[int, int]] = []
    for (k0, f0), (k1, f1) in zip(points, points[1:]):
        while k0 + 1 < k1 and f0 + 1 < f1:
            step = (k0 + 1, f0 + 1) if follows(k0, f0, 1) else replaced(k0, f0, k1, f1, 1) if k0 >= 0 else None
            if step is None:
                break
            k0, f0 = step
            matched.append(step)
        while k1 - 1 > k0 and f1 - 1 > f0:
            step = (k1 - 1, f1 - 1) if follows(k1, f1, -1) else (
                replaced(k1, f1, k0, f0, -1) if k1 < len(mine) else None)
            if step is None:
                break
            k1, f1 = step
            matched.append(step)
    matched = sorted(matched + anchors)
    if not matched:
        return
    pairs += [(mine[k], theirs[f]) for k, f in matched]
    points = [(-1, -1), *matched, (len(mine), len(theirs))]
    for (k0, f0), (k1, f1) in zip(points, points[1:]):
        if k1 - k0 > 1 and f1 - f0 > 1:
            _anchor(items, mine[k0 + 1:k1], file_items, theirs[f0 + 1:f1], (item(k0, f0), item(k1, f1)), pairs)


def _unique_in_order(items: list[Item], mine: list[int], file_items: list[Item],
                     theirs: list[int]) -> list[tuple[int, int]]:
    """The (snippet, file) positions in `mine` and `theirs` of the lines whose text occurs once on
    each side, in their longest common order."""
    counts = Counter(items[i].key for i in mine)
    file_counts = Counter(file_items[i].key for i in theirs)
    where = {file_items[i].key: f for f, i in enumerate(theirs) if file_counts[file_items[i].key] == 1}
    return in_order([(k, where[items[i].key]) for k, i in enumerate(mine)
                      if counts[items[i].key] == 1 and items[i].key in where])


def _joined(items: list[Item], first: int, second: int, breaker: str) -> bool:
    """No `breaker` item (a marker in the snippet, a definition in the file) stands between."""
    return all(items[i].kind != breaker for i in range(first + 1, second))
