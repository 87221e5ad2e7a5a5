"""Use several drafters: each step, the proposal most likely to be accepted wins."""
from __future__ import annotations

from collections.abc import Sequence

from .base import Draft, Drafter
from .prediction import PredictionDrafter, PromptSpanDrafter
from .prompt_lookup import PromptLookupDrafter


class CombinedDrafter:
    name = "combined"

    def __init__(self, *drafters: Drafter):
        self.drafters = drafters
        self._owner: dict[int, Drafter] = {}

    def propose(self, tokens: Sequence[int], prompt_length: int, limit: int) -> Draft | None:
        best: Draft | None = None
        for drafter in self.drafters:
            draft = drafter.propose(tokens, prompt_length, limit)
            if draft and (best is None or draft.acceptance > best.acceptance):
                best, self._owner[id(draft)] = draft, drafter
        return best

    def feedback(self, draft: Draft, accepted: int) -> None:
        owner = self._owner.pop(id(draft), None)
        self._owner.clear()
        if owner is not None:
            owner.feedback(draft, accepted)


def rewrite_drafter(prediction: Sequence[int]) -> CombinedDrafter:
    """What a rewrite drafts with, in our loop and in vLLM's: the predicted output (the code),
    realigned after each edit, and prompt lookup where the prediction has nothing."""
    return CombinedDrafter(PredictionDrafter(prediction), PromptLookupDrafter())


def lookup_drafter(prompt: Sequence[int]) -> CombinedDrafter:
    """What a raw completion without a prediction drafts with: the span of the prompt the answer
    repeats (a next-edit model's window), and prompt lookup beside it."""
    return CombinedDrafter(PromptSpanDrafter(prompt), PromptLookupDrafter())
