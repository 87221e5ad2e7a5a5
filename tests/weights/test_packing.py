"""int8-fbgemm's weights from the cache are packed once per start, at load, after the projections
that share an input are joined: the same logits, bit for bit, as packing each layer and joining
the packed ones. A later start packs them while the model is built (prepacked.py), else after."""
import random

import pytest
import torch
from transformers import DynamicCache

from rewriter.weights import cpu_choice, int8_kernels, models, prepacked, quantize
from rewriter.weights.models import load_model
from rewriter.weights.prepacked import Prepacking
from rewriter.weights.quantize import FbgemmInt8Linear, quantize_int8, quantized_tensors
from rewriter.weights.shared_products import share_input_products
from tests.helpers.models import tiny_model

pytestmark = pytest.mark.skipif(not int8_kernels.fbgemm_levels(), reason="no exact FBGEMM here")


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


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """A private cache that keeps the tiny model's int8 weights; the prepackings started, counted."""
    monkeypatch.setenv("REWRITER_CACHE", str(tmp_path))
    monkeypatch.delenv("REWRITER_DTYPE", raising=False)
    monkeypatch.setattr(models, "KEEP_MIN_PARAMETERS", 0)
    started: list[Prepacking] = []

    class Counted(Prepacking):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self)

    monkeypatch.setattr(models, "Prepacking", Counted)
    return started


def test_a_later_start_packs_each_weight_once_at_load(tiny_checkpoint, tmp_path, kept, counted_ops):
    first = load_model(str(tiny_checkpoint), dtype="int8-fbgemm")
    assert not kept  # nothing kept yet: quantized, joined, then packed
    assert list((tmp_path / "quantized").glob("*-int8-fbgemm.safetensors"))
    for op in counted_ops.values():
        op.calls = 0
    said: list[str] = []
    later = load_model(str(tiny_checkpoint), dtype="int8-fbgemm", progress=said.append)
    assert len(kept) == 1 and not kept[0].failure  # packed from the kept file while the model was built
    assert not [line for line in said if "not used" in line]
    layers = [module for module in later.model.modules() if isinstance(module, FbgemmInt8Linear)]
    assert len(layers) == 5  # q/k/v joined, o, gate/up joined, down, the output layer
    assert all(layer.packed is not None for layer in layers)  # packed at load, not in the first request
    pieces = sum(len(layer.packed) for layer in layers)  # the output layer's 151936 rows: in pieces
    assert pieces > len(layers)
    assert counted_ops["linear_prepack"].calls == pieces  # so none twice, and nothing unpacked
    assert counted_ops["linear_unpack"].calls == 0
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.inference_mode():
        assert torch.equal(first.model(input_ids=ids).logits, later.model(input_ids=ids).logits)


def test_layers_joined_before_packing_give_the_bits_of_packed_layers_joined(counted_ops):
    plain = quantize_int8(tiny_model(seed=3, eos_token_id=255), "int8-fbgemm")  # each layer packed as made
    joined_packed = quantize_int8(tiny_model(seed=3, eos_token_id=255), "int8-fbgemm")
    assert share_input_products(joined_packed) == 4  # joined from packed layers' unpacked rows
    from_state = quantize_int8(tiny_model(seed=3, eos_token_id=255), "int8-fbgemm", state=dict(quantized_tensors(plain)))
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
    filled = quantize_int8(tiny_model(seed=4, eos_token_id=255), "int8-fbgemm", state=dict(quantized_tensors(made)))
    assert all(module.packed is None for module in filled.modules() if isinstance(module, FbgemmInt8Linear))
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.inference_mode():
        assert torch.equal(made(input_ids=ids).logits, filled(input_ids=ids).logits)


def _later_start_logits(checkpoint, said=None, dtype="int8-fbgemm"):
    ids = torch.tensor([[5, 6, 7, 8, 9, 10, 11]])
    loaded = load_model(str(checkpoint), dtype=dtype, progress=None if said is None else said.append)
    assert loaded.dtype == "int8-fbgemm"
    with torch.inference_mode():
        return loaded.model(input_ids=ids).logits


