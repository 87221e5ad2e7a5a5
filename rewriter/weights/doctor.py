"""`rewriter doctor`: what this machine runs a model on, and why; `--retime` times the CPU paths again.

The CPU's identity (its model, its int8 features, the thread count, the kernel settings), the path
known fastest for its kind (path_timing.KNOWN_FASTEST), and the choice `--dtype auto` keeps for the
model, with the pass costs it was made by. A choice is otherwise timed again only when the CPU, its
settings, torch or the model change.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from .. import cache_root
from .cpu_choice import choice_key, cpu_identity, forget, remembered
from .models import checkpoint_identity, load_model, resolve_checkpoint
from .path_timing import known_fastest


def doctor(model: str, retime: bool, say: Callable[[str], None], progress: Callable[[str], None]) -> int:
    """Say what `auto` runs `model` on here; with `retime`, forget the kept choice and time again."""
    say(f"CPU: {cpu_identity()}")
    say(f"torch {torch.__version__}; cache: {cache_root()}")
    known = known_fastest()
    say(f"known fastest on this kind of CPU: {known}" if known
        else "no path is known fastest on this kind of CPU: the timings alone decide")
    identity = checkpoint_identity(resolve_checkpoint(model, progress))
    if identity is None:
        say(f"{model}: not a local checkpoint, so no choice is kept for it; each start times the paths")
        return 0
    key = choice_key(identity)
    kept = remembered(cache_root(), key)
    if kept is not None and not retime:
        say(f"{model}: {kept.line()}")
        return 0
    if kept is not None:
        forget(cache_root(), key)
        say(f"{model}: the kept choice ({kept.dtype}) is forgotten; timing the paths again")
    else:
        say(f"{model}: no choice kept yet; timing the paths")
    loaded = load_model(model, device="cpu", dtype="auto", progress=progress)
    say(f"{model}: now {loaded.dtype}")
    return 0
