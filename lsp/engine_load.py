"""An engine made and loaded once, in a thread, for everyone who waits for it.

The load is a task of its own, so that a waiter given up meanwhile (a cancelled request) does not
cut it off: the next one waits for the same load, never starts a second. Loading progress goes to
every waiter, not only the one that started it. A failed load is tried again by the next waiter.
The load runs on the kept daemon thread (lsp/threads.py): an editor that closes meanwhile does
not wait for it.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable

from rewriter.engine import Engine

from .threads import TORCH_THREAD

Report = Callable[[str], None]


class EngineLoad:
    def __init__(self, make: Callable[[], Engine]):
        self.make = make
        self.engine: Engine | None = None
        self._load: asyncio.Future | None = None
        self._listeners: set[Report] = set()  # the progress reporters of the waiters

    @property
    def ready(self) -> Engine | None:
        """The engine, where it is loaded; None before."""
        engine = self.engine
        return engine if engine is not None and getattr(engine, "ready", False) else None

    async def get(self, report: Report) -> Engine:
        """The engine, loaded first if need be; `report` hears the load's progress meanwhile."""
        self._listeners.add(report)
        try:
            load = self._load
            if load is None or (load.done() and (load.cancelled() or load.exception() is not None)):
                load = self._load = asyncio.ensure_future(self._run())
            return await asyncio.shield(load)
        finally:
            self._listeners.discard(report)

    async def _run(self) -> Engine:
        if self.engine is None:
            self.engine = await TORCH_THREAD.run(self.make)
        engine = self.engine
        if not engine.ready:
            loop = asyncio.get_running_loop()

            def say(message: str) -> None:  # from the loading thread
                loop.call_soon_threadsafe(self._tell, f"model: {message}")

            self._tell("loading the model (once)")
            await TORCH_THREAD.run(engine.load, say)
        return engine

    def _tell(self, message: str) -> None:
        for report in list(self._listeners):
            report(message)
