"""The service's requests, checked: the limits, OpenAI's error shape (`ApiError`, which every
refusal is), the checks of a body's fields, and /v1/rewrites' body (`RewriteRequest`). OpenAI's chat
completions are read in chat_request.py, the JSON body itself in request_body.py.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from starlette.responses import JSONResponse

from ..answer import NoCodeBlock
from ..edits.target import line_count
from ..engine import PREFIX_CACHE_MB, Turn, instruction_is_empty
from ..results import RewriteError

log = logging.getLogger(__name__)


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


def type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def wrong_type(param: str, expected: str, value: Any) -> ApiError:
    return ApiError(400, f"Invalid type for '{param}': expected {expected}, but got {type_name(value)} instead.",
                    param=param, code="invalid_type")


def get_field(body: dict, name: str, kind: str, default: Any = None, param: str | None = None) -> Any:
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
        raise wrong_type(param or name, names[kind], value)
    if kind == "number" and not math.isfinite(value):
        raise ApiError(400, f"Invalid '{param or name}': expected a finite number, got {value}.",
                       param=param or name, code="invalid_value")
    return value




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
    snippet: str | None = None  # the apply model's update, which its merge must keep (not a body field)
    conversation: tuple[Turn, ...] = ()  # a refine: the turns before this one (engine.EditRequest)


def check_max_tokens(max_tokens: int | None, limits: Limits) -> None:
    if max_tokens and max_tokens > limits.max_output_tokens:
        raise ApiError(400, f"Invalid 'max_tokens': this server allows at most {limits.max_output_tokens} "
                       f"output tokens, got {max_tokens}.", param="max_tokens", code="integer_above_max_value")


def parse_rewrite(body: dict) -> RewriteRequest:
    text = body.get("text")
    if not isinstance(text, str):
        raise ApiError(400, "Missing required parameter: 'text' (a string)." if text is None else
                       wrong_type("text", "a string", text).message, param="text",
                       code="missing_required_parameter" if text is None else "invalid_type")
    instruction = body.get("instruction")
    if not isinstance(instruction, str):
        raise ApiError(400, "Missing required parameter: 'instruction' (a string)." if instruction is None else
                       wrong_type("instruction", "a string", instruction).message, param="instruction",
                       code="missing_required_parameter" if instruction is None else "invalid_type")
    if instruction_is_empty(instruction):
        raise ApiError(400, "The instruction is empty: say what to change.", param="instruction",
                       code="invalid_rewrite")
    language = get_field(body, "language", "str", "")
    file_name = get_field(body, "file_name", "str")
    context = get_field(body, "context", "str")
    max_tokens = get_field(body, "max_tokens", "int")
    if max_tokens is not None and max_tokens < 1:
        raise ApiError(400, f"Invalid 'max_tokens': expected a value >= 1, got {max_tokens}.", param="max_tokens",
                       code="integer_below_min_value")
    lines = None
    raw_range = get_field(body, "range", "dict")
    if raw_range is not None:
        if context is not None:
            raise ApiError(400, "Give either 'range' (the rest of 'text' is the context) or 'context', not both.",
                           param="range", code="invalid_value")
        start = get_field(raw_range, "start", "int", param="range.start")
        end = get_field(raw_range, "end", "int", param="range.end")
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
                          conversation=_conversation(get_field(body, "conversation", "list", [])))


def _conversation(turns: list) -> tuple[Turn, ...]:
    """A refine's earlier turns: [{"text", "instruction"}, ...], first to last."""
    checked = []
    for number, turn in enumerate(turns):
        param = f"conversation[{number}]"
        if not isinstance(turn, dict):
            raise wrong_type(param, "an object", turn)
        text, instruction = (get_field(turn, name, "str", param=f"{param}.{name}") for name in ("text", "instruction"))
        if text is None or instruction is None:
            raise ApiError(400, f"Missing required parameter: '{param}.{'text' if text is None else 'instruction'}'.",
                           param=param, code="missing_required_parameter")
        checked.append(Turn(text, instruction))
    return tuple(checked)



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
