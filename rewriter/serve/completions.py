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
from .streaming import EventStream, sse, start, text_chunks, usage_of, whole_text
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
    whole = await whole_text(job, watcher, first, request_id, "completion")
    if whole is None:
        return Response(status_code=499)
    text, event = whole
    return JSONResponse({**base, "choices": [_choice(text, event.stats.finish_reason)],
                         "usage": usage_of(event.stats, event.rejected_prediction_tokens)})


def completion_chunks(body: CompletionBody, base: dict, job, first, request_id: str) -> AsyncGenerator[bytes, None]:
    """The completion as server-sent chunks, as OpenAI streams them."""
    chunk = {**base, "usage": None} if body.include_usage else base
    return text_chunks(job, first, lambda text: sse({**chunk, "choices": [_choice(text, None)]}),
                       lambda finish: sse({**chunk, "choices": [_choice("", finish)]}),
                       chunk if body.include_usage else None, request_id, "completion stream")
