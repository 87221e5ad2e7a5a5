"""The drafter interface: propose the next tokens, hear how many were accepted."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class Draft:
    tokens: list[int]
    # The drafter's estimate of the chance that each next draft token is accepted, given that
    # the ones before it were; the loop sizes the lookahead window from it.
    acceptance: float
    source: str
    # Per-token draft distributions for sampling verifiers (a tensor, or a list of rows: this
    # module stays torch-free); None means one-hot drafts.
    probs: Any = field(default=None, repr=False)


class Drafter(Protocol):
    name: str

    def propose(self, tokens: Sequence[int], prompt_length: int, limit: int) -> Draft | None:
        """Draft up to `limit` tokens to follow `tokens` (prompt and output so far), or None."""

    def feedback(self, draft: Draft, accepted: int) -> None:
        """`accepted` of `draft.tokens` were accepted by the verifier."""


def laplace(successes: float, failures: float) -> float:
    """Rule of succession: the chance of the next success after these observations."""
    return (successes + 1.0) / (successes + failures + 2.0)
