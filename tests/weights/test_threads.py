"""Torch's threads wait as what runs beside the process asks, set when an engine first imports
torch: asleep at once beside other work, after a brief spin on a quiet machine; a wait the
environment sets is kept, and processes started later get the environment as it was."""
import os
import sys

import pytest

from rewriter.weights import threads
from rewriter.weights.threads import BESIDE_OTHER_WORK, QUIET, WAIT_SETTINGS, thread_waits


@pytest.fixture
def before_torch(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch")  # as in a process that has not imported it yet
    for name in WAIT_SETTINGS:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(("others", "expected"), [(0, QUIET), (2, BESIDE_OTHER_WORK)])
def test_the_first_import_of_torch_waits_as_the_machine_asks_and_the_environment_is_restored(
        before_torch, monkeypatch, others, expected):
    monkeypatch.setattr(threads, "others_running", lambda: others)
    with thread_waits() as setting:
        name, value = expected
        assert setting == expected and os.environ[name] == value
    assert not [name for name in WAIT_SETTINGS if name in os.environ]


def test_a_wait_the_environment_sets_is_kept(before_torch, monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    with thread_waits() as setting:
        assert setting is None and "GOMP_SPINCOUNT" not in os.environ
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


def test_nothing_is_set_once_torch_is_imported(monkeypatch):
    import torch  # noqa: F401  (loaded: its threads' wait is settled)

    for name in WAIT_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    with thread_waits() as setting:
        assert setting is None and not [name for name in WAIT_SETTINGS if name in os.environ]


def test_other_work_is_counted_without_this_process():
    assert threads.others_running(samples=2, gap_s=0) >= 0
