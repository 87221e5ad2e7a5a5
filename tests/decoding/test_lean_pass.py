"""The lean decoding pass: bit for bit the model's forward, used where it applies, and given up
(with a warning) the moment it would differ."""
import random

import pytest
import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

from drafters import CombinedDrafter, PredictionDrafter, PromptLookupDrafter
from rewriter.decoding.decode import Decoder
from rewriter.decoding.forward import LeanPass
from rewriter.passes import WIDEST_DECODING_PASS
from rewriter.weights.cpu_choice import pass_costs
from rewriter.weights.quantize import INT8_KINDS, quantize_int8
from rewriter.weights.shared_products import share_input_products
from tests.helpers.exactness import edited
from tests.helpers.models import CharTokenizer, greedy_reference, tiny_model


def tiny_llama(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         initializer_range=0.2, eos_token_id=255, bos_token_id=255, pad_token_id=255,
                         tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = model.generation_config.pad_token_id = 255
    return model


ARCHITECTURES = {"qwen2": lambda: tiny_model(seed=3, eos_token_id=255), "llama": tiny_llama}


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Each test checks the lean pass itself: no answer kept by another test or run."""
    monkeypatch.setenv("REWRITER_CACHE", str(tmp_path))


@pytest.fixture(params=[(arch, kind) for arch in ARCHITECTURES for kind in INT8_KINDS], ids=str)
def int8_model(request):
    arch, kind = request.param
    model = quantize_int8(ARCHITECTURES[arch](), kind)
    share_input_products(model)  # as load_model leaves it
    return model


@pytest.mark.parametrize("width", [1, 2, 17, WIDEST_DECODING_PASS])
def test_a_lean_pass_gives_the_forwards_logits_and_cache_bit_for_bit(int8_model, width):
    lean = LeanPass.for_model(int8_model)
    assert lean is not None
    tokens = [random.Random(width).randrange(1, 255) for _ in range(300 + width)]
    caches = DynamicCache(config=int8_model.config), DynamicCache(config=int8_model.config)
    with torch.inference_mode():
        for cache in caches:  # a prompt wider than a decoding pass, then a few one-token passes
            int8_model(input_ids=torch.tensor([tokens[:290]]), cache=cache, use_cache=True)
            for token in tokens[290:300]:
                int8_model(input_ids=torch.tensor([[token]]), cache=cache, use_cache=True)
        ids = torch.tensor([tokens[300:]])
        expected = int8_model(input_ids=ids, cache=caches[0], use_cache=True).logits
        got = lean._pass(ids, caches[1])
    assert torch.equal(got, expected)
    for model_layer, lean_layer in zip(caches[0].layers, caches[1].layers):
        assert torch.equal(model_layer.keys, lean_layer.keys) and torch.equal(model_layer.values, lean_layer.values)


def _decoding(model, seed: int, prompt_tokens: int, budget: int, **options):
    """A random prompt, plain greedy's answer to it, and a decoder for the model."""
    rng = random.Random(seed)
    prompt = [rng.randrange(1, 255) for _ in range(prompt_tokens)]
    tokenizer = CharTokenizer(eos_token_id=255)
    return rng, prompt, greedy_reference(model, prompt, budget), Decoder(model, tokenizer, **options)


def test_decoding_takes_the_lean_pass_and_stays_exact(int8_model):
    rng, prompt, reference, decoder = _decoding(int8_model, 1, 48, 120, pass_costs=pass_costs(int8_model))
    drafter = CombinedDrafter(PredictionDrafter(edited(reference, "replacement_middle", rng)), PromptLookupDrafter())
    tokens = [token for step in decoder.generate(prompt, drafter, 120) for token in step.tokens]
    assert tokens == reference
    # Passes after the prompt went the lean way (which widths, the window policy's timings decide).
    assert decoder.lean is not None and decoder.lean.usable and decoder.lean.checked


def test_a_lean_pass_that_would_differ_is_given_up_with_a_warning(int8_model):
    _, prompt, reference, decoder = _decoding(int8_model, 2, 40, 60)
    assert decoder.lean is not None
    rotate = decoder.lean.rotate
    decoder.lean.rotate = lambda query, key, cos, sin: rotate(query, key, cos, -sin)  # a wrong rotation
    with pytest.warns(RuntimeWarning, match="differs from the model's forward"):
        tokens = [token for step in decoder.generate(prompt, PromptLookupDrafter(), 60) for token in step.tokens]
    assert tokens == reference
    assert not decoder.lean.usable


def test_the_check_s_answer_is_kept_and_a_later_decoder_takes_the_lean_pass_unchecked(monkeypatch):
    model = quantize_int8(tiny_model(seed=3, eos_token_id=255), "int8-fbgemm")
    share_input_products(model)
    _, prompt, reference, first = _decoding(model, 4, 40, 30)
    assert [token for step in first.generate(prompt, PromptLookupDrafter(), 30) for token in step.tokens] == reference
    checks = []
    monkeypatch.setattr(LeanPass, "_check", lambda self, *args: checks.append(args) or True)
    _, _, _, later = _decoding(model, 4, 40, 30)
    assert [token for step in later.generate(prompt, PromptLookupDrafter(), 30) for token in step.tokens] == reference
    assert not checks and later.lean is not None and later.lean.usable  # the kept answer, not a new check


def test_the_lean_pass_is_only_for_the_int8_paths_attention():
    assert LeanPass.for_model(tiny_model(seed=3)) is None  # float32: transformers' own attention and mask
