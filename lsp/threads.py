"""Torch's work in the language server (a model's load, a suggestion, a prefill) on a thread
started for it, which ends with it and never holds up the process's exit.

A thread of its own, because torch's OpenMP pool belongs to the thread that ran an op and lives as
long as it: beside a pool that a kept thread holds (asyncio's executor), the next thread's ops each
wait for a sleeping thread to wake (rewriter/weights/threads.py). A daemon, because asyncio's
executor threads are joined at exit: an editor that closes would wait for a model's load to end
(what a load writes to disk it writes atomically)."""
from __future__ import annotations

import asyncio
import contextlib

from rewriter.weights.threads import start_own_thread


async def in_daemon_thread(name: str, function, *args):
    """`function(*args)` on a daemon thread of its own, awaited."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def hand_over(succeeded: bool, value) -> None:
        if not done.done():
            (done.set_result if succeeded else done.set_exception)(value)

    def settle(succeeded: bool, value) -> None:  # on the thread
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
            loop.call_soon_threadsafe(hand_over, succeeded, value)

    start_own_thread(name, function, args, settle)
    return await done
