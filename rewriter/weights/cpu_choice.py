"""`--dtype auto` on a CPU: the path that is fastest on this machine, by measurement.

Which path is fastest depends on the CPU: `int8` (`torch._int_mm`) is several times faster than
float32 where oneDNN has VNNI kernels and many times slower where it has not (AVX2-only CPUs);
`int8-fbgemm` (FBGEMM's int8 kernels; 7-bit activations on AVX2) is fast on AVX2 and AVX-512 alike;
`int8-bf16` (int8 weights, bfloat16 activations) is cheap for narrow passes but not for wide ones.
So the first load times a few passes of the real model at widths 1, 16 and 64
and one 512-token prompt for each candidate (path_timing.py), picks the one whose expected cost of
a typical edit is lowest (the lookahead's own window policy turns pass costs into seconds), and
remembers the choice for this CPU, torch and model in the cache directory.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..kept_checks import read_entries, write_entries
from ..lookahead import Lookahead, expected_tokens
from ..machine import cpu_name_and_flags, kernels_identity
from ..passes import CPU_INT8_BF16_PRIOR, CPU_INT8_PRIOR, PASS_SIZES, PassCosts
from .path_timing import CANDIDATES, known_fastest, measure_candidates
from .threads import others_running

if TYPE_CHECKING:
    from transformers import PreTrainedModel

STEADY_SPREAD = 1.3  # repeats further apart than this: the machine was busy, the choice is not kept
# Bump when the candidates, the measurement or the cost model change: older choices are re-measured.
CHOICE_VERSION = 5
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


# The remembered choice -----------------------------------------------------------------------------


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
    entries = read_entries(_choices_file(root))
    entries[key] = {"dtype": choice.dtype, "costs": choice.costs, "steady": steady,
                    "measured": time.strftime("%Y-%m-%dT%H:%M:%S")}
    write_entries(_choices_file(root), entries)


def forget(root: Path, key: str) -> None:
    """Drop the choice kept for `key`: the next start times the paths again."""
    entries = read_entries(_choices_file(root))
    if entries.pop(key, None) is not None:
        write_entries(_choices_file(root), entries)


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
