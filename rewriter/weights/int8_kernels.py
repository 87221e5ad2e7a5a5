"""The int8 kernels the CPU paths run (quantize.py): whether each runs exactly here, and FBGEMM's
packed weights and products.
"""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import torch

# The CPU paths with row-independent arithmetic, by --dtype name.
INT8_KINDS = ("int8", "int8-bf16", "int8-fbgemm")


class QuantizationUnavailable(RuntimeError):
    """This machine's torch cannot run the int8 path; the caller falls back to float32."""


# int8-fbgemm's activation levels a side, most precise first: 127 where FBGEMM's kernels sum 8-bit
# activations exactly (VNNI); its AVX2 kernel adds pairs of u8 x s8 products in 16 bits, which
# saturate unless activations keep to 7 bits.
FBGEMM_LEVELS = (127, 63)
# FBGEMM packs a weight one input at a time across all its output rows: past a few thousand rows
# they fall out of the CPU's caches and packing slows, up to 3x (the 1.5B's output layer has
# 152k rows). Weights with more rows are packed in pieces, each one more product a pass: passes
# time the same with smaller pieces, but each product is one more wait for threads.
PACK_PIECE_ROWS = 8192
_FBGEMM_LEVELS_HERE: list[int] = []


def range_row(inputs: int, levels: int) -> torch.Tensor:
    row = torch.zeros(1, inputs)
    row[0, :2] = torch.tensor([-levels, levels + 1])
    return row


def fbgemm_sums(with_range_row: torch.Tensor, packed: tuple, levels: int) -> torch.Tensor:
    """FBGEMM's linear of rows of integers whose last row is the range row, less that row; one
    product per piece of the packed weight (fbgemm_pack), their outputs side by side."""
    reduce_range = levels < 127  # 7-bit activations: FBGEMM's quantized inputs span 0..127
    sums = [torch.ops.quantized.linear_dynamic(with_range_row, piece, reduce_range)[:-1] for piece in packed]
    return sums[0] if len(sums) == 1 else torch.cat(sums, dim=-1)


def fbgemm_levels() -> int:
    """int8-fbgemm's activation levels a side on this machine: the most that FBGEMM's kernels sum
    exactly (checked once per process on the largest sums a row can have)."""
    if not _FBGEMM_LEVELS_HERE:
        with torch.device("cpu"):  # the first call may come from a shell built on the meta device
            _FBGEMM_LEVELS_HERE.append(next((levels for levels in FBGEMM_LEVELS if _fbgemm_exact(levels)), 0))
    return _FBGEMM_LEVELS_HERE[0]


def _fbgemm_exact(levels: int) -> bool:
    if "fbgemm" not in torch.backends.quantized.supported_engines:
        return False
    inputs, generator = 4864, torch.Generator().manual_seed(0)  # 4864: the 0.5B model's down projection
    weight = torch.randint(-127, 128, (16, inputs), dtype=torch.int8, generator=generator)
    weight[0], weight[1] = 127, -127
    rows = torch.randint(-levels, levels + 1, (4, inputs), generator=generator).float()
    rows[0], rows[1] = levels, -levels  # with the weights' extremes: every pair of products at its largest
    try:
        sums = fbgemm_sums(torch.cat([rows, range_row(inputs, levels)]), fbgemm_pack(weight), levels)
    except RuntimeError:
        return False
    return torch.equal(sums, (rows.double() @ weight.double().t()).float())


def pack_pieces(weight: torch.Tensor) -> list[torch.Tensor]:
    """The pieces of rows, of about equal size, that an int8 weight, (out, in), is packed in."""
    count = -(-len(weight) // PACK_PIECE_ROWS)
    size = -(-len(weight) // count) if count else 1
    return [weight[start:start + size] for start in range(0, len(weight), size)]


def fbgemm_pack(weight: torch.Tensor) -> tuple:
    """FBGEMM's packed form of an int8 weight, (out, in), with unit scales: one packed piece per
    piece of rows (pack_pieces). Each output is its own exact sum, so pieces change no bit."""
    with fbgemm_engine(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized tensors are deprecated; the op is what we use
        packed = []
        for piece in pack_pieces(weight):
            quantized = torch._make_per_channel_quantized_tensor(
                piece, torch.ones(piece.shape[0], dtype=torch.double),
                torch.zeros(piece.shape[0], dtype=torch.long), 0)
            packed.append(torch.ops.quantized.linear_prepack(quantized, None))
        return tuple(packed)


@contextlib.contextmanager
def fbgemm_engine() -> Iterator[None]:
    """FBGEMM as torch's quantized engine within, the one before restored after. It is one setting
    for the process: layers packed side by side are all inside their caller's `with`."""
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = "fbgemm"
    try:
        yield
    finally:
        torch.backends.quantized.engine = previous


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


def _self_check_weight_only() -> None:
    """Raise QuantizationUnavailable unless the weight-only int8 product runs here, row by row."""
    if not hasattr(torch, "_weight_int8pack_mm"):
        raise QuantizationUnavailable(f"torch {torch.__version__} has no weight-only int8 product "
                                      "(torch._weight_int8pack_mm)")
    generator = torch.Generator().manual_seed(0)
    rows = torch.randn(5, 64, generator=generator).bfloat16()
    weight = torch.randint(-127, 128, (16, 64), dtype=torch.int8, generator=generator)
    ones = torch.ones(16, dtype=torch.bfloat16)
    try:
        together = torch._weight_int8pack_mm(rows, weight, ones)
        alone = torch.cat([torch._weight_int8pack_mm(rows[i:i + 1], weight, ones) for i in range(len(rows))])
    except RuntimeError as error:
        raise QuantizationUnavailable(f"weight-only int8 products fail here: {error}") from error
    if not torch.equal(together, alone):
        raise QuantizationUnavailable("weight-only int8 products depend on the other rows of a pass here")


def _self_check_fbgemm() -> None:
    """Raise QuantizationUnavailable unless FBGEMM's linear gives each row its exact integer sum here."""
    if "fbgemm" not in torch.backends.quantized.supported_engines:
        raise QuantizationUnavailable("this torch has no FBGEMM (an x86 build is needed)")
    if not fbgemm_levels():
        raise QuantizationUnavailable("FBGEMM's int8 linear is not exact here")


def check_kind(kind: str) -> None:
    """Raise QuantizationUnavailable unless the int8 path `kind` runs here, row-independent."""
    if kind not in INT8_KINDS:
        raise ValueError(f"unknown int8 kind {kind!r}")
    if kind == "int8":
        _self_check()
    elif kind == "int8-bf16":
        _self_check_weight_only()
    elif kind == "int8-fbgemm":
        _self_check_fbgemm()
