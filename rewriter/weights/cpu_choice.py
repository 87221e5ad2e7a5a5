"""`--dtype auto` on a CPU: the path that is fastest on this machine, by measurement.

Which path is fastest depends on the CPU: `int8` (`torch._int_mm`) is several times faster than
float32 where oneDNN has VNNI kernels and many times slower where it has not (AVX2-only CPUs);
`int8-fbgemm` (FBGEMM's int8 kernels; 7-bit activations on AVX2) is fast on AVX2 and AVX-512 alike;
`int8-bf16` (int8 weights, bfloat16 activations) is cheap for narrow passes but not for wide ones.
So the first load times a few passes of the real model at widths 1, 16 and 64
and one 512-token prompt for each candidate, picks the one whose expected cost of a typical edit
is lowest (the lookahead's own window policy turns pass costs into seconds), and remembers the
choice for this CPU, torch and model in the cache directory.

Only the model's first few decoder layers are timed (SAMPLE_LAYERS), with its output layer timed
alone: the layers are alike, so the whole model's pass is the sample's with the rest of the layers
added at the sample's cost per layer. So the candidates are made for those layers only, and a model
mapped from its file has only those float32 weights read beside them (the 1.5B's first start held
a whole float32 copy beside three int8 ones: 12 GB).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..lookahead import Lookahead, expected_tokens
from ..machine import cpu_name_and_flags, kernels_identity
from ..passes import CPU_INT8_BF16_PRIOR, CPU_INT8_PRIOR, PASS_SIZES, PassCosts
from .threads import others_running

if TYPE_CHECKING:
    from transformers import PreTrainedModel

CANDIDATES = ("float32", "int8", "int8-bf16", "int8-fbgemm")
MEASURED_WIDTHS = (1, 16, 64)
# The context the passes are timed after, and the prompt timed whole: a typical file's prompt.
PROMPT_TOKENS = 512
GIVE_UP_FACTOR = 2.0  # a candidate this many times slower than float32 at a width is not timed wider
STEADY_SPREAD = 1.3  # repeats further apart than this: the machine was busy, the choice is not kept
# The decoder layers timed; a deeper model's other layers are counted at their cost per layer.
SAMPLE_LAYERS = 4
# Bump when the candidates, the measurement or the cost model change: older choices are re-measured.
CHOICE_VERSION = 5
# The path fastest for a kind of CPU wherever it was timed on a quiet machine (docs/weights.md):
# FBGEMM's int8 on every x86 CPU with AVX2, with or without AVX-512, VNNI or AMX. A timing taken
# beside other work never replaces it, and a quiet one only when another path is clearly faster.
KNOWN_FASTEST = (("avx2", "int8-fbgemm"),)
CLEARLY_FASTER = 1.2  # another path's expected edit time must beat the known one's by this factor


@dataclass(frozen=True)
class EditProfile:
    """A typical edit, from `rewriter bench` on the NoFunEval cases (medians: a 470-token prompt,
    300 tokens out, 18 passes): the prompt is prefilled once, most of the answer is copied from
    the file in long drafts that are nearly always accepted (rejections gather at the edit, where
    the drafter realigns), the rest is new code, one pass a token. Measured on an AVX2 imitation,
    this profile's expected seconds ranked float32 and int8-bf16 as ours did on those cases; edits
    that write more new code (40 tokens or more in 300) would go faster in int8-bf16 there."""

    prompt_tokens: int = 500
    copied_tokens: int = 280
    new_tokens: int = 20
    copy_acceptance: float = 0.99


TYPICAL_EDIT = EditProfile()


def pass_cost_curve(measured: dict[int, float]) -> dict[int, float]:
    """Seconds for a pass of each of the lookahead's sizes, linear between the measured widths."""
    points = sorted(measured.items())
    curve = {}
    for size in PASS_SIZES:
        if size <= points[0][0]:
            curve[size] = points[0][1]
            continue
        for (n0, t0), (n1, t1) in zip(points, points[1:]):
            if size <= n1:
                curve[size] = t0 + (t1 - t0) * (size - n0) / (n1 - n0)
                break
        else:  # past the widest measured pass: the last slope
            (n0, t0), (n1, t1) = points[-2], points[-1]
            curve[size] = t1 + (t1 - t0) * (size - n1) / (n1 - n0)
    return curve


# The shape of each int8 kind's pass costs, for a model whose own were not measured here.
INT8_PRIORS = {"int8": CPU_INT8_PRIOR, "int8-fbgemm": CPU_INT8_PRIOR, "int8-bf16": CPU_INT8_BF16_PRIOR}


