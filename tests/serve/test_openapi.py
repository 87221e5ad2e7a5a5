"""The service's OpenAPI document: valid OpenAPI, one entry for each route the app serves and
none else, the server's own limits and key, and OpenAI's names, types and enums for the OpenAI
objects it takes and gives (compared with tests/serve/data/openai_fields.json, OpenAI's
published spec's shapes of exactly the fields the document has)."""
from __future__ import annotations

import copy
import datetime
import json
import re

import httpx
import pytest
import schemathesis
from schemathesis.specs.openapi.adapter.validators import validate_v3
from starlette.testclient import TestClient

from rewriter.serve.app import ROUTES, create_app
from rewriter.serve.openapi import Served, document
from rewriter.serve.openapi_completions import EXTENSION
from rewriter.serve.schema import Limits
from tests.helpers.openapi_fields import FIXTURE, REQUESTS, RESPONSES, at, field_paths, shape

SERVED = Served(["qwen", "rewriter-apply"], Limits(max_output_tokens=77))


def test_every_route_is_documented_and_nothing_else():
    served = set()
    for route in ROUTES:
        path = re.sub(r"\{(\w+)(:\w+)?\}", r"{\1}", route.path)  # Starlette's {name:path} is OpenAPI's {name}
        # Starlette answers HEAD wherever GET is served: not an endpoint of its own
        served |= {(path, method.lower()) for method in route.methods - {"HEAD"}}
    documented = {(path, method) for path, methods in document(SERVED)["paths"].items() for method in methods}
    assert ("/openapi.json", "get") in served
    assert documented == served


@pytest.mark.parametrize("api_key", [True, False])
def test_the_document_is_valid_openapi(api_key):
    found = document(Served(SERVED.models, SERVED.limits, api_key))
    validate_v3(found)
    broken = copy.deepcopy(found)
    broken["paths"]["/health"]["get"]["responses"]["200"]["description"] = 5
    with pytest.raises(Exception, match="is not of type"):
        validate_v3(broken)  # the validator is not a formality


def test_the_document_is_the_servers_own():
    keyed = document(Served(SERVED.models, SERVED.limits, api_key=True))
    chat = keyed["components"]["schemas"]["CreateChatCompletionRequest"]["properties"]
    assert chat["model"]["enum"] == SERVED.models
    assert chat["max_tokens"]["maximum"] == chat["max_completion_tokens"]["maximum"] == 77
    assert keyed["components"]["schemas"]["RewriteRequest"]["properties"]["max_tokens"]["maximum"] == 77
    completion = keyed["components"]["schemas"]["CreateCompletionRequest"]["properties"]
    assert completion["model"]["enum"] == ["qwen"]  # the apply model answers chat only
    assert completion["max_tokens"]["maximum"] == completion["max_completion_tokens"]["maximum"] == 77
    assert completion["max_tokens"]["default"] == 16
    assert keyed["security"] == [{"bearer": []}] and keyed["paths"]["/health"]["get"]["security"] == []
    assert "401" in keyed["paths"]["/v1/models"]["get"]["responses"]
    assert "401" not in keyed["paths"]["/health"]["get"]["responses"]
    open_one = document(SERVED)
    assert "security" not in open_one and "403" in open_one["paths"]["/health"]["get"]["responses"]
    busy = open_one["paths"]["/v1/chat/completions"]["post"]["responses"]["429"]
    assert busy["headers"]["Retry-After"]["required"] is True


def test_get_openapi_json_serves_the_document_behind_the_key(tiny_loaded):
    app = create_app(tiny_loaded, Limits(max_output_tokens=9), api_key="k-1")
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        assert client.get("/openapi.json").status_code == 401
        served = client.get("/openapi.json", headers={"Authorization": "Bearer k-1"}).json()
    assert served == document(Served([tiny_loaded.name, "rewriter-apply"], Limits(max_output_tokens=9), True))


def _events(path: str, *events: tuple[str | None, dict | str]) -> httpx.Response:
    text = "".join((f"event: {name}\n" if name else "") + f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
                   for name, data in events)
    response = httpx.Response(200, headers={"content-type": "text/event-stream; charset=utf-8"}, content=text.encode(),
                              request=httpx.Request("POST", f"http://127.0.0.1{path}"))
    response.elapsed = datetime.timedelta(0)
    return response


CHUNK = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "qwen", "system_fingerprint": "f",
         "choices": [{"index": 0, "delta": {"content": "x"}, "logprobs": None, "finish_reason": None}]}
ERROR = {"error": {"message": "m", "type": "server_error", "param": None, "code": None}}
TEXT = {**CHUNK, "id": "cmpl-1", "object": "text_completion",
        "choices": [{"index": 0, "text": "x", "logprobs": None, "finish_reason": None}]}
USAGE = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2,
         "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
         "completion_tokens_details": {"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
                                       "reasoning_tokens": 0, "audio_tokens": 0}}
DELTA = ("delta", {"text": "x"})


