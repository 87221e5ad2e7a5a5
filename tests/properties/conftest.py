"""The properties run on one thread: their tiny models gain nothing from more, and a busy machine
makes threads wait on each other."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
