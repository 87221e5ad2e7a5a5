"""How many draft tokens to verify in the next forward pass.

A pass over n tokens costs t(n); a draft of k tokens whose tokens are each accepted with
chance a yields on average 1 + a + ... + a^k tokens. We pick the window k that maximises
tokens per second. t(n) starts from a device-shaped prior and follows what this device
actually measures, so rejected drafts stay cheap where wide passes cost much (CPUs) and the
window grows where they are nearly free (GPUs). Measurements are kept per band of context
length: a wide pass's attention grows with the context, so what a 2,000-token file's passes
cost says little about a 300-token selection's.
"""
from __future__ import annotations

import math

from drafters.base import Draft

# Window sizes tried: passes of 1, 2, 4, ... tokens, where matrix kernels change cost steps.
PASS_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
# A GPU verifies a few hundred tokens in about the time of one, so it may look further ahead.
GPU_PASS_SIZES = PASS_SIZES + (256, 512)
# Relative cost of a pass of n tokens before anything is measured.
# CPU: measured for the 0.5B model on 2 cores (../shared/MODELS.md); GPU: nearly flat.
CPU_PRIOR = {1: 1.0, 2: 1.5, 4: 1.58, 8: 1.58, 16: 2.62, 32: 2.75, 64: 4.0, 128: 7.2}
# int8 (rewriter/quantize.py) on the same CPU, 520 tokens of context: 33 ms for one token, 335 ms
# for 128. One-token passes get far cheaper than in float32, so wide passes cost relatively more.
CPU_INT8_PRIOR = {1: 1.0, 2: 1.3, 4: 1.5, 8: 1.78, 16: 2.55, 32: 3.52, 64: 6.14, 128: 10.2}
# int8 weights with bfloat16 activations (int8-bf16), on a 2-core AVX2 CPU (issue 15): 63 / 126 /
# 284 / 991 / 2065 ms for 1 / 4 / 16 / 64 / 128 tokens, linear in between.
CPU_INT8_BF16_PRIOR = {1: 1.0, 2: 1.33, 4: 2.0, 8: 2.83, 16: 4.51, 32: 8.16, 64: 15.7, 128: 32.8}
# Measured on an H100 (0.5B, batch-invariant bf16, 520 tokens of context): 29 ms for one token,
# 30-36 ms for 2 to 512, the host launching kernels setting the pace. A prior that rises gently
# with the width did better on rewrites than that flat shape (26x against 23x plain greedy): it
# keeps windows short after an edit, until the drafter has earned trust.
GPU_PRIOR = {n: 1.0 + n / 256 for n in GPU_PASS_SIZES}
# What a CPU pass of each size in PASS_SIZES costs, in seconds or relative (only the shape counts
# until passes are timed here). The weights side knows it (LoadedModel.pass_costs()): the loop is handed it.
PassCosts = dict[int, float]
# Context bands: lengths of the same bit length share one table of measured costs; below 512, one.
SHORTEST_BAND = 9


def _band(context: int) -> int:
    return max(SHORTEST_BAND, context.bit_length())


def expected_tokens(acceptance: float, draft_length: int) -> float:
    """Mean tokens one pass yields: accepted draft tokens plus the model's own next token."""
    if acceptance >= 1.0:
        return draft_length + 1.0
    return (1.0 - acceptance ** (draft_length + 1)) / (1.0 - acceptance)


class Lookahead:
    def __init__(self, device_type: str = "cpu", max_window: int | None = None, smoothing: float = 0.3,
                 int8: bool = False, prior: PassCosts | None = None):
        """`prior`: CPU pass costs for every size in PASS_SIZES, measured on this machine or an int8
        kind's fixed shape; without it, the device's and dtype's fixed shape."""
        self.sizes: tuple[int, ...]
        if device_type == "cuda":
            self.prior, self.sizes = GPU_PRIOR, GPU_PASS_SIZES
        elif prior is not None:
            self.prior, self.sizes = prior, PASS_SIZES
        else:
            self.prior, self.sizes = CPU_INT8_PRIOR if int8 else CPU_PRIOR, PASS_SIZES
        self.max_window = self.sizes[-1] - 1 if max_window is None else min(max_window, self.sizes[-1] - 1)
        self.smoothing = smoothing
        self.tables: dict[int, dict[int, float]] = {}  # context band -> pass size -> smoothed seconds

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
        """A pass over `pass_tokens` took `seconds` with `context` tokens before it."""
        table = self.tables.setdefault(_band(context), {})
        bucket = self._bucket(pass_tokens)
        old = table.get(bucket)
        table[bucket] = seconds if old is None else old + self.smoothing * (seconds - old)

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
        """The draft length to verify next (0 means a plain one-token step), `context` tokens in."""
        best_length, best_rate = 0, 1.0 / self.cost(1, context)
        limit = min(available, self.max_window)
        for size in self.sizes[1:]:
            length = min(size - 1, limit)
            rate = expected_tokens(acceptance, length) / self.cost(length + 1, context)
            if rate > best_rate:
                best_length, best_rate = length, rate
            if length == limit:
                break
        return best_length

    def fit(self, draft: Draft | None, room: int, context: int = 0) -> Draft | None:
        """`draft` cut to the window worth verifying next (at most `room` tokens), or None for a
        plain one-token step."""
        if draft is None:
            return None
        draft.tokens = draft.tokens[:self.window(draft.acceptance, min(room, len(draft.tokens)), context)]
        return draft if draft.tokens else None
