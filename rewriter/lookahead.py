"""How many draft tokens to verify in the next forward pass.

A pass over n tokens costs t(n); a draft of k tokens whose tokens are each accepted with
chance a yields on average 1 + a + ... + a^k tokens. We pick the window k that maximises
tokens per second. t(n) starts from a device-shaped prior and follows what this device
actually measures, so rejected drafts stay cheap where wide passes cost much (CPUs) and the
window grows where they are nearly free (GPUs). Measurements are kept per band of context
length: a wide pass's attention grows with the context, so what a 2,000-token file's passes
cost says little about a 300-token selection's.

Torch-free and low in the house: the decoder, the CPU path's choice (weights/cpu_choice.py) and
the vLLM proposer each size windows with it.
"""
from __future__ import annotations

import math
from typing import Protocol, TypeVar

from .passes import CPU_PRIOR, GPU_PASS_SIZES, GPU_PRIOR, PASS_SIZES, PassCosts

# Context bands: lengths of the same bit length share one table of measured costs; below 512, one.
SHORTEST_BAND = 9
# Plain steps in a row, a draft at hand, before its best length is verified once anyway (Lookahead.window).
PLAIN_STEPS = 8


class _Draft(Protocol):
    """What the window policy reads of a draft: drafters.base.Draft, by shape (drafters import this
    module, so it imports none of theirs)."""

    tokens: list[int]
    acceptance: float


DraftT = TypeVar("DraftT", bound=_Draft)


def _band(context: int) -> int:
    return max(SHORTEST_BAND, context.bit_length())


def expected_tokens(acceptance: float, draft_length: int) -> float:
    """Mean tokens one pass yields: accepted draft tokens plus the model's own next token."""
    if acceptance >= 1.0:
        return draft_length + 1.0
    return (1.0 - acceptance ** (draft_length + 1)) / (1.0 - acceptance)


class Lookahead:
    def __init__(self, device_type: str = "cpu", max_window: int | None = None, smoothing: float = 0.3,
                 prior: PassCosts | None = None):
        """`prior`: CPU pass costs for every size in PASS_SIZES, measured on this machine or an int8
        kind's fixed shape; without it, the device's fixed shape."""
        self.sizes: tuple[int, ...]
        if device_type == "cuda":
            self.prior, self.sizes = GPU_PRIOR, GPU_PASS_SIZES
        elif prior is not None:
            self.prior, self.sizes = prior, PASS_SIZES
        else:
            self.prior, self.sizes = CPU_PRIOR, PASS_SIZES
        self.max_window = self.sizes[-1] - 1 if max_window is None else min(max_window, self.sizes[-1] - 1)
        self.smoothing = smoothing
        self.tables: dict[int, dict[int, float]] = {}  # context band -> pass size -> smoothed seconds
        self.plain_steps = 0  # plain steps chosen in a row while a draft was at hand

    def _bucket(self, pass_tokens: int) -> int:
        for size in self.sizes:
            if pass_tokens <= size:
                return size
        return self.sizes[-1]

    def _measured(self, context: int) -> dict[int, float]:
        """The costs measured in this context's band, else in the nearest band measured."""
        band = _band(context)
        if band in self.tables or not self.tables:
            return self.tables.get(band, {})
        return self.tables[min(self.tables, key=lambda measured: abs(measured - band))]

    def record(self, pass_tokens: int, seconds: float, context: int = 0) -> None:
        """A pass over `pass_tokens` took `seconds` with `context` tokens before it. Load only adds
        time: a pass faster than its size's smoothed cost is taken as the cost at once; slower ones
        are smoothed in."""
        table = self.tables.setdefault(_band(context), {})
        bucket = self._bucket(pass_tokens)
        old = table.get(bucket)
        table[bucket] = seconds if old is None or seconds < old else old + self.smoothing * (seconds - old)

    def cost(self, pass_tokens: int, context: int = 0) -> float:
        bucket = self._bucket(pass_tokens)
        measured = self._measured(context)
        if bucket in measured:
            return measured[bucket]
        if not measured:
            return self.prior[bucket]
        # Scale the prior's shape to the sizes measured so far.
        scale = math.exp(sum(math.log(t / self.prior[n]) for n, t in measured.items()) / len(measured))
        return self.prior[bucket] * scale

    def window(self, acceptance: float, available: int, context: int = 0) -> int:
        """The draft length to verify next (0 means a plain one-token step), `context` tokens in.

        After PLAIN_STEPS plain steps in a row where a draft was at hand, the best draft length is
        verified once anyway: a wide pass measured while another process held the core stays
        measured dear until a wide pass runs again, and would otherwise keep drafts off for good."""
        best_length, best_rate = 0, 1.0 / self.cost(1, context)
        widest_best, widest_rate = 0, 0.0  # the best draft length of at least one token
        limit = min(available, self.max_window)
        for size in self.sizes[1:]:
            length = min(size - 1, limit)
            if length < 1:
                break
            rate = expected_tokens(acceptance, length) / self.cost(length + 1, context)
            if rate > widest_rate:
                widest_best, widest_rate = length, rate
            if rate > best_rate:
                best_length, best_rate = length, rate
            if length == limit:
                break
        if best_length or not widest_best:
            self.plain_steps = 0
            return best_length
        self.plain_steps += 1
        if self.plain_steps <= PLAIN_STEPS:
            return 0
        self.plain_steps = 0
        return widest_best

    def fit(self, draft: DraftT | None, room: int, context: int = 0) -> DraftT | None:
        """`draft` cut to the window worth verifying next (at most `room` tokens), or None for a
        plain one-token step."""
        if draft is None:
            return None
        draft.tokens = draft.tokens[:self.window(draft.acceptance, min(room, len(draft.tokens)), context)]
        return draft if draft.tokens else None
