"""The JSON schemas of OpenAI's chat completions as this service takes and gives them, for its
OpenAPI document (openapi.py): OpenAI's names, types and enums (tests/serve/data holds the
published spec's, which a test compares these with), narrowed to what chat_request.py accepts.

A field the service does not offer is documented with the only values that ask for nothing
(`n` at most 1, `logprobs` false, penalties 0): the request parser refuses the rest.
Fields it ignores (`user`, `metadata`, ...) are left out: any value of theirs is served.
"""
from __future__ import annotations

from .chat_request import MAX_STOP_SEQUENCES, ROLES
from .openapi_parts import Operation, Served, json_data, nullable, ref

SEED_RANGE = (-2**63, 2**64 - 1)  # what engine.SamplingParams takes

TEXT_PART = {"type": "object", "required": ["type", "text"],
             "properties": {"type": {"type": "string", "enum": ["text"]}, "text": {"type": "string"}}}
CONTENT = {"anyOf": [{"type": "string"}, {"type": "array", "items": TEXT_PART}]}  # chat_request._text_of

MESSAGE = {
    "type": "object", "required": ["role", "content"],
    "description": "Tool and function messages, and tool_calls, are refused: this server has no function calling.",
    "properties": {"role": {"type": "string", "enum": list(ROLES)}, "content": CONTENT},
}

ONLY_NONE = "Not offered by this server: only the value that asks for nothing is served."


def sampled_fields(max_output_tokens: int) -> dict:
    """The fields chat and raw completions read alike (chat_request.py's _prediction, _streaming,
    _max_tokens, _stop and _sampling)."""
    tokens = {**nullable("integer"), "minimum": 1, "maximum": max_output_tokens}
    return {
        "prediction": {**nullable("object"), "required": ["type", "content"],
                       "properties": {"type": {"type": "string", "enum": ["content"]}, "content": CONTENT}},
        "stream": nullable("boolean"),
        "stream_options": {**nullable("object"), "description": "Only with `stream`.",
                           "properties": {"include_usage": nullable("boolean")}},
        "max_tokens": tokens,
        "max_completion_tokens": {**tokens, "description": "Wins over `max_tokens` when both are given."},
        "temperature": {**nullable("number"), "minimum": 0, "maximum": 2},
        "top_p": {**nullable("number"), "exclusiveMinimum": 0, "maximum": 1},
        "seed": {**nullable("integer"), "minimum": SEED_RANGE[0], "maximum": SEED_RANGE[1]},
        "stop": {"anyOf": [nullable("string"),
                           {"type": "array", "maxItems": MAX_STOP_SEQUENCES, "items": {"type": "string"}}]},
    }


PENALTY = {**nullable("number"), "minimum": 0, "maximum": 0}
NO_BIAS = {**nullable("object"), "maxProperties": 0}


def only_none(schema: dict) -> dict:
    """A field this server does not offer, held to the values that ask for nothing."""
    return {**schema, "description": ONLY_NONE}


def chat_request(models: list[str], max_output_tokens: int) -> dict:
    """CreateChatCompletionRequest as parse_chat checks it (nulls stand for a field left out)."""
    return {
        "type": "object", "required": ["model", "messages"],
        "properties": {
            "model": {"type": "string", "enum": models},
            "messages": {"type": "array", "minItems": 1, "items": MESSAGE},
            **sampled_fields(max_output_tokens),
            "n": only_none({**nullable("integer"), "minimum": 1, "maximum": 1}),
            "logprobs": only_none({**nullable("boolean"), "enum": [False, None]}),
            "top_logprobs": only_none({"type": "null"}),
            "presence_penalty": only_none(PENALTY),
            "frequency_penalty": only_none(PENALTY),
            "tools": only_none({**nullable("array"), "maxItems": 0}),
            "functions": only_none({**nullable("array"), "maxItems": 0}),
            "audio": only_none({"type": "null"}),
            "modalities": only_none({**nullable("array"), "minItems": 1, "maxItems": 1,
                                     "items": {"type": "string", "enum": ["text"]}}),
            "logit_bias": only_none(NO_BIAS),
            "response_format": only_none({**nullable("object"),
                                          "properties": {"type": {"type": "string", "enum": ["text"]}}}),
        },
    }


