"""Vector math's first calls in a process, made on one thread before any pass.

Vector math on the CPU (torch's cos, sin, exp and the like) sets itself up at its first call in a
process. Where two OpenMP threads make that first call together, one of them now and then computes
its share otherwise: the first `cos` of a process differed in its last bits from every later one
in 5 of 40 processes (2 threads, torch 2.13, Intel Xeon), never on one thread. A model's first pass
computes its rotary table so, and a prompt's first pass then differs from the same pass later, and
so can the greedy answer (docs/weights.md). Made once on one thread first, the setting-up is done
before any two threads meet there.
"""
from __future__ import annotations

import functools

VECTOR_MATH = ("cos", "sin", "tan", "acos", "asin", "atan", "cosh", "sinh", "tanh", "exp", "expm1", "log",
               "log10", "log1p", "log2", "erf", "erfc", "erfinv", "sqrt", "rsqrt", "lgamma", "sigmoid")


@functools.cache
def settle_vector_math() -> None:
    """Make vector math's first calls of this process on one thread (see VECTOR_MATH); at once
    after the first time."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.inference_mode():
            for dtype in (torch.float32, torch.float64):
                probe = torch.linspace(0.01, 0.99, 64, dtype=dtype)
                for name in VECTOR_MATH:
                    getattr(torch, name)(probe)
    finally:
        torch.set_num_threads(threads)
