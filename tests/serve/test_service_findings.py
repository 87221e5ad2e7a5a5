"""What the service mishandled and the OpenAPI work found, each kept as the request that showed it:
by schemathesis (test_service_fuzz.py) or while writing the document down (rewriter/serve/openapi.py),
where the code and what it would have to say disagreed. In-process, on a tiny random Qwen2."""
from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from rewriter.serve.app import create_app
from rewriter.serve.apply_model import APPLY_MODEL
from rewriter.serve.schema import Limits

CHAT = "/v1/chat/completions"
CODE = "import os\n\n\ndef load(path):\n    return open(path).read()\n\n\ndef main():\n    print(load('a.txt'))\n"
UPDATE = "# ... existing code ...\n\ndef main():\n    print(load(os.path.join('data', 'a.txt')))\n"


@pytest.fixture(scope="module")
def client(tiny_loaded):
    with TestClient(create_app(tiny_loaded, Limits(max_output_tokens=8)), base_url="http://127.0.0.1:8000") as client:
        yield client


def error_of(response, status: int, param: str | None = None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert param is None or error["param"] == param, error
    return error


@pytest.mark.parametrize("role", [{}, [], ["user"]])
def test_a_role_that_is_an_object_or_array_is_a_400_not_a_500(client, tiny_loaded, role):
    # schemathesis, negative data: `role not in ROLES` raised TypeError (unhashable) -> 500
    body = {"model": tiny_loaded.name, "messages": [{"role": role, "content": ""}], "max_tokens": 1}
    error_of(client.post(CHAT, json=body), 400, "messages[0].role")


@pytest.mark.parametrize("field", ["presence_penalty", "frequency_penalty"])
def test_a_negative_penalty_with_a_prediction_is_refused_not_ignored(client, tiny_loaded, field):
    # The document says penalties other than 0 are not served; with a prediction a negative one
    # was answered as if it had not been sent.
    body = {"model": tiny_loaded.name, "messages": [{"role": "user", "content": "x = 1"}], "max_tokens": 1,
            "prediction": {"type": "content", "content": "x = 1"}, field: -0.5}
    assert "other than 0" in error_of(client.post(CHAT, json=body), 400, field)["message"]


def test_the_apply_model_refuses_max_tokens_over_the_limit_also_where_no_model_runs(client):
    # The document gives max_tokens' maximum (--max-output-tokens); the deterministic merge
    # answered a request over it, the model's merge refused it.
    message = f"<code>{CODE}</code>\n<update>{UPDATE}</update>"
    body = {"model": APPLY_MODEL, "messages": [{"role": "user", "content": message}]}
    assert client.post(CHAT, json=body).status_code == 200  # merged without the model
    error_of(client.post(CHAT, json={**body, "max_tokens": 9}), 400, "max_tokens")
    assert client.post(CHAT, json={**body, "max_tokens": 8}).status_code == 200


def test_a_method_not_allowed_says_which_are(client):
    # RFC 9110: a 405 names the allowed methods; the error handler dropped Starlette's Allow header.
    response = client.delete("/v1/models")
    error_of(response, 405)
    assert set(response.headers["allow"].replace(" ", "").split(",")) >= {"GET"}