FINISH_REASONS = ["stop", "length"]
COUNT = {"type": "integer", "minimum": 0}


def _counts(*names: str) -> dict:
    return {"type": "object", "required": list(names), "properties": dict.fromkeys(names, COUNT)}


USAGE = {
    "type": "object",
    "required": ["prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details",
                 "completion_tokens_details"],
    "properties": {
        "prompt_tokens": COUNT, "completion_tokens": COUNT, "total_tokens": COUNT,
        "prompt_tokens_details": _counts("cached_tokens", "audio_tokens"),
        "completion_tokens_details": _counts("accepted_prediction_tokens", "rejected_prediction_tokens",
                                             "reasoning_tokens", "audio_tokens"),
    },
}

HEAD = {"id": {"type": "string"}, "created": {"type": "integer"}, "model": {"type": "string"},
         "system_fingerprint": {"type": "string"}}

CHAT_COMPLETION = {
    "type": "object", "required": ["id", "object", "created", "model", "system_fingerprint", "choices", "usage"],
    "properties": {
        **HEAD, "object": {"type": "string", "enum": ["chat.completion"]},
        "choices": {"type": "array", "minItems": 1, "maxItems": 1, "items": {
            "type": "object", "required": ["index", "message", "logprobs", "finish_reason"],
            "properties": {
                "index": {"type": "integer"},
                "message": {"type": "object", "required": ["role", "content", "refusal"], "properties": {
                    "role": {"type": "string", "enum": ["assistant"]}, "content": {"type": "string"},
                    "refusal": {"type": "null"}}},
                "logprobs": {"type": "null"},
                "finish_reason": {"type": "string", "enum": FINISH_REASONS},
            }}},
        "usage": ref("CompletionUsage"),
    },
}

CHAT_COMPLETION_CHUNK = {
    "type": "object", "required": ["id", "object", "created", "model", "system_fingerprint", "choices"],
    "properties": {
        **HEAD, "object": {"type": "string", "enum": ["chat.completion.chunk"]},
        "choices": {"type": "array", "maxItems": 1, "items": {
            "type": "object", "required": ["index", "delta", "logprobs", "finish_reason"],
            "properties": {
                "index": {"type": "integer"},
                "delta": {"type": "object", "properties": {
                    "role": {"type": "string", "enum": ["assistant"]}, "content": {"type": "string"},
                    "refusal": {"type": "null"}}},
                "logprobs": {"type": "null"},
                "finish_reason": {"type": ["string", "null"], "enum": [*FINISH_REASONS, None]},
            }}},
        "usage": {"description": "With `stream_options.include_usage`: null, and the usage in a last chunk "
                                 "whose `choices` is empty.",
                  "anyOf": [{"type": "null"}, ref("CompletionUsage")]},
    },
}

# A streamed completion's events: its chunks, an error where decoding failed after the first, then [DONE].
CHAT_EVENT = {"type": "object", "required": ["data"], "properties": {"data": {"anyOf": [
    {"const": "[DONE]"},
    json_data({"anyOf": [ref("CreateChatCompletionStreamResponse"), ref("ErrorResponse")]})]}}}


def chat_completions(served: Served) -> Operation:
    ok = {"description": "The completion: whole, or with `stream` as server-sent chunks ending with [DONE].",
          "content": {"application/json": {"schema": ref("CreateChatCompletionResponse")},
                      "text/event-stream": {"itemSchema": CHAT_EVENT}}}
    return Operation(
        "createChatCompletion", "OpenAI's chat completions, decoded with `prediction` as the draft.", ok,
        body=ref("CreateChatCompletionRequest"), errors=(404, 422, 429),
        schemas={"CreateChatCompletionRequest": chat_request(served.models, served.limits.max_output_tokens),
                 "CreateChatCompletionResponse": CHAT_COMPLETION,
                 "CreateChatCompletionStreamResponse": CHAT_COMPLETION_CHUNK, "CompletionUsage": USAGE})
