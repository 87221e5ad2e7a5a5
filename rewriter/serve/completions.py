"""A raw completion's answer over HTTP, as OpenAI's completions give it: one `text_completion`,
or server-sent chunks of the same object ending with `[DONE]`. The request is read in
completion_request.py and decoded by the backend (Backend.completion)."""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .completion_request import CompletionBody
from .schema import ApiError
from .streaming import EventStream, log_done, next_event, sse, start, usage_of
from .worker import END


async def answer_completion(request: Request, body: CompletionBody, job, request_id: str,
                            fingerprint: str) -> Response:
    """The job's answer: whole, or streamed as chunks."""
    job, watcher, first = await start(request, job)
    if first is END:
        return Response(status_code=499)  # the client went away while queued
    base = {"id": request_id, "object": "text_completion", "created": int(time.time()), "model": body.model,
            "system_fingerprint": fingerprint}
    if body.stream:
        return EventStream(completion_chunks(body, base, job, first, request_id), job, watcher)
    return await full_completion(base, job, watcher, first, request_id)


def _choice(text: str, finish_reason: str | None) -> dict:
    return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}


async def full_completion(base: dict, job, watcher: asyncio.Task, first, request_id: str) -> Response:
    """The whole completion in one JSON response."""
    try:
        text, event = [first.text], first
        while not event.done:
            event = await next_event(job)
            if event is END:
                return Response(status_code=499)
            text.append(event.text)
    finally:
        job.cancel()
        watcher.cancel()
    log_done(request_id, "completion", event.stats, job)
    return JSONResponse({**base, "choices": [_choice("".join(text), event.stats.finish_reason)],
                         "usage": usage_of(event.stats, event.rejected_prediction_tokens)})


async def completion_chunks(body: CompletionBody, base: dict, job, first,
                            request_id: str) -> AsyncGenerator[bytes, None]:
    """The completion as server-sent chunks, as OpenAI streams them."""
    chunk = {**base, "usage": None} if body.include_usage else base
    event = first
    while True:
        if event.text:
            yield sse({**chunk, "choices": [_choice(event.text, None)]})
        if event.done:
            break
        try:
            event = await next_event(job)
        except ApiError as error:
            yield sse(error.body())
            return
        if event is END:
            return  # cancelled
    yield sse({**chunk, "choices": [_choice("", event.stats.finish_reason)]})
    if body.include_usage:
        yield sse({**chunk, "choices": [], "usage": usage_of(event.stats, event.rejected_prediction_tokens)})
    yield sse("[DONE]")
    log_done(request_id, "completion stream", event.stats, job)
