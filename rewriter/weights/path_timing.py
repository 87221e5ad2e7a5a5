"""Timing the CPU paths for `--dtype auto`: best-of-repeats seconds of a pass of each width on
each candidate (float32 and the int8 kinds), the candidates' layers swapped into the model in turn
and put back; and the path known fastest for a kind of CPU. cpu_choice.py makes the choice from
these timings and remembers it.

Only the model's first few decoder layers are timed (SAMPLE_LAYERS), with its output layer timed
alone: the layers are alike, so the whole model's pass is the sample's with the rest of the layers
added at the sample's cost per layer. So the candidates are made for those layers only, and a model
mapped from its file has only those float32 weights read beside them (the 1.5B's first start held
a whole float32 copy beside three int8 ones: 12 GB).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch

from ..machine import cpu_name_and_flags

if TYPE_CHECKING:
    from transformers import PreTrainedModel

CANDIDATES = ("float32", "int8", "int8-bf16", "int8-fbgemm")
MEASURED_WIDTHS = (1, 16, 64)
# The context the passes are timed after, and the prompt timed whole: a typical file's prompt.
PROMPT_TOKENS = 512
GIVE_UP_FACTOR = 2.0  # a candidate this many times slower than float32 at a width is not timed wider
# The decoder layers timed; a deeper model's other layers are counted at their cost per layer.
SAMPLE_LAYERS = 4
# The path fastest for a kind of CPU wherever it was timed on a quiet machine (docs/weights.md):
# FBGEMM's int8 on every x86 CPU with AVX2, with or without AVX-512, VNNI or AMX. A timing taken
# beside other work never replaces it, and a quiet one only when another path is clearly faster.
KNOWN_FASTEST = (("avx2", "int8-fbgemm"),)


def known_fastest() -> str | None:
    """The path KNOWN_FASTEST names for this CPU's features, if any."""
    flags = cpu_name_and_flags()[1]
    return next((path for feature, path in KNOWN_FASTEST if feature in flags), None)


def measure_candidates(model: PreTrainedModel, candidates=CANDIDATES, widths=MEASURED_WIDTHS,
                       say: Callable[[str], None] = lambda message: None,
                       context_tokens: int = PROMPT_TOKENS, prompt_tokens: int = PROMPT_TOKENS,
                       repeats: int = 2, spread: dict[str, dict[int, float]] | None = None,
                       made: dict[str, dict[str, torch.nn.Module]] | None = None,
                       sample_layers: int = SAMPLE_LAYERS) -> dict[str, dict[int, float]]:
    """Best-of-`repeats` seconds of one pass of each width for each candidate, after
    `context_tokens` of context, on this float32 model whose linear layers are swapped in turn
    and put back; then, for those still in the running, one prompt of `prompt_tokens` (0: none),
    timed as a pass of that width. Candidates take turns within each repeat, so a burst of load
    elsewhere on the machine does not fall on one of them alone.
    Candidates that cannot run here (no int8 kernel) are left out. `spread`, when given, gets the
    slowest over the fastest repeat of each: how far other work on the machine moved the timings.
    `made`, when given, gets each int8 candidate's layers, so the chosen one is not quantized again.
    A model deeper than `sample_layers` is timed on its first `sample_layers` decoder layers (see
    the module's docstring); `made` then holds those layers' and the output layer's."""
    with first_layers(model, sample_layers) as (sampled, depth):
        costs, heads = _measure_sample(model, candidates, widths, say, context_tokens, prompt_tokens, repeats,
                                       spread, made)
    if sampled == depth:
        return costs
    # The sample's pass minus its output layer, per decoder layer, times the model's depth.
    return {kind: {width: heads[kind][width] + (seconds - heads[kind][width]) * depth / sampled
                   for width, seconds in measured.items()} for kind, measured in costs.items()}


def _measure_sample(model: PreTrainedModel, candidates, widths, say: Callable[[str], None], context_tokens: int,
                    prompt_tokens: int, repeats: int, spread: dict[str, dict[int, float]] | None,
                    made: dict[str, dict[str, torch.nn.Module]] | None
                    ) -> tuple[dict[str, dict[int, float]], dict[str, dict[int, float]]]:
    """measure_candidates on the model as it is, with each candidate's output layer timed alone
    for the same widths (a prompt's: one row, as its pass keeps one token's logits)."""
    from transformers import DynamicCache

    from .attention import prepare_int8_attention

    layers = _candidate_layers(model, candidates, say)
    float_layers = layers["float32"]
    float_attention = model.config._attn_implementation
    int8_attention = prepare_int8_attention(model.config)
    vocab = model.config.vocab_size
    positions = getattr(model.config, "max_position_embeddings", None)
    if positions:  # a model with a short context is timed within it
        context_tokens = max(1, min(context_tokens, positions - max(widths)))
        prompt_tokens = min(prompt_tokens, positions)
    generator = torch.Generator().manual_seed(0)
    cache = DynamicCache(config=model.config)  # one context for all: timings do not depend on its values

    def timed(kind: str, width: int, prompt: bool = False) -> float:
        """One pass of `width` tokens after the shared context, or (`prompt`) a prompt of them."""
        _swap(model, layers[kind])
        model.config._attn_implementation = float_attention if kind == "float32" else int8_attention
        ids = torch.randint(0, vocab, (1, width), generator=generator)
        start = time.perf_counter()
        if prompt:
            model(input_ids=ids, use_cache=True, logits_to_keep=1)
            return time.perf_counter() - start
        model(input_ids=ids, cache=cache, use_cache=True)
        seconds = time.perf_counter() - start
        cache.crop(-width)
        return seconds

    try:
        with torch.inference_mode():
            model(input_ids=torch.randint(0, vocab, (1, context_tokens), generator=generator),
                  cache=cache, use_cache=True, logits_to_keep=1)
            costs, active = _time_widths(timed, list(layers), widths, repeats, spread)
            # Prompts: wide passes cost far from linearly in the narrow ones (float32 products
            # grow more efficient with the rows, int8-bf16's do not), so one is timed, not extrapolated.
            for kind in active if prompt_tokens else []:
                costs[kind][prompt_tokens] = timed(kind, prompt_tokens, prompt=True)
            heads = _time_output_layers(model, layers, costs, prompt_tokens, repeats)
    finally:
        _swap(model, float_layers)
        model.config._attn_implementation = float_attention
    if made is not None:
        made.update({kind: made_layers for kind, made_layers in layers.items() if kind != "float32"})
    return costs, heads


