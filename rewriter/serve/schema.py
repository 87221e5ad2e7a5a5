"""Requests to the HTTP service, parsed and checked: OpenAI's chat completions, /v1/rewrites, the
JSON body itself, the limits; every refusal an `ApiError` with OpenAI's error shape.
"""
from __future__ import annotations

import asyncio
import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse

from ..answer import NoCodeBlock
from ..edits.target import line_count
from ..engine import PREFIX_CACHE_MB, SamplingParams, Turn, instruction_is_empty
from ..results import RewriteError

log = logging.getLogger(__name__)

MAX_STOP_SEQUENCES = 4
MAX_JSON_DEPTH = 32  # OpenAI's bodies nest a few levels; deeper is refused before any work


@dataclass
class Limits:
    max_queue: int = 32  # requests that may wait behind the running one
    max_body_bytes: int = 2 * 1024 * 1024
    max_prompt_tokens: int | None = None  # None: the model's context length
    max_output_tokens: int = 8192
    read_timeout_s: float = 30.0  # for a request's headers, and again for its body
    max_connections: int = 64  # open connections and requests; beyond that uvicorn answers 503
    prefix_cache_mb: int = PREFIX_CACHE_MB  # what the caches of recent requests' prompts may hold


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


# The fields of a body ---------------------------------------------------------------------------


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
    sampling: SamplingParams
    prediction: str | None = None
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)


def parse_chat(body: dict, model_ids: set[str]) -> ChatRequest:
    # Checked in this order: a request with several faults is refused for the first one.
    model = _model(body, model_ids)
    messages = _messages(body)
    prediction = _prediction(body)
    stream, include_usage = _streaming(body)
    max_tokens = _max_tokens(body)
    stop = _stop(body)
    sampling = _sampling(body)
    _refuse_unsupported(body, prediction is not None)
    return ChatRequest(model=model, messages=messages, prediction=prediction, stream=stream,
                       include_usage=include_usage, max_tokens=max_tokens, stop=stop, sampling=sampling)


def _model(body: dict, model_ids: set[str]) -> str:
    model = body.get("model")
    if model is None:
        raise ApiError(400, "You must provide a model parameter.", param="model", code="missing_required_parameter")
    if not isinstance(model, str):
        raise _wrong_type("model", "a string", model)
    if model not in model_ids:
        raise ApiError(404, f"The model `{model}` does not exist or you do not have access to it. "
                       f"This server serves: {', '.join(sorted(model_ids))}.", param="model", code="model_not_found")
    return model


def _messages(body: dict) -> list[dict]:
    raw_messages = body.get("messages")
    if raw_messages is None:
        raise ApiError(400, "Missing required parameter: 'messages'.", param="messages",
                       code="missing_required_parameter")
    if not isinstance(raw_messages, list):
        raise _wrong_type("messages", "an array", raw_messages)
    if not raw_messages:
        raise ApiError(400, "Invalid 'messages': empty array. Expected an array with minimum length 1.",
                       param="messages", code="empty_array")
    return [_message(message, f"messages[{i}]") for i, message in enumerate(raw_messages)]


def _message(message, param: str) -> dict:
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
    return {"role": ROLES[role], "content": _text_of(message["content"], f"{param}.content")}


def _prediction(body: dict) -> str | None:
    raw_prediction = _get(body, "prediction", "dict")
    if raw_prediction is None:
        return None
    if raw_prediction.get("type") != "content":
        raise ApiError(400, "Invalid 'prediction.type': expected 'content'.", param="prediction.type",
                       code="invalid_value")
    if "content" not in raw_prediction:
        raise ApiError(400, "Missing required parameter: 'prediction.content'.", param="prediction.content",
                       code="missing_required_parameter")
    return _text_of(raw_prediction["content"], "prediction.content")


def _streaming(body: dict) -> tuple[bool, bool]:
    """Whether to stream, and whether the stream ends with a usage chunk."""
    stream = _get(body, "stream", "bool", False)
    stream_options = _get(body, "stream_options", "dict")
    if stream_options is not None and not stream:
        raise ApiError(400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                       param="stream_options", code="invalid_value")
    include_usage = _get(stream_options or {}, "include_usage", "bool", False)
    return stream, include_usage


def _max_tokens(body: dict) -> int | None:
    max_tokens = None
    for name in ("max_tokens", "max_completion_tokens"):  # the newer name wins when both are given
        value = _get(body, name, "int")
        if value is not None:
            if value < 1:
                raise ApiError(400, f"Invalid '{name}': integer below minimum value. Expected a value >= 1, "
                               f"but got {value} instead.", param=name, code="integer_below_min_value")
            max_tokens = value
    return max_tokens


