"""A raw completion on the local model: the prompt's own tokens (no chat template), decoded with
the prediction as the draft or, without one, with the span of the prompt the answer repeats
(drafters.lookup_drafter); the answer ends at a stop string. Greedy output is plain greedy
decoding's, token for token; a sampling verifier keeps the model's distribution (the drafts are
one-hot)."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from drafters import Drafter

from ..engine import CompletionRequest
from ..results import ContextTooLarge, Stats
from .decode import Decoder, StopCheck
from .verify import Verifier

# A completion without max_tokens or a prediction to size it by: a next-edit window and more.
DEFAULT_COMPLETION_TOKENS = 1024


def stop_once(holds: Callable[[list[int]], bool]) -> StopCheck:
    """Stop once the output holds what ends it, keeping the fewest tokens that still hold it."""

    def check(output: list[int]) -> int | None:
        if not holds(output):
            return None
        keep = len(output)
        while keep > 1 and holds(output[: keep - 1]):
            keep -= 1
        return keep

    return check


def stop_strings(tokenizer, stops: list[str] | tuple[str, ...]) -> StopCheck:
    """Stop once any stop string is in the output, keeping the fewest tokens that hold it."""
    # Enough tail tokens to hold the longest stop string even in byte tokens (4 per character).
    tail = 4 * max(len(s) for s in stops) + 8

    def contains(ids: list[int]) -> bool:
        text = tokenizer.decode(ids[-tail:], skip_special_tokens=True)
        return any(s in text for s in stops)

    return stop_once(contains)


class StopTrimmer:
    """Text increments without the stop string or anything after it.

    While the text ends with what may become a stop string, that part is held back.
    """

    def __init__(self, stops: list[str] | tuple[str, ...]):
        self.stops = stops
        self.text = ""
        self.sent = 0
        self.stopped = False

    def feed(self, piece: str, final: bool) -> str:
        if self.stopped:
            return ""
        self.text += piece
        cuts = [i for i in (self.text.find(s) for s in self.stops) if i >= 0]
        if cuts:
            end, self.stopped = min(cuts), True
        elif final:
            end = len(self.text)
        else:
            end = len(self.text) - self._held()
        out = self.text[self.sent:end] if end > self.sent else ""
        self.sent = max(self.sent, end)
        return out

    def _held(self) -> int:
        longest = 0
        for stop in self.stops:
            for n in range(min(len(stop) - 1, len(self.text)), longest, -1):
                if self.text.endswith(stop[:n]):
                    longest = n
                    break
        return longest


@dataclass
class PlannedCompletion:
    """A completion tokenized and fitted to the context, before it is decoded."""

    request: CompletionRequest
    prompt: list[int]
    prediction: list[int] | None  # the prediction's tokens (no end of turn: a raw prompt has none)
    budget: int


@dataclass
class CompletionPiece:
    """What one decoding step added to the answer (stop strings cut), and the running stats;
    the last piece (`done`) has the answer's tokens."""

    text: str
    stats: Stats
    done: bool
    output: list[int] = dataclasses.field(default_factory=list)


def plan_completion(tokenizer, context_length: int, request: CompletionRequest,
                    default_budget: int = DEFAULT_COMPLETION_TOKENS) -> PlannedCompletion:
    """The prompt's and prediction's tokens and the output budget; ContextTooLarge when the
    prompt leaves no room for an answer."""
    prompt = tokenizer.encode(request.prompt, add_special_tokens=False)
    if not prompt:
        raise ContextTooLarge("the prompt is empty: a completion needs a prompt to continue")
    prediction = (tokenizer.encode(request.prediction, add_special_tokens=False)
                  if request.prediction is not None else None)
    room = context_length - len(prompt)
    if room < 1:
        raise ContextTooLarge(f"the prompt takes {len(prompt)} tokens, and the model takes {context_length} "
                              "in all: there is no room for an answer; send a shorter prompt")
    # Sized as a rewrite is: an edit may grow the predicted text, leave room for twice it, and some more.
    wanted = request.max_new_tokens or (2 * len(prediction) + 256 if prediction else default_budget)
    return PlannedCompletion(request, prompt, prediction, min(wanted, room))


def decode_completion(decoder: Decoder, drafter: Drafter | None, planned: PlannedCompletion,
                      verifier: Verifier | None = None) -> Iterator[CompletionPiece]:
    """The answer's pieces as they are accepted: the request's stop strings end it and are cut.
    Without a drafter, plain greedy decoding (the bench's reference)."""
    request = planned.request
    stops = [s for s in request.stop if s]
    stop = stop_strings(decoder.tokenizer, stops) if stops else None
    trimmer = StopTrimmer(stops)
    output: list[int] = []
    for step in decoder.generate(planned.prompt, drafter, planned.budget, stop, verifier):
        output += step.tokens
        yield CompletionPiece(trimmer.feed(step.text, step.done), dataclasses.replace(step.stats), step.done,
                              list(output) if step.done else [])
