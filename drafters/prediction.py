"""Draft from the predicted output (the original code), realigning after each edit.

While the output follows the prediction, drafts come from a cursor into it. When the output
departs from it (the edit), the drafter looks for the longest suffix of the output that occurs
in the prediction, preferring the occurrence at or just after the point of departure, so that
drafting resumes a token or two after the edit ends, even among repeated lines.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Sequence

from .base import Draft, laplace

MAX_NGRAM = 8
# Before any evidence, expect the answer to copy the prediction for a while.
OPENING_PRIOR_RUN = 8


class PredictionDrafter:
    name = "prediction"

    def __init__(self, prediction: Sequence[int], max_ngram: int = MAX_NGRAM):
        self.prediction = list(prediction)
        self.max_ngram = max_ngram
        # n-gram -> sorted positions just past each occurrence, for n = 1..max_ngram
        self._index: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for end in range(1, len(self.prediction) + 1):
            for n in range(1, min(max_ngram, end) + 1):
                self._index[tuple(self.prediction[end - n:end])].append(end)
        self.cursor: int | None = 0  # position in the prediction of the next expected token
        self.synced = 0  # output tokens already matched against the cursor
        self.run = OPENING_PRIOR_RUN  # consecutive output tokens that followed the prediction
        self.departure = 0  # where the output last left the prediction
        self.confirmed = OPENING_PRIOR_RUN  # tokens matched since the last realignment

    def propose(self, tokens: Sequence[int], prompt_length: int, limit: int) -> Draft | None:
        output = tokens[prompt_length:]
        self._follow(output)
        if self.cursor is None and not self._realign(output):
            return None
        assert self.cursor is not None  # _realign placed it
        draft = self.prediction[self.cursor:self.cursor + limit]
        if not draft:
            return None
        return Draft(draft, acceptance=laplace(self.run, 0), source=self.name)

    def feedback(self, draft: Draft, accepted: int) -> None:
        # The cursor is checked against the output itself on the next propose.
        pass

    def _follow(self, output: Sequence[int]) -> None:
        """Advance the cursor over the output produced since the last call."""
        while self.synced < len(output):
            token = output[self.synced]
            self.synced += 1
            if self.cursor is None:
                continue
            if self.cursor < len(self.prediction) and self.prediction[self.cursor] == token:
                self.cursor += 1
                self.run += 1
                self.confirmed += 1
            else:
                # A realignment that failed at once was a false match: keep the old departure.
                if self.confirmed >= 2:
                    self.departure = self.cursor
                self.cursor = None
                self.run = 0

    def _realign(self, output: Sequence[int]) -> bool:
        """Find where the output rejoins the prediction; set the cursor just after the match."""
        for n in range(min(self.max_ngram, len(output)), 0, -1):
            ends = self._index.get(tuple(output[-n:]))
            if not ends:
                continue
            end = self._nearest(ends)
            if end >= len(self.prediction):
                continue  # matched only at the very end: nothing left to draft
            self.cursor = end
            self.run = n - 1  # a 1-gram match is weak evidence
            self.confirmed = 0
            return True
        return False

    def _nearest(self, ends: list[int]) -> int:
        """The first occurrence at or after the departure point, else the last one before it."""
        i = bisect_left(ends, self.departure + 1)
        if i < len(ends):
            return ends[i]
        return ends[-1]


class PromptSpanDrafter(PredictionDrafter):
    """Draft from the prompt itself, for an answer that repeats a span of it (a next-edit model
    rewriting the window its prompt holds) when no prediction is given.

    The prediction drafter's realignment over the prompt's tokens: the longest tail of the output
    (up to MAX_NGRAM tokens) found in the prompt, at or after the place the output last followed,
    so a repeated line does not send the draft back to an earlier copy (prompt lookup's 3-grams,
    at their latest place, often land in the answer itself). Unlike a prediction, the answer does
    not start at the prompt's start: the first draft waits for a match.
    """

    name = "prompt_span"

    def __init__(self, prompt: Sequence[int], max_ngram: int = MAX_NGRAM):
        super().__init__(prompt, max_ngram)
        self.cursor = None
        self.run = self.confirmed = 0