def _stop(body: dict) -> list[str]:
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
    return [s for s in stop if s]


def _sampling(body: dict) -> SamplingParams:
    temperature = _get(body, "temperature", "number")
    top_p = _get(body, "top_p", "number")
    seed = _get(body, "seed", "int")
    if temperature is not None and not 0 <= temperature <= 2:
        raise ApiError(400, f"Invalid 'temperature': expected a value between 0 and 2, got {temperature}.",
                       param="temperature",
                       code="decimal_below_min_value" if temperature < 0 else "decimal_above_max_value")

    try:
        # Greedy unless asked: an editor wants the model's most likely edit.
        return SamplingParams(temperature=float(temperature or 0.0),
                              top_p=float(top_p if top_p is not None else 1.0), seed=seed)
    except ValueError as error:  # its messages start with the setting's name
        raise ApiError(400, f"Invalid sampling parameters: {error}.", param=str(error).split()[0],
                       code="invalid_value") from error


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


@dataclass(frozen=True)
class RewriteRequest:
    """A /v1/rewrites body, checked."""

    text: str
    instruction: str
    language: str = ""  # for the prompt; the checks infer one when this is empty
    context: str | None = None
    max_tokens: int | None = None
    lines: range | None = None  # the body's `range`: the lines of `text` to rewrite; the rest is context
    file_name: str | None = None  # the file's name or path, for its language
    judged_instruction: str | None = None  # what the integrity check reads, where not `instruction`
    conversation: tuple[Turn, ...] = ()  # a refine: the turns before this one (engine.EditRequest)


def parse_rewrite(body: dict) -> RewriteRequest:
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
    if instruction_is_empty(instruction):
        raise ApiError(400, "The instruction is empty: say what to change.", param="instruction",
                       code="invalid_rewrite")
    language = _get(body, "language", "str", "")
    file_name = _get(body, "file_name", "str")
    context = _get(body, "context", "str")
    max_tokens = _get(body, "max_tokens", "int")
    if max_tokens is not None and max_tokens < 1:
        raise ApiError(400, f"Invalid 'max_tokens': expected a value >= 1, got {max_tokens}.", param="max_tokens",
                       code="integer_below_min_value")
    lines = None
    raw_range = _get(body, "range", "dict")
    if raw_range is not None:
        if context is not None:
            raise ApiError(400, "Give either 'range' (the rest of 'text' is the context) or 'context', not both.",
                           param="range", code="invalid_value")
        start = _get(raw_range, "start", "int", param="range.start")
        end = _get(raw_range, "end", "int", param="range.end")
        total = line_count(text)
        for name, value in (("start", start), ("end", end)):
            if value is None:
                raise ApiError(400, f"Missing required parameter: 'range.{name}'.", param=f"range.{name}",
                               code="missing_required_parameter")
        if not 0 <= start < end <= max(total, 1):
            raise ApiError(400, f"Invalid 'range': expected {{\"start\": line, \"end\": line}} with "
                           f"0 <= start < end <= {total} (0-based lines, end exclusive).",
                           param="range.start" if not 0 <= start < max(total, 1) else "range.end",
                           code="invalid_value")
        lines = range(start, end)
    return RewriteRequest(text=text, instruction=instruction, language=language, context=context,
                          max_tokens=max_tokens, lines=lines, file_name=file_name,
                          conversation=_conversation(_get(body, "conversation", "list", [])))


def _conversation(turns: list) -> tuple[Turn, ...]:
    """A refine's earlier turns: [{"text", "instruction"}, ...], first to last."""
    checked = []
    for number, turn in enumerate(turns):
        param = f"conversation[{number}]"
        if not isinstance(turn, dict):
            raise _wrong_type(param, "an object", turn)
        text, instruction = (_get(turn, name, "str", param=f"{param}.{name}") for name in ("text", "instruction"))
        if text is None or instruction is None:
            raise ApiError(400, f"Missing required parameter: '{param}.{'text' if text is None else 'instruction'}'.",
                           param=param, code="missing_required_parameter")
        checked.append(Turn(text, instruction))
    return tuple(checked)


# The body --------------------------------------------------------------------------------------


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


def error_for(error: BaseException) -> ApiError:
    """What the client is told about an exception raised while serving its request."""
    if isinstance(error, ApiError):
        return error
    if isinstance(error, NoCodeBlock):
        return ApiError(422, f"{error}; nothing changed", code="no_code_block", type="invalid_response_error")
    if isinstance(error, RewriteError):
        return ApiError(400, str(error), code="invalid_rewrite")
    log.error("request failed", exc_info=error)
    return ApiError(500, f"The server failed this request: {type(error).__name__}: {error}",
                    type="server_error", code="internal_error")
