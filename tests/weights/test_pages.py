"""Mapped weights let go once read: only pages equal to the file's, never other memory."""
import sys

import numpy as np
import pytest
import torch

from rewriter.weights.pages import clean_file_mappings, release_mapped

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc are Linux's")

SMAPS = """\
7f0000000000-7f0000100000 rw-p 00000000 fe:00 11 /cache/model.safetensors
Size:               1024 kB
Anonymous:             0 kB
Private_Dirty:         0 kB
7f0000200000-7f0000300000 rw-p 00000000 fe:00 12 /cache/written.safetensors
Size:               1024 kB
Anonymous:             4 kB
Private_Dirty:         4 kB
7f0000400000-7f0000500000 rw-p 00000000 00:00 0
Anonymous:             0 kB
7f0000600000-7f0000700000 r--p 00000000 fe:00 13 /lib/libc.so.6
Anonymous:             0 kB
Private_Dirty:         0 kB
"""


def test_only_files_mapped_with_no_page_written_count_as_clean():
    assert clean_file_mappings(SMAPS) == [(0x7F0000000000, 0x7F0000100000), (0x7F0000600000, 0x7F0000700000)]


def _mapped(tmp_path, values: np.ndarray) -> tuple[torch.Tensor, np.memmap]:
    path = tmp_path / "weights.bin"
    values.tofile(path)
    mapping = np.memmap(path, dtype=values.dtype, mode="c", shape=values.shape)  # private, as transformers maps
    return torch.from_numpy(mapping), mapping


def test_a_mapped_weight_read_is_let_go_and_reads_the_same_after(tmp_path):
    values = np.arange(1 << 20, dtype=np.float32)
    weight, _mapping = _mapped(tmp_path, values)
    total = float(weight.double().sum())  # every page read, so resident
    assert release_mapped([weight]) >= (1 << 22) - 2 * 4096
    assert float(weight.double().sum()) == total and torch.equal(weight, torch.from_numpy(values))


def test_memory_of_the_process_s_own_is_never_let_go(tmp_path):
    heap = torch.arange(1 << 20, dtype=torch.float32)
    assert release_mapped([heap]) == 0
    assert torch.equal(heap, torch.arange(1 << 20, dtype=torch.float32))


def test_a_mapping_with_a_page_written_is_left_alone(tmp_path):
    weight, _mapping = _mapped(tmp_path, np.zeros(1 << 20, dtype=np.float32))
    weight[5] = 7.0  # a copy-on-write page: it differs from the file now
    assert release_mapped([weight]) == 0
    assert float(weight[5]) == 7.0