@pytest.mark.parametrize("path, events, valid", [
    ("/v1/chat/completions", [(None, CHUNK), (None, "[DONE]")], True),
    ("/v1/chat/completions", [(None, CHUNK), (None, ERROR)], True),
    ("/v1/chat/completions", [(None, {**CHUNK, "object": "chat.completion"}), (None, "[DONE]")], False),
    ("/v1/chat/completions", [(None, CHUNK), (None, "[END]")], False),
    ("/v1/completions", [(None, TEXT), (None, {**TEXT, "choices": [], "usage": USAGE}), (None, "[DONE]")], True),
    ("/v1/completions", [(None, TEXT), (None, ERROR)], True),
    ("/v1/completions", [(None, CHUNK), (None, "[DONE]")], False),  # a chat chunk
    ("/v1/completions", [(None, {**TEXT, "usage": {"total_tokens": 2}}), (None, "[DONE]")], False),
    ("/v1/rewrites", [DELTA, ("hunk", {"start": 0, "end": 1, "lines": ["y\n"]}), ("error", ERROR)], True),
    ("/v1/rewrites", [DELTA, ("hunk", {"start": 0, "end": 1})], False),
    ("/v1/rewrites", [DELTA, ("delta", ERROR)], False),
])
def test_each_event_of_a_stream_is_held_to_the_document(path, events, valid):
    # what the fuzzing's response_schema_conformance does with each event (OpenAPI 3.2's itemSchema)
    operation = schemathesis.openapi.from_dict(document(SERVED))[path]["POST"]
    if valid:
        operation.validate_response(_events(path, *events))
    else:
        with pytest.raises(AssertionError, match="SSE event"):
            operation.validate_response(_events(path, *events))


def _openai() -> dict:
    return json.loads(FIXTURE.read_text())["components"]


def _fits(ours: list[str] | None, theirs: list[str] | None, extra: set[str] = frozenset()) -> bool:
    """Whether every type of ours is one of theirs (an integer is a number), apart from `extra`."""
    if theirs is None:
        return True
    return ours is not None and all(kind in theirs or (kind == "integer" and "number" in theirs)
                                    for kind in set(ours) - extra)


def test_the_fixture_has_exactly_the_documents_openai_fields():
    # A field added to the document needs OpenAI's shape of it: rerun tests/helpers/openapi_fields.py.
    ours = document(SERVED)
    assert {name: list(paths) for name, paths in _openai().items()} == {
        name: field_paths(name, ours) for name in REQUESTS + RESPONSES}


def _extension(component: str, path: str, ours: dict) -> bool:
    """Whether the field, or one it is in, is marked as this server's own (not OpenAI's)."""
    segments = path.replace("[]", ".[]").split(".")
    return any(schema.get(EXTENSION) for n in range(1, len(segments) + 1)
               for schema in at(component, ".".join(segments[:n]).replace(".[]", "[]"), ours))


def differences(component: str, ours: dict) -> list[str]:
    """Where our `component` has a field OpenAI's lacks (unless marked as our own), or a type, enum
    or required field of its own."""
    wrong = []
    for path, theirs in _openai()[component].items():
        if theirs is None:
            if not _extension(component, path, ours):
                wrong.append(f"{path}: not a field of OpenAI's {component}")
            continue
        mine = shape(at(component, path, ours), ours)
        # A request may send null wherever a field may be left out: the service reads it so.
        if not _fits(mine["types"], theirs["types"], {"null"} if component in REQUESTS else set()):
            wrong.append(f"{path}: types {mine['types']}, OpenAI's {theirs['types']}")
        if theirs["enum"] is not None and (mine["enum"] is None or not set(map(json.dumps, mine["enum"])) <= set(
                map(json.dumps, theirs["enum"]))):
            wrong.append(f"{path}: enum {mine['enum']}, OpenAI's {theirs['enum']}")
        sent_as_object = "object" in (mine["types"] or ["object"])  # not where ours is always null
        if component in RESPONSES and sent_as_object and not set(theirs["required"]) <= set(mine["required"]):
            wrong.append(f"{path}: requires {mine['required']}, OpenAI's {theirs['required']}")
    return wrong


@pytest.mark.parametrize("component", REQUESTS + RESPONSES)
def test_openai_objects_have_openais_names_types_and_enums(component):
    assert differences(component, document(SERVED)) == []


def test_the_comparison_sees_a_wrong_type_a_wrong_enum_a_missing_required_field_and_a_field_not_openais():
    broken = document(SERVED)
    schemas = broken["components"]["schemas"]
    schemas["CreateChatCompletionRequest"]["properties"]["temperature"] = {"type": "string"}
    choice = schemas["CreateChatCompletionResponse"]["properties"]["choices"]["items"]
    choice["properties"]["finish_reason"]["enum"] = ["stop", "done"]
    schemas["Model"]["required"].remove("owned_by")
    del schemas["CreateCompletionRequest"]["properties"]["prediction"][EXTENSION]
    assert differences("CreateChatCompletionRequest", broken) == [
        "temperature: types ['string'], OpenAI's ['null', 'number']"]
    assert differences("CreateChatCompletionResponse", broken) == [
        "choices[].finish_reason: enum ['done', 'stop'], OpenAI's "
        "['content_filter', 'function_call', 'length', 'stop', 'tool_calls']"]
    assert differences("Model", broken) == [
        ": requires ['created', 'id', 'object'], OpenAI's ['created', 'id', 'object', 'owned_by']"]
    assert differences("CreateCompletionRequest", broken) == [
        f"prediction{path}: not a field of OpenAI's CreateCompletionRequest"
        for path in ("", ".type", ".content", ".content[].type", ".content[].text")]


@pytest.mark.parametrize("stream", [False, True])
def test_a_served_completion_is_what_the_document_says(tiny_loaded, stream):
    app = create_app(tiny_loaded, Limits(max_output_tokens=3))
    body = {"model": tiny_loaded.name, "prompt": "def f(x):\n", "stream": stream,
            **({"stream_options": {"include_usage": True}} if stream else {})}
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        response = client.post("/v1/completions", json=body)
    served = Served([tiny_loaded.name, "rewriter-apply"], Limits(max_output_tokens=3))
    response.elapsed = datetime.timedelta(0)
    schemathesis.openapi.from_dict(document(served))["/v1/completions"]["POST"].validate_response(response)
    if stream:
        assert response.text.endswith("data: [DONE]\n\n") and '"usage": {' in response.text.replace('":{', '": {')
    else:
        assert response.json()["object"] == "text_completion" and response.json()["usage"]["completion_tokens"] <= 3
