"""Torch's work in the language server, on daemon threads, which never hold up the process's exit
(asyncio's executor threads are joined at exit: an editor that closed would wait for a model's load
to end; what a load writes to disk it writes atomically).

Models load and suggestions decode on one kept thread (`TORCH_THREAD`), in turn; a prefill runs on
a thread of its own (`in_daemon_thread`), as a rewrite does. That is where asyncio's executor ran
them before, kept so on purpose: torch's OpenMP pool belongs to the thread that ran an op and lives
as long as it, and with a pool kept beside a rewrite's, libgomp spins less between ops. Every
piece on a thread that ends (one pool at a time) made a rewrite 1.9x faster beside a process at
nice 19, and 3x slower beside one at the same priority (docs/weights.md): a path load flips.
"""
from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable


def _settled(loop: asyncio.AbstractEventLoop, done: asyncio.Future) -> Callable[[bool, object], None]:
    """What hands a thread's outcome to `done`, on `loop`."""
    def hand_over(succeeded: bool, value) -> None:
        if not done.done():
            (done.set_result if succeeded else done.set_exception)(value)

    def settle(succeeded: bool, value) -> None:  # on the thread
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
            loop.call_soon_threadsafe(hand_over, succeeded, value)

    return settle


def _outcome(function, args: tuple) -> tuple[bool, object]:
    try:
        return True, function(*args)
    except BaseException as error:  # handed to the awaiting task
        return False, error


async def in_daemon_thread(name: str, function, *args):
    """`function(*args)` on a daemon thread started for it, awaited."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    settle = _settled(loop, done)
    threading.Thread(target=lambda: settle(*_outcome(function, args)), name=name, daemon=True).start()
    return await done


class KeptThread:
    """One daemon thread, started at the first call and kept, that runs what it is handed in turn.
    Called from the event loop only."""

    def __init__(self, name: str):
        self.name = name
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    async def run(self, function, *args):
        """`function(*args)` on the kept thread, after what was handed to it before; awaited."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
            self._thread.start()
        self._work.put((function, args, _settled(loop, done)))
        return await done

    def _serve(self) -> None:
        while True:
            function, args, settle = self._work.get()
            settle(*_outcome(function, args))


TORCH_THREAD = KeptThread("torch")
