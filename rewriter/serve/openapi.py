"""The service's OpenAPI document, served at GET /openapi.json: every endpoint app.py serves,
with the bodies it takes and gives and the errors it really answers (OpenAI's error body).

It is built for one server (`Served`): the model names it serves, its limits (the largest
`max_tokens`) and whether it needs an API key. An endpoint is one entry in ENDPOINTS: a function
of `Served` that gives its `Operation` (openapi_parts.py) and the schemas it names;
tests/serve/test_openapi.py checks that the entries and app.py's routes agree.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..edits.checks.integrity import Status
from ..results import Stats
from .openapi_chat import chat_completions
from .openapi_completions import completions
from .openapi_parts import (
    BODY_ERRORS,
    ERROR,
    Operation,
    Served,
    error_response,
    event_stream,
    json_data,
    json_response,
    nullable,
    ref,
)

OPENAPI_VERSION = "3.2.0"  # the first with `itemSchema`: the schema of each server-sent event

STRING, INTEGER, BOOLEAN = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
LINES = {"type": "integer", "minimum": 0}


def _stats() -> dict:
    """/v1/rewrites' stats: Stats.as_dict() and OpenAI's count of rejected prediction tokens."""
    kinds = {"int": INTEGER, "float": {"type": "number"}, "str": STRING}
    properties = {item.name: kinds[str(item.type)] for item in dataclasses.fields(Stats)}
    properties.update(tokens_per_s={"type": "number"}, rejected_prediction_drafts=INTEGER,
                      rejected_prediction_tokens=INTEGER)
    return {"type": "object", "required": list(properties), "properties": properties}


def _turn() -> dict:
    return {"type": "object", "required": ["text", "instruction"],
            "properties": {"text": STRING, "instruction": STRING}}


def _rewrite_request(max_output_tokens: int) -> dict:
    """schema.parse_rewrite's checks."""
    return {"type": "object", "required": ["text", "instruction"], "properties": {
        "text": STRING,
        "instruction": {"type": "string", "description": "What to change; a blank one is refused."},
        "language": nullable("string"), "file_name": nullable("string"),
        "context": {**nullable("string"), "description": "The file around `text`; not with `range`."},
        "max_tokens": {**nullable("integer"), "minimum": 1, "maximum": max_output_tokens},
        "range": {**nullable("object"), "required": ["start", "end"],
                  "description": "The lines of `text` to rewrite, 0-based, end exclusive; the rest is the context.",
                  "properties": {"start": LINES, "end": {"type": "integer", "minimum": 1}}},
        "conversation": {**nullable("array"), "items": _turn(),
                         "description": "A refine: the earlier requests, first to last."},
    }}


def _event(name: str, data: dict) -> dict:
    return {"type": "object", "required": ["event", "data"],
            "properties": {"event": {"const": name}, "data": json_data(data)}}


REWRITE_RESULT = {
    "type": "object", "required": ["text", "answer", "changed", "stats", "integrity"], "properties": {
        "text": STRING, "answer": STRING, "changed": BOOLEAN, "stats": ref("RewriteStats"),
        "integrity": {"type": "string", "enum": [status.value for status in Status]},
        "stripped": STRING, "selection": STRING,
        "refused": {"type": "object", "required": ["reason", "text"],
                    "properties": {"reason": STRING, "text": nullable("string")}},
    },
}


def rewrite(served: Served) -> Operation:
    events = {"oneOf": [
        _event("delta", {"type": "object", "required": ["text"], "properties": {"text": STRING}}),
        _event("hunk", {"type": "object", "required": ["start", "end", "lines"], "properties": {
            "start": LINES, "end": LINES, "lines": {"type": "array", "items": STRING}}}),
        _event("stats", ref("RewriteStats")),
        _event("result", ref("RewriteResult")),
        _event("error", ref("ErrorResponse")),
    ]}
    return Operation(
        "createRewrite", "Rewrite code: the answer's deltas and line hunks as they are accepted, then the result.",
        event_stream("delta, hunk and stats events, then a result (or an error).", events),
        body=ref("RewriteRequest"), errors=(422, 429),
        schemas={"RewriteRequest": _rewrite_request(served.limits.max_output_tokens), "RewriteStats": _stats(),
                 "RewriteResult": REWRITE_RESULT})


