"""int8 weights for the CPU, exact against the quantized model's own greedy decoding.

Why int8: on a 2-core x86 CPU every pass of the 0.5B model in float32 is bound by its linear
layers; int8 matrix products (`torch._int_mm`, integer accumulation) make them several times
cheaper, and the embedded weights were 4-bit to begin with, so int8 per-channel weights lose
little.

Why not `torch.ao.quantization.quantize_dynamic`: it is deprecated (it warns it will be
removed), and it scales activations per tensor, so one token's logits depend on the other tokens
in its pass. A wide verification pass then disagrees with plain one-token greedy decoding, and
a prompt's outlier activations coarsen every row of the prefill.

Here activations are scaled per row and products accumulate exactly in int32, so each row's
result is bit-for-bit the same whatever else shares the pass. Attention, the one part left in
floating point, runs in float64 and rounds back to float32, so its shape-dependent summation
order vanishes in the rounding. Passes of any width then give the same logits as one token at a
time (tests check bit equality), and drafts cannot change the output.
"""
from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward

# Attention in float64, rounded back: shared with the GPU path (batch_invariant.py).
FLOAT64_ATTENTION = "rewriter_float64"


class QuantizationUnavailable(RuntimeError):
    """This machine's torch cannot run the int8 path; the caller falls back to float32."""


class Int8Linear(nn.Module):
    """A linear layer with int8 weights (one scale per output channel) and per-row int8 activations."""

    weight_t: torch.Tensor
    weight_scale: torch.Tensor
    bias: torch.Tensor | None

    def __init__(self, linear: nn.Linear):
        super().__init__()
        weight = linear.weight.detach().float()
        scale = weight.abs().amax(dim=1).clamp(min=1e-12) / 127.0
        quantized = torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8)
        # (in, out) contiguous: the layout _int_mm's right operand is fastest in.
        self.register_buffer("weight_t", quantized.t().contiguous())
        self.register_buffer("weight_scale", scale)
        bias = linear.bias
        self.register_buffer("bias", None if bias is None else bias.detach().float())
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).float()
        row_scale = rows.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 127.0
        quantized = torch.round(rows / row_scale).to(torch.int8)
        out = torch._int_mm(quantized, self.weight_t).float() * (row_scale * self.weight_scale)
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features).to(x.dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


def _float64_attention(module, query, key, value, attention_mask, **kwargs):
    if attention_mask is not None and attention_mask.is_floating_point():
        attention_mask = attention_mask.double()
    out, _ = sdpa_attention_forward(module, query.double(), key.double(), value.double(), attention_mask, **kwargs)
    return out.to(query.dtype), None


def register_float64_attention() -> str:
    """Register float64 SDPA with transformers; returns its name for `_attn_implementation`."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(FLOAT64_ATTENTION, _float64_attention)
    AttentionMaskInterface.register(FLOAT64_ATTENTION, sdpa_mask)
    return FLOAT64_ATTENTION


def _self_check() -> None:
    """Raise QuantizationUnavailable unless int8 products run here and are exact."""
    if not hasattr(torch, "_int_mm"):
        raise QuantizationUnavailable(f"torch {torch.__version__} has no int8 matrix product (torch._int_mm)")
    generator = torch.Generator().manual_seed(0)
    a = torch.randint(-127, 128, (3, 64), dtype=torch.int8, generator=generator)
    b = torch.randint(-127, 128, (64, 16), dtype=torch.int8, generator=generator)
    try:
        product = torch._int_mm(a, b)
    except RuntimeError as error:
        raise QuantizationUnavailable(f"int8 matrix products fail here: {error}") from error
    if not torch.equal(product, a.int() @ b.int()):
        raise QuantizationUnavailable("int8 matrix products are not exact here")


def is_int8(model: nn.Module) -> bool:
    return any(isinstance(module, Int8Linear) for module in model.modules())


def quantize_int8(model: PreTrainedModel) -> PreTrainedModel:
    """Replace every nn.Linear of a float32 CPU model with Int8Linear, in place; seconds for 0.5B."""
    _self_check()
    if next(model.parameters()).device.type != "cpu":
        raise QuantizationUnavailable("int8 runs on the CPU only; on a GPU use bfloat16")
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, Int8Linear(child))
    model.config._attn_implementation = register_float64_attention()
    return model
