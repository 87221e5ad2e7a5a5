"""The batch-invariant RMS norm in one Triton kernel, for GPUs.

In a decoding pass on a GPU, time goes to running kernels one after another, so their count sets a
pass's time, and the eager norm (batch_invariant.Float64RMSNorm) is ten. Here one program computes
one row, in the eager norm's steps: the mean of squares summed in float64 and rounded to float32,
the row scaled in float32 and rounded to the activations' dtype, then the weight applied. A row's
bits depend on that row alone, whatever else the pass holds. Both the model's forward and the static
decoding pass call the norm modules, so they share its arithmetic. Without Triton: None, and the
eager operations do the work.
"""
from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import torch

RmsNorm = Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]


try:  # torch's CUDA builds bring Triton; its CPU builds do not, and need no kernel of these
    import triton
    import triton.language as tl
except ImportError as missing:
    triton = tl = None
    _MISSING: ImportError | None = missing
else:
    _MISSING = None


@functools.cache
def fused_rms_norm() -> RmsNorm | None:
    """The fused norm, (hidden, weight, eps) -> normed; None where Triton cannot be had (said once)."""
    if _MISSING is not None:
        warnings.warn(f"Triton is not importable ({_MISSING}); the batch-invariant norm on this GPU runs "
                      "as separate operations", RuntimeWarning, stacklevel=3)
        return None

    @triton.jit
    def kernel(hidden_ptr, weight_ptr, out_ptr, row_stride, out_stride, width, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        columns = tl.arange(0, BLOCK)
        inside = columns < width
        hidden = tl.load(hidden_ptr + row * row_stride + columns, mask=inside, other=0.0)
        wide = hidden.to(tl.float64)
        variance = (tl.sum(wide * wide, axis=0) / width).to(tl.float32)
        normed = (hidden.to(tl.float32) * tl.rsqrt(variance + eps)).to(hidden.dtype)
        weight = tl.load(weight_ptr + columns, mask=inside, other=0.0)
        out = (weight.to(tl.float32) * normed.to(tl.float32)).to(hidden.dtype)
        tl.store(out_ptr + row * out_stride + columns, out, mask=inside)

    def norm(hidden: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        width = hidden.shape[-1]
        rows = hidden.reshape(-1, width)
        if rows.stride(-1) != 1:
            rows = rows.contiguous()
        out = torch.empty_like(rows)
        if rows.shape[0]:
            kernel[(rows.shape[0],)](rows, weight, out, rows.stride(0), out.stride(0), width, eps,
                                     BLOCK=triton.next_power_of_2(width))
        return out.view(hidden.shape)

    return norm
