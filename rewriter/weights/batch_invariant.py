"""Batch-invariant arithmetic for GPUs: a token's logits do not depend on what else is in its pass.

GPU libraries pick matrix kernels by shape: a one-token pass and a 64-token verification pass
run different kernels that sum in different orders, so in bfloat16 the same token can get
slightly different logits, and now and then a different argmax. Drafts would then change the
output. Three parts of a transformer reduce over numbers whose grouping depends on the pass:

- linear layers: every product here has the same shape, ROWS rows, padded with zeros or cut
  into blocks, so one kernel with one summation order computes every row whatever the pass;
- RMS norms: the mean of squares is taken in float64 and rounded to float32, so the order of
  the sum vanishes in the rounding;
- attention: SDPA in float64, rounded back (the same trick the CPU int8 paths fall back to).

Everything else is elementwise. Plain greedy decoding of the patched model (transformers'
`generate` on it) then equals greedy with drafts token for token, and the prefill, cut into the
same blocks, gives the same cache whether a prompt prefix was reused or not.

On a GPU each norm is one Triton kernel (norm_kernel.py) instead of ten: a decoding pass there is
a chain of small kernels whose count sets its time. Both the model's forward and the static
decoding pass (decoding/static.py) call these modules, so they share the kernel's arithmetic; one
program a row, with its sum in float64, keeps each row's bits whatever the pass.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel

from .attention import register_float64_attention

# Rows per linear product. A GPU computes 256 rows of a 0.5B-1.5B model's layer in about the
# time of one (the weights' memory traffic dominates), so padding a one-token pass costs little.
ROWS = 256


class FixedShapeLinear(nn.Module):
    """nn.Linear whose products always have ROWS rows, so each row's sum order is fixed."""

    def __init__(self, linear: nn.Linear, rows: int = ROWS):
        super().__init__()
        self.weight = linear.weight
        self.bias = linear.bias
        self.rows = rows
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features)
        count = flat.shape[0]
        padded = flat
        if count % self.rows:
            # A product computes each row from that row alone, so the padding rows' values reach no
            # real row and need no zeros: one copy, no fill.
            padded = flat.new_empty(count + -count % self.rows, self.in_features)
            padded[:count] = flat
        blocks = [F.linear(block, self.weight, self.bias) for block in padded.split(self.rows)]
        out = blocks[0] if len(blocks) == 1 else torch.cat(blocks)
        return out[:count].reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, rows={self.rows}"


class Float64RMSNorm(nn.Module):
    """RMS norm whose mean of squares is summed in float64, then computed as transformers does.
    `fused`: in one kernel where it can be had (norm_kernel.py: CUDA with Triton)."""

    def __init__(self, norm: nn.Module, fused: bool = False):
        super().__init__()
        assert isinstance(norm.weight, torch.Tensor)  # _is_rms_norm checked it
        self.weight = norm.weight
        self.eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", 1e-6))
        self.fused = None
        if fused:
            from .norm_kernel import fused_rms_norm

            self.fused = fused_rms_norm()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.fused is not None and hidden.dtype == self.weight.dtype and hidden.is_cuda:
            return self.fused(hidden, self.weight, self.eps)
        dtype = hidden.dtype
        variance = hidden.double().pow(2).mean(-1, keepdim=True).float()
        normed = hidden.float() * torch.rsqrt(variance + self.eps)
        return self.weight * normed.to(dtype)


def _is_rms_norm(module: nn.Module) -> bool:
    return type(module).__name__.endswith("RMSNorm") and isinstance(getattr(module, "weight", None), torch.Tensor)


def make_batch_invariant(model: PreTrainedModel, rows: int = ROWS,
                         fused_norms: bool | None = None) -> PreTrainedModel:
    """Patch a float model in place so that passes of any width give the logits of one-token passes.
    `fused_norms`: norms in one kernel each (default: on a CUDA device, where a pass's kernel
    count sets its time)."""
    if fused_norms is None:
        fused_norms = next(model.parameters()).device.type == "cuda"
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, FixedShapeLinear(child, rows))
            elif _is_rms_norm(child):
                setattr(parent, name, Float64RMSNorm(child, fused_norms))
    model.config._attn_implementation = register_float64_attention()
    return model