def test_kept_weights_that_do_not_fit_are_loaded_the_other_way(tiny_checkpoint, tmp_path, kept, monkeypatch):
    reference = _later_start_logits(tiny_checkpoint)  # the first start: quantized, joined, packed
    monkeypatch.setattr(prepacked.Prepacking, "install", lambda self, model, kind: False)
    assert torch.equal(_later_start_logits(tiny_checkpoint), reference)  # the cache, joined, then packed
    monkeypatch.undo()
    monkeypatch.setenv("REWRITER_CACHE", str(tmp_path))
    monkeypatch.setattr(models, "KEEP_MIN_PARAMETERS", 0)
    # a kept file whose key names another format: nothing of it is packed, and the other path
    # (which checks the same key) quantizes again
    monkeypatch.setattr(models, "QUANTIZED_FORMAT", models.QUANTIZED_FORMAT + 1)
    said: list[str] = []
    assert torch.equal(_later_start_logits(tiny_checkpoint, said), reference)
    assert [line for line in said if "packed ahead are not used (the kept weights are for another model" in line]


def test_a_failure_while_packing_ahead_falls_back_to_packing_after(tiny_checkpoint, kept, monkeypatch):
    reference = _later_start_logits(tiny_checkpoint)

    def broken(weight):
        raise RuntimeError("no FBGEMM today")

    monkeypatch.setattr(prepacked, "fbgemm_pack", broken)
    said: list[str] = []
    assert torch.equal(_later_start_logits(tiny_checkpoint, said), reference)
    assert len(kept) == 1 and "no FBGEMM today" in kept[0].failure
    assert not kept[0].products  # nothing packed ahead is held beside the layers loaded the other way
    assert [line for line in said if "packed ahead are not used (RuntimeError: no FBGEMM today)" in line]


def test_auto_packs_ahead_only_what_it_chose_before(tiny_checkpoint, kept, monkeypatch):
    monkeypatch.setattr(cpu_choice, "measure_candidates", lambda model, **kwargs: {
        "int8-fbgemm": {1: 1.0, 16: 2.0, 64: 4.0, 512: 20.0}, "int8": {1: 2.0, 16: 4.0, 64: 8.0, 512: 40.0}})
    reference = _later_start_logits(tiny_checkpoint, dtype="auto")  # measured, chosen, quantized, kept
    assert not kept
    assert torch.equal(_later_start_logits(tiny_checkpoint, dtype="auto"), reference)
    assert len(kept) == 1 and not kept[0].failure
    load_model(str(tiny_checkpoint), dtype="int8")  # keeps int8 weights: nothing to pack ahead
    assert len(kept) == 1


def test_prepacking_groups_the_kept_layers_as_the_model_joins_them():
    shapes = {f"model.layers.0.{name}.weight_int8": ((rows, 64), torch.int8) for name, rows in (
        ("mlp.down_proj", 64), ("mlp.gate_proj", 128), ("mlp.up_proj", 128), ("self_attn.k_proj", 32),
        ("self_attn.o_proj", 64), ("self_attn.q_proj", 64), ("self_attn.v_proj", 32))}
    shapes |= {f"model.layers.0.self_attn.{name}.bias": ((1,), torch.float32) for name in ("q_proj", "k_proj", "v_proj")}
    shapes["lm_head.weight_int8"] = ((256, 64), torch.int8)
    assert sorted(prepacked._products(shapes)) == sorted([
        ["model.layers.0.mlp.down_proj"], ["model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj"],
        ["model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.v_proj"],
        ["model.layers.0.self_attn.o_proj"], ["lm_head"]])
    del shapes["model.layers.0.self_attn.v_proj.bias"]  # biased and unbiased: not joined, as share_input_products
    assert ["model.layers.0.self_attn.k_proj"] in prepacked._products(shapes)


def test_a_weight_packed_in_pieces_gives_the_bits_of_one_piece(monkeypatch):
    # Each output channel is its own exact integer sum: pieces of rows change no bit of any pass.
    generator = torch.Generator().manual_seed(7)
    weight = torch.randint(-127, 128, (100, 64), dtype=torch.int8, generator=generator)
    scale, bias = torch.rand(100, generator=generator) / 50, torch.randn(100, generator=generator)
    linear = torch.nn.Linear(64, 100)
    linear.bias.data.copy_(bias)
    whole = FbgemmInt8Linear(linear, weights=(weight, scale))
    monkeypatch.setattr(int8_kernels, "PACK_PIECE_ROWS", 16)
    pieces = FbgemmInt8Linear(linear, weights=(weight, scale))
    assert len(whole.packed) == 1 and len(pieces.packed) == 7  # 100 rows: 6 of 15, then 10
    assert torch.equal(pieces.int8_weight()[0], weight)
    for rows in (1, 5, 200):  # a decoding pass and a prompt's
        x = torch.randn(rows, 64, generator=generator) * 4
        with torch.inference_mode():
            assert torch.equal(pieces(x), whole(x)), rows
