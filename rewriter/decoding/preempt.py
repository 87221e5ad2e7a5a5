"""Work done ahead of a request (a prompt's prefix prefilled in the background) gives way to it
within a fraction of a pass: a check before every module of every layer."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch


class Preempted(Exception):
    """A pass was abandoned midway because a request came: the cache may hold part of it."""


@contextmanager
def preemptible(model: torch.nn.Module, stopped: Callable[[], bool]) -> Iterator[None]:
    """Within this block a forward pass of `model` raises Preempted at its next module once
    `stopped()` is true. A model without a `model.layers` list is checked between passes only.
    The hooks are the model's: whoever else runs it meanwhile is preempted too (callers serialise)."""
    layers = getattr(getattr(model, "model", None), "layers", None)

    def check(module, args) -> None:
        if stopped():
            raise Preempted

    handles = [module.register_forward_pre_hook(check)
               for layer in (layers if isinstance(layers, torch.nn.ModuleList) else ()) for module in layer.modules()]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def roll_back(cache, length: int) -> None:
    """Drop what an abandoned pass wrote into each layer of a DynamicCache past `length` tokens
    (the layers it reached, and only those, hold more)."""
    for layer in cache.layers:
        extra = layer.get_seq_length() - length
        if extra > 0:
            layer.crop(-extra)
