"""int8 weights for the CPU, exact against the quantized model's own greedy decoding.

Why int8: on a small x86 CPU every pass of the 0.5B model in float32 is bound by its linear
layers; int8 matrix products (`torch._int_mm`, integer accumulation) make them several times
cheaper, and the embedded weights were 4-bit to begin with, so int8 per-channel weights lose
little.

Why not `torch.ao.quantization.quantize_dynamic`: it is deprecated (it warns it will be
removed), and it scales activations per tensor, so one token's logits depend on the other tokens
in its pass. A wide verification pass then disagrees with plain one-token greedy decoding, and
a prompt's outlier activations coarsen every row of the prefill.

Here activations are scaled per row and products accumulate exactly in int32, so each row's
result is bit-for-bit the same whatever else shares the pass. Attention, the one part left in
floating point, keeps each row's bits too (attention.py). Passes of any width then give the same
logits as one token at a time (tests check bit equality), and drafts cannot change the output.

`int8` needs a fast `torch._int_mm`: oneDNN's VNNI kernels (AVX-512 VNNI, AVX-VNNI, AMX). Where
that is missing (AVX2-only CPUs) `_int_mm` is slower than float32 at every width. Two paths keep
the int8 weights there:
- `int8-fbgemm`: FBGEMM's int8 linear (the op behind quantize_dynamic, fed so that its per-tensor
  scaling is the identity, see FbgemmInt8Linear), fast on AVX2 and AVX-512 alike. Its AVX2 kernel
  needs 7-bit activations, so there rows are scaled to 63 levels a side instead of 127. Quantized
  tensors are deprecated in torch; where a torch lacks the op, the path is left out.
- `int8-bf16`: bfloat16 activations (`torch._weight_int8pack_mm`, an ATen kernel that each output
  row computes alone, so it is row-independent like `int8`); cheap for narrow passes only.
The residual stream stays in float32 on every int8 path. float32 matrix
products are not row-independent (a wide pass differs from one-token passes in the last bits),
so float32's greedy output with drafts equals its plain greedy output only where no two logits
tie that closely; every check here agrees, but it is not a bit-level guarantee the way int8's is.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import torch
from torch import nn

from ..passes import WIDEST_DECODING_PASS
from .int8_kernels import (
    INT8_KINDS,
    QuantizationUnavailable,
    check_kind,
    fbgemm_engine,
    fbgemm_levels,
    fbgemm_pack,
    fbgemm_sums,
    range_row,
)

if TYPE_CHECKING:  # transformers is imported where a model is built: prepacked.py packs before that
    from transformers import PreTrainedModel

# _weight_int8pack_mm reads its inputs in groups of 16; at other input sizes its sums are wrong.
PACK_GROUP = 16
# Rows rounded to int8 at a time (int8_weights).
QUANTIZE_ROWS = 4096


def int8_weights(linear: nn.Linear) -> tuple[torch.Tensor, torch.Tensor]:
    """The weight in int8, (out, in), and one float32 scale per output channel. Rounded a block of
    rows at a time: each row is its own, and a whole output layer's float32 temporaries would
    add a few times its size to a first start's peak memory."""
    weight = linear.weight.detach().float()
    quantized = torch.empty(weight.shape, dtype=torch.int8, device=weight.device)
    scale = torch.empty(weight.shape[0], device=weight.device)
    for start in range(0, weight.shape[0], QUANTIZE_ROWS):
        rows = weight[start:start + QUANTIZE_ROWS]
        row_scale = rows.abs().amax(dim=1).clamp(min=1e-12) / 127.0
        quantized[start:start + QUANTIZE_ROWS] = torch.round(rows / row_scale[:, None]).clamp(-127, 127)
        scale[start:start + QUANTIZE_ROWS] = row_scale
    return quantized, scale


