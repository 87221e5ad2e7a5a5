"""The GPU path's batch invariance: a token's logits do not depend on the rest of its pass.

On a CPU these check the mechanics (values, shapes, the patched model's exactness under
drafts); the CUDA cases, which need a GPU, check the property where kernels differ by shape.
"""
import random

import pytest
import torch
from transformers import DynamicCache

from drafters import CombinedDrafter, PredictionDrafter, PromptLookupDrafter
from rewriter.decoding.decode import Decoder
from rewriter.weights.batch_invariant import FixedShapeLinear, Float64RMSNorm, make_batch_invariant
from tests.helpers.exactness import KINDS, edited
from tests.helpers.models import CharTokenizer, greedy_reference, tiny_model

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def test_fixed_shape_linear_computes_the_linear_layer():
    torch.manual_seed(0)
    linear = torch.nn.Linear(32, 24)
    layer = FixedShapeLinear(linear, rows=8)
    for count in (1, 7, 8, 9, 20):
        x = torch.randn(2, count, 32)
        out = layer(x)
        assert out.shape == (2, count, 24)
        torch.testing.assert_close(out, linear(x))


def test_rms_norm_matches_transformers():
    model = tiny_model(seed=1)
    norm = model.model.norm
    hidden = torch.randn(3, 5, model.config.hidden_size)
    torch.testing.assert_close(Float64RMSNorm(norm)(hidden), norm(hidden))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the fused norm is a CUDA kernel")
def test_the_fused_norm_computes_the_norm_and_keeps_each_rows_bits():
    from rewriter.weights.norm_kernel import fused_rms_norm

    fused = fused_rms_norm()
    assert fused is not None, "Triton should come with CUDA's torch"
    norm = tiny_model(seed=1, hidden=896).model.norm.to("cuda", torch.bfloat16)
    hidden = torch.randn(1, 300, 896, device="cuda", dtype=torch.bfloat16) * 4
    wide = fused(hidden, norm.weight, norm.variance_epsilon)
    torch.testing.assert_close(wide, norm(hidden))  # within bfloat16's rounding of transformers' norm
    for start, count in ((0, 1), (7, 1), (10, 3), (100, 64), (299, 1)):
        alone = fused(hidden[:, start:start + count].clone(), norm.weight, norm.variance_epsilon)
        assert torch.equal(alone, wide[:, start:start + count])


@pytest.fixture(scope="module", params=DEVICES)
def invariant_model(request):
    # On a CPU, blocks of 16 rows keep the test fast and still cut wide passes into several blocks.
    if request.param == "cuda":
        return make_batch_invariant(tiny_model(seed=3, eos_token_id=255).to("cuda", torch.bfloat16))
    return make_batch_invariant(tiny_model(seed=3, eos_token_id=255), rows=16)


def test_every_linear_and_norm_is_replaced(invariant_model):
    assert any(isinstance(module, FixedShapeLinear) for module in invariant_model.modules())
    assert not any(type(module) is torch.nn.Linear for module in invariant_model.modules())
    assert not any(type(module).__name__.endswith("RMSNorm") and type(module) is not Float64RMSNorm
                   for module in invariant_model.modules())


@pytest.mark.parametrize("start,width", [(10, 2), (20, 16), (30, 40), (5, 300)])
def test_a_wide_pass_gives_the_logits_of_one_token_passes(invariant_model, start, width):
    model = invariant_model
    device = next(model.parameters()).device
    tokens = [random.Random(start).randrange(1, 255) for _ in range(start + width)]

    def run(ids, cache):
        return model(input_ids=torch.tensor([ids], device=device), cache=cache, use_cache=True).logits[0]

    with torch.inference_mode():
        wide_cache, step_cache = DynamicCache(config=model.config), DynamicCache(config=model.config)
        run(tokens[:start], wide_cache)
        run(tokens[:start], step_cache)
        wide = run(tokens[start:], wide_cache)
        steps = torch.cat([run([t], step_cache) for t in tokens[start:]])
    assert torch.equal(wide, steps)


# On a CPU, where the plain loop is already exact (test_exactness.py), a few kinds check the
# mechanics; on a GPU, where exactness rests on the patch, every kind runs.
CPU_KINDS = ("several", "repeated_lines", "replacement_middle")


@pytest.mark.parametrize("kind", KINDS)
def test_greedy_with_drafts_equals_plain_greedy(invariant_model, kind):
    model = invariant_model
    if next(model.parameters()).device.type == "cpu" and kind not in CPU_KINDS:
        pytest.skip("every kind runs on CUDA; the CPU loop's exactness is test_exactness.py's")
    device = next(model.parameters()).device
    rng = random.Random(7)
    prompt = [rng.randrange(1, 255) for _ in range(48)]
    decoder = Decoder(model, CharTokenizer())
    ids = torch.tensor([prompt], device=device)
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=120,
                             eos_token_id=sorted(decoder.eos_ids))
    reference = out[0, len(prompt):].tolist()
    drafter = CombinedDrafter(PredictionDrafter(edited(reference, kind, rng)), PromptLookupDrafter())
    tokens = [t for step in decoder.generate(prompt, drafter, 120) for t in step.tokens]
    assert tokens == reference


def test_the_cpu_reference_is_unchanged_by_the_patch():
    # Patched and plain float32 models decode the same greedy tokens on a CPU: the patch changes
    # summation order only where it must, it does not change the model.
    plain = tiny_model(seed=4, eos_token_id=255)
    patched = make_batch_invariant(tiny_model(seed=4, eos_token_id=255))
    prompt = [random.Random(4).randrange(1, 255) for _ in range(40)]
    assert greedy_reference(patched, prompt, 60) == greedy_reference(plain, prompt, 60)
