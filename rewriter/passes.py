"""A model's passes: their widths and what each width costs before anything is measured.

Torch-free and low in the house: the decoding loop, the window policy (lookahead.py), the weights
(the int8 paths' attention, the CPU path's choice) and the vLLM proposer all read it, and none of
them has to import another for it.

Passes up to WIDEST_DECODING_PASS tokens are the ones decoding makes; the int8 attention computes
them row-independently. Only a prompt's pass is wider; its rows are computed in chunks that start
at multiples of PROMPT_CHUNK, so a cached prompt prefix is reused in whole chunks, and the decoder
feeds a long prompt one chunk a pass (prompt_passes).
"""
# Window sizes tried: passes of 1, 2, 4, ... tokens, where matrix kernels change cost steps.
PASS_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
# A GPU verifies a few hundred tokens in about the time of one, so it may look further ahead.
GPU_PASS_SIZES = PASS_SIZES + (256, 512)
WIDEST_DECODING_PASS = PASS_SIZES[-1]  # a CPU window's draft plus the token before it
PROMPT_CHUNK = 256  # measured: a 500-token prompt's pass is as fast in chunks of 256 as in one
# The int8 paths' attentions, as registered with transformers (weights/attention.py). Both mask a
# decoding pass themselves (causal within the pass), so decoding.forward.LeanPass calls them with no
# mask, and compute each row of a decoding pass alone. A prompt's pass, wider, the first computes in
# chunks; the second computes each row alone too, where this machine's kernels make that cost nothing.
INT8_ATTENTION = "rewriter_int8_attention"
INT8_ROW_ATTENTION = "rewriter_int8_row_attention"
# The GPU path's float64 attention (weights/batch_invariant.py), as registered with transformers:
# with it, every row of a pass gets the bits it has alone, which the static pass (decoding/static.py) needs.
FLOAT64_ATTENTION = "rewriter_float64"

# What a CPU pass of each size in PASS_SIZES costs, in seconds or relative (only the shape counts
# until passes are timed here). The weights side knows it (LoadedModel.pass_costs()): the loop is handed it.
PassCosts = dict[int, float]
# Relative cost of a pass of n tokens before anything is measured: the shape of each path's costs
# on a small CPU, nearly flat on a GPU (the measured costs are in docs/decoding.md, Lookahead window).
# float32: a 64-token pass costs about 4x a one-token pass, and even 2 tokens about 1.5x.
CPU_PRIOR = {1: 1.0, 2: 1.5, 4: 1.58, 8: 1.58, 16: 2.62, 32: 2.75, 64: 4.0, 128: 7.2}
# int8 (weights/quantize.py): one-token passes get far cheaper than in float32, so wide passes cost
# relatively more.
CPU_INT8_PRIOR = {1: 1.0, 2: 1.3, 4: 1.5, 8: 1.78, 16: 2.55, 32: 3.52, 64: 6.14, 128: 10.2}
# int8 weights with bfloat16 activations (int8-bf16), where a CPU has no fast int8 products: wide
# passes cost nearly in proportion to their width (the sizes between measured ones interpolated).
CPU_INT8_BF16_PRIOR = {1: 1.0, 2: 1.33, 4: 2.0, 8: 2.83, 16: 4.51, 32: 8.16, 64: 15.7, 128: 32.8}
# On a GPU a pass costs about the same at every width up to 512: the host launching kernels sets the
# pace. A prior that rises gently with the width did better on rewrites than that flat shape: it
# keeps windows short after an edit, until the drafter has earned trust.
GPU_PRIOR = {n: 1.0 + n / 256 for n in GPU_PASS_SIZES}


def attention_of(model) -> str | None:
    """The attention `model` runs, as its config names it."""
    return getattr(getattr(model, "config", None), "_attn_implementation", None)


def has_int8_attention(model) -> bool:
    """Whether `model` runs one of the int8 paths' attentions: row-independent decoding passes."""
    return attention_of(model) in (INT8_ATTENTION, INT8_ROW_ATTENTION)


def has_row_independent_prompts(model) -> bool:
    """Whether every row of any pass, a prompt's included, gets the bits it has alone: a cache of
    any prefix of a prompt is then what a cold prefill computes (decoding/prefix_cache.py)."""
    return is_batch_invariant(model) or attention_of(model) == INT8_ROW_ATTENTION


def is_batch_invariant(model) -> bool:
    """Whether `model` was made batch-invariant (weights/batch_invariant.py): its attention is the
    float64 one and its linear layers compute whole blocks of `rows` rows."""
    return (attention_of(model) == FLOAT64_ATTENTION
            and isinstance(getattr(getattr(model, "lm_head", None), "rows", None), int))


def prompt_passes(start: int, end: int) -> list[tuple[int, int]]:
    """The passes that feed a prompt's positions start..end on the int8 paths: one per PROMPT_CHUNK,
    bounded at its multiples.

    The int8 layers are row-independent and the attention computes a wide pass chunk by chunk, so
    this changes no bit. It keeps the intermediates of a pass in the CPU's caches, so a long prompt
    takes less time in chunks than in one pass. Every pass stays wider than
    any decoding pass, as the chunked attention tells them apart by width: a short first or last
    piece joins its neighbour. `start` is a whole number of chunks where the prompt's attention
    computes it in chunks (what PrefixCache reuses there); anywhere where rows are computed alone.
    """
    if end - start <= WIDEST_DECODING_PASS:
        return [(start, end)]
    bounds = list(range((start // PROMPT_CHUNK + 1) * PROMPT_CHUNK, end, PROMPT_CHUNK))
    if bounds and bounds[0] - start <= WIDEST_DECODING_PASS:
        bounds.pop(0)
    if bounds and end - bounds[-1] <= WIDEST_DECODING_PASS:
        bounds.pop()
    bounds = [start, *bounds, end]
    return list(zip(bounds, bounds[1:]))


def decoding_passes(start: int, end: int) -> list[tuple[int, int]]:
    """Passes that feed positions start..end as decoding passes (each row the bits it has alone on
    the int8 paths): WIDEST_DECODING_PASS at a time. What a conversation's earlier answer was
    computed in, a few tokens at a time, whatever the split."""
    return [(begin, min(begin + WIDEST_DECODING_PASS, end)) for begin in range(start, end, WIDEST_DECODING_PASS)]
