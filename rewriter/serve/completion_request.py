"""OpenAI's (legacy) completions request to the HTTP service, parsed and checked: a raw prompt,
decoded with no chat template, as a next-edit model's editor integration sends it (Zed's
OpenAI-compatible edit-prediction provider). The first fault found is refused, with OpenAI's error
shape (schema.ApiError); the fields it shares with chat completions are read as chat_request.py
reads them, and unknown fields are ignored as there.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .chat_request import GenerationRequest, _model, generation_fields
from .schema import ApiError, get_field, type_name

# OpenAI's completions default: a request without max_tokens and a prediction gets this many tokens.
DEFAULT_COMPLETION_TOKENS = 16


@dataclass(kw_only=True)
class CompletionBody(GenerationRequest):
    prompt: str


def parse_completion(body: dict, model_ids: set[str]) -> CompletionBody:
    # Checked in this order: a request with several faults is refused for the first one.
    model = _model(body, model_ids)
    prompt = _prompt(body.get("prompt"))
    fields = generation_fields(body)
    _refuse_unsupported(body)
    return CompletionBody(model=model, prompt=prompt, **fields)


def _prompt(prompt: Any) -> str:
    """A string, or an array holding one string; token arrays and batches are refused."""
    if prompt is None:
        raise ApiError(400, "Missing required parameter: 'prompt'.", param="prompt", code="missing_required_parameter")
    if isinstance(prompt, list):
        if len(prompt) != 1 or not isinstance(prompt[0], str):
            what = ("several prompts" if len(prompt) > 1 and all(isinstance(p, str) for p in prompt)
                    else "token ids" if prompt and not isinstance(prompt[0], str) else "an empty array")
            raise ApiError(400, f"Invalid 'prompt': this server takes one prompt as a string (or an array "
                           f"holding one string), not {what}.", param="prompt", code="invalid_value")
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ApiError(400, f"Invalid type for 'prompt': expected a string, but got {type_name(prompt)} instead.",
                       param="prompt", code="invalid_type")
    if not prompt:
        raise ApiError(400, "Invalid 'prompt': the prompt is empty; a completion continues a prompt.",
                       param="prompt", code="invalid_value")
    return prompt


def _refuse_unsupported(body: dict) -> None:
    """What this server does not offer for completions: OpenAI's other choices and extras."""

    def refuse(param: str, what: str) -> None:
        raise ApiError(400, f"Invalid parameter: '{param}' {what} is not supported by this server.",
                       param=param, code="unsupported_parameter")

    for name in ("n", "best_of"):
        count = get_field(body, name, "int", 1)
        if count < 1:
            raise ApiError(400, f"Invalid '{name}': expected a value >= 1, got {count}.", param=name,
                           code="integer_below_min_value")
        if count > 1:
            refuse(name, "greater than 1")
    if get_field(body, "logprobs", "int"):  # completions ask for the top N log-probabilities
        refuse("logprobs", "")
    if get_field(body, "echo", "bool", False):
        refuse("echo", "(true)")
    if get_field(body, "suffix", "str"):
        refuse("suffix", "(insertion)")
    for name in ("presence_penalty", "frequency_penalty"):
        if get_field(body, name, "number", 0) != 0:
            refuse(name, "other than 0")
    if get_field(body, "logit_bias", "dict"):
        refuse("logit_bias", "")
