"""Patience sorting: of pairs of positions in two texts, the longest run in both texts' order, the
core of patience matching (the snippet merge's anchors, the snippet-kept check's)."""
from __future__ import annotations

from bisect import bisect_left


def in_order(candidates: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest run of the (first, second) positions, given in increasing first position,
    whose second positions increase too."""
    tails: list[int] = []  # tails[n]: the candidate that ends the best run of length n + 1
    ends: list[int] = []  # its second position
    before: list[int] = []
    for at, (_, second) in enumerate(candidates):
        n = bisect_left(ends, second)
        before.append(tails[n - 1] if n else -1)
        tails[n:n + 1], ends[n:n + 1] = [at], [second]
    run, at = [], tails[-1] if tails else -1
    while at >= 0:
        run.append(candidates[at])
        at = before[at]
    return run[::-1]
