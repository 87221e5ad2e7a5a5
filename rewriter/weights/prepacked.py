"""int8-fbgemm's weights packed from the cache while the model is still being built.

A later start of the 1.5B spends about 7 s of CPU time packing its int8 weights for FBGEMM
(int8_kernels.PACK_PIECE_ROWS), and about 4 s of one core importing transformers, reading the
tokenizer and building the model: one after the other, one core idles for most of the second.
When the cache already says what a start will load (the kept int8-fbgemm weights and, for
`auto`, the remembered choice), packing needs nothing of the model. Prepacking maps the kept
file (its pages let go as each weight is packed) and packs its weights in threads, in pieces of
rows (int8_kernels.pack_pieces), the projections that share an input joined as
share_input_products joins them, while the caller imports and builds; `install` then puts the
packed layers in. The same weights, joins and packing as loading the file and packing after
(load_model's other path), so the same bits (tests/weights/test_packing.py).
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from .int8_kernels import check_kind, fbgemm_engine, fbgemm_pack, pack_pieces
from .quantize import FbgemmInt8Linear, quantized_shapes, release_freed_memory
from .shared_products import SHARED_INPUT_PROJECTIONS, SharedInputProjection, _SharedProduct, joinable
from .stored import StoredTensors

WEIGHT = ".weight_int8"


@dataclass
class _Packed:
    """One product as the model will hold it: a layer, or the projections of one input joined."""

    names: list[str]  # module names, in the joined product's order
    out_features: list[int]
    in_features: int
    scale: torch.Tensor
    bias: torch.Tensor | None
    packed: list[Future]  # one per piece of rows (pack_pieces), packed side by side


class Prepacking:
    """Packs the int8-fbgemm weights kept at `path` in the background, from construction on,
    one thread per core; the file's metadata must hold `key` (else nothing is packed)."""

    kind = "int8-fbgemm"

    def __init__(self, path: Path, key: str, workers: int | None = None):
        self.path, self.key = path, key
        self.workers = workers or max(1, min(torch.get_num_threads(), os.cpu_count() or 1))
        self.products: list[_Packed] = []
        self.shapes: dict[str, tuple[tuple[int, ...], torch.dtype | None]] = {}
        self.failure = ""  # why the packed layers cannot be used; "" when they can
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="rewriter-prepacking", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            with StoredTensors(self.path) as stored:
                if stored.metadata.get("key") != self.key:
                    self.failure = "the kept weights are for another model or format"
                    return
                self.shapes = stored.shapes()
                self._pack_all(stored)
        except Exception as error:  # noqa: BLE001  (any failure means: load the other way)
            self.failure = f"{type(error).__name__}: {error}"

    def _pack_all(self, stored: StoredTensors) -> None:
        in_flight = threading.Semaphore(2 * self.workers)  # pieces of weights taken but not yet packed
        with fbgemm_engine(), ThreadPoolExecutor(self.workers) as pool:
            for count, names in enumerate(_products(self.shapes)):
                if self._stop.is_set():
                    self.failure = "cancelled"
                    return
                self.products.append(self._submit(stored, names, pool, in_flight))
                if count % 16 == 15:  # joined weights are freed once packed: give the memory back as it goes
                    release_freed_memory()
            for product in self.products:
                for piece in product.packed:
                    piece.result()  # a packing error fails here, inside the engine's `with`
        release_freed_memory()

    def _submit(self, stored: StoredTensors, names: list[str], pool: ThreadPoolExecutor,
                in_flight: threading.Semaphore) -> _Packed:
        """One product's pieces handed to the packing threads; its weights are the file's mapped
        pages (joined ones copied first), let go once packed."""
        weights = [stored.mapped(name + WEIGHT) for name in names]
        joined = torch.cat(weights) if len(weights) > 1 else weights[0]
        pieces = pack_pieces(joined)
        left = [len(pieces)]

        def packed(_: Future) -> None:
            in_flight.release()
            with self._lock:
                left[0] -= 1
                if not left[0]:
                    for name in names:
                        stored.release(name + WEIGHT)

        futures = []
        for piece in pieces:
            in_flight.acquire()
            future = pool.submit(fbgemm_pack, piece)
            future.add_done_callback(packed)
            futures.append(future)
        biases = [stored[name + ".bias"] for name in names if name + ".bias" in self.shapes]
        return _Packed(names, [len(weight) for weight in weights], weights[0].shape[1],
                       torch.cat([stored[name + ".weight_scale"] for name in names]),
                       torch.cat(biases) if biases else None, futures)

    def finish(self) -> None:
        """Wait for the packing: after this no thread of it runs (FBGEMM's engine is one setting for
        the process, so nothing else may run quantized ops beside it)."""
        self._thread.join()

    def cancel(self) -> None:
        self._stop.set()
        self.finish()

    def discard(self) -> None:
        """Let the packed weights go: not held beside the layers loaded the other way."""
        self.finish()
        self.products = []

    def install(self, model: nn.Module, kind: str) -> bool:
        """Put the packed layers into `model` (a float model whose layers are still nn.Linear) and
        return True; False, with `failure` saying why, where they do not fit it (the caller then
        loads the other way)."""
        self.finish()
        if kind != self.kind:
            self.failure = self.failure or f"{kind} was chosen, not {self.kind}"
        elif not self.failure:
            check_kind(kind)  # QuantizationUnavailable, as the other path would raise
            if self.shapes != quantized_shapes(model, kind):
                self.failure = "the kept weights do not fit this model"
        if self.failure:
            self.discard()
            return False
        for product in self.products:
            layer = _packed_layer(product)
            if len(product.names) == 1:
                _replace(model, product.names[0], layer)
                continue
            shared, start = _SharedProduct(layer, len(product.names)), 0
            for name, width in zip(product.names, product.out_features):
                _replace(model, name, SharedInputProjection(shared, start, start + width))
                start += width
        self.products = []  # the model holds them now
        from .attention import prepare_int8_attention

        model.config._attn_implementation = prepare_int8_attention(model.config)  # type: ignore[union-attr]
        return True


def _products(shapes: dict) -> list[list[str]]:
    """The kept layers' names, grouped into the products the model computes: the projections of
    one input joined where share_input_products joins them (same input size, all biased or none)."""
    layers = [name[:-len(WEIGHT)] for name in shapes if name.endswith(WEIGHT)]
    present, placed, products = set(layers), set(), []
    for name in layers:
        if name in placed:
            continue
        parent, _, leaf = name.rpartition(".")
        group = [name]
        for names in SHARED_INPUT_PROJECTIONS:
            members = [f"{parent}.{member}" for member in names]
            if leaf in names and all(member in present for member in members) and joinable(
                    [(shapes[member + WEIGHT][0][1], member + ".bias" in shapes) for member in members]):
                group = members
        placed.update(group)
        products.append(group)
    return products


def _packed_layer(product: _Packed) -> FbgemmInt8Linear:
    layer = FbgemmInt8Linear(in_features=product.in_features, out_features=len(product.scale),
                             bias=product.bias is not None)  # a shell on the meta device
    layer.packed = tuple(packed for piece in product.packed for packed in piece.result())
    layer.weight_int8 = None
    layer.weight_scale, layer.bias = product.scale, product.bias
    return layer


def _replace(model: nn.Module, name: str, layer: nn.Module) -> None:
    parent, _, leaf = name.rpartition(".")
    setattr(model.get_submodule(parent), leaf, layer)
