"""Torch's threads wait as what runs beside the process asks, set when an engine first imports
torch: asleep at once beside other work, after a brief spin on a quiet machine; a wait the
environment sets is kept, and processes started later get the environment as it was; torch's work
on a thread of its own leaves no pool of torch's threads behind."""
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
POOLS = """
import os, time, torch
from rewriter.weights.threads import in_own_thread
torch.set_num_threads(2)
def tasks():
    return len(os.listdir("/proc/self/task"))
def settled():
    time.sleep(0.3)  # a pool's threads end a moment after their thread
    return tasks()
parallel = lambda: float((torch.ones(1 << 22) * 2).sum())  # big enough for torch's threads
before = settled()
assert in_own_thread(parallel) == 2.0 * (1 << 22)
after_own = settled()
parallel()
print(before, after_own, settled())
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task") or (os.cpu_count() or 1) < 2, reason="needs Linux and two cores")
def test_torch_work_on_a_thread_of_its_own_leaves_no_pool_of_torch_threads_behind():
    """What keeps decoding off the main thread fast: the OpenMP pool of a thread that ran torch's
    ops ends with it, where the main thread's stays for good (and, beside another, slows both)."""
    import subprocess

    ran = subprocess.run([sys.executable, "-c", POOLS], capture_output=True, text=True, timeout=120, check=True)
    before, after_own, after_main = map(int, ran.stdout.split())
    if after_main == before:
        pytest.skip("torch's threads here keep no pool per thread (not libgomp)")
    assert after_own == before  # the thread's pool went with it ...
    assert after_main > before  # ... where the main thread's stays


def test_work_in_a_thread_of_its_own_gives_its_result_or_raises_its_error():
    import asyncio

    from lsp.threads import in_daemon_thread
    from rewriter.weights.threads import in_own_thread

    def fail():
        raise ValueError("no model")

    assert in_own_thread(pow, 2, 10) == 1024
    with pytest.raises(ValueError, match="no model"):
        in_own_thread(fail)

    async def awaited():
        assert await in_daemon_thread("power", pow, 3, 3) == 27
        with pytest.raises(ValueError, match="no model"):
            await in_daemon_thread("failing", fail)

    asyncio.run(awaited())
