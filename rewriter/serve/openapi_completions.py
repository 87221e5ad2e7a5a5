"""The JSON schemas of OpenAI's (legacy) completions as this service takes and gives them, for its
OpenAPI document (openapi.py): OpenAI's names, types and enums (tests/serve/data holds the
published spec's, which a test compares these with), narrowed to what completion_request.py accepts.

The fields it shares with chat completions are documented as there (openapi_chat.sampled_fields);
two of them are not OpenAI's completions fields, `prediction` and `max_completion_tokens`, and
are marked `x-rewriter-extension`. A field the service does not offer is documented with the only
values that ask for nothing; fields it ignores (`user`) are left out.
"""
from __future__ import annotations

from .apply_model import APPLY_MODEL
from .completion_request import DEFAULT_COMPLETION_TOKENS
from .openapi_chat import FINISH_REASONS, HEAD, NO_BIAS, PENALTY, USAGE, only_none, sampled_fields
from .openapi_parts import Operation, Served, json_data, nullable, ref

EXTENSION = "x-rewriter-extension"  # a field of this server's, not of OpenAI's request
PROMPT = {"type": "string", "minLength": 1}


def completion_request(models: list[str], max_output_tokens: int) -> dict:
    """CreateCompletionRequest as parse_completion checks it (nulls stand for a field left out)."""
    shared = sampled_fields(max_output_tokens)
    tokens = {**shared["max_tokens"], "default": DEFAULT_COMPLETION_TOKENS, "description": (
        f"Without it: {DEFAULT_COMPLETION_TOKENS} tokens, as OpenAI's; with a non-empty `prediction`, twice its "
        f"tokens and 256 more; never over {max_output_tokens}, nor past the model's context.")}
    extension = {EXTENSION: True}
    return {
        "type": "object", "required": ["model", "prompt"],
        "properties": {
            "model": {"type": "string", "enum": [model for model in models if model != APPLY_MODEL],
                      "description": f"A served model; `{APPLY_MODEL}` answers chat completions only."},
            "prompt": {"description": "One prompt, decoded as it is (no chat template): a string, or an array "
                                      "holding one string. Token ids and several prompts are refused.",
                       "anyOf": [PROMPT, {"type": "array", "minItems": 1, "maxItems": 1, "items": PROMPT}]},
            **shared,
            "prediction": {**shared["prediction"], **extension, "description":
                           "The predicted output, as chat completions take it: decoded as the draft."},
            "max_tokens": tokens,
            "max_completion_tokens": {**shared["max_completion_tokens"], **extension},
            "n": only_none({**nullable("integer"), "minimum": 1, "maximum": 1}),
            "best_of": only_none({**nullable("integer"), "minimum": 1, "maximum": 1}),
            "logprobs": only_none({**nullable("integer"), "minimum": 0, "maximum": 0}),
            "echo": only_none({**nullable("boolean"), "enum": [False, None]}),
            "suffix": only_none({**nullable("string"), "maxLength": 0}),
            "presence_penalty": only_none(PENALTY),
            "frequency_penalty": only_none(PENALTY),
            "logit_bias": only_none(NO_BIAS),
        },
    }


def _choice(finish_reason: dict) -> dict:
    return {"type": "object", "required": ["index", "text", "logprobs", "finish_reason"], "properties": {
        "index": {"type": "integer"}, "text": {"type": "string"}, "logprobs": {"type": "null"},
        "finish_reason": finish_reason}}


TEXT_COMPLETION = {
    "type": "object", "required": ["id", "object", "created", "model", "system_fingerprint", "choices", "usage"],
    "properties": {
        **HEAD, "object": {"type": "string", "enum": ["text_completion"]},
        "choices": {"type": "array", "minItems": 1, "maxItems": 1,
                    "items": _choice({"type": "string", "enum": FINISH_REASONS})},
        "usage": ref("CompletionUsage"),
    },
}

TEXT_COMPLETION_CHUNK = {
    "type": "object", "required": ["id", "object", "created", "model", "system_fingerprint", "choices"],
    "description": "A streamed piece: OpenAI streams `text_completion` objects (its spec names no schema of "
                   "their own); `finish_reason` is null until the last piece, whose `text` is empty.",
    "properties": {
        **HEAD, "object": {"type": "string", "enum": ["text_completion"]},
        "choices": {"type": "array", "maxItems": 1,
                    "items": _choice({"type": ["string", "null"], "enum": [*FINISH_REASONS, None]})},
        "usage": {"description": "With `stream_options.include_usage`: null, and the usage in a last chunk "
                                 "whose `choices` is empty.",
                  "anyOf": [{"type": "null"}, ref("CompletionUsage")]},
    },
}

# A streamed completion's events: its chunks, an error where decoding failed after the first, then [DONE].
COMPLETION_EVENT = {"type": "object", "required": ["data"], "properties": {"data": {"anyOf": [
    {"const": "[DONE]"},
    json_data({"anyOf": [ref("CreateCompletionStreamResponse"), ref("ErrorResponse")]})]}}}


def completions(served: Served) -> Operation:
    ok = {"description": "The completion: whole, or with `stream` as server-sent chunks ending with [DONE].",
          "content": {"application/json": {"schema": ref("CreateCompletionResponse")},
                      "text/event-stream": {"itemSchema": COMPLETION_EVENT}}}
    return Operation(
        "createCompletion", "OpenAI's (legacy) completions: a raw prompt, decoded with `prediction` as the draft.",
        ok, body=ref("CreateCompletionRequest"), errors=(404, 429),
        schemas={"CreateCompletionRequest": completion_request(served.models, served.limits.max_output_tokens),
                 "CreateCompletionResponse": TEXT_COMPLETION,
                 "CreateCompletionStreamResponse": TEXT_COMPLETION_CHUNK, "CompletionUsage": USAGE})
