"""int8 weights: close to float32, bit-identical in passes of any width, and exact under drafts."""
import random

import pytest
import torch
from transformers import DynamicCache

from drafters import CombinedDrafter, PredictionDrafter, PromptLookupDrafter
from rewriter.decoding import quantize
from rewriter.decoding.decode import Decoder
from rewriter.decoding.lookahead import CPU_INT8_PRIOR, CPU_PRIOR, GPU_PRIOR, Lookahead
from rewriter.decoding.models import ModelError, load_model, resolve_dtype
from rewriter.decoding.quantize import Int8Linear, QuantizationUnavailable, is_int8, quantize_int8
from rewriter.decoding.verify import BlockVerifier, LogitsShaper
from tests.conftest import CharTokenizer, greedy_reference, tiny_model
from tests.test_exactness import KINDS, edited
from tests.test_sampling import (
    ALPHA,
    TARGET_SEED,
    DraftSource,
    chi_square_p_value,
    exact_distribution,
    logits_table,
    peaky_model,
    sample_with_verifier,
)


def test_int8_linear_is_close_to_float():
    torch.manual_seed(0)
    linear = torch.nn.Linear(96, 80)
    x = torch.randn(5, 96)
    error = (Int8Linear(linear)(x) - linear(x)).norm() / linear(x).norm()
    assert error < 0.02


def test_int8_linear_rows_do_not_depend_on_their_neighbours():
    # The property that makes drafts exact: a row's result is the same in any batch, bit for bit.
    torch.manual_seed(1)
    layer = Int8Linear(torch.nn.Linear(64, 48))
    rows = torch.randn(9, 64)
    rows[4] *= 1000  # an outlier row would coarsen every other row under per-tensor scaling
    together = layer(rows)
    alone = torch.cat([layer(rows[i:i + 1]) for i in range(len(rows))])
    assert torch.equal(together, alone)


@pytest.fixture(scope="module")
def int8_model():
    return quantize_int8(tiny_model(seed=3, eos_token_id=255))


def test_quantize_replaces_every_linear(int8_model):
    assert is_int8(int8_model)
    assert not any(type(module) is torch.nn.Linear for module in int8_model.modules())


@pytest.mark.parametrize("start,width", [(10, 2), (20, 16), (30, 40)])
def test_a_wide_pass_gives_the_logits_of_one_token_passes(int8_model, start, width):
    tokens = [random.Random(start).randrange(1, 255) for _ in range(start + width)]
    with torch.inference_mode():
        wide_cache, step_cache = DynamicCache(config=int8_model.config), DynamicCache(config=int8_model.config)
        int8_model(input_ids=torch.tensor([tokens[:start]]), past_key_values=wide_cache, use_cache=True)
        int8_model(input_ids=torch.tensor([tokens[:start]]), past_key_values=step_cache, use_cache=True)
        wide = int8_model(input_ids=torch.tensor([tokens[start:]]), past_key_values=wide_cache, use_cache=True).logits[0]
        steps = torch.cat([int8_model(input_ids=torch.tensor([[t]]), past_key_values=step_cache, use_cache=True).logits[0]
                           for t in tokens[start:]])
    assert torch.equal(wide, steps)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("kind", KINDS)
def test_int8_output_equals_its_own_plain_greedy(seed, kind):
    model = quantize_int8(tiny_model(seed=seed, eos_token_id=255))
    rng = random.Random(seed)
    prompt = [rng.randrange(1, 255) for _ in range(48)]
    reference = greedy_reference(model, prompt, 120)
    drafter = CombinedDrafter(PredictionDrafter(edited(reference, kind, rng)), PromptLookupDrafter())
    tokenizer = CharTokenizer()
    tokenizer.eos_token_id = 255  # the model's own; CharTokenizer's 0 is an ordinary token here
    tokens = []
    for step in Decoder(model, tokenizer).generate(prompt, drafter, 120):
        tokens.extend(step.tokens)
    assert tokens == reference


def test_int8_sampling_keeps_the_target_distribution():
    # The verifier sees the int8 model's logits; with drafts they must be the same as one pass per prefix.
    model = quantize_int8(peaky_model(seed=TARGET_SEED))
    table = logits_table(model)
    shape = LogitsShaper(temperature=0.8, top_p=0.95)
    generator = torch.Generator().manual_seed(4321)
    drafts = DraftSource("model", shape, generator)
    counts, mean_accepted = sample_with_verifier(BlockVerifier(shape, seed=8765), table, shape, drafts, 6000, generator)
    assert chi_square_p_value(counts, exact_distribution(table, shape)) > ALPHA
    assert mean_accepted > 0.2


def test_dtype_auto_is_int8_on_cpu_and_bfloat16_on_gpu():
    assert resolve_dtype("auto", torch.device("cpu")) == "int8"
    assert resolve_dtype(None, torch.device("cuda")) == "bfloat16"
    assert resolve_dtype("float32", torch.device("cpu")) == "float32"
    with pytest.raises(ModelError, match="unknown dtype"):
        resolve_dtype("int4", torch.device("cpu"))


def test_int8_on_a_cpu_loads_quantized(tiny_checkpoint):
    loaded = load_model(str(tiny_checkpoint), dtype="auto")
    assert loaded.dtype == "int8" and is_int8(loaded.model)
    assert Decoder(loaded.model, loaded.tokenizer).lookahead.prior is CPU_INT8_PRIOR


def test_without_an_int8_backend_loading_falls_back_to_float32_with_one_line(tiny_checkpoint, monkeypatch):
    def broken(a, b):
        raise RuntimeError("no int8 kernel for this CPU")

    monkeypatch.setattr(quantize.torch, "_int_mm", broken)
    said = []
    loaded = load_model(str(tiny_checkpoint), dtype="int8", progress=said.append)
    assert loaded.dtype == "float32" and not is_int8(loaded.model)
    warnings = [line for line in said if "int8 is unavailable" in line]
    assert len(warnings) == 1 and "no int8 kernel" in warnings[0] and "using float32" in warnings[0]
    # ...and the float32 model decodes.
    assert loaded.model(input_ids=torch.tensor([[1, 2, 3]])).logits.shape[-1] > 0


def test_a_torch_without_int_mm_is_reported_not_crashed(monkeypatch):
    monkeypatch.delattr(quantize.torch, "_int_mm")
    with pytest.raises(QuantizationUnavailable, match="no int8 matrix product"):
        quantize_int8(tiny_model(seed=0))


def test_the_window_prior_follows_the_device_and_dtype():
    assert Lookahead("cpu").prior is CPU_PRIOR
    assert Lookahead("cpu", int8=True).prior is CPU_INT8_PRIOR
    assert Lookahead("cuda", int8=True).prior is GPU_PRIOR
