"""The HTTP service: OpenAI-compatible chat completions with `prediction`, and /v1/rewrites.

A request is parsed and validated here (OpenAI's error shape for every refusal), then queued
on the engine's worker (engine.py), which owns the model. Results stream back as server-sent
events; a client that goes away cancels its request, which frees the engine within one step.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import difflib
import hmac
import ipaddress
import json
import logging
import math
import os
import time
import uuid
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from drafters import CombinedDrafter, Drafter, PredictionDrafter, PromptLookupDrafter

from ..decoding.decode import Decoder, Stats, StopCheck
from ..decoding.models import LoadedModel
from ..decoding.rewrite import Progress, RewriteError, Rewriter
from ..decoding.sampling import SamplingParams, make_verifier
from ..edits.hunks import Hunk
from ..edits.integrity import STRIPPED, FileIntegrity
from ..edits.scopes import grammar_for
from ..prompt import NoCodeBlock
from .client import AnswerHunks
from .engine import END, Engine, Failed, QueueFull

log = logging.getLogger(__name__)

API_KEY_ENV = "REWRITER_API_KEY"
STATS_EVERY_S = 0.5
MAX_STOP_SEQUENCES = 4
MAX_JSON_DEPTH = 32  # OpenAI's bodies nest a few levels; deeper is refused before any work
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


@dataclass
class Limits:
    max_queue: int = 32  # requests that may wait behind the running one
    max_body_bytes: int = 2 * 1024 * 1024
    max_prompt_tokens: int | None = None  # None: the model's context length
    max_output_tokens: int = 8192
    read_timeout_s: float = 30.0  # for a request's headers, and again for its body
    max_connections: int = 64  # open connections and requests; beyond that uvicorn answers 503


class ApiError(Exception):
    """A refusal with OpenAI's error shape."""

    def __init__(self, status: int, message: str, param: str | None = None,
                 code: str | None = None, type: str = "invalid_request_error",
                 headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.type = status, message, param, code, type
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_api_key(path: str | None = None) -> str | None:
    """The API key from a file (first line) or the REWRITER_API_KEY environment variable."""
    if path:
        with open(path, encoding="utf-8") as handle:
            key = handle.readline().strip()
        if not key:
            raise ValueError(f"the API key file {path} is empty")
        return key
    return os.environ.get(API_KEY_ENV, "").strip() or None  # blank is no key, not a key of spaces


def host_name(header: str) -> str:
    """The name in a Host header, without the port: `[::1]:8000` -> `::1`."""
    if header.startswith("["):
        return header[1:].partition("]")[0].lower()
    return header.rpartition(":")[0].lower() if header.count(":") == 1 else header.lower()


def bearer_token(header: str) -> str | None:
    """The credentials of an `Authorization: Bearer ...` header; the scheme is case-insensitive."""
    scheme, _, token = header.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


# Request parsing ------------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def _wrong_type(param: str, expected: str, value: Any) -> ApiError:
    return ApiError(400, f"Invalid type for '{param}': expected {expected}, but got {_type_name(value)} instead.",
                    param=param, code="invalid_type")


def _get(body: dict, name: str, kind: str, default: Any = None, param: str | None = None) -> Any:
    """body[name] checked against a JSON kind: bool, int, number, str, list, dict; `param` names it in errors."""
    value = body.get(name)
    if value is None:
        return default
    ok = {
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, (int, float)) and not isinstance(value, bool),
        "str": isinstance(value, str),
        "list": isinstance(value, list),
        "dict": isinstance(value, dict),
    }[kind]
    if not ok:
        names = {"bool": "a boolean", "int": "an integer", "number": "a number", "str": "a string",
                 "list": "an array", "dict": "an object"}
        raise _wrong_type(param or name, names[kind], value)
    if kind == "number" and not math.isfinite(value):
        raise ApiError(400, f"Invalid '{param or name}': expected a finite number, got {value}.",
                       param=param or name, code="invalid_value")
    return value


