"""Predictions edited in the ways a user edits code, for the exactness tests."""
from __future__ import annotations

import random


def edited(reference: list[int], kind: str, rng: random.Random) -> list[int]:
    """A prediction that differs from the true output by the named edit."""
    n = len(reference)
    spots = {"start": 0, "middle": n // 2, "end": n - 6}
    if kind == "unchanged":
        return list(reference)
    if kind == "empty":
        return []
    if kind == "unrelated":
        return [rng.randrange(1, 256) for _ in range(n)]
    if kind == "several":
        p = list(reference)
        del p[90:94]
        p[60:63] = [rng.randrange(1, 256) for _ in range(5)]
        p[20:20] = [rng.randrange(1, 256) for _ in range(7)]
        return p
    if kind == "repeated_lines":
        # A duplicated stretch next to the edit: the output drops one copy.
        segment = reference[40:48]
        return reference[:48] + segment + segment + reference[48:]
    edit, where = kind.split("_")
    at = spots[where]
    if edit == "insertion":  # the output has tokens the prediction lacks
        return reference[:at] + reference[at + 6:]
    if edit == "deletion":  # the output lacks tokens the prediction has
        return reference[:at] + [rng.randrange(1, 256) for _ in range(6)] + reference[at:]
    if edit == "replacement":
        return reference[:at] + [rng.randrange(1, 256) for _ in range(4)] + reference[at + 3:]
    raise AssertionError(kind)


KINDS = ["unchanged", "empty", "unrelated", "several", "repeated_lines"] + [
    f"{edit}_{where}" for edit in ("insertion", "deletion", "replacement") for where in ("start", "middle", "end")
]
