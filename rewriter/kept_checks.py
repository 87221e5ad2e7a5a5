"""Answers of load-time kernel checks, kept in the cache for the next start.

A check such as attention's _float32_keeps_rows runs thousands of small ops: 0.1 to 0.3 s on a
quiet machine, and over 10 s beside other work, where each op waits for a thread that is not
running. Its answer depends only on the kernels: the CPU, its features, the thread count, the
kernel settings in the environment and the torch version, which the key names
(machine.kernels_identity). So it is computed once per key and read back after.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import torch

from . import cache_root
from .machine import cpu_name_and_flags, kernels_identity

# Bump when a check changes what it tests: older answers are then never read.
CHECKS_VERSION = 1


def _checks_file(root: Path) -> Path:
    return root / "kernel-checks.json"


def check_key(name: str, threads: int) -> str:
    """The key of check `name` (its arguments included) on this machine's kernels, on `threads` threads."""
    identity = kernels_identity(*cpu_name_and_flags())
    return f"v{CHECKS_VERSION} | {name} on {threads} threads | {identity} | torch {torch.__version__}"


def kept_answer(name: str, threads: int, check: Callable[[], bool]) -> bool:
    """The kept answer of the check `name` on these kernels, else `check()`, kept for next time
    (a cache that cannot be written only costs the next start the check)."""
    key = check_key(name, threads)
    root = cache_root()
    entries = read_entries(_checks_file(root))
    answer = entries.get(key)
    if isinstance(answer, bool):
        return answer
    answer = bool(check())
    entries = read_entries(_checks_file(root))  # another process may have kept one meanwhile
    entries[key] = answer
    try:
        write_entries(_checks_file(root), entries)
    except OSError:
        pass
    return answer


def read_entries(path: Path) -> dict:
    """The JSON object kept in `path`; empty where it is missing, unreadable or not an object."""
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return entries if isinstance(entries, dict) else {}


def write_entries(path: Path, entries: dict) -> None:
    """Keep `entries` in `path` whole: written beside it, then moved over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        temporary.write_text(json.dumps(entries, indent=1) + "\n")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
