"""A decoding pass without transformers' per-call machinery, for the CPU's int8 paths.

On a CPU a one-token pass of the 0.5B model is short enough (about 25 ms) that what transformers
does around the arithmetic (argument handling and decorators at every level, building a causal
mask, looking up the attention function, each module's call hooks) costs a measurable share of it.
`LeanPass` runs the same arithmetic through the model's own submodules, calling their `forward`
directly, in transformers' order (Qwen2 and Llama layers: RMSNorm, rotary embedding, grouped-query
attention, gated MLP), so its logits and cache are bit for bit the model's own. The first
one-token pass and the first wider pass of each `LeanPass` are checked against the model's forward;
if they ever differ (another transformers version), it says so and the model's forward is used
from then on.

Only passes up to WIDEST_DECODING_PASS tokens, and only the int8 paths' attention, whose decoding
passes need no mask from transformers: a prompt's pass goes through the model's forward.
"""
from __future__ import annotations

import sys
import warnings
from collections.abc import Callable

import torch

from ..passes import WIDEST_DECODING_PASS, attention_of, has_int8_attention

# The attention classes whose layers LeanPass and the static pass know (their modules share Llama's structure).
LEAN_ATTENTIONS = ("Qwen2Attention", "LlamaAttention")
_LAYER_PARTS = ("input_layernorm", "post_attention_layernorm", "self_attn", "mlp")
_ATTENTION_PARTS = ("q_proj", "k_proj", "v_proj", "o_proj", "head_dim", "scaling")
_MLP_PARTS = ("gate_proj", "up_proj", "down_proj", "act_fn")


def llama_rotation(model) -> Callable | None:
    """The `apply_rotary_pos_emb` of a model whose layers all share Llama's structure (Qwen2 and
    Llama: RMSNorm, rotary embedding, grouped-query attention over the whole context, gated MLP),
    which a pass can run through its submodules in transformers' order; None for any other model."""
    config = model.config
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if not layers or not all(hasattr(inner, part) for part in ("embed_tokens", "norm", "rotary_emb")):
        return None
    if not hasattr(model, "lm_head") or set(getattr(config, "layer_types", None) or ["full_attention"]) != {
            "full_attention"}:
        return None
    for layer in layers:
        attention, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        if (type(attention).__name__ not in LEAN_ATTENTIONS
                or not all(hasattr(layer, part) for part in _LAYER_PARTS)
                or not all(hasattr(attention, part) for part in _ATTENTION_PARTS)
                or not all(hasattr(mlp, part) for part in _MLP_PARTS)):
            return None
    return getattr(sys.modules[type(layers[0].self_attn).__module__], "apply_rotary_pos_emb", None)


class LeanPass:
    """Called with a pass's ids (1, rows) and the cache: the logits of every row (1, rows, vocab),
    or None when the pass is the model's forward's to make (a prompt, or after a failed check)."""

    def __init__(self, model, rotate: Callable, attend: Callable):
        inner = model.model
        self.model = model
        self.embed, self.layers, self.norm = inner.embed_tokens, list(inner.layers), inner.norm
        self.rotary, self.head = inner.rotary_emb, model.lm_head
        self.rotate = rotate  # the layers' own apply_rotary_pos_emb
        self.attend = attend  # the int8 paths' attention, as transformers has it registered
        self.checked: set[bool] = set()  # which kinds of pass (wider than one token or not) were checked
        self.usable = True

    @classmethod
    def for_model(cls, model) -> LeanPass | None:
        """A LeanPass for `model`, or None where it does not apply (not an int8 path's attention,
        another architecture, sliding-window layers)."""
        if not has_int8_attention(model):
            return None
        rotate = llama_rotation(model)
        if rotate is None:
            return None
        from transformers import AttentionInterface

        attend = AttentionInterface().get(attention_of(model))
        return cls(model, rotate, attend) if attend is not None else None

    def __call__(self, ids: torch.Tensor, cache) -> torch.Tensor | None:
        if not self.usable or ids.shape[1] > WIDEST_DECODING_PASS or cache.get_seq_length() == 0:
            return None
        if (ids.shape[1] > 1) not in self.checked:
            return self._checked(ids, cache)
        return self._pass(ids, cache)

    def _pass(self, ids: torch.Tensor, cache) -> torch.Tensor:
        rows = ids.shape[1]
        hidden = self.embed.forward(ids)
        positions = (torch.arange(rows, device=ids.device) + cache.get_seq_length()).unsqueeze(0)
        cos, sin = self.rotary.forward(hidden, positions)
        for index, layer in enumerate(self.layers):
            attention, mlp = layer.self_attn, layer.mlp
            normed = layer.input_layernorm.forward(hidden)
            heads = (1, rows, -1, attention.head_dim)
            query = attention.q_proj.forward(normed).view(heads).transpose(1, 2)
            key = attention.k_proj.forward(normed).view(heads).transpose(1, 2)
            value = attention.v_proj.forward(normed).view(heads).transpose(1, 2)
            query, key = self.rotate(query, key, cos, sin)
            key, value = cache.update(key, value, index)
            out, _ = self.attend(attention, query, key, value, None, scaling=attention.scaling)
            hidden = hidden + attention.o_proj.forward(out.reshape(1, rows, -1).contiguous())
            normed = layer.post_attention_layernorm.forward(hidden)
            gated = mlp.act_fn(mlp.gate_proj.forward(normed)) * mlp.up_proj.forward(normed)
            hidden = hidden + mlp.down_proj.forward(gated)
        return self.head.forward(self.norm.forward(hidden))

    def _checked(self, ids: torch.Tensor, cache) -> torch.Tensor:
        """The model's forward's logits for this pass, after comparing a lean pass with it."""
        rows = ids.shape[1]
        lean = self._pass(ids, cache)
        lean_rows = [(layer.keys[..., -rows:, :], layer.values[..., -rows:, :]) for layer in cache.layers]
        cache.crop(-rows)
        expected = self.model(input_ids=ids, cache=cache, use_cache=True).logits
        same = torch.equal(lean, expected) and all(
            torch.equal(keys, layer.keys[..., -rows:, :]) and torch.equal(values, layer.values[..., -rows:, :])
            for (keys, values), layer in zip(lean_rows, cache.layers))
        self.checked.add(rows > 1)
        self.usable = same
        if not same:
            warnings.warn("the lean decoding pass differs from the model's forward with this transformers "
                          "version; decoding uses the model's forward", RuntimeWarning, stacklevel=2)
        return expected
