"""This machine's CPU as torch's kernels see it: the name in the keys of what is kept per machine
(the dtype choice, weights/cpu_choice.py; kernel checks, kept_checks.py)."""
from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

# Environment variables that change which kernels torch runs (and so what is fastest).
KERNEL_SETTINGS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS",
                   "FBGEMM_ENABLE_INSTRUCTIONS",
                   "OMP_NUM_THREADS")
# CPU features that decide the int8 kernels.
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8", "amx_bf16",
             "asimddp", "i8mm", "sve")


def cpu_name_and_flags() -> tuple[str, set[str]]:
    """The CPU's model name and its feature flags, as /proc/cpuinfo gives them (elsewhere: the
    platform's processor name and no flags)."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("model name", "Processor", "CPU part") and name in (platform.processor(), platform.machine()):
                name = value.strip()
            if key in ("flags", "Features"):
                flags = set(value.split())
                break
    except OSError:
        pass
    return name, flags


def kernels_identity(name: str, flags: set[str]) -> str:
    """The CPU `name`, its int8-relevant features among `flags`, the thread count and the kernel
    settings in force."""
    features = ",".join(flag for flag in ISA_FLAGS if flag in flags)
    settings = ",".join(f"{key}={os.environ[key]}" for key in KERNEL_SETTINGS if key in os.environ)
    mkldnn = "" if torch.backends.mkldnn.enabled else ",mkldnn off"
    return f"{name} [{features}] x{torch.get_num_threads()}{mkldnn}" + (f" {settings}" if settings else "")
