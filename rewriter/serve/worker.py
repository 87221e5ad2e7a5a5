"""The worker: one thread owns the model and serves queued requests one at a time.

A request is a generator function run on the worker; its events are handed to the event
loop as they come. A cancelled request (a client that went away) stops its generator at the
next event, which closes Decoder.generate and frees the worker within one decoding step.
"""
from __future__ import annotations

import asyncio
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

Work = Callable[[], Generator[Any, None, None]]

MAX_RETRY_AFTER_S = 120  # a client told to wait longer would rather hear "busy" again
FIRST_SECONDS_PER_TOKEN = 0.05  # until a request has been timed
RATE_MEMORY = 0.5  # weight of the latest request in the per-token time: recent load counts most


class QueueFull(RuntimeError):
    """Too many requests wait already; `retry_after` is a guess in whole seconds."""

    def __init__(self, retry_after: int):
        super().__init__(f"the server is busy; retry in {retry_after}s")
        self.retry_after = retry_after


@dataclass
class Failed:
    """The request's generator raised; the service maps the exception to an error."""

    error: BaseException


class _End:
    pass


END = _End()


@dataclass
class WorkerCounters:
    completed: int = 0
    cancelled: int = 0
    failed: int = 0
    # From a cancel() of the running request to the worker having stopped it.
    last_cancel_latency_s: float | None = None
    # The longest gap between two events of the request that was cancelled: about one step.
    last_cancelled_step_s: float | None = None
    seconds_per_token: float = FIRST_SECONDS_PER_TOKEN  # per expected output token, recent requests


@dataclass
class QueuedRequest:
    work: Work
    loop: asyncio.AbstractEventLoop
    tokens: int = 1  # the output tokens it is expected to take: what Retry-After adds up
    events: asyncio.Queue = field(default_factory=asyncio.Queue)
    cancelled: threading.Event = field(default_factory=threading.Event)
    queued_at: float = field(default_factory=time.perf_counter)
    started_at: float | None = None
    cancelled_at: float | None = None

    def cancel(self) -> None:
        if not self.cancelled.is_set():
            self.cancelled_at = time.perf_counter()
            self.cancelled.set()

    def _push(self, event: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, event)
        except RuntimeError:  # the loop is gone (shutdown): nobody listens any more
            self.cancel()

    async def next(self) -> Any:
        """The next event, a Failed, or END."""
        return await self.events.get()


class AnsweredJob:
    """A request answered without the worker (the apply model's deterministic merge): its events,
    then END, as a queued request hands them out."""

    def __init__(self, *events: Any):
        self.events = [*events, END]
        self.queued_at = self.started_at = time.perf_counter()

    def cancel(self) -> None:
        pass  # nothing runs

    async def next(self) -> Any:
        return self.events.pop(0)


class Worker:
    """Runs submitted work one request at a time on a worker thread, with a bounded queue."""

    def __init__(self, max_queue: int = 32):
        self.max_queue = max_queue
        self._queue: queue.Queue[QueuedRequest | None] = queue.Queue()
        self._waiting = 0
        self._waiting_tokens = 0
        self._lock = threading.Lock()
        self.running: QueuedRequest | None = None
        self.counters = WorkerCounters()
        self._thread = threading.Thread(target=self._serve, name="rewriter-worker", daemon=True)
        self._thread.start()

    @property
    def waiting(self) -> int:
        return self._waiting

    def submit(self, work: Work, loop: asyncio.AbstractEventLoop | None = None, tokens: int = 1) -> QueuedRequest:
        """Queue `work`; `tokens` (its expected output) lets a refusal say how long the queue takes."""
        loop = loop or asyncio.get_running_loop()
        with self._lock:
            if self._waiting >= self.max_queue:
                raise QueueFull(self._retry_after())
            self._waiting += 1
            self._waiting_tokens += max(1, tokens)
        job = QueuedRequest(work=work, loop=loop, tokens=max(1, tokens))
        self._queue.put(job)
        return job

    def _retry_after(self) -> int:
        """Seconds until the queue has drained: its tokens, and the running request's rest, at the recent pace."""
        pace = self.counters.seconds_per_token
        seconds = self._waiting_tokens * pace
        running = self.running
        if running is not None and running.started_at is not None:
            seconds += max(0.0, running.tokens * pace - (time.perf_counter() - running.started_at))
        return min(MAX_RETRY_AFTER_S, max(1, math.ceil(seconds)))

    def close(self, timeout: float = 5.0) -> None:
        running = self.running
        if running:
            running.cancel()
        self._queue.put(None)
        self._thread.join(timeout)

    def _serve(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            with self._lock:
                self._waiting -= 1
                self._waiting_tokens -= job.tokens
            if job.cancelled.is_set():
                self.counters.cancelled += 1
                job._push(END)
                continue
            self.running = job
            try:
                self._run(job)
            finally:
                self.running = None
                job._push(END)

    def _run(self, job: QueuedRequest) -> None:
        job.started_at = time.perf_counter()
        generator = job.work()
        last = job.started_at
        longest_gap = 0.0
        stopped = False
        try:
            for event in generator:
                now = time.perf_counter()
                longest_gap = max(longest_gap, now - last)
                last = now
                if job.cancelled.is_set():
                    stopped = True
                    break
                job._push(event)
        except Exception as error:  # the request's own failure, reported to its client only
            self.counters.failed += 1
            job._push(Failed(error))
            return
        finally:
            generator.close()  # stops Decoder.generate at once
        elapsed = time.perf_counter() - job.started_at
        if stopped:
            self.counters.cancelled += 1
            self.counters.last_cancel_latency_s = time.perf_counter() - (job.cancelled_at or last)
            self.counters.last_cancelled_step_s = longest_gap
            log.info("request cancelled; worker free %.3fs after the cancel",
                     self.counters.last_cancel_latency_s)
        else:
            self.counters.completed += 1
            pace = elapsed / job.tokens
            memory = RATE_MEMORY if self.counters.completed > 1 else 1.0  # the first timing replaces the guess
            self.counters.seconds_per_token += memory * (pace - self.counters.seconds_per_token)