def pass_costs(model: torch.nn.Module, measured: dict[int, float] | None = None) -> PassCosts | None:
    """What the decoder's window policy starts from: the pass costs `--dtype auto` measured for
    this model's path, else its int8 kind's fixed shape (None: float32's, or a GPU's)."""
    from .quantize import int8_kind

    if measured:
        return pass_cost_curve(measured)
    return INT8_PRIORS.get(int8_kind(model) or "")


def expected_edit_seconds(measured: dict[int, float], profile: EditProfile = TYPICAL_EDIT) -> float:
    """Seconds our decoding would take for the profile's edit with these pass costs."""
    curve = pass_cost_curve(measured)
    widest = max(measured)
    prefill = profile.prompt_tokens / widest * measured[widest]
    lookahead = Lookahead("cpu", prior=curve)
    window = lookahead.window(profile.copy_acceptance, PASS_SIZES[-1])
    copy_rate = expected_tokens(profile.copy_acceptance, window) / lookahead.cost(window + 1)
    return prefill + profile.new_tokens * curve[1] + profile.copied_tokens / copy_rate


def choose(costs: dict[str, dict[int, float]], profile: EditProfile = TYPICAL_EDIT) -> str:
    """The candidate with the lowest expected edit time. A path slower than float32 at every
    measured width is never chosen, whatever the profile says."""
    reference = costs.get("float32")
    eligible = {}
    for name, measured in costs.items():
        if reference and name != "float32":
            if set(measured) != set(reference):  # given up on part way: far slower than float32
                continue
            if all(measured[w] > reference[w] for w in reference):
                continue
        eligible[name] = expected_edit_seconds(measured, profile)
    return min(eligible, key=lambda name: eligible[name])


def describe(chosen: str, costs: dict[str, dict[int, float]], cached: bool = False) -> str:
    """One line: what was chosen and the pass costs it was chosen by."""
    all_widths = sorted({w for measured in costs.values() for w in measured})
    parts = []
    for name, measured in costs.items():
        parts.append(f"{name} " + "/".join(f"{1000 * measured[w]:.0f}" if w in measured else "-" for w in all_widths))
    widths = "/".join(str(w) for w in all_widths)
    source = "chosen before on this machine" if cached else "measured now"
    return f"dtype auto: {chosen} ({source}; ms per pass of {widths} tokens: {', '.join(parts)})"


# Measuring ---------------------------------------------------------------------------------------


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
                      if costs[kind][width] <= GIVE_UP_FACTOR * reference or kind == known_fastest()]
    return costs, active


def _swap(model: torch.nn.Module, layers: dict[str, torch.nn.Module]) -> None:
    for name, layer in layers.items():
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, child, layer)


# The remembered choice -----------------------------------------------------------------------------


def known_fastest() -> str | None:
    """The path KNOWN_FASTEST names for this CPU's features, if any."""
    flags = cpu_name_and_flags()[1]
    return next((path for feature, path in KNOWN_FASTEST if feature in flags), None)


def cpu_identity() -> str:
    """The CPU model, its int8-relevant features, core count and the kernel settings in force."""
    return kernels_identity(*cpu_name_and_flags())


def choice_key(model_id: str) -> str:
    return f"v{CHOICE_VERSION} | {cpu_identity()} | torch {torch.__version__} | {model_id}"


@dataclass
class Choice:
    dtype: str
    costs: dict[str, dict[int, float]] = field(default_factory=dict)
    cached: bool = False
    # The chosen int8 path's layers when they were made for the measurement: load_model uses them.
    layers: dict[str, torch.nn.Module] | None = field(default=None, compare=False, repr=False)

    def line(self) -> str:
        return describe(self.dtype, self.costs, self.cached)


def _measured_whole(costs: dict[str, dict[int, float]], path: str) -> bool:
    """Whether `path` ran here and was timed at every width float32 was (not given up on)."""
    reference = costs.get("float32", {})
    return path in costs and set(costs[path]) >= set(reference)


def faster_of(costs: dict[str, dict[int, float]], other: dict[str, dict[int, float]]) -> dict[str, dict[int, float]]:
    """Each candidate's pass costs, the lower of the two timings where both have one."""
    return {kind: {width: min(seconds, other.get(kind, {}).get(width, seconds)) for width, seconds in measured.items()}
            for kind, measured in costs.items()}


def _choices_file(root: Path) -> Path:
    return root / "dtype-choices.json"


