"""int8-fbgemm's weights from the cache are packed once per start, at load, after the projections
that share an input are joined: the same logits, bit for bit, as packing each layer and joining
the packed ones."""
import random

import pytest
import torch
from transformers import DynamicCache

from rewriter.weights import models, quantize
from rewriter.weights.models import load_model
from rewriter.weights.quantize import FbgemmInt8Linear, quantize_int8, quantized_state
from rewriter.weights.shared_products import share_input_products
from tests.helpers.models import tiny_model

pytestmark = pytest.mark.skipif(not quantize.fbgemm_levels(), reason="no exact FBGEMM here")


class _Counted:
    """An op that counts its calls and then runs."""

    def __init__(self, op):
        self.op, self.calls = op, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.op(*args, **kwargs)


@pytest.fixture
def counted_ops(monkeypatch):
    """FBGEMM's pack and unpack, counted."""
    ops = {name: _Counted(getattr(torch.ops.quantized, name)) for name in ("linear_prepack", "linear_unpack")}
    for name, op in ops.items():
        monkeypatch.setattr(torch.ops.quantized, name, op)
    return ops


def _logits(model, tokens):
    """A prompt's logits, then a wider pass's after it."""
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        prompt = model(input_ids=torch.tensor([tokens[:80]]), cache=cache, use_cache=True).logits
        step = model(input_ids=torch.tensor([tokens[80:]]), cache=cache, use_cache=True).logits
    return prompt, step


def test_a_later_start_packs_each_weight_once_at_load(tiny_checkpoint, tmp_path, monkeypatch, counted_ops):
    monkeypatch.setenv("REWRITER_CACHE", str(tmp_path))
    monkeypatch.setattr(models, "KEEP_MIN_PARAMETERS", 0)  # keep the tiny model's int8 weights
    first = load_model(str(tiny_checkpoint), dtype="int8-fbgemm")
    assert list((tmp_path / "quantized").glob("*-int8-fbgemm.safetensors"))
    for op in counted_ops.values():
        op.calls = 0
    later = load_model(str(tiny_checkpoint), dtype="int8-fbgemm")
    layers = [module for module in later.model.modules() if isinstance(module, FbgemmInt8Linear)]
    assert len(layers) == 5  # q/k/v joined, o, gate/up joined, down, the output layer
    assert all(layer.packed is not None for layer in layers)  # packed at load, not in the first request
    assert counted_ops["linear_prepack"].calls == len(layers)  # so none twice, and nothing unpacked
    assert counted_ops["linear_unpack"].calls == 0
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.inference_mode():
        assert torch.equal(first.model(input_ids=ids).logits, later.model(input_ids=ids).logits)


def test_layers_joined_before_packing_give_the_bits_of_packed_layers_joined(counted_ops):
    plain = quantize_int8(tiny_model(seed=3, eos_token_id=255), "int8-fbgemm")  # each layer packed as made
    joined_packed = quantize_int8(tiny_model(seed=3, eos_token_id=255), "int8-fbgemm")
    assert share_input_products(joined_packed) == 4  # joined from packed layers' unpacked rows
    from_state = quantize_int8(tiny_model(seed=3, eos_token_id=255), "int8-fbgemm", state=quantized_state(plain))
    counted_ops["linear_prepack"].calls = 0
    assert share_input_products(from_state) == 4
    quantize.pack_fbgemm_weights(from_state)
    assert counted_ops["linear_prepack"].calls == 2 * 4 + 1  # 4 layers a decoder layer and the output layer
    tokens = [random.Random(5).randrange(1, 255) for _ in range(90)]
    reference = _logits(plain, tokens)
    for model in (joined_packed, from_state):
        assert all(torch.equal(mine, theirs) for mine, theirs in zip(_logits(model, tokens), reference))


def test_a_layer_filled_from_a_state_dict_packs_itself_when_first_used():
    made = quantize_int8(tiny_model(seed=4, eos_token_id=255), "int8-fbgemm")
    filled = quantize_int8(tiny_model(seed=4, eos_token_id=255), "int8-fbgemm", state=quantized_state(made))
    assert all(module.packed is None for module in filled.modules() if isinstance(module, FbgemmInt8Linear))
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.inference_mode():
        assert torch.equal(made(input_ids=ids).logits, filled(input_ids=ids).logits)
