"""Our calls into transformers use its current API: decoding on every path, a draft model's and
MJSD's drafts and the CPU path's timing warn of nothing deprecated (transformers 5.24 renamed
`past_key_values` to `cache`, in the calls and in the outputs)."""
from __future__ import annotations

import logging
import random
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from transformers import DynamicCache

from drafters import CombinedDrafter, PredictionDrafter, PromptLookupDrafter
from drafters.draft_model import DraftModelDrafter
from rewriter.decoding.decode import Decoder
from rewriter.decoding.mjsd import BeamDrafter, MJSDVerifier
from rewriter.weights.cpu_choice import pass_costs
from rewriter.weights.path_timing import measure_candidates
from rewriter.weights.quantize import INT8_KINDS, QuantizationUnavailable, check_kind, quantize_int8
from rewriter.weights.shared_products import share_input_products
from tests.helpers.models import CharTokenizer, tiny_model


class _Logged(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def deprecations() -> Iterator[list[str]]:
    """Collects what the block is told is deprecated: FutureWarnings and DeprecationWarnings
    (transformers' deprecated arguments), and warnings transformers logs (its deprecated output
    fields log once a process, so that memory is cleared first)."""
    found: list[str] = []
    logging.Logger.warning_once.cache_clear()  # type: ignore[attr-defined]  # transformers' own, lru-cached
    logged = _Logged()
    logger = logging.getLogger("transformers")
    logger.addHandler(logged)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield found
    finally:
        logger.removeHandler(logged)
    found += [f"{w.category.__name__}: {w.message}" for w in caught
              if issubclass(w.category, (FutureWarning, DeprecationWarning))]
    found += [message for message in logged.messages if "deprecat" in message.lower()]


def _decode(decoder: Decoder, prompt: list[int], drafter, verifier=None) -> list[int]:
    tokens = []
    for step in decoder.generate(prompt, drafter, 40, verifier=verifier):
        tokens.extend(step.tokens)
    return tokens


@pytest.mark.parametrize("dtype", ["float32", *INT8_KINDS])
def test_decoding_warns_of_nothing_deprecated(dtype):
    model = tiny_model(seed=4, eos_token_id=255)
    if dtype != "float32":
        try:
            check_kind(dtype)
        except QuantizationUnavailable as error:
            pytest.skip(str(error))
        share_input_products(quantize_int8(model, dtype))
    rng = random.Random(4)
    prompt = [rng.randrange(1, 255) for _ in range(300)]  # past one prompt chunk: the int8 paths feed it in two
    with deprecations() as found:
        decoder = Decoder(model, CharTokenizer(), pass_costs=pass_costs(model), prefix_cache=True)
        reference = _decode(decoder, prompt, None)
        drafted = _decode(decoder, prompt, CombinedDrafter(PredictionDrafter(reference[:20] + [9] + reference[20:]),
                                                           PromptLookupDrafter()))
    assert found == []
    assert drafted == reference and len(reference) >= 10  # the decodes ran, with drafts


def test_draft_models_and_mjsd_warn_of_nothing_deprecated():
    target, small = tiny_model(seed=5, eos_token_id=255), tiny_model(seed=6, eos_token_id=255)
    prompt = list(range(10, 40))
    with deprecations() as found:
        decoder = Decoder(target, CharTokenizer())
        _decode(decoder, prompt, DraftModelDrafter(small))
        _decode(decoder, prompt, BeamDrafter(small, beams=3), MJSDVerifier(tau=0.3))
    assert found == []


def test_timing_the_cpu_paths_warns_of_nothing_deprecated():
    with deprecations() as found:
        costs = measure_candidates(tiny_model(seed=7), widths=(1, 4), context_tokens=8, prompt_tokens=12, repeats=1)
    assert found == []
    assert costs["float32"]


def test_the_check_sees_a_deprecated_call():
    model = tiny_model(seed=8)
    with deprecations() as found, torch.inference_mode():
        out = model(input_ids=torch.tensor([[1, 2, 3]]), past_key_values=DynamicCache(config=model.config),
                    use_cache=True)
        assert out.past_key_values is not None
    assert any("past_key_values" in message for message in found), found
    assert sum("Use `cache` instead" in message for message in found) == 2  # the argument, then the field
