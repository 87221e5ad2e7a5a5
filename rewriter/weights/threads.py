"""How torch's threads wait for each other, set as torch is first imported: by what else runs.

Torch runs its CPU ops on OpenMP threads (libgomp, in torch's Linux wheels), one per core. The
thread that finishes its share of an op first waits for the others, spinning for about 3 ms by
default before it sleeps. Where another process keeps a core busy, the thread it waits for is
often not running, and the spinning keeps it off the core: beside a busy core a start and its
rewrite take far longer so than with waiting threads asleep at once (OMP_WAIT_POLICY=PASSIVE;
figures in docs/weights.md). On a quiet machine that made every pass much slower
(each of its hundreds of ops woke a sleeping thread), so there they spin about 50 us
(GOMP_SPINCOUNT), which covers the gaps between a pass's ops. The same threads split the same
work either way, so no bit changes.

libgomp reads the setting once, when torch loads it: the variable is set for that import only,
so that processes started later (`apply --test`) keep the environment they were given. A wait
the environment already sets is kept.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator

# Settings of the wait itself: libgomp's and Intel OpenMP's.
WAIT_SETTINGS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
BESIDE_OTHER_WORK = ("OMP_WAIT_POLICY", "PASSIVE")
# Spins before a waiting thread sleeps: about 50 us (libgomp counts about 100 a microsecond).
QUIET = ("GOMP_SPINCOUNT", "5000")
# Runnable threads are counted a few times, the least kept: only work that holds a core throughout
# counts as busy (about 15 ms in all).
SAMPLES, SAMPLE_GAP_S = 8, 0.002


@contextlib.contextmanager
def thread_waits() -> Iterator[tuple[str, str] | None]:
    """Within, a first import of torch makes its threads wait as what runs beside this process
    asks; yields the setting, or None where torch is imported already or the environment sets
    the wait."""
    if "torch" in sys.modules or any(name in os.environ for name in WAIT_SETTINGS):
        yield None
        return
    name, value = setting = BESIDE_OTHER_WORK if others_running() else QUIET
    os.environ[name] = value
    try:
        yield setting
    finally:
        os.environ.pop(name, None)


def others_running(samples: int = SAMPLES, gap_s: float = SAMPLE_GAP_S) -> int:
    """Threads of other work running on this machine now, the least of a few counts of
    /proc/loadavg's runnable threads less the one reading them (0 where it cannot be read)."""
    counts = []
    for sample in range(samples):
        try:
            with open("/proc/loadavg") as loadavg:
                counts.append(int(loadavg.read().split()[3].split("/")[0]))
        except (OSError, ValueError, IndexError):
            return 0
        if sample + 1 < samples:
            time.sleep(gap_s)
    return max(0, min(counts) - 1)