def _text_of(content: Any, param: str) -> str:
    """A message or prediction content: a string or an array of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ApiError(400, f"Invalid content part at '{param}[{i}]': only text parts "
                               "({\"type\": \"text\", \"text\": ...}) are supported.", param=f"{param}[{i}]",
                               code="invalid_value")
            texts.append(part["text"])
        return "".join(texts)
    raise _wrong_type(param, "a string or an array of text parts", content)


ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


@dataclass
class ChatRequest:
    model: str
    messages: list[dict]
    prediction: str | None = None
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)
    sampling: SamplingParams = field(default_factory=SamplingParams)


def parse_chat(body: dict, model_ids: set[str]) -> ChatRequest:
    model = body.get("model")
    if model is None:
        raise ApiError(400, "You must provide a model parameter.", param="model", code="missing_required_parameter")
    if not isinstance(model, str):
        raise _wrong_type("model", "a string", model)
    if model not in model_ids:
        raise ApiError(404, f"The model `{model}` does not exist or you do not have access to it. "
                       f"This server serves: {', '.join(sorted(model_ids))}.", param="model", code="model_not_found")

    raw_messages = body.get("messages")
    if raw_messages is None:
        raise ApiError(400, "Missing required parameter: 'messages'.", param="messages",
                       code="missing_required_parameter")
    if not isinstance(raw_messages, list):
        raise _wrong_type("messages", "an array", raw_messages)
    if not raw_messages:
        raise ApiError(400, "Invalid 'messages': empty array. Expected an array with minimum length 1.",
                       param="messages", code="empty_array")
    messages = []
    for i, message in enumerate(raw_messages):
        param = f"messages[{i}]"
        if not isinstance(message, dict):
            raise _wrong_type(param, "an object", message)
        role = message.get("role")
        if role not in ROLES:
            if role in ("tool", "function"):
                raise ApiError(400, f"Invalid '{param}.role': {role} messages are not supported "
                               "(this server has no function calling).", param=f"{param}.role", code="invalid_value")
            raise ApiError(400, f"Invalid '{param}.role': expected one of system, developer, user, assistant; "
                           f"got {role!r}.", param=f"{param}.role", code="invalid_value")
        if message.get("tool_calls"):
            raise ApiError(400, f"Invalid '{param}.tool_calls': function calling is not supported.",
                           param=f"{param}.tool_calls", code="unsupported_parameter")
        if "content" not in message or message["content"] is None:
            raise ApiError(400, f"Missing required parameter: '{param}.content'.", param=f"{param}.content",
                           code="missing_required_parameter")
        messages.append({"role": ROLES[role], "content": _text_of(message["content"], f"{param}.content")})

    prediction = None
    raw_prediction = _get(body, "prediction", "dict")
    if raw_prediction is not None:
        if raw_prediction.get("type") != "content":
            raise ApiError(400, "Invalid 'prediction.type': expected 'content'.", param="prediction.type",
                           code="invalid_value")
        if "content" not in raw_prediction:
            raise ApiError(400, "Missing required parameter: 'prediction.content'.", param="prediction.content",
                           code="missing_required_parameter")
        prediction = _text_of(raw_prediction["content"], "prediction.content")

    stream = _get(body, "stream", "bool", False)
    stream_options = _get(body, "stream_options", "dict")
    if stream_options is not None and not stream:
        raise ApiError(400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                       param="stream_options", code="invalid_value")
    include_usage = _get(stream_options or {}, "include_usage", "bool", False)

    max_tokens = None
    for name in ("max_tokens", "max_completion_tokens"):  # the newer name wins when both are given
        value = _get(body, name, "int")
        if value is not None:
            if value < 1:
                raise ApiError(400, f"Invalid '{name}': integer below minimum value. Expected a value >= 1, "
                               f"but got {value} instead.", param=name, code="integer_below_min_value")
            max_tokens = value

    raw_stop = body.get("stop")
    if raw_stop is None:
        stop = []
    elif isinstance(raw_stop, str):
        stop = [raw_stop]
    elif isinstance(raw_stop, list) and all(isinstance(s, str) for s in raw_stop):
        if len(raw_stop) > MAX_STOP_SEQUENCES:
            raise ApiError(400, f"Invalid 'stop': at most {MAX_STOP_SEQUENCES} sequences.", param="stop",
                           code="array_above_max_length")
        stop = list(raw_stop)
    else:
        raise _wrong_type("stop", "a string or an array of strings", raw_stop)
    stop = [s for s in stop if s]

    temperature = _get(body, "temperature", "number")
    top_p = _get(body, "top_p", "number")
    seed = _get(body, "seed", "int")
    if temperature is not None and not 0 <= temperature <= 2:
        raise ApiError(400, f"Invalid 'temperature': expected a value between 0 and 2, got {temperature}.",
                       param="temperature",
                       code="decimal_below_min_value" if temperature < 0 else "decimal_above_max_value")
    try:
        # Greedy unless asked: an editor wants the model's most likely edit.
        sampling = SamplingParams(temperature=float(temperature or 0.0),
                                  top_p=float(top_p if top_p is not None else 1.0), seed=seed)
    except ValueError as error:  # its messages start with the setting's name
        raise ApiError(400, f"Invalid sampling parameters: {error}.", param=str(error).split()[0],
                       code="invalid_value") from error

    _refuse_unsupported(body, prediction is not None)
    return ChatRequest(model=model, messages=messages, prediction=prediction, stream=stream,
                       include_usage=include_usage, max_tokens=max_tokens, stop=stop, sampling=sampling)


def _refuse_unsupported(body: dict, with_prediction: bool) -> None:
    """OpenAI refuses these with a prediction; this server does not offer them at all."""

    def refuse(param: str, what: str) -> None:
        if with_prediction:
            raise ApiError(400, f"Invalid parameter: '{param}' {what} is not supported with predicted outputs.",
                           param=param, code="unsupported_parameter")
        raise ApiError(400, f"Invalid parameter: '{param}' {what} is not supported by this server.",
                       param=param, code="unsupported_parameter")

    n = _get(body, "n", "int", 1)
    if n < 1:
        raise ApiError(400, f"Invalid 'n': expected a value >= 1, got {n}.", param="n", code="integer_below_min_value")
    if n > 1:
        refuse("n", "greater than 1")
    if _get(body, "logprobs", "bool", False):
        refuse("logprobs", "(true)")
    if _get(body, "top_logprobs", "int") is not None:
        refuse("top_logprobs", "")
    for name in ("presence_penalty", "frequency_penalty"):
        value = _get(body, name, "number", 0)
        if value > 0 or (value != 0 and not with_prediction):
            refuse(name, "other than 0" if not with_prediction else "greater than 0")
    for name in ("tools", "functions"):
        if _get(body, name, "list"):
            refuse(name, "(function calling)")
    if body.get("audio") is not None:
        refuse("audio", "(audio output)")
    modalities = _get(body, "modalities", "list")
    if modalities is not None and modalities != ["text"]:
        refuse("modalities", "other than [\"text\"]")
    if _get(body, "logit_bias", "dict"):
        refuse("logit_bias", "")
    response_format = _get(body, "response_format", "dict")
    if response_format is not None and response_format.get("type", "text") != "text":
        refuse("response_format", f"of type {response_format.get('type')!r}")


def parse_rewrite(body: dict) -> dict:
    text = body.get("text")
    if not isinstance(text, str):
        raise ApiError(400, "Missing required parameter: 'text' (a string)." if text is None else
                       _wrong_type("text", "a string", text).message, param="text",
                       code="missing_required_parameter" if text is None else "invalid_type")
    instruction = body.get("instruction")
    if not isinstance(instruction, str):
        raise ApiError(400, "Missing required parameter: 'instruction' (a string)." if instruction is None else
                       _wrong_type("instruction", "a string", instruction).message, param="instruction",
                       code="missing_required_parameter" if instruction is None else "invalid_type")
    if not instruction.strip():
        raise ApiError(400, "The instruction is empty: say what to change.", param="instruction",
                       code="invalid_rewrite")
    language = _get(body, "language", "str", "")
    context = _get(body, "context", "str")
    max_tokens = _get(body, "max_tokens", "int")
    if max_tokens is not None and max_tokens < 1:
        raise ApiError(400, f"Invalid 'max_tokens': expected a value >= 1, got {max_tokens}.", param="max_tokens",
                       code="integer_below_min_value")
    span = None
    raw_range = _get(body, "range", "dict")
    if raw_range is not None:
        if context is not None:
            raise ApiError(400, "Give either 'range' (the rest of 'text' is the context) or 'context', not both.",
                           param="range", code="invalid_value")
        start = _get(raw_range, "start", "int", param="range.start")
        end = _get(raw_range, "end", "int", param="range.end")
        lines = len(text.splitlines())
        for name, value in (("start", start), ("end", end)):
            if value is None:
                raise ApiError(400, f"Missing required parameter: 'range.{name}'.", param=f"range.{name}",
                               code="missing_required_parameter")
        if not 0 <= start < end <= max(lines, 1):
            raise ApiError(400, f"Invalid 'range': expected {{\"start\": line, \"end\": line}} with "
                           f"0 <= start < end <= {lines} (0-based lines, end exclusive).",
                           param="range.start" if not 0 <= start < max(lines, 1) else "range.end",
                           code="invalid_value")
        span = (start, end)
    return {"text": text, "instruction": instruction, "language": language, "context": context,
            "max_tokens": max_tokens, "range": span}


# Work run on the engine's worker ------------------------------------------------------------


def stop_strings(tokenizer, stops: list[str]) -> StopCheck:
    """Stop once any stop string is in the output, keeping the fewest tokens that hold it."""
    # Enough tail tokens to hold the longest stop string even in byte tokens (4 per character).
    tail = 4 * max(len(s) for s in stops) + 8

    def contains(ids: list[int]) -> bool:
        text = tokenizer.decode(ids[-tail:], skip_special_tokens=True)
        return any(s in text for s in stops)

    def check(output: list[int]) -> int | None:
        if not contains(output):
            return None
        keep = len(output)
        while keep > 1 and contains(output[: keep - 1]):
            keep -= 1
        return keep

    return check


class StopTrimmer:
    """Text increments without the stop string or anything after it.

    While the text ends with what may become a stop string, that part is held back.
    """

    def __init__(self, stops: list[str]):
        self.stops = stops
        self.text = ""
        self.sent = 0
        self.stopped = False

    def feed(self, piece: str, final: bool) -> str:
        if self.stopped:
            return ""
        self.text += piece
        cuts = [i for i in (self.text.find(s) for s in self.stops) if i >= 0]
        if cuts:
            end, self.stopped = min(cuts), True
        elif final:
            end = len(self.text)
        else:
            end = len(self.text) - self._held()
        out = self.text[self.sent:end] if end > self.sent else ""
        self.sent = max(self.sent, end)
        return out

    def _held(self) -> int:
        longest = 0
        for stop in self.stops:
            for n in range(min(len(stop) - 1, len(self.text)), longest, -1):
                if self.text.endswith(stop[:n]):
                    longest = n
                    break
        return longest


@dataclass
class ChatDelta:
    text: str
    stats: Stats
    done: bool
    rejected_prediction_tokens: int = 0  # as OpenAI counts them; set on the last delta


@dataclass
class PreparedChat:
    """A chat request checked against the limits and tokenized, before it takes a queue slot."""

    request: ChatRequest
    prompt: list[int]
    prediction: list[int] | None  # the prediction's tokens, without the end of turn
    budget: int


@dataclass
class PreparedRewrite:
    request: dict
    code: str
    context: str | None
    offset: int  # the first line of `code` in the request's text
    prediction: list[int]
    budget: int


def rejected_prediction_tokens(prediction: list[int], completion: list[int], final: bool = True) -> int:
    """OpenAI's count: the prediction's tokens that do not appear in the completion.

    While the completion is still growing (`final` False), only the prediction up to the
    furthest point the completion has matched counts.
    """
    blocks = difflib.SequenceMatcher(None, prediction, completion, autojunk=False).get_matching_blocks()
    matched = sum(block.size for block in blocks)
    reached = len(prediction) if final else max((b.a + b.size for b in blocks if b.size), default=0)
    return reached - matched


class Backend:
    """The loaded model and everything that decodes with it.

    prepare_* run before queueing (tokenizing only); chat and rewrite run on the engine's worker.
    """

    def __init__(self, loaded: LoadedModel, limits: Limits):
        self.loaded = loaded
        self.tokenizer = loaded.tokenizer
        self.limits = limits
        self.decoder = Decoder(loaded.model, loaded.tokenizer, prefix_cache=True)
        self.rewriter = Rewriter(loaded, decoder=self.decoder)
        self.context_length = loaded.context_length
        self.max_prompt_tokens = min(limits.max_prompt_tokens or self.context_length, self.context_length - 1)
        # Totals over completed requests, for /health.
        self.totals = {"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
                       "rejected_prediction_drafts": 0}

    def prepare_chat(self, request: ChatRequest) -> PreparedChat:
        self._check_max_tokens(request.max_tokens)
        prompt = self.rewriter.encode_messages(request.messages)
        if len(prompt) > self.max_prompt_tokens:
            raise ApiError(400, f"The messages take {len(prompt)} tokens; this server takes at most "
                           f"{self.max_prompt_tokens} prompt tokens. Please shorten them.", param="messages",
                           code="context_length_exceeded")
        room = self.context_length - len(prompt)
        if request.max_tokens and request.max_tokens > room:
            raise ApiError(400, f"This model's maximum context length is {self.context_length} tokens. However, "
                           f"you requested {len(prompt) + request.max_tokens} tokens ({len(prompt)} in the "
                           f"messages, {request.max_tokens} in the completion). Please reduce the length of the "
                           "messages or completion.", param="max_tokens", code="context_length_exceeded")
        budget = min(request.max_tokens or self.limits.max_output_tokens, room)
        prediction = None
        if request.prediction is not None:
            prediction = self.tokenizer.encode(request.prediction, add_special_tokens=False)
        return PreparedChat(request, prompt, prediction, budget)

    def chat(self, prepared: PreparedChat, verifier) -> Iterator[ChatDelta]:
        request = prepared.request
        if prepared.prediction is not None:
            drafts = list(prepared.prediction)
            if self.tokenizer.eos_token_id is not None:  # as Rewriter.encode_prediction: end with the turn
                drafts.append(self.tokenizer.eos_token_id)
            drafter: Drafter = CombinedDrafter(PredictionDrafter(drafts), PromptLookupDrafter())
        else:
            drafter = PromptLookupDrafter()
        stop = stop_strings(self.tokenizer, request.stop) if request.stop else None
        trimmer = StopTrimmer(request.stop)
        output: list[int] = []
        for step in self.decoder.generate(prepared.prompt, drafter, prepared.budget, stop, verifier):
            output += step.tokens
            rejected = 0
            if step.done:
                rejected = rejected_prediction_tokens(prepared.prediction or [], output)
                self._count(step.stats, rejected)
            yield ChatDelta(trimmer.feed(step.text, step.done), dataclasses.replace(step.stats), step.done,
                            rejected)

    def _count(self, stats: Stats, rejected: int) -> None:
        self.totals["accepted_prediction_tokens"] += stats.accepted_prediction_tokens
        self.totals["rejected_prediction_tokens"] += rejected
        self.totals["rejected_prediction_drafts"] += stats.rejected_prediction_tokens

    def _check_max_tokens(self, max_tokens: int | None) -> None:
        if max_tokens and max_tokens > self.limits.max_output_tokens:
            raise ApiError(400, f"Invalid 'max_tokens': this server allows at most {self.limits.max_output_tokens} "
                           f"output tokens, got {max_tokens}.", param="max_tokens", code="integer_above_max_value")

    def prepare_rewrite(self, request: dict) -> PreparedRewrite:
        original = request["text"]
        code, context, offset = original, request["context"], 0
        if request["range"]:
            start, end = request["range"]
            code, context, offset = "".join(original.splitlines(keepends=True)[start:end]), original, start
        self._check_max_tokens(request["max_tokens"])
        try:  # stream() plans again on the worker (tokenizing is cheap)
            prompt, prediction, budget = self.rewriter.plan(code, request["instruction"], request["language"],
                                                            context, request["max_tokens"])
        except RewriteError as error:
            raise ApiError(400, str(error), param="text", code="invalid_rewrite") from error
        if len(prompt) > self.max_prompt_tokens:
            raise ApiError(400, f"The prompt takes {len(prompt)} tokens; this server takes at most "
                           f"{self.max_prompt_tokens}. Rewrite a smaller part.", param="text",
                           code="invalid_rewrite")
        if prediction and prediction[-1] == self.tokenizer.eos_token_id:
            prediction = prediction[:-1]
        return PreparedRewrite(request, code, context, offset, prediction,
                               min(budget, self.limits.max_output_tokens))

    def rewrite(self, prepared: PreparedRewrite) -> Iterator[tuple[str, dict]]:
        """(event, data) pairs for /v1/rewrites: delta, hunk, stats, then result."""
        request, code, offset = prepared.request, prepared.code, prepared.offset
        hunks = AnswerHunks(code)
        answer = ""
        stats_sent = time.perf_counter()

        def shifted(found: list[Hunk]) -> Iterator[tuple[str, dict]]:
            for hunk in found:
                yield "hunk", {"start": hunk.start + offset, "end": hunk.end + offset, "lines": list(hunk.lines)}

        def stats_data(stats: Stats, final: bool) -> dict:
            # The answer's tokens again (the stream gives text): OpenAI's count needs them.
            completion = self.tokenizer.encode(answer, add_special_tokens=False)
            return {**stats.as_dict(), "rejected_prediction_drafts": stats.rejected_prediction_tokens,
                    "rejected_prediction_tokens": rejected_prediction_tokens(prepared.prediction, completion, final)}

        for event in self.rewriter.stream(code, request["instruction"], request["language"], prepared.context,
                                          prepared.budget):
            if isinstance(event, Progress):
                answer += event.text
                yield "delta", {"text": event.text}
                yield from shifted(hunks.feed(answer))
                if time.perf_counter() - stats_sent >= STATS_EVERY_S:
                    stats_sent = time.perf_counter()
                    yield "stats", stats_data(event.stats, final=False)
                continue
            result = event
            answer = result.answer
            yield from shifted(hunks.finish(result.text))
            stats = stats_data(result.stats, final=True)
            self._count(result.stats, stats["rejected_prediction_tokens"])
            yield "stats", stats
            verdict = judge_rewrite(request["text"] if request["range"] else prepared.context, code,
                                    offset if request["range"] else None, result.text, request["instruction"],
                                    request["language"])
            new = code if verdict.refused else verdict.text
            data = {"text": new, "answer": result.answer, "changed": new != code, "stats": stats,
                    "integrity": verdict.status}
            if verdict.status == STRIPPED:
                data["stripped"] = verdict.reason
            if verdict.refused:
                data["refused"] = {"reason": verdict.reason, "text": verdict.text}
            if request["range"]:
                lines = request["text"].splitlines(keepends=True)
                data["selection"] = new
                data["text"] = "".join(lines[:offset]) + new + "".join(lines[request["range"][1]:])
            yield "result", data


def judge_rewrite(file_text: str | None, code: str, first_line: int | None, answer: str, instruction: str,
                  language: str):
    """The integrity verdict on a /v1/rewrites answer: within the request's text when a range
    names the lines, within the context when the code occurs in it once, else on the code alone."""
    start = None
    if file_text is not None and first_line is not None:
        start = len("".join(file_text.splitlines(keepends=True)[:first_line]))
    elif file_text is not None and code and file_text.count(code) == 1:
        start = file_text.index(code)
    if file_text is None or start is None:
        file_text, start = code, 0
    check = FileIntegrity(file_text, grammar_for(language.lower()))
    return check.check(start, start + len(code), answer, instruction)


# HTTP --------------------------------------------------------------------------------------


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
        raise ApiError(400, f"The request body must be a JSON object, not {_type_name(body)}.", code="invalid_json")
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


def error_for(error: BaseException) -> ApiError:
    if isinstance(error, ApiError):
        return error
    if isinstance(error, NoCodeBlock):
        return ApiError(422, f"{error}; nothing changed", code="no_code_block", type="invalid_response_error")
    if isinstance(error, RewriteError):
        return ApiError(400, str(error), code="invalid_rewrite")
    log.error("request failed", exc_info=error)
    return ApiError(500, f"The server failed this request: {type(error).__name__}: {error}",
                    type="server_error", code="internal_error")


def create_app(loaded: LoadedModel, limits: Limits | None = None, api_key: str | None = None,
               model_ids: set[str] | None = None, allowed_hosts: tuple[str, ...] = ()) -> Starlette:
    limits = limits or Limits()
    backend = Backend(loaded, limits)
    engine = Engine(max_queue=limits.max_queue)
    served = sorted(model_ids or {loaded.name})
    created = int(time.time())
    api_key = (api_key or "").strip() or None
    hosts = {*LOOPBACK_HOSTS, *(host_name(h) for h in allowed_hosts)}

    def check_host(request: Request) -> None:
        # Without a key, any web page could reach a loopback server through a DNS name it
        # controls (DNS rebinding); such requests carry that name in Host.
        if api_key is None and host_name(request.headers.get("host", "")) not in hosts:
            raise ApiError(403, f"Host {request.headers.get('host', '(none)')!r} is not allowed: without an API key "
                           "this server answers only loopback names (add others with --allowed-host).",
                           code="host_not_allowed", type="permission_error")

    def check_auth(request: Request) -> None:
        if api_key is None:
            return
        given = bearer_token(request.headers.get("authorization", "")) or ""
        if not hmac.compare_digest(given.encode(), api_key.encode()):
            raise ApiError(401, "Incorrect or missing API key: send 'Authorization: Bearer <key>'.",
                           code="invalid_api_key")

    def submit(work, request_id: str, tokens: int):
        try:
            return engine.submit(work, tokens=tokens)
        except QueueFull as full:
            log.warning("%s refused: %d requests waiting", request_id, engine.waiting)
            raise ApiError(503, f"The server is busy ({engine.waiting} requests waiting); retry in "
                           f"{full.retry_after}s.", code="server_busy", type="server_error",
                           headers={"Retry-After": str(full.retry_after)}) from full

    async def next_event(job):
        event = await job.next()
        if isinstance(event, Failed):
            raise error_for(event.error)
        return event

    async def start(request: Request, work, request_id: str, tokens: int):
        """Queue the work, watch for the client leaving, and wait for its first event.

        Refusals found on the worker become plain HTTP errors; END means the client left.
        """
        job = submit(work, request_id, tokens)
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

    def log_done(request_id: str, kind: str, stats: Stats | None, job) -> None:
        if stats is None:
            return
        waited = (job.started_at or job.queued_at) - job.queued_at
        log.info("%s %s: %d prompt tokens (%d cached), %d output tokens, prediction %d accepted / %d "
                 "rejected, waited %.2fs, ttft %.3fs, %.1f tok/s, %s", request_id, kind, stats.prompt_tokens,
                 stats.cached_prompt_tokens, stats.output_tokens, stats.accepted_prediction_tokens,
                 stats.rejected_prediction_tokens, waited, stats.ttft_s, stats.tokens_per_s,
                 stats.finish_reason or "cancelled")

    async def chat_completions(request: Request) -> Response:
        check_auth(request)
        body = await read_json(request, limits.max_body_bytes, limits.read_timeout_s)
        chat = parse_chat(body, set(served))
        try:
            verifier = make_verifier(chat.sampling)
        except ValueError as error:
            raise ApiError(400, f"Invalid sampling parameters: {error}.", param="temperature",
                           code="unsupported_value") from error
        prepared = await asyncio.to_thread(backend.prepare_chat, chat)  # refusals before taking a queue slot
        request_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        tokens = min(prepared.budget, len(prepared.prediction) + 16 if prepared.prediction else prepared.budget)
        job, watcher, first = await start(request, lambda: backend.chat(prepared, verifier), request_id, tokens)
        if first is END:
            return Response(status_code=499)  # the client went away while queued
        base = {"id": request_id, "created": int(time.time()), "model": chat.model,
                "system_fingerprint": f"rewriter-{loaded.name}"}

        if not chat.stream:
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
            log_done(request_id, "chat", event.stats, job)
            return JSONResponse({
                **base, "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(text), "refusal": None},
                             "logprobs": None, "finish_reason": event.stats.finish_reason}],
                "usage": usage_of(event.stats, event.rejected_prediction_tokens),
            })

        async def chunks() -> AsyncGenerator[bytes, None]:
            chunk = {**base, "object": "chat.completion.chunk"}
            if chat.include_usage:
                chunk["usage"] = None

            def choice(delta: dict, finish: str | None = None) -> bytes:
                return sse({**chunk, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                                   "finish_reason": finish}]})

            yield choice({"role": "assistant", "content": "", "refusal": None})
            event = first
            while True:
                if event.text:
                    yield choice({"content": event.text})
                if event.done:
                    break
                try:
                    event = await next_event(job)
                except ApiError as error:
                    yield sse(error.body())
                    return
                if event is END:
                    return  # cancelled
            yield choice({}, event.stats.finish_reason)
            if chat.include_usage:
                yield sse({**chunk, "choices": [], "usage": usage_of(event.stats, event.rejected_prediction_tokens)})
            yield sse("[DONE]")
            log_done(request_id, "chat stream", event.stats, job)

        return EventStream(chunks(), job, watcher)

    async def rewrites(request: Request) -> Response:
        check_auth(request)
        if request.method == "GET":  # what this endpoint is, for clients that detect it
            return JSONResponse({"object": "rewriter.service", "model": loaded.name, "models": served,
                                 "hunk_lines": "0-based, end exclusive, in the request text's lines"})
        body = await read_json(request, limits.max_body_bytes, limits.read_timeout_s)
        prepared = await asyncio.to_thread(backend.prepare_rewrite, parse_rewrite(body))
        request_id = f"rewrite-{uuid.uuid4().hex[:24]}"
        job, watcher, first = await start(request, lambda: backend.rewrite(prepared), request_id,
                                          min(prepared.budget, len(prepared.prediction) + 16))
        if first is END:
            return Response(status_code=499)

        async def events() -> AsyncGenerator[bytes, None]:
            event = first
            while True:
                name, data = event
                yield sse(data, name)
                if name == "result":
                    log_done(request_id, "rewrite", stats_of(data["stats"]), job)
                    return
                try:
                    event = await next_event(job)
                except ApiError as error:
                    yield sse(error.body(), "error")
                    return
                if event is END:
                    return

        return EventStream(events(), job, watcher)

    async def models(request: Request) -> Response:
        check_auth(request)
        return JSONResponse({"object": "list", "data": [_model_card(name, created) for name in served]})

    async def model(request: Request) -> Response:
        check_auth(request)
        name = request.path_params["name"]
        if name not in served:
            raise ApiError(404, f"The model `{name}` does not exist or you do not have access to it.",
                           param="model", code="model_not_found")
        return JSONResponse(_model_card(name, created))

    async def health(request: Request) -> Response:
        counters = engine.counters
        return JSONResponse({
            "status": "ok", "model": loaded.name, "device": str(loaded.device),
            "running": engine.running is not None, "waiting": engine.waiting,
            "completed": counters.completed, "cancelled": counters.cancelled, "failed": counters.failed,
            "last_cancel_latency_s": counters.last_cancel_latency_s,
            "last_cancelled_step_s": counters.last_cancelled_step_s,
            # rejected_prediction_tokens as OpenAI counts them; drafts: rejected draft positions
            **backend.totals,
        })

    def guarded(handler):
        async def run(request: Request) -> Response:
            try:
                check_host(request)
                return await handler(request)
            except ApiError as error:
                return error.response()
            except ClientGone:
                log.info("%s %s: the client hung up before its request was read", request.method, request.url.path)
                return Response(status_code=499)
            except Exception as error:  # never a crash: a 500 in OpenAI's shape
                return error_for(error).response()
        return run

    async def http_error(request: Request, error: HTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code)
        message = {404: f"Unknown path {request.url.path}.",
                   405: f"Method {request.method} is not allowed on {request.url.path}."}.get(
                       error.status_code, str(error.detail))
        return ApiError(error.status_code, message, code=code).response()

    async def server_error(request: Request, error: Exception) -> Response:
        return error_for(error).response()

    routes = [
        Route("/v1/chat/completions", guarded(chat_completions), methods=["POST"]),
        Route("/v1/rewrites", guarded(rewrites), methods=["GET", "POST"]),
        Route("/v1/models", guarded(models), methods=["GET"]),
        Route("/v1/models/{name:path}", guarded(model), methods=["GET"]),
        Route("/health", guarded(health), methods=["GET"]),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        engine.close()

    handlers = {HTTPException: http_error, Exception: server_error}
    app = Starlette(routes=routes, exception_handlers=handlers, lifespan=lifespan)  # type: ignore[arg-type]
    app.state.engine = engine
    app.state.backend = backend
    return app


def stats_of(data: dict) -> Stats:
    from .client import stats_from

    return stats_from(data)


def _model_card(name: str, created: int) -> dict:
    return {"id": name, "object": "model", "created": created, "owned_by": "rewriter"}


def serve(model: str | None = None, host: str = "127.0.0.1", port: int = 8000, device: str | None = None,
          limits: Limits | None = None, api_key_file: str | None = None, say=print,
          allowed_hosts: tuple[str, ...] = (), dtype: str | None = None) -> None:
    """Load the model and serve until interrupted. Off loopback, an API key is required."""
    import uvicorn

    from ..decoding.models import load_model
    from .http_protocol import with_header_timeout

    limits = limits or Limits()

    api_key = read_api_key(api_key_file)
    if not is_loopback(host) and not api_key:
        raise ValueError(f"refusing to listen on {host} without an API key: set {API_KEY_ENV} or pass "
                         "--api-key-file (loopback addresses need none)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    started = time.perf_counter()
    loaded = load_model(model, device=device, dtype=dtype, progress=say)
    say(f"model {loaded.name} ({loaded.dtype}) ready on {loaded.device} in {time.perf_counter() - started:.1f}s")
    app = create_app(loaded, limits, api_key, allowed_hosts=allowed_hosts)
    say(f"serving on http://{host}:{port}/v1 ({'API key required' if api_key else 'no API key'})")
    uvicorn.run(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=5,
                http=with_header_timeout(limits.read_timeout_s), limit_concurrency=limits.max_connections,
                timeout_keep_alive=5)
