"""Verifiers: given the model's logits over the last token and a draft, decide what to keep.

A verifier returns how many draft tokens are accepted and the token that follows them (the
model's own next token: the "extra token" every step yields). Sampling verifiers plug in here.
"""
from __future__ import annotations

from typing import Protocol

import torch

from drafters.base import Draft


class Verifier(Protocol):
    def first_token(self, logits: torch.Tensor) -> int:
        """The next token from the logits of one position (after the prompt)."""

    def verify(self, logits: torch.Tensor, draft: Draft) -> tuple[int, int]:
        """`logits` has len(draft.tokens) + 1 rows; returns (accepted count, next token)."""


class GreedyVerifier:
    """Accept the longest draft prefix that equals the model's argmax: output is exactly greedy."""

    def first_token(self, logits: torch.Tensor) -> int:
        return int(logits.argmax(-1))

    def verify(self, logits: torch.Tensor, draft: Draft) -> tuple[int, int]:
        choices = logits.argmax(-1).tolist()
        accepted = 0
        for drafted, chosen in zip(draft.tokens, choices):
            if drafted != chosen:
                break
            accepted += 1
        return accepted, choices[accepted]
