"""Pages of weights mapped from a checkpoint's file, let go once they are no longer needed.

transformers maps a safetensors checkpoint: a float32 weight costs no memory until it is read,
but once read its pages stay in the process's resident memory. A first start reads float32
weights to time the paths and to quantize them, then runs on int8 copies, so without this the
float32 pages it touched stay resident beside them. Letting them go (madvise MADV_DONTNEED) is
safe only where no page of the mapping was written: those pages equal the file's, which the
system keeps in its cache, and a later read maps them again. A mapping with any page written
(its copy-on-write pages are anonymous memory) is left alone, and so is all other memory.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import re
from collections.abc import Iterable

import torch

MADV_DONTNEED = 4  # Linux
_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \d+\s*(.*)$")


def clean_file_mappings(smaps: str | None = None) -> list[tuple[int, int]]:
    """The address ranges of this process's readable mappings of files with no page written
    (`smaps`: /proc/self/smaps's text, read when not given; none where it cannot be read)."""
    if smaps is None:
        try:
            with open("/proc/self/smaps") as file:
                smaps = file.read()
        except OSError:
            return []
    ranges: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    clean = False
    for line in smaps.splitlines():
        header = _HEADER.match(line)
        if header:
            if current is not None and clean:
                ranges.append(current)
            start, end, permissions, path = header.groups()
            is_file = path.startswith("/") and not path.endswith("(deleted)")
            current = (int(start, 16), int(end, 16)) if is_file and permissions.startswith("r") else None
            clean = current is not None
        elif current is not None and line.startswith("Anonymous:"):  # copy-on-write pages: written here
            clean = clean and line.split()[1] == "0"
    if current is not None and clean:
        ranges.append(current)
    return ranges


def release_mapped(tensors: Iterable[torch.Tensor]) -> int:
    """Let go of the whole pages of `tensors` (CPU tensors) that lie in a clean mapping of a file;
    returns the bytes let go (0 where nothing is mapped, or off Linux)."""
    mappings = clean_file_mappings()
    if not mappings:
        return 0
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return 0
    released = 0
    for tensor in tensors:
        if tensor.device.type != "cpu" or not tensor.numel() or not tensor.is_contiguous():
            continue
        begin = tensor.data_ptr()
        end = begin + tensor.numel() * tensor.element_size()
        if not any(start <= begin and end <= stop for start, stop in mappings):
            continue
        first = -(-begin // mmap.PAGESIZE) * mmap.PAGESIZE
        last = end // mmap.PAGESIZE * mmap.PAGESIZE
        if last > first and libc.madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first), MADV_DONTNEED) == 0:
            released += last - first
    return released
