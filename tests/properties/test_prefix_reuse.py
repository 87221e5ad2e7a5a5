"""Property: a decoder that keeps prefix caches (rewriter/decoding/prefix_cache.py) gives every
request of any sequence the tokens a cold decoder gives it.

The requests share prefixes the ways real ones do: the same file asked again with another
instruction (a shared start, a different end), a conversation's next turn (an earlier prompt and
its answer, then more, its positions from the earlier answer on computed narrow), another file in
between, a prefix computed ahead (Decoder.prefill), the same prompt twice; some prompts longer
than a prompt chunk. On tiny models of the int8 paths (prompts row by row, and in chunks) and on
transformers' own float path, with a budget that may be too small to keep them all.
"""
from __future__ import annotations

from functools import cache

from hypothesis import given
from hypothesis import strategies as st

from drafters import PredictionDrafter
from rewriter.decoding.decode import Decoder
from rewriter.decoding.prefix_cache import PREFIX_CACHE_BYTES
from rewriter.passes import INT8_ATTENTION, INT8_ROW_ATTENTION, PROMPT_CHUNK
from rewriter.weights.quantize import quantize_int8
from tests.helpers.models import CharTokenizer, tiny_model

EOS = 255
PATHS = [INT8_ROW_ATTENTION, INT8_ATTENTION, "float"]
tokens = st.integers(1, EOS - 1)


@cache
def model(path: str):
    if path == "float":
        return tiny_model(seed=7, eos_token_id=EOS, hidden=32)
    quantized = quantize_int8(tiny_model(seed=7, eos_token_id=EOS, hidden=32), "int8")
    quantized.config._attn_implementation = path  # both are registered by quantize_int8
    return quantized


def tokenizer() -> CharTokenizer:
    return CharTokenizer(eos_token_id=EOS)


@st.composite
def requests(draw, count: int):
    """`count` requests (prompt, narrow_from, max_new_tokens, prefill only), each built on what came before."""
    made: list[tuple[list[int], int | None, int, bool]] = []
    seen: list[list[int]] = []  # earlier prompts, and earlier prompts with what a turn answered
    for _ in range(count):
        kind = draw(st.sampled_from(["new", "shared start", "next turn", "again"] if seen else ["new"]))
        narrow_from = None
        if kind == "new":
            long = draw(st.integers(0, 7)) == 0
            prompt = draw(st.lists(tokens, min_size=PROMPT_CHUNK - 40 if long else 1,
                                   max_size=PROMPT_CHUNK + 90 if long else 40))
        elif kind == "shared start":
            base = draw(st.sampled_from(seen))
            prompt = base[:draw(st.integers(0, len(base)))] + draw(st.lists(tokens, min_size=1, max_size=12))
        elif kind == "next turn":  # an earlier prompt, its answer (or anything), then the next turn
            base = draw(st.sampled_from(seen))
            narrow_from = len(base)
            prompt = base + draw(st.lists(tokens, max_size=10)) + draw(st.lists(tokens, min_size=1, max_size=10))
        else:
            prompt = list(draw(st.sampled_from(seen)))
        prefill_only = draw(st.integers(0, 4)) == 0
        made.append((prompt, narrow_from, draw(st.integers(1, 6)), prefill_only))
        seen.append(prompt)
    return made


def decode(decoder: Decoder, prompt: list[int], narrow_from: int | None, max_new_tokens: int) -> list[int]:
    output: list[int] = []
    drafter = PredictionDrafter(prompt[-8:])  # some drafts, mostly refused: rejected tails cropped
    for step in decoder.generate(prompt, drafter, max_new_tokens, narrow_from=narrow_from):
        output.extend(step.tokens)
    return output


@given(st.sampled_from(PATHS), st.integers(2, 4).flatmap(requests), st.sampled_from([PREFIX_CACHE_BYTES, 40_000]))
def test_requests_sharing_prefixes_give_the_cold_tokens(path, sequence, budget):
    warm = Decoder(model(path), tokenizer(), prefix_cache=True, prefix_cache_bytes=budget)
    for prompt, narrow_from, max_new_tokens, prefill_only in sequence:
        if prefill_only:  # computed ahead; the request itself comes later or never
            assert warm.prefill(prompt, narrow_from) == len(prompt)
            continue
        cold = decode(Decoder(model(path), tokenizer()), prompt, narrow_from, max_new_tokens)
        assert decode(warm, prompt, narrow_from, max_new_tokens) == cold


def test_a_prefix_held_whole_under_another_bound_is_prefilled_without_an_empty_pass():
    # Found by the property, kept: the float path fed a pass of no tokens once the prefix cache
    # held all of the prefix, kept by a request whose prompt was computed narrow from further on.
    prompt = list(range(1, 11))
    warm = Decoder(model("float"), tokenizer(), prefix_cache=True)
    decode(warm, prompt, None, 3)
    assert warm.prefill(prompt[:6]) == 6
    assert decode(warm, prompt[:6] + [20, 21], None, 4) == decode(Decoder(model("float"), tokenizer()),
                                                                  prompt[:6] + [20, 21], None, 4)
