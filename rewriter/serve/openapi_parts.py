"""The pieces of the service's OpenAPI document (openapi.py) that its endpoints share: what an
endpoint is (`Operation`), what the document depends on (`Served`), the error responses every
refusal gives (OpenAI's error body), and the shapes of JSON and server-sent event bodies."""
from __future__ import annotations

from dataclasses import dataclass, field

from .schema import Limits
from .worker import MAX_RETRY_AFTER_S


@dataclass(frozen=True)
class Served:
    """What one server's document says that another's may not: its models, limits and key."""

    models: list[str]  # the names a request may ask for
    limits: Limits = field(default_factory=Limits)
    api_key: bool = False  # whether requests need `Authorization: Bearer <key>`


@dataclass(frozen=True)
class Operation:
    """One endpoint's method, as the document gives it; the errors every endpoint may answer
    (401 or 403, 500), and a JSON body's (400, 408, 413, 415), are added to `errors`."""

    id: str  # the operationId, in OpenAI's style where OpenAI has the endpoint
    summary: str
    ok: dict  # the 200 response
    body: dict | None = None  # the JSON request body's schema
    errors: tuple[int, ...] = ()  # what else this endpoint refuses with
    public: bool = False  # served without the API key
    parameters: tuple[dict, ...] = ()
    schemas: dict = field(default_factory=dict)  # the components it names (ref), by name


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(kind: str) -> dict:
    """A field that may be null, which the service reads as left out."""
    return {"type": [kind, "null"]}


def json_response(description: str, schema: dict) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def event_stream(description: str, event: dict) -> dict:
    """A text/event-stream response; `event` is the schema of each event ({event?, data, id?})."""
    return {"description": description, "content": {"text/event-stream": {"itemSchema": event}}}


def json_data(schema: dict) -> dict:
    """An event's `data`: JSON text that `schema` describes."""
    return {"type": "string", "contentMediaType": "application/json", "contentSchema": schema}


ERRORS = {
    400: "The request is malformed or asks for what this server does not serve; `param` names the field.",
    401: "Incorrect or missing API key: send `Authorization: Bearer <key>`.",
    403: "Without an API key, only loopback Host names (and each --allowed-host) are served.",
    404: "The model (or model name in the path) is not served.",
    408: "The request body did not arrive within the server's read timeout.",
    413: "The request body is larger than the server takes.",
    415: "The request body was not sent as `Content-Type: application/json`.",
    422: "The model's answer could not be used (no code block; an apply model merge refused): nothing changed.",
    500: "The server failed the request (a bug).",
    429: "The queue is full (--max-queue); retry after `Retry-After` seconds.",
}
BODY_ERRORS = (400, 408, 413, 415)


def error_response(status: int) -> dict:
    response = json_response(ERRORS[status], ref("ErrorResponse"))
    if status == 429:
        response["headers"] = {"Retry-After": {"required": True, "schema": {
            "type": "integer", "minimum": 1, "maximum": MAX_RETRY_AFTER_S}}}
    return response


ERROR = {  # OpenAI's error body (schema.ApiError)
    "type": "object", "required": ["error"],
    "properties": {"error": {"type": "object", "required": ["message", "type", "param", "code"], "properties": {
        "message": {"type": "string"}, "type": {"type": "string"},
        "param": nullable("string"), "code": nullable("string")}}},
}
