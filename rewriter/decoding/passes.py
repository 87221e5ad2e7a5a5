"""The widths of a model's passes, shared by the decoding loop and the int8 paths' attention.

Passes up to WIDEST_DECODING_PASS tokens are the ones decoding makes; the int8 attention computes
them row-independently. Only a prompt's pass is wider; its rows are computed in chunks that start
at multiples of PROMPT_CHUNK, so a cached prompt prefix is reused in whole chunks, and the decoder
feeds a long prompt one chunk a pass (prompt_passes).
"""
from .lookahead import PASS_SIZES

WIDEST_DECODING_PASS = PASS_SIZES[-1]  # a CPU window's draft plus the token before it
PROMPT_CHUNK = 256  # measured: a 500-token prompt's pass is as fast in chunks of 256 as in one
# The int8 paths' attention, as registered with transformers (weights/quantize.py). It masks a
# decoding pass itself (causal within the pass), so forward.LeanPass calls it with no mask.
INT8_ATTENTION = "rewriter_int8_attention"


def has_int8_attention(model) -> bool:
    """Whether `model` runs the int8 paths' attention: row-independent decoding passes, and a wide
    pass computed chunk by chunk."""
    return getattr(getattr(model, "config", None), "_attn_implementation", None) == INT8_ATTENTION


def prompt_passes(start: int, end: int) -> list[tuple[int, int]]:
    """The passes that feed a prompt's positions start..end on the int8 paths: one per PROMPT_CHUNK.

    The int8 layers are row-independent and the attention computes a wide pass chunk by chunk, so
    this changes no bit. It keeps the intermediates of a pass in the CPU's caches: a 1,000-token
    prompt's pass was 1.8 s in one pass and 1.1 s in chunks (0.5B). Every pass stays wider than
    any decoding pass, as the attention tells them apart by width: a short last chunk joins the one
    before it. `start` is 0 or a whole number of chunks (what PrefixCache reuses).
    """
    if end - start <= WIDEST_DECODING_PASS:
        return [(start, end)]
    bounds = list(range(start, end, PROMPT_CHUNK))[1:] if start % PROMPT_CHUNK == 0 else []
    if bounds and end - bounds[-1] <= WIDEST_DECODING_PASS:
        bounds.pop()
    bounds = [start, *bounds, end]
    return list(zip(bounds, bounds[1:]))
