"""The widths of a model's passes, shared by the decoding loop and the int8 paths' attention.

Passes up to WIDEST_DECODING_PASS tokens are the ones decoding makes; the int8 attention computes
them row-independently. Only a prompt's pass is wider; its rows are computed in chunks that start
at multiples of PROMPT_CHUNK, so a cached prompt prefix is reused in whole chunks.
"""
from .lookahead import PASS_SIZES

WIDEST_DECODING_PASS = PASS_SIZES[-1]  # a CPU window's draft plus the token before it
PROMPT_CHUNK = 256  # measured: a 500-token prompt's pass is as fast in chunks of 256 as in one
# The int8 paths' attention, as registered with transformers (weights/quantize.py). It masks a
# decoding pass itself (causal within the pass), so forward.LeanPass calls it with no mask.
PROMPT_FLOAT32_ATTENTION = "rewriter_float64_prompt_float32"
