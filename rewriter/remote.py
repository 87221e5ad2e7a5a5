"""A remote engine: rewrite through our service or any OpenAI-compatible endpoint.

`RemoteRewriter` is an Engine (rewriter/engine.py) like the in-process Rewriter: `stream(request)`
yields Progress increments of the model's answer, then a RewriteResult, so every front end takes
either. The edit session (edits/session.py) derives diff hunks from the answer, as for any engine.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Generator, Iterator
from dataclasses import fields
from urllib.parse import urlsplit

import httpx

from .answer import AnswerStream, NoCodeBlock
from .engine import EditRequest, SamplingParams, require_instruction
from .results import (
    ContextTooLarge,
    Progress,
    RewriteError,
    RewriteResult,
    ServiceError,
    Stats,
    UnsupportedSampling,
)

MAX_RETRY_WAIT_S = 30.0
# A request too large for the model, in the words of OpenAI and vLLM, and of our service (whose
# code for it is the older invalid_rewrite): the one place a remote error is known by its text.
TOO_LARGE_WORDS = ("maximum context length", "too large for the model's context", "Rewrite a smaller part")


def stats_from(data: dict | None) -> Stats:
    """A Stats from its JSON form, ignoring fields this version does not know."""
    known = {f.name for f in fields(Stats)}
    return Stats(**{k: v for k, v in (data or {}).items() if k in known})


def openai_sampling(sampling: SamplingParams | None) -> dict:
    """A chat request's sampling fields for these settings (None: greedy), as OpenAI's API takes
    them; UnsupportedSampling for what it has no field for."""
    if sampling is None or sampling.greedy:
        return {"temperature": 0}
    if sampling.top_k:
        raise UnsupportedSampling(f"top_k={sampling.top_k}: OpenAI-compatible endpoints take temperature, "
                                  "top_p and seed, not top_k; leave top_k at 0 for an endpoint")
    if sampling.verification != "block":
        raise UnsupportedSampling(f"verification={sampling.verification!r} picks how the local decoder checks "
                                  "drafts; an endpoint checks its own way: leave it at 'block' for an endpoint")
    fields: dict = {"temperature": sampling.temperature, "top_p": sampling.top_p}
    if sampling.seed is not None:
        fields["seed"] = sampling.seed
    return fields


class RemoteRewriter:
    """An engine that decodes on a server: ours (/v1/rewrites) or any OpenAI-compatible one.

    `base_url` is the API root as OpenAI clients take it (e.g. http://127.0.0.1:8000/v1; a URL
    without a path gets /v1). `protocol`: "rewriter", "openai", or "auto" (ask the server once).
    The API key defaults to REWRITER_API_KEY, then OPENAI_API_KEY.
    """

    def __init__(self, base_url: str, api_key: str | None = None, model: str | None = None,
                 protocol: str = "auto", timeout: float = 600.0, retries: int = 3,
                 http: httpx.Client | None = None, budget_field: str = "max_completion_tokens"):
        """`budget_field`: the chat request's name for the token budget. OpenAI's is
        max_completion_tokens (it refuses both names at once); some servers (llama-cpp-python)
        honour only the older max_tokens."""
        if protocol not in ("auto", "rewriter", "openai"):
            raise ValueError(f"protocol must be auto, rewriter or openai, got {protocol!r}")
        if budget_field not in ("max_completion_tokens", "max_tokens"):
            raise ValueError(f"budget_field must be max_completion_tokens or max_tokens, got {budget_field!r}")
        self.budget_field = budget_field
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.base_url = base_url.rstrip("/") if parts.path.strip("/") else base_url.rstrip("/") + "/v1"
        key = api_key or os.environ.get("REWRITER_API_KEY") or os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.http = http or httpx.Client(timeout=httpx.Timeout(timeout, connect=10.0), headers=headers)
        self.model = model
        self.retries = retries
        self._protocol = protocol

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> RemoteRewriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def protocol(self) -> str:
        if self._protocol == "auto":
            try:
                answer = self.http.get(f"{self.base_url}/rewrites")
                ours = answer.status_code == 200 and answer.json().get("object") == "rewriter.service"
            except (httpx.HTTPError, ValueError, AttributeError):
                ours = False
            self._protocol = "rewriter" if ours else "openai"
        return self._protocol

    # The engine interface -------------------------------------------------------------------

    concurrent = True  # the server queues or batches requests; we need not
    ready = True

    def load(self, say) -> None:
        """Nothing to load here: the server holds the model."""

    def stream(self, request: EditRequest) -> Generator[Progress | RewriteResult, None, None]:
        """Progress (answer text increments) and finally a RewriteResult, like Rewriter.stream.

        The request's sampling goes to the endpoint; UnsupportedSampling for settings it has no word for.
        """
        require_instruction(request.instruction)
        if self.protocol == "rewriter":
            yield from self._stream_rewriter(request)
        else:
            yield from self._stream_openai(request)

    # Our service ------------------------------------------------------------------------------

    def _stream_rewriter(self, request: EditRequest) -> Iterator[Progress | RewriteResult]:
        if request.sampling is not None and not request.sampling.greedy:
            raise UnsupportedSampling("the rewriter service's /v1/rewrites decodes greedily only: to sample "
                                      "(temperature > 0), use its OpenAI-compatible API (protocol 'openai')")
        body: dict[str, object] = {"text": request.code, "instruction": request.instruction,
                                   "language": request.language}
        if request.context is not None:
            body["context"] = request.context
        if request.conversation:
            body["conversation"] = [{"text": turn.code, "instruction": turn.instruction}
                                    for turn in request.conversation]
        if request.max_new_tokens:
            body["max_tokens"] = request.max_new_tokens
        stats = stats_from(None)
        for event, data in self._sse("/rewrites", body):
            if event == "delta":
                yield Progress(data["text"], stats)
            elif event == "stats":
                stats = stats_from(data)
            # "hunk" events are for clients that apply them as they come: the session derives its own
            elif event == "result":
                # A refused answer comes back as such: the caller's own integrity check refuses it
                # again, with the reason, and can show it.
                text = data["refused"]["text"] if data.get("refused") else data["text"]
                yield RewriteResult(text=text, answer=data["answer"], stats=stats_from(data["stats"]))
                return
            elif event == "error":
                raise _error_from(data, 200)
        raise ServiceError("the server closed the stream before the result")

    # Any OpenAI-compatible endpoint -----------------------------------------------------------

    def _stream_openai(self, request: EditRequest) -> Iterator[Progress | RewriteResult]:
        # The endpoint takes messages only: the model writes the answer's opening itself.
        answer = AnswerStream(request, prefilled=False)
        body = {
            "messages": answer.prompt.messages,
            "prediction": {"type": "content", "content": answer.prompt.prediction},
            **openai_sampling(request.sampling),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.model:
            body["model"] = self.model
        if request.max_new_tokens:
            body[self.budget_field] = request.max_new_tokens
        stats = stats_from(None)
        started = time.perf_counter()
        events = self._sse("/chat/completions", body)
        try:
            for _, data in events:
                if "error" in data:
                    raise _error_from(data, 200)
                for choice in data.get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content") or ""
                    if choice.get("finish_reason"):
                        stats.finish_reason = choice["finish_reason"]
                    if not piece:
                        continue
                    if not answer.text:
                        stats.ttft_s = time.perf_counter() - started
                    settled = answer.feed(piece)
                    stats.total_s = time.perf_counter() - started
                    if settled:
                        yield Progress(settled, stats)
                    if answer.echoed:
                        break
                if answer.echoed:
                    break
                if data.get("usage"):
                    _usage_into(stats, data["usage"])
        finally:
            events.close()  # closing the stream early stops the endpoint's decoding too
        stats.total_s = time.perf_counter() - started
        yield from answer.finish(stats)  # NoCodeBlock, as the local engine raises

    # Transport --------------------------------------------------------------------------------

    def _sse(self, path: str, body: dict) -> Generator[tuple[str, dict], None, None]:
        """POST and yield (event name, JSON data) of a server-sent event stream, retrying when busy."""
        for attempt in range(self.retries + 1):
            try:
                with self.http.stream("POST", f"{self.base_url}{path}", json=body,
                                      headers={"Accept": "text/event-stream"}) as response:
                    if response.status_code in (429, 503) and attempt < self.retries:
                        wait = _retry_after(response)
                        response.close()
                        time.sleep(min(wait, MAX_RETRY_WAIT_S))
                        continue
                    if response.status_code != 200:
                        response.read()
                        raise _error_from(_json_or_text(response), response.status_code,
                                          _retry_after(response))
                    yield from _parse_sse(response.iter_lines())
                    return
            except httpx.HTTPError as error:
                raise ServiceError(f"cannot reach {self.base_url}: {error}") from error


def _parse_sse(lines: Iterator[str]) -> Iterator[tuple[str, dict]]:
    event = "message"
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                payload = "\n".join(data)
                if payload.strip() == "[DONE]":
                    return
                try:
                    yield event, json.loads(payload)
                except ValueError as error:
                    raise ServiceError(f"the server sent an event that is not JSON: {payload[:200]!r}") from error
            event, data = "message", []
        elif line.startswith(":"):
            continue  # a comment (keep-alive)
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


def _retry_after(response: httpx.Response) -> float:
    try:
        return max(0.0, float(response.headers.get("retry-after", "1")))
    except ValueError:
        return 1.0


def _json_or_text(response: httpx.Response) -> dict:
    try:
        data = response.json()
        return data if isinstance(data, dict) else {"error": {"message": str(data)}}
    except ValueError:
        return {"error": {"message": response.text[:500] or response.reason_phrase}}


def _error_from(data: dict, status: int, retry_after: float | None = None) -> Exception:

    error = data.get("error")
    if not isinstance(error, dict):
        error = {"message": str(data.get("error", data))}
    message = error.get("message") or "unknown error"
    code = error.get("code")
    if code == "no_code_block":
        return NoCodeBlock(message)
    if code == "context_length_exceeded" or any(words in message for words in TOO_LARGE_WORDS):
        return ContextTooLarge(message)
    if code == "invalid_rewrite" or (status == 400 and error.get("type") == "invalid_request_error"):
        return RewriteError(message)
    return ServiceError(f"HTTP {status}: {message}" if status != 200 else message, status, code, retry_after)


def _usage_into(stats, usage: dict) -> None:
    stats.prompt_tokens = usage.get("prompt_tokens") or 0
    stats.output_tokens = usage.get("completion_tokens") or 0
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    stats.cached_prompt_tokens = cached or 0
    details = usage.get("completion_tokens_details") or {}
    stats.accepted_prediction_tokens = details.get("accepted_prediction_tokens") or 0
    stats.rejected_prediction_tokens = details.get("rejected_prediction_tokens") or 0
