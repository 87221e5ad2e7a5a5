"""One int8 product for the projections that share an input (q/k/v, gate/up): the input is
scaled once and the weights read in one call. Each output channel is its own exact integer sum,
so a slice of the joined product is bit for bit what the projection's own layer gives.
"""
from __future__ import annotations

import torch
from torch import nn

from .quantize import FbgemmInt8Linear, Int8Layer, Int8Linear, release_freed_memory

# Projections of one input that a model computes one after another (Llama and Qwen families).
SHARED_INPUT_PROJECTIONS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


class _SharedProduct(nn.Module):
    """One int8 product for several projections of the same input: the input is scaled once and
    the weights read in one call, where each projection did both (a few percent off every pass).
    The product is kept until every projection has taken its slice of it, so those that follow on
    the same tensor do not compute it again."""

    def __init__(self, layer: Int8Layer, takers: int):
        super().__init__()
        self.layer, self.takers = layer, takers
        self.last: tuple[torch.Tensor, torch.Tensor] | None = None
        self.waiting = 0  # projections yet to take the kept product

    def product(self, x: torch.Tensor) -> torch.Tensor:
        if self.last is None or self.last[0] is not x:
            self.last, self.waiting = (x, self.layer(x)), self.takers
        out = self.last[1]
        self.waiting -= 1
        if not self.waiting:  # a prompt's product is large (the 0.5B's MLP: 39 KB a token a layer)
            self.last = None
        return out


class SharedInputProjection(nn.Module):
    """A projection that is a slice of a _SharedProduct: bit for bit what its own int8 layer gives,
    since each output channel is its own exact integer sum, scaled the same way."""

    def __init__(self, shared: _SharedProduct, start: int, stop: int):
        super().__init__()
        self.shared, self.start, self.stop = shared, start, stop

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shared.product(x)[..., self.start:self.stop]


def share_input_products(model: nn.Module) -> int:
    """Fuse each group of SHARED_INPUT_PROJECTIONS whose layers are int8 or int8-fbgemm (exact
    integer sums, so fusing changes no bit; int8-bf16's sums are float) into one product; in place,
    after the model's int8 weights are kept in the cache. Returns how many groups were fused."""
    fused = 0
    for names in SHARED_INPUT_PROJECTIONS:
        # Parents only: a list of every module would keep the replaced layers alive to the end.
        for parent in [module for module in model.modules() if hasattr(module, names[0])]:
            if _share(parent, names):
                fused += 1
                release_freed_memory()  # the layers just replaced: else the heap grows by each group
    return fused


def joinable(layers: list[tuple[int, bool]]) -> bool:
    """Whether layers of these (input size, biased) join into one product: one input size, and
    all biased or none."""
    return len(set(layers)) == 1


def _share(parent: nn.Module, names: tuple[str, ...]) -> bool:
    found = [getattr(parent, name, None) for name in names]
    layers = [layer for layer in found if isinstance(layer, (Int8Linear, FbgemmInt8Linear))]
    if len(layers) < len(names) or len({type(layer) for layer in layers}) != 1 \
            or not joinable([(layer.in_features, layer.bias is not None) for layer in layers]):
        return False
    shared = _SharedProduct(_joined(layers), len(layers))
    start = 0
    for name, layer in zip(names, layers):
        setattr(parent, name, SharedInputProjection(shared, start, start + layer.out_features))
        start += layer.out_features
    return True


def _joined(layers: list[Int8Linear | FbgemmInt8Linear]) -> Int8Layer:
    """One layer of the same kind whose output channels are those of `layers`, in order."""
    weights, scales = zip(*(layer.int8_weight() for layer in layers))
    first = layers[0]
    joined = type(first)(in_features=first.in_features, out_features=sum(layer.out_features for layer in layers),
                         bias=first.bias is not None)
    weight = torch.cat(weights)
    state = {"weight_scale": torch.cat(scales)}
    if isinstance(joined, Int8Linear):
        state["weight_t"] = weight.t().contiguous()
    else:
        state["weight_int8"] = weight
    biases = [layer.bias for layer in layers if layer.bias is not None]
    if biases:
        state["bias"] = torch.cat(biases)
    joined.load_state_dict(state, assign=True)
    return joined
