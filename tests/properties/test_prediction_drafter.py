"""Property: whatever the prediction, decoding with the prediction drafter gives plain greedy's
tokens, and its stats add up.

The answer is known: a tiny random Qwen2's greedy continuation of a prompt, decoded by
transformers' own generate (tests/helpers/models.py), once for each of a few prompts. The prediction is drawn as the answer
edited the ways code and chat answers differ from it: tokens inserted, deleted, replaced, stretches
swapped or repeated, cut short or run long, empty, unrelated, with the end-of-text token inside;
alone or beside prompt lookup (the rewrite's drafter, drafters/combined.py).
"""
from __future__ import annotations

import random
from functools import cache

from hypothesis import given
from hypothesis import strategies as st

from drafters import PredictionDrafter
from drafters.combined import rewrite_drafter
from rewriter.decoding.decode import Decoder
from tests.helpers.models import CharTokenizer, greedy_reference, tiny_model

EOS = 255
LENGTH = 32  # the longest answer asked for
tokens = st.integers(1, EOS)  # the end-of-text token included: a prediction may hold one


@cache
def model(seed: int):
    return tiny_model(seed=seed, eos_token_id=EOS, hidden=32, layers=1)


PROMPTS = 12  # for each model


@cache
def prompt_and_answer(seed: int, index: int) -> tuple[list[int], list[int]]:
    rng = random.Random(seed * PROMPTS + index)
    prompt = [rng.randrange(1, EOS) for _ in range(rng.randrange(1, 17))]
    return prompt, greedy_reference(model(seed), prompt, LENGTH)


def tokenizer() -> CharTokenizer:
    return CharTokenizer(eos_token_id=EOS)


@st.composite
def edited(draw, answer: list[int]) -> list[int]:
    """The answer after a few edits of the kinds a prediction differs from it by."""
    prediction = list(answer)
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["insert", "delete", "replace", "swap", "repeat", "cut", "extend", "other"]))
        at = draw(st.integers(0, len(prediction)))
        end = draw(st.integers(at, min(len(prediction), at + 12)))
        if kind == "insert":
            prediction[at:at] = draw(st.lists(tokens, min_size=1, max_size=8))
        elif kind == "delete":
            del prediction[at:end]
        elif kind == "replace":
            prediction[at:end] = draw(st.lists(tokens, max_size=8))
        elif kind == "swap":  # two stretches exchanged
            later = draw(st.integers(end, len(prediction)))
            prediction[at:later] = prediction[end:later] + prediction[at:end]
        elif kind == "repeat":  # a stretch twice, as a duplicated line
            prediction[at:at] = prediction[at:end]
        elif kind == "cut":
            del prediction[at:]
        elif kind == "extend":  # longer than the answer: more after it, or the answer again
            prediction += draw(st.one_of(st.lists(tokens, max_size=20), st.just(list(answer))))
        else:  # unrelated to the answer
            prediction = draw(st.lists(tokens, max_size=LENGTH))
    return prediction


@given(st.data(), st.sampled_from([0, 1, 2]), st.integers(0, PROMPTS - 1), st.integers(1, LENGTH), st.booleans())
def test_any_prediction_decodes_to_plain_greedy(data, seed, index, max_new_tokens, with_prompt_lookup):
    prompt, reference = prompt_and_answer(seed, index)
    prediction = data.draw(edited(reference), label="prediction")
    drafter = rewrite_drafter(prediction) if with_prompt_lookup else PredictionDrafter(prediction)
    output = []
    for step in Decoder(model(seed), tokenizer()).generate(prompt, drafter, max_new_tokens):
        output.extend(step.tokens)
    stats = step.stats
    assert output == reference[:max_new_tokens]
    assert stats.output_tokens == len(output)
    assert stats.finish_reason == ("stop" if output[-1] == EOS else "length")
    # every pass adds its own token to the draft tokens it accepted (the last may fall past the end)
    assert len(output) <= stats.accepted_draft_tokens + stats.forward_passes <= len(output) + 1
