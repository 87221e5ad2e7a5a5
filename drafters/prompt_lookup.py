"""Prompt lookup decoding: draft what followed the latest earlier occurrence of the output's tail.

The index covers the prompt and the output so far and grows as tokens are appended.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from .base import Draft, laplace


class PromptLookupDrafter:
    name = "prompt_lookup"

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1):
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self._index: dict[tuple[int, ...], list[int]] = defaultdict(list)
        self._indexed = 0  # tokens whose n-grams ending there are indexed
        self.successes = 0.0
        self.failures = 0.0

    def propose(self, tokens: Sequence[int], prompt_length: int, limit: int) -> Draft | None:
        # Index every n-gram that ends before the last token, so a lookup never finds the tail itself.
        while self._indexed < len(tokens) - 1:
            end = self._indexed + 1
            for n in range(1, min(self.max_ngram, end) + 1):
                self._index[tuple(tokens[end - n:end])].append(end)
            self._indexed = end
        for n in range(min(self.max_ngram, len(tokens)), self.min_ngram - 1, -1):
            ends = self._index.get(tuple(tokens[-n:]))
            if ends:
                start = ends[-1]
                draft = list(tokens[start:start + limit])
                if draft:
                    evidence = laplace(self.successes + n, self.failures + 1)
                    return Draft(draft, acceptance=evidence, source=self.name)
        return None

    def feedback(self, draft: Draft, accepted: int) -> None:
        # Decay old evidence so the estimate follows the part of the answer being written.
        self.successes = 0.8 * self.successes + accepted
        self.failures = 0.8 * self.failures + (accepted < len(draft.tokens))
