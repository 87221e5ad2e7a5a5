"""Branches where the model hesitated: further answers to one request, each still decoded at
prediction speed.

Greedy verification already computes the model's distribution at every position of the answer.
`HesitationRecorder` verifies exactly as `GreedyVerifier` does and also notes, at each position,
the runner-up token and how far behind the chosen one it was. A branch forces the runner-up at
one such position (the answer before it kept as it was) and decodes on greedily; the prediction
drafter realigns after the branch as after any edit. Smallest margins first: where the model
nearly answered otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from drafters.base import Draft

from ..engine import EditRequest
from ..results import RewriteResult
from .verify import GreedyVerifier


@dataclass(frozen=True)
class Hesitation:
    """At answer position `position` the model chose `chosen` (at `log_prob`); `runner_up` came
    `margin` behind (a difference of logits, so of log-probabilities: 0 is a tie)."""

    position: int
    chosen: int
    runner_up: int
    margin: float
    log_prob: float = 0.0


class HesitationRecorder(GreedyVerifier):
    """Greedy verification (the same tokens) that notes each answer position's runner-up."""

    def __init__(self):
        self.hesitations: list[Hesitation] = []

    def first_token(self, logits: torch.Tensor) -> int:
        self._note(logits.reshape(1, -1))
        return self.hesitations[-1].chosen

    def verify(self, logits: torch.Tensor, draft: Draft) -> tuple[int, int]:
        accepted, following = super().verify(logits, draft)
        self._note(logits[: accepted + 1])  # the rows of the tokens this pass settles
        return accepted, following

    def _note(self, rows: torch.Tensor) -> None:
        rows = rows.float()
        values, tokens = rows.topk(2, dim=-1)
        totals = torch.logsumexp(rows, dim=-1)
        for (best, second), (chosen, runner_up), total in zip(values.tolist(), tokens.tolist(), totals.tolist()):
            self.hesitations.append(Hesitation(len(self.hesitations), chosen, runner_up, best - second, best - total))

    def answer(self, length: int) -> list[int]:
        """The answer's first `length` tokens (a stop may have kept fewer than were verified)."""
        return [h.chosen for h in self.hesitations[:length]]

    def branch_points(self, length: int, count: int, excluded: frozenset[int] = frozenset()) -> list[Hesitation]:
        """The `count` positions of the answer's first `length` tokens where the runner-up came
        closest, skipping runner-ups in `excluded` (end-of-answer tokens: a branch that stops at
        once answers nothing)."""
        candidates = [h for h in self.hesitations[:length] if h.runner_up not in excluded]
        return sorted(candidates, key=lambda h: (h.margin, h.position))[:count]

    def forced(self, point: Hesitation) -> list[int]:
        """The answer up to `point`, then its runner-up: what a branch decodes on from."""
        return [h.chosen for h in self.hesitations[: point.position]] + [point.runner_up]


def mean_log_prob(point: Hesitation, follower: HesitationRecorder, length: int) -> float:
    """A branch's mean log-probability per token from its branch point on, `length` its answer's
    tokens: the forced runner-up's (from the answer it branched from), then those decoded after it
    (`follower`, the branch's own recorder; its first entry is the forced position's, not taken)."""
    after = follower.hesitations[1: length - point.position]
    values = [point.log_prob - point.margin, *(h.log_prob for h in after)]
    return sum(values) / len(values)


@dataclass
class Branched:
    """A request's greedy answer as `recorder` saw it (its first `length` tokens kept), and the
    answers of its branches in the order of their points, as far as decoded (None: a branch
    that gave no code block)."""

    request: EditRequest  # compared whole
    recorder: HesitationRecorder
    length: int
    decoded: list[RewriteResult | None] = field(default_factory=list)
