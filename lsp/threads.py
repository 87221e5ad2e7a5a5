"""Work the language server hands to a thread of its own that never holds up the process's exit."""
from __future__ import annotations

import asyncio
import threading


async def in_daemon_thread(name: str, function, *args):
    """`function(*args)` in a daemon thread, awaited. asyncio.to_thread's workers are joined at exit,
    so an editor that closes would wait for a model's load or a prefill to end; a daemon thread
    ends with the process (what it writes to disk it writes atomically)."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def work() -> None:
        try:
            result = function(*args)
        except BaseException as error:  # handed to the awaiting task
            outcome, value = done.set_exception, error
        else:
            outcome, value = done.set_result, result
        try:
            loop.call_soon_threadsafe(lambda: done.done() or outcome(value))
        except RuntimeError:  # the loop has closed: nobody waits any more
            pass

    threading.Thread(target=work, name=name, daemon=True).start()
    return await done
