"""A decoding pass without transformers' per-call machinery, for the CPU's int8 paths.

On a CPU a one-token pass of the 0.5B model is short enough (about 25 ms) that what transformers
does around the arithmetic (argument handling and decorators at every level, building a causal
mask, looking up the attention function, each module's call hooks) costs a measurable share of it.
`LeanPass` runs the same arithmetic through the model's own submodules, calling their `forward`
directly, in transformers' order (Qwen2 and Llama layers: RMSNorm, rotary embedding, grouped-query
attention, gated MLP), so its logits and cache are bit for bit the model's own. The first
one-token pass and the first wider pass are checked against the model's forward once per
machine's kernels, transformers version and model shape (the answer is kept: kept_checks.py); if
they ever differ (another transformers version), it says so and the model's forward is used.

Only passes up to WIDEST_DECODING_PASS tokens, and only the int8 paths' attention, whose decoding
passes need no mask from transformers: a prompt's pass goes through the model's forward.
"""
from __future__ import annotations

import hashlib
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from ..kept_checks import kept_answer
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
        wide = ids.shape[1] > 1
        if wide not in self.checked:
            self.checked.add(wide)
            checked: list[torch.Tensor] = []  # the model's own logits, where the check runs now
            self.usable = kept_answer(self._check_name(wide), torch.get_num_threads(),
                                      lambda: self._check(ids, cache, checked))
            if checked:
                return checked[0]
            if not self.usable:
                return None
        return self._pass(ids, cache)

    def _check_name(self, wide: bool) -> str:
        """What the check of a pass compares, with all that may change its answer but the machine."""
        import transformers

        config = self.model.config
        parts = (type(self.model).__name__, type(self.layers[0].self_attn.q_proj).__name__, attention_of(self.model),
                 config.hidden_size, config.num_attention_heads, getattr(config, "num_key_value_heads", None),
                 len(self.layers))
        code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]  # this pass's own code
        return (f"lean {'wide' if wide else 'one-token'} pass {code} of {parts} "
                f"under transformers {transformers.__version__}")

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

    def _check(self, ids: torch.Tensor, cache, checked: list[torch.Tensor]) -> bool:
        """Whether a lean pass gives the model's forward's logits and cache for this pass; the
        forward's logits go into `checked`."""
        rows = ids.shape[1]
        lean = self._pass(ids, cache)
        lean_rows = [(layer.keys[..., -rows:, :], layer.values[..., -rows:, :]) for layer in cache.layers]
        cache.crop(-rows)
        expected = self.model(input_ids=ids, cache=cache, use_cache=True).logits
        same = torch.equal(lean, expected) and all(
            torch.equal(keys, layer.keys[..., -rows:, :]) and torch.equal(values, layer.values[..., -rows:, :])
            for (keys, values), layer in zip(lean_rows, cache.layers))
        if not same:
            warnings.warn("the lean decoding pass differs from the model's forward with this transformers "
                          "version; decoding uses the model's forward", RuntimeWarning, stacklevel=2)
        checked.append(expected)
        return same
