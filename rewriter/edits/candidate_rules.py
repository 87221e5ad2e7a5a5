"""Choosing one of several candidate answers without running tests (blind).

The candidates come in the order they were decoded: branches where the model hesitated, closest
first (decoding/branches.py), each already through every check and changing the code. A rule
picks one by what the candidates themselves say: where the model hesitated most (`closest`),
the model's own mean log-probability of the branch's tokens (`likeliest`), or the text most
candidates agree on (`agreed`). `rewriter bench --tests --branches N` reports them side by side.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    text: str  # the decided text of the span
    mean_log_prob: float | None  # from the branch point on; None where the engine gave none


def closest(candidates: Sequence[Candidate]) -> int:
    """The first: the branch from where the model came closest to answering otherwise."""
    return 0


def likeliest(candidates: Sequence[Candidate]) -> int:
    """The branch whose tokens the model found likeliest on average; the earlier one on a tie."""
    scores = [c.mean_log_prob if c.mean_log_prob is not None else float("-inf") for c in candidates]
    return max(range(len(candidates)), key=lambda i: (scores[i], -i))


def agreed(candidates: Sequence[Candidate]) -> int:
    """The first candidate of the text most candidates gave; the earlier text on a tie."""
    counts = Counter(c.text for c in candidates)
    return max(range(len(candidates)), key=lambda i: (counts[candidates[i].text], -i))


RULES: dict[str, Callable[[Sequence[Candidate]], int]] = {
    "closest": closest, "likeliest": likeliest, "agreed": agreed,
}