def rewrite_service(served: Served) -> Operation:
    service = {"type": "object", "required": ["object", "model", "models", "hunk_lines"], "properties": {
        "object": {"type": "string", "enum": ["rewriter.service"]}, "model": STRING,
        "models": {"type": "array", "items": STRING}, "hunk_lines": STRING}}
    return Operation("getRewriteService", "What /v1/rewrites is, for clients that detect it.",
                     json_response("This service.", service))


MODEL = {"type": "object", "required": ["id", "object", "created", "owned_by"], "properties": {
    "id": STRING, "object": {"type": "string", "enum": ["model"]}, "created": INTEGER, "owned_by": STRING}}


def list_models(served: Served) -> Operation:
    models = {"type": "object", "required": ["object", "data"], "properties": {
        "object": {"type": "string", "enum": ["list"]}, "data": {"type": "array", "items": ref("Model")}}}
    return Operation("listModels", "The served models: the loaded model first, then the apply model.",
                     json_response("The models.", ref("ListModelsResponse")),
                     schemas={"ListModelsResponse": models, "Model": MODEL})


def retrieve_model(served: Served) -> Operation:
    name = {"name": "name", "in": "path", "required": True, "schema": STRING,
            "description": "A served model's id (it may hold slashes)."}
    return Operation("retrieveModel", "One served model.", json_response("The model.", ref("Model")),
                     errors=(404,), parameters=(name,), schemas={"Model": MODEL})


def health(served: Served) -> Operation:
    counts = ("waiting", "completed", "cancelled", "failed", "accepted_prediction_tokens",
              "rejected_prediction_tokens", "rejected_prediction_drafts")
    seconds = ("last_cancel_latency_s", "last_cancelled_step_s")
    properties = {"status": {"type": "string", "enum": ["ok"]}, "model": STRING, "draft_model": nullable("string"),
                  "device": STRING, "running": BOOLEAN, **dict.fromkeys(counts, INTEGER),
                  **dict.fromkeys(seconds, nullable("number"))}
    return Operation("getHealth", "The queue's state and the service's counters (no API key needed).",
                     json_response("The service is up.", {"type": "object", "required": list(properties),
                                                          "properties": properties}), public=True)


def openapi_document(served: Served) -> Operation:
    schema = {"type": "object", "required": ["openapi", "info", "paths"],
              "properties": {"openapi": STRING, "info": {"type": "object"}, "paths": {"type": "object"}}}
    return Operation("getOpenApiDocument", "This document.", json_response(f"OpenAPI {OPENAPI_VERSION}.", schema))


# path -> method -> its Operation, for one server. A new endpoint is one entry here.
ENDPOINTS: dict[str, dict[str, Callable[[Served], Operation]]] = {
    "/v1/chat/completions": {"post": chat_completions},
    "/v1/completions": {"post": completions},
    "/v1/rewrites": {"get": rewrite_service, "post": rewrite},
    "/v1/models": {"get": list_models},
    "/v1/models/{name}": {"get": retrieve_model},
    "/health": {"get": health},
    "/openapi.json": {"get": openapi_document},
}


def document(served: Served) -> dict:
    """The OpenAPI document of a server that serves `served`."""
    paths: dict[str, dict] = {}
    schemas = {"ErrorResponse": ERROR}
    for path, methods in ENDPOINTS.items():
        for method, build in methods.items():
            operation = build(served)
            for name, schema in operation.schemas.items():
                if schemas.setdefault(name, schema) != schema:
                    raise ValueError(f"two different schemas named {name}")
            paths.setdefault(path, {})[method] = _operation(operation, served)
    components: dict = {"schemas": dict(sorted(schemas.items()))}
    found: dict[str, Any] = {"openapi": OPENAPI_VERSION,
                             "info": {"title": "rewriter", "version": "0.1.0", "description":
                                      "Rewrite code with a language model, your code as the predicted output."},
                             "paths": paths, "components": components}
    if served.api_key:
        components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        found["security"] = [{"bearer": []}]
    return found


def _operation(operation: Operation, served: Served) -> dict:
    errors = set(operation.errors) | {500}
    if served.api_key and not operation.public:
        errors.add(401)
    if not served.api_key:
        errors.add(403)  # the Host check
    found: dict = {"operationId": operation.id, "summary": operation.summary}
    if operation.parameters:
        found["parameters"] = list(operation.parameters)
    if operation.body is not None:
        errors |= set(BODY_ERRORS)
        found["requestBody"] = {"required": True, "content": {"application/json": {"schema": operation.body}}}
    found["responses"] = {"200": operation.ok, **{str(status): error_response(status) for status in sorted(errors)}}
    if served.api_key and operation.public:
        found["security"] = []
    return found
