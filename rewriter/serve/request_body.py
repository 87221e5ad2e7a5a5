"""A request's JSON body, read and checked before any field is: its type, its size, the time
it takes to arrive, its nesting and its strings; refused with OpenAI's error shape (schema.ApiError).
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import ClientDisconnect, Request

from .schema import ApiError, type_name

MAX_JSON_DEPTH = 32  # OpenAI's bodies nest a few levels; deeper is refused before any work


class ClientGone(Exception):
    """The client hung up before its request was read: nobody to answer."""


async def read_json(request: Request, limit: int, timeout_s: float = 30.0) -> dict:
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind != "application/json":
        # A web page may post text/plain cross-site without asking first; JSON needs a preflight.
        raise ApiError(415, f"The request body must be sent as Content-Type: application/json, not "
                       f"{kind or 'without a type'}.", code="unsupported_media_type")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"The request body is {declared} bytes; this server takes at most {limit}.",
                       code="request_too_large")
    chunks, size = [], 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise ApiError(413, f"The request body exceeds {limit} bytes.", code="request_too_large")
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(408, f"The request body did not arrive within {timeout_s:g}s.", code="request_timeout",
                       headers={"Connection": "close"}) from None
    except ClientDisconnect:
        raise ClientGone() from None
    try:
        body = json.loads(b"".join(chunks))
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        reason = "it nests too deeply" if isinstance(error, RecursionError) else str(error)
        raise ApiError(400, f"We could not parse the JSON body of your request ({reason}). The body must be "
                       "a JSON object.", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(400, f"The request body must be a JSON object, not {type_name(body)}.", code="invalid_json")
    check_json_values(body)
    return body


def check_json_values(body: dict) -> None:
    """Refuse what parses but cannot be served: deep nesting, and strings that are not valid Unicode."""
    pending: list[tuple[Any, str, int]] = [(body, "", 0)]
    while pending:  # no recursion: the depth is what is being checked
        value, path, depth = pending.pop()
        if depth > MAX_JSON_DEPTH:
            raise ApiError(400, f"The request body nests more than {MAX_JSON_DEPTH} levels deep.",
                           code="invalid_json")
        if isinstance(value, dict):
            for key, item in value.items():
                _check_text(key, path or "body")
                pending.append((item, f"{path}.{key}" if path else key, depth + 1))
        elif isinstance(value, list):
            pending.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))
        elif isinstance(value, str):
            _check_text(value, path)


def _check_text(text: str, param: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ApiError(400, f"Invalid '{param}': the string holds a lone UTF-16 surrogate "
                       f"({text[error.start]!r} at {error.start}), which is not valid Unicode.",
                       param=param, code="invalid_value") from None