def _time_output_layers(model: PreTrainedModel, layers: dict[str, dict[str, torch.nn.Module]],
                        costs: dict[str, dict[int, float]], prompt_tokens: int, repeats: int
                        ) -> dict[str, dict[int, float]]:
    """Best-of-`repeats` seconds of each candidate's output layer alone, at the widths in `costs`
    (0 where the model's output layer is not one of its linear layers)."""
    output = model.get_output_embeddings()
    name = next((name for name, layer in layers["float32"].items() if layer is output), None)
    heads: dict[str, dict[int, float]] = {}
    for kind, measured in costs.items():
        heads[kind] = {}
        for width in measured:
            if name is None:
                heads[kind][width] = 0.0
                continue
            rows = torch.randn(1, 1 if width == prompt_tokens else width, model.config.hidden_size)
            seconds = []
            for _ in range(repeats + 1):  # the first pays for kernel set-up
                start = time.perf_counter()
                layers[kind][name](rows)
                seconds.append(time.perf_counter() - start)
            heads[kind][width] = min(seconds[1:])
    return heads


@contextmanager
def first_layers(model: torch.nn.Module, count: int) -> Iterator[tuple[int, int]]:
    """The model cut to its first `count` decoder layers (its own modules: nothing is copied) until
    the block ends; yields how many it runs and how many it has. A model whose layers are not a
    `layers` list on its base model runs whole."""
    stack = getattr(getattr(model, "base_model", model), "layers", None)
    config = getattr(model, "config", None)
    if not isinstance(stack, torch.nn.ModuleList) or config is None or len(stack) <= count:
        depth = len(stack) if isinstance(stack, torch.nn.ModuleList) else 1
        yield depth, depth
        return
    base, depth = getattr(model, "base_model", model), len(stack)
    layer_types = getattr(config, "layer_types", None)
    base.layers = torch.nn.ModuleList(list(stack)[:count])
    config.num_hidden_layers = count
    if layer_types is not None:
        config.layer_types = layer_types[:count]
    try:
        yield count, depth
    finally:
        base.layers = stack
        config.num_hidden_layers = depth
        if layer_types is not None:
            config.layer_types = layer_types


def _candidate_layers(model: PreTrainedModel, candidates, say: Callable[[str], None]
                      ) -> dict[str, dict[str, torch.nn.Module]]:
    """Each candidate's linear layers by name, float32's the model's own; those that cannot run here
    are left out, with a line saying why."""
    from .quantize import QuantizationUnavailable, check_kind, quantized_layers

    float_layers: dict[str, torch.nn.Module] = {
        name: module for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}
    layers: dict[str, dict[str, torch.nn.Module]] = {"float32": float_layers}
    for kind in candidates:
        if kind == "float32":
            continue
        try:
            check_kind(kind)
        except QuantizationUnavailable as error:
            say(f"dtype auto: {kind} left out ({error})")
            continue
        layers[kind] = quantized_layers(float_layers, kind, shared=layers)
    return layers


def _time_widths(timed: Callable[[str, int], float], kinds: list[str], widths, repeats: int,
                 spread: dict[str, dict[int, float]] | None) -> tuple[dict[str, dict[int, float]], list[str]]:
    """Best-of-`repeats` seconds of a pass of each width for each kind, and the kinds still in the
    running after the widest (see measure_candidates)."""
    costs: dict[str, dict[int, float]] = {kind: {} for kind in kinds}
    active = list(kinds)
    known = known_fastest()
    for width in widths:
        for kind in active:  # the first pass of a shape pays for kernel set-up (oneDNN JIT)
            timed(kind, width)
        times: dict[str, list[float]] = {kind: [] for kind in active}
        for _ in range(repeats):
            for kind in active:
                times[kind].append(timed(kind, width))
        for kind, seconds in times.items():
            costs[kind][width] = min(seconds)
            if spread is not None:
                spread.setdefault(kind, {})[width] = max(seconds) / min(seconds)
        # A path far slower than float32 here is not timed wider (an int8 fallback can take
        # seconds a pass); with widths left unmeasured it is never chosen. The path known fastest
        # for this kind of CPU is timed whole: a pass slowed by other work must not rule it out.
        reference = costs.get("float32", {}).get(width)
        if reference is not None:
            active = [kind for kind in active
                      if costs[kind][width] <= GIVE_UP_FACTOR * reference or kind == known]
    return costs, active


def _swap(model: torch.nn.Module, layers: dict[str, torch.nn.Module]) -> None:
    for name, layer in layers.items():
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, child, layer)
