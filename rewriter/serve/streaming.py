"""A queued job's answer over HTTP: waiting for its events, cancelling it when the client goes
away, and server-sent events."""
from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..results import Stats
from .schema import ApiError, error_for
from .worker import END, Failed

log = logging.getLogger("rewriter.serve.app")  # the service's lines, under the name they had before the split


async def next_event(job):
    event = await job.next()
    if isinstance(event, Failed):
        raise error_for(event.error)
    return event


async def start(request: Request, job):
    """Watch for the client leaving, and wait for the job's first event.

    Refusals found on the worker become plain HTTP errors; END means the client left.
    """
    watcher = asyncio.create_task(_watch_disconnect(request, job))
    try:
        first = await next_event(job)
    except BaseException:
        job.cancel()
        watcher.cancel()
        raise
    if first is END:
        watcher.cancel()
    return job, watcher, first


async def whole_text(job, watcher: asyncio.Task, first, request_id: str, kind: str):
    """The job's whole text and its last event, for an answer in one JSON response; None when the
    client went away. The job and its watcher are cancelled either way."""
    try:
        text, event = [first.text], first
        while not event.done:
            event = await next_event(job)
            if event is END:
                return None
            text.append(event.text)
    finally:
        job.cancel()
        watcher.cancel()
    log_done(request_id, kind, event.stats, job)
    return "".join(text), event


async def text_chunks(job, first, text: Callable[[str], bytes], finish: Callable[[str | None], bytes],
                      usage_chunk: dict | None, request_id: str, kind: str) -> AsyncGenerator[bytes, None]:
    """The job's text as server-sent chunks, as OpenAI streams them: `text` encodes each piece and
    `finish` the finish reason; then, where the client asked for usage, `usage_chunk` with it, and
    `[DONE]`. A failure on the worker ends the stream with its error; a cancelled job just stops."""
    event = first
    while True:
        if event.text:
            yield text(event.text)
        if event.done:
            break
        try:
            event = await next_event(job)
        except ApiError as error:
            yield sse(error.body())
            return
        if event is END:
            return  # cancelled
    yield finish(event.stats.finish_reason)
    if usage_chunk is not None:
        yield sse({**usage_chunk, "choices": [], "usage": usage_of(event.stats, event.rejected_prediction_tokens)})
    yield sse("[DONE]")
    log_done(request_id, kind, event.stats, job)


def log_done(request_id: str, kind: str, stats: Stats | None, job) -> None:
    if stats is None:
        return
    waited = (job.started_at or job.queued_at) - job.queued_at
    log.info("%s %s: %d prompt tokens (%d cached), %d output tokens, prediction %d accepted / %d "
             "rejected, waited %.2fs, ttft %.3fs, %.1f tok/s, %s", request_id, kind, stats.prompt_tokens,
             stats.cached_prompt_tokens, stats.output_tokens, stats.accepted_prediction_tokens,
             stats.rejected_prediction_tokens, waited, stats.ttft_s, stats.tokens_per_s,
             stats.finish_reason or "cancelled")


async def _watch_disconnect(request: Request, job) -> None:
    """Cancel the job as soon as the client goes away."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            job.cancel()
            return


class EventStream(Response):
    """Server-sent events from an async iterator of encoded events; cancels the job when done."""

    def __init__(self, events: AsyncGenerator[bytes, None], job, watcher: asyncio.Task):
        self.status_code = 200
        self.background = None
        self.raw_headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"),
                            (b"x-accel-buffering", b"no")]
        self.events, self.job, self.watcher = events, job, watcher

    async def __call__(self, scope, receive, send) -> None:
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for chunk in self.events:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went away
        finally:
            self.job.cancel()
            self.watcher.cancel()
            await self.events.aclose()


def sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"{head}data: {payload}\n\n".encode()


def usage_of(stats: Stats, rejected_prediction_tokens: int) -> dict:
    return {
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.output_tokens,
        "total_tokens": stats.prompt_tokens + stats.output_tokens,
        "prompt_tokens_details": {"cached_tokens": stats.cached_prompt_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "accepted_prediction_tokens": stats.accepted_prediction_tokens,
            "rejected_prediction_tokens": rejected_prediction_tokens,
            "reasoning_tokens": 0,
            "audio_tokens": 0,
        },
    }