def _int8_parts(linear: nn.Linear | None, in_features: int, out_features: int, bias: bool,
                weights: tuple[torch.Tensor, torch.Tensor] | None
                ) -> tuple[int, int, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Shape, int8 weights, scales and bias of a layer: from `linear`, or an empty shell that a
    cached state dict fills."""
    if linear is None:  # the weight on the meta device: nothing allocated until the cache's is assigned
        return (in_features, out_features, torch.empty(out_features, in_features, dtype=torch.int8, device="meta"),
                torch.ones(out_features), torch.zeros(out_features) if bias else None)
    quantized, scale = weights if weights is not None else int8_weights(linear)
    return (linear.in_features, linear.out_features, quantized, scale,
            None if linear.bias is None else linear.bias.detach().float())


class Int8Layer(nn.Module):
    """What both int8 layers share: int8 weights with one float32 scale per output channel, a
    float32 bias, built from a float layer or as an empty shell that a cached state dict fills."""

    weight_scale: torch.Tensor
    bias: torch.Tensor | None

    def __init__(self, linear: nn.Linear | None = None, *, in_features: int = 0, out_features: int = 0,
                 bias: bool = False, weights: tuple[torch.Tensor, torch.Tensor] | None = None):
        super().__init__()
        in_features, out_features, quantized, scale, bias_values = _int8_parts(
            linear, in_features, out_features, bias, weights)
        self.in_features, self.out_features = in_features, out_features
        self._keep_weight(quantized)
        self.register_buffer("weight_scale", scale)
        self.register_buffer("bias", bias_values)

    def _keep_weight(self, quantized: torch.Tensor) -> None:
        raise NotImplementedError

    def int8_weight(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The int8 weight, (out, in), and its per-channel scales: what another kind is built from."""
        raise NotImplementedError

    def _finish(self, out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The product's float32 rows, biased and shaped like the input."""
        if self.bias is not None:
            out.add_(self.bias)  # every product here is a fresh tensor
        return out.reshape(*x.shape[:-1], self.out_features).to(x.dtype)


class Int8Linear(Int8Layer):
    """A linear layer with int8 weights (one scale per output channel) and per-row int8 activations."""

    weight_t: torch.Tensor

    def _keep_weight(self, quantized: torch.Tensor) -> None:
        # (in, out) contiguous: the layout _int_mm's right operand is fastest in.
        self.register_buffer("weight_t", quantized.t().contiguous())

    def int8_weight(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.weight_t.t(), self.weight_scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).float()
        row_scale = rows.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 127.0
        quantized = torch.round(rows / row_scale).to(torch.int8)
        return self._finish(torch._int_mm(quantized, self.weight_t).float() * (row_scale * self.weight_scale), x)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


class WeightInt8Linear(Int8Layer):
    """int8 weights (one float32 scale per output channel) times bfloat16 activations.

    `_weight_int8pack_mm` accumulates each output in float32 and rounds it to bfloat16; its scale
    argument is bfloat16 too, so it gets ones and the float32 scale is applied afterwards (one
    rounding, no per-channel error from a coarse scale).
    """

    weight_int8: torch.Tensor
    unit_scale: torch.Tensor

    def _keep_weight(self, quantized: torch.Tensor) -> None:
        # (out, in): the kernel's layout; inputs padded with zero columns to whole groups.
        self.register_buffer("weight_int8", _pad_inputs(quantized).contiguous())
        self.register_buffer("unit_scale", torch.ones(self.out_features, dtype=torch.bfloat16), persistent=False)

    def int8_weight(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.weight_int8[:, :self.in_features], self.weight_scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = _pad_inputs(x.reshape(-1, self.in_features).to(torch.bfloat16))
        out = torch._weight_int8pack_mm(rows, self.weight_int8, self.unit_scale).float() * self.weight_scale
        return self._finish(out, x)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 weights, bfloat16 activations"


class FbgemmInt8Linear(Int8Layer):
    """int8 weights times per-row int8 activations on FBGEMM (torch's quantized linear op), whose
    integer kernels are fast on AVX2 as well as on AVX-512: 127 levels a side where its kernels sum
    them exactly, 63 where they need 7 bits (fbgemm_levels).

    The op scales its input per tensor; every call gets one extra row holding -L and L + 1, so the
    input's range is exactly 2L + 1 levels, its scale 1 and its zero point L: the integers pass
    through unchanged and each output is its row's exact int32 sum in float32, whatever else
    shares the pass.
    """

    weight_int8: torch.Tensor | None
    range_row: torch.Tensor
    packed: tuple | None  # FBGEMM's packed pieces of the weight (int8_kernels.fbgemm_pack)

    def __init__(self, linear: nn.Linear | None = None, **kwargs):
        super().__init__(linear, **kwargs)
        self.packed = None
        if linear is not None:  # a shell filled from the cache is packed later: see pack
            self.pack()

    def _keep_weight(self, quantized: torch.Tensor) -> None:
        self.register_buffer("weight_int8", quantized.contiguous())  # (out, in): what the cache keeps
        self.levels = fbgemm_levels()
        self.register_buffer("range_row", range_row(self.in_features, self.levels), persistent=False)

    def pack(self) -> None:
        """Pack the int8 weight for FBGEMM, if not done yet. Only the packed copy is kept: the int8
        weight, as large, is unpacked when asked for.

        A layer filled from a state dict stays unpacked until this is called (pack_fbgemm_weights
        at load, else its first pass): share_input_products joins its rows first, so a weight is
        packed once per start (packing the 1.5B and 0.5B pair took 19 of a 38 s start when the
        joined layers were packed, unpacked and packed again)."""
        if self.packed is None:
            assert self.weight_int8 is not None
            self.packed, self.weight_int8 = fbgemm_pack(self.weight_int8), None

    def _load_from_state_dict(self, *args, **kwargs):
        if self.weight_int8 is None:  # packed already: let the state dict's weight in again
            self.weight_int8 = torch.empty(self.out_features, self.in_features, dtype=torch.int8, device="meta")
        self.packed = None
        super()._load_from_state_dict(*args, **kwargs)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        if self.packed is not None:  # first, where an unpacked layer has it: one order for the cache
            destination[prefix + "weight_int8"] = self.int8_weight()[0]
        super()._save_to_state_dict(destination, prefix, keep_vars)

    def int8_weight(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.packed is None:
            assert self.weight_int8 is not None
            return self.weight_int8, self.weight_scale
        pieces = [torch.ops.quantized.linear_unpack(piece)[0].int_repr() for piece in self.packed]
        return pieces[0] if len(pieces) == 1 else torch.cat(pieces), self.weight_scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # In place where it can be: in a prompt's pass the scaling around the product costs as
        # much as the product itself.
        rows = x.reshape(-1, self.in_features).float()
        count = len(rows)
        if count <= WIDEST_DECODING_PASS:  # a decoding pass: fewer ops (6 us of 40 at one row), same bits
            row_scale = rows.abs().amax(dim=1, keepdim=True).clamp_(min=1e-12).div_(self.levels)
            sums = self.integer_sums(torch.div(rows, row_scale).round_())
        else:
            # amax and amin, not abs().amax() (a copy) or aminmax (25x slower along rows in torch 2.13).
            high, low = rows.amax(dim=1, keepdim=True), rows.amin(dim=1, keepdim=True)
            row_scale = torch.maximum(high, low.neg_()).clamp_(min=1e-12).div_(self.levels)
            integers = torch.empty(count + 1, self.in_features)
            torch.div(rows, row_scale, out=integers[:count]).round_()
            integers[count] = self.range_row
            sums = self._sums_with_range_row(integers)
        return self._finish(sums.mul_(row_scale).mul_(self.weight_scale), x)

    def integer_sums(self, quantized: torch.Tensor) -> torch.Tensor:
        """Each row's exact sum of products with the int8 weight, in float32; rows hold integers
        within the layer's levels."""
        return self._sums_with_range_row(torch.cat([quantized, self.range_row]))

    def _sums_with_range_row(self, integers: torch.Tensor) -> torch.Tensor:
        self.pack()
        assert self.packed is not None
        return fbgemm_sums(integers, self.packed, self.levels)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, int8 weights, "
                f"activations on {self.levels} levels a side, FBGEMM")


def pack_fbgemm_weights(model: nn.Module) -> None:
    """Pack every int8-fbgemm layer of the model not packed yet: at load, not in the first request.
    FBGEMM packs a weight on one thread, so layers are packed side by side, one per core torch may
    use (seconds of packing for the 1.5B, docs/weights.md)."""
    layers = [module for module in model.modules() if isinstance(module, FbgemmInt8Linear)]
    workers = max(1, min(torch.get_num_threads(), os.cpu_count() or 1))
    with fbgemm_engine(), ThreadPoolExecutor(workers) as pool:
        for start in range(0, len(layers), 16):  # each int8 weight is freed once packed: give it back as it goes
            list(pool.map(FbgemmInt8Linear.pack, layers[start:start + 16]))
            release_freed_memory()


def _pad_inputs(matrix: torch.Tensor) -> torch.Tensor:
    """`matrix` with zero columns added up to a whole number of the kernel's input groups."""
    short = -matrix.shape[-1] % PACK_GROUP
    return torch.nn.functional.pad(matrix, (0, short)) if short else matrix


def int8_kind(model: nn.Module) -> str | None:
    """Which of the row-independent int8 paths (INT8_KINDS) the model runs, or None."""
    for module in model.modules():
        if isinstance(module, Int8Linear):
            return "int8"
        if isinstance(module, WeightInt8Linear):
            return "int8-bf16"
        if isinstance(module, FbgemmInt8Linear):
            return "int8-fbgemm"
    return None


def quantize_int8(model: PreTrainedModel, kind: str = "int8", state: Mapping[str, torch.Tensor] | None = None,
                  layers: dict[str, nn.Module] | None = None,
                  float_state: Mapping[str, torch.Tensor] | None = None) -> PreTrainedModel:
    """Replace every nn.Linear of a float32 CPU model with an int8 layer, in place; seconds for 0.5B.

    kind: `int8` (int8 activations, `_int_mm`), `int8-bf16` (bfloat16 activations) or `int8-fbgemm`
    (7-bit activations, FBGEMM). `state`, a
    state dict saved from a model quantized the same way, fills the layers instead of quantizing
    (int8-fbgemm's unpacked, till pack_fbgemm_weights or their first pass);
    `layers` (from quantized_layers, by module name) are put in as they are. `float_state`, the
    model's own checkpoint read one tensor at a time, gives the float weights that are rounded, so
    a model mapped from its file never has the whole file's pages resident at once.
    """
    check_kind(kind)
    if next(model.parameters()).device.type != "cpu":
        raise QuantizationUnavailable("int8 runs on the CPU only; on a GPU use bfloat16")
    stored_names = {id(parameter): name for name, parameter in model.named_parameters()}  # tied: the first name
    rounded = 0
    for parent_name, parent in list(model.named_modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                full_name = f"{parent_name}.{name}" if parent_name else name
                made = layers.get(full_name) if layers else None
                if made is None and state is None and float_state is not None:
                    child = _read_alone(child, float_state, stored_names.get(id(child.weight)))
                    rounded += 1
                    if rounded % 16 == 0:  # each weight as read, freed once rounded
                        release_freed_memory()
                setattr(parent, name, made if made is not None else
                        _quantized_layer(child, kind, quantize=state is None))
    if state is not None:  # layer by layer: a lazy `state` is then read one layer at a time
        for name, module in [(name, module) for name, module in model.named_modules()
                             if isinstance(module, Int8Layer)]:
            # int8-fbgemm's layers are left unpacked: see FbgemmInt8Linear.pack
            module.load_state_dict({key: state[f"{name}.{key}"] for key in module.state_dict()}, assign=True)
    from .attention import prepare_int8_attention

    model.config._attn_implementation = prepare_int8_attention(model.config)
    return model


def _read_alone(linear: nn.Linear, float_state: Mapping[str, torch.Tensor], weight_name: str | None) -> nn.Linear:
    """`linear` with its weight read from `float_state` on its own (as it is when the state lacks it)."""
    if weight_name is None or weight_name not in float_state:
        return linear
    read = nn.Linear(linear.in_features, linear.out_features, bias=False, device="meta")
    read.weight = nn.Parameter(float_state[weight_name].float(), requires_grad=False)
    read.bias = linear.bias
    return read


def release_freed_memory() -> None:
    """Give freed heap memory back to the system (glibc's malloc_trim; elsewhere nothing).

    Weights replaced while loading leave holes in the heap that later, larger allocations do not
    fit, so the process's resident memory grows by them: 280 MB for the 0.5B's fused products."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _quantized_layer(linear: nn.Linear, kind: str, quantize: bool,
                     weights: tuple[torch.Tensor, torch.Tensor] | None = None) -> nn.Module:
    layer = {"int8": Int8Linear, "int8-bf16": WeightInt8Linear, "int8-fbgemm": FbgemmInt8Linear}[kind]
    return layer(linear if quantize else None, in_features=linear.in_features, out_features=linear.out_features,
                 bias=linear.bias is not None, weights=weights)


def quantized_layers(linears: dict[str, nn.Module], kind: str,
                     shared: dict[str, dict[str, nn.Module]] | None = None) -> dict[str, nn.Module]:
    """int8 layers of `kind` for these float layers; all kinds round the same weights, so layers
    of another kind already in `shared` lend theirs instead of quantizing again."""
    donors = [layers for other, layers in (shared or {}).items() if other in INT8_KINDS and other != kind]
    made = {}
    for name, linear in linears.items():
        assert isinstance(linear, nn.Linear)
        donor = next((layers[name] for layers in donors if name in layers), None)
        weights = donor.int8_weight() if isinstance(donor, Int8Layer) else None
        made[name] = _quantized_layer(linear, kind, True, weights)
    return made


def quantized_shapes(model: nn.Module, kind: str) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """The shape and dtype of each tensor quantized_tensors gives for this float model in `kind`."""
    shapes = {}
    for prefix, module in model.named_modules():
        if isinstance(module, nn.Linear):
            with torch.device("meta"):
                shell = _quantized_layer(module, kind, quantize=False)
            for name, tensor in shell.state_dict().items():
                shapes[f"{prefix}.{name}"] = (tuple(tensor.shape), tensor.dtype)
    return shapes


def quantized_tensors(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """The int8 layers' tensors, one layer at a time (int8-fbgemm's weight unpacked when its turn
    comes), in quantized_shapes' order: what a later start loads instead of quantizing again."""
    for prefix, module in model.named_modules():
        if isinstance(module, Int8Layer):
            for name, tensor in module.state_dict().items():
                yield f"{prefix}.{name}", tensor.contiguous()
