"""OpenAI's chat completions request to the HTTP service, parsed and checked: the first fault
found is refused, with OpenAI's error shape (schema.ApiError).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from ..engine import SamplingParams
from .schema import ApiError, get_field, wrong_type

MAX_STOP_SEQUENCES = 4


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
    raise wrong_type(param, "a string or an array of text parts", content)


ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


@dataclass(kw_only=True)
class GenerationRequest:
    """What a chat completions request and a completions request share, read alike (generation_fields)."""

    model: str
    sampling: SamplingParams
    prediction: str | None = None
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)


class GenerationFields(TypedDict):
    """GenerationRequest's fields but the model, as the body gives them."""

    prediction: str | None
    stream: bool
    include_usage: bool
    max_tokens: int | None
    stop: list[str]
    sampling: SamplingParams


@dataclass(kw_only=True)
class ChatRequest(GenerationRequest):
    messages: list[dict]


def parse_chat(body: dict, model_ids: set[str]) -> ChatRequest:
    # Checked in this order: a request with several faults is refused for the first one.
    model = _model(body, model_ids)
    messages = _messages(body)
    fields = generation_fields(body)
    _refuse_unsupported(body, fields["prediction"] is not None)
    return ChatRequest(model=model, messages=messages, **fields)


def generation_fields(body: dict) -> GenerationFields:
    """The shared fields after the model and the endpoint's own input, in the order they are checked."""
    prediction = _prediction(body)
    stream, include_usage = _streaming(body)
    max_tokens = _max_tokens(body)
    stop = _stop(body)
    sampling = _sampling(body)
    return GenerationFields(prediction=prediction, stream=stream, include_usage=include_usage, max_tokens=max_tokens,
                            stop=stop, sampling=sampling)


def _model(body: dict, model_ids: set[str]) -> str:
    model = body.get("model")
    if model is None:
        raise ApiError(400, "You must provide a model parameter.", param="model", code="missing_required_parameter")
    if not isinstance(model, str):
        raise wrong_type("model", "a string", model)
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
        raise wrong_type("messages", "an array", raw_messages)
    if not raw_messages:
        raise ApiError(400, "Invalid 'messages': empty array. Expected an array with minimum length 1.",
                       param="messages", code="empty_array")
    return [_message(message, f"messages[{i}]") for i, message in enumerate(raw_messages)]


def _message(message, param: str) -> dict:
    if not isinstance(message, dict):
        raise wrong_type(param, "an object", message)
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:  # an object or array cannot be looked up
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
    raw_prediction = get_field(body, "prediction", "dict")
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
    stream = get_field(body, "stream", "bool", False)
    stream_options = get_field(body, "stream_options", "dict")
    if stream_options is not None and not stream:
        raise ApiError(400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                       param="stream_options", code="invalid_value")
    include_usage = get_field(stream_options or {}, "include_usage", "bool", False)
    return stream, include_usage


def _max_tokens(body: dict) -> int | None:
    max_tokens = None
    for name in ("max_tokens", "max_completion_tokens"):  # the newer name wins when both are given
        value = get_field(body, name, "int")
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
        raise wrong_type("stop", "a string or an array of strings", raw_stop)
    return [s for s in stop if s]


def _sampling(body: dict) -> SamplingParams:
    temperature = get_field(body, "temperature", "number")
    top_p = get_field(body, "top_p", "number")
    seed = get_field(body, "seed", "int")
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

    n = get_field(body, "n", "int", 1)
    if n < 1:
        raise ApiError(400, f"Invalid 'n': expected a value >= 1, got {n}.", param="n", code="integer_below_min_value")
    if n > 1:
        refuse("n", "greater than 1")
    if get_field(body, "logprobs", "bool", False):
        refuse("logprobs", "(true)")
    if get_field(body, "top_logprobs", "int") is not None:
        refuse("top_logprobs", "")
    for name in ("presence_penalty", "frequency_penalty"):  # OpenAI takes negative ones with a prediction;
        if get_field(body, name, "number", 0) != 0:  # this server applies none, so it takes none
            refuse(name, "other than 0")
    for name in ("tools", "functions"):
        if get_field(body, name, "list"):
            refuse(name, "(function calling)")
    if body.get("audio") is not None:
        refuse("audio", "(audio output)")
    modalities = get_field(body, "modalities", "list")
    if modalities is not None and modalities != ["text"]:
        refuse("modalities", "other than [\"text\"]")
    if get_field(body, "logit_bias", "dict"):
        refuse("logit_bias", "")
    response_format = get_field(body, "response_format", "dict")
    if response_format is not None and response_format.get("type", "text") != "text":
        refuse("response_format", f"of type {response_format.get('type')!r}")
