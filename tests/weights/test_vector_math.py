"""Vector math's first call in a process, on two threads, gives the bits of every later call once
settle_vector_math has run (rewriter/vector_math.py). Without it the first `cos` differed in 5 of 30
processes on a quiet machine (its threads start at that call): 24 processes, one after another, then
fail all but about one time in 80."""
from __future__ import annotations

import subprocess
import sys

# A rotary table's angles, as a model's first pass computes their cos and sin.
FIRST_CALLS = """
import hashlib, torch
from rewriter.vector_math import settle_vector_math
torch.set_num_threads(2)
settle_vector_math()
angles = (torch.arange(328.0)[:, None] * 10000.0 ** (-torch.arange(0, 64, 2.0) / 64)[None]).repeat(1, 2)
bits = lambda t: hashlib.sha1(t.numpy().tobytes()).hexdigest()
print(*(bits(getattr(angles, name)()) == bits(getattr(angles, name)()) for name in ("cos", "sin", "exp")))
"""
PROCESSES = 24


def test_the_first_cos_sin_and_exp_of_a_process_give_the_bits_of_every_later_one():
    answers = [subprocess.run([sys.executable, "-c", FIRST_CALLS], capture_output=True, text=True, check=True,
                              timeout=120).stdout.strip() for _ in range(PROCESSES)]
    assert answers == ["True True True"] * PROCESSES