def remembered(root: Path, key: str, steady_only: bool = True) -> Choice | None:
    """The choice kept for `key`; one measured under load (not steady) only when asked for."""
    try:
        entry = json.loads(_choices_file(root).read_text())[key]
        costs = {name: {int(w): float(t) for w, t in measured.items()} for name, measured in entry["costs"].items()}
        if entry["dtype"] not in CANDIDATES or (steady_only and not entry.get("steady", True)):
            return None
        return Choice(entry["dtype"], costs, cached=True)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def remember(root: Path, key: str, choice: Choice, steady: bool = True) -> None:
    entries = _entries(root)
    entries[key] = {"dtype": choice.dtype, "costs": choice.costs, "steady": steady,
                    "measured": time.strftime("%Y-%m-%dT%H:%M:%S")}
    _write_entries(root, entries)


def forget(root: Path, key: str) -> None:
    """Drop the choice kept for `key`: the next start times the paths again."""
    entries = _entries(root)
    if entries.pop(key, None) is not None:
        _write_entries(root, entries)


def _entries(root: Path) -> dict:
    try:
        entries = json.loads(_choices_file(root).read_text())
    except (OSError, ValueError):
        return {}
    return entries if isinstance(entries, dict) else {}


def _write_entries(root: Path, entries: dict) -> None:
    path = _choices_file(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(entries, indent=1) + "\n")
    os.replace(temporary, path)


def choose_for(model: PreTrainedModel, model_id: str | None, root: Path,
               say: Callable[[str], None] = lambda message: None, measure=None) -> Choice:
    """The remembered choice for this CPU, torch and model, or a new one measured on `model`
    (and remembered, unless `model_id` is None).

    Timings that varied between repeats, or were taken while other work ran, may be wrong: on a
    CPU of a known kind they never replace its known path; elsewhere their choice is kept only
    once a second start, measuring again, makes the same one (a busy machine costs one extra
    measurement, not one at every start)."""
    key = choice_key(model_id) if model_id else None
    choice = remembered(root, key) if key else None
    if choice is not None:
        return choice
    known = known_fastest()
    # A CPU of a known kind times its known path against float32 alone: the other int8 paths
    # were slower on every such CPU, and each candidate costs the first start seconds and memory.
    candidates = ("float32", known) if known in CANDIDATES else CANDIDATES
    say(f"dtype auto: timing {', '.join(candidates)} passes once on this machine"
        + (f" ({known} is the fastest on every CPU of this kind timed so far)" if known in candidates else ""))
    spread: dict[str, dict[int, float]] = {}
    made: dict[str, dict[str, torch.nn.Module]] = {}
    busy = others_running()
    costs = (measure or measure_candidates)(model, candidates=candidates, say=say, spread=spread, made=made)
    busy = max(busy, others_running())
    worst = max((ratio for ratios in spread.values() for ratio in ratios.values()), default=1.0)
    steady = worst <= STEADY_SPREAD and not busy
    chosen = choose(costs)
    if known is not None and known != chosen and _measured_whole(costs, known):
        if not steady:
            why = f"other work ran beside the timing ({busy} threads)" if busy else \
                f"timings varied up to {worst:.1f}x (other work on this CPU)"
            say(f"dtype auto: {why} and named {chosen}; "
                f"{known}, the fastest path on every CPU of this kind timed so far, is kept")
            chosen, steady = known, True
        elif expected_edit_seconds(costs[known]) < CLEARLY_FASTER * expected_edit_seconds(costs[chosen]):
            chosen = known  # not clearly faster: noise must not flip a start's path
    elif known is not None and known == chosen:
        steady = True  # what the timings say agrees with every quiet machine of this kind
    choice = Choice(chosen, costs, layers=made.get(chosen))
    if not steady and key:
        earlier = remembered(root, key, steady_only=False)
        if earlier is not None and earlier.dtype == choice.dtype:
            say(f"dtype auto: timings varied up to {worst:.1f}x (other work on this CPU), but the last "
                f"start chose {choice.dtype} too; the choice is kept")
            # The costs are the window policy's prior: other work only slows a pass, so each
            # pass's faster timing of the two starts is the nearer to what it costs.
            choice = Choice(choice.dtype, faster_of(choice.costs, earlier.costs), layers=choice.layers)
            steady = True
        else:
            say(f"dtype auto: timings varied up to {worst:.1f}x (other work on this CPU); the choice is "
                "kept once the next start measures the same")
    if key:
        try:
            remember(root, key, choice, steady=steady)
        except OSError as error:
            say(f"dtype auto: could not remember the choice ({error})")
    return choice
