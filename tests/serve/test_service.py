"""The HTTP service end to end, on a tiny random Qwen2 (real tokenizer) served by a subprocess.

The official `openai` package is the client wherever it can be; raw httpx for malformed input.
"""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time

import httpx
import openai
import pytest
import torch

from tests.helpers.models import greedy_reference
from tests.helpers.service import ROOT, Server

MESSAGES = [{"role": "system", "content": "You edit code."},
            {"role": "user", "content": "Rename x to y:\n```python\ndef f(x):\n    return x + 1\n```"}]
API_KEY = "test-key-5b7f0c2e"


@pytest.fixture(scope="module")
def server(tiny_dir, tmp_path_factory):
    server = Server(str(tiny_dir), "--max-body-bytes", "65536", "--max-output-tokens", "40000",
                    log=tmp_path_factory.mktemp("log") / "server.log")
    try:
        yield server.wait_ready()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def keyed_server(tiny_dir, tmp_path_factory):
    """A second server: a queue of one, at most 300 prompt tokens, and an API key from a file."""
    logs = tmp_path_factory.mktemp("keyed")
    key_file = logs / "key"
    key_file.write_text(API_KEY + "\n")
    server = Server(str(tiny_dir), "--max-queue", "1", "--api-key-file", str(key_file),
                    "--max-output-tokens", "40000", "--max-prompt-tokens", "300", log=logs / "server.log")
    try:
        yield server.wait_ready()
    finally:
        server.stop()


def client_for(server: Server, api_key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=api_key, max_retries=0, timeout=120)


def model_name(server: Server) -> str:
    return server.health()["model"]


def reference(loaded, messages: list[dict], max_tokens: int) -> tuple[str, int, int]:
    """Plain greedy decoding in this process: (text, prompt tokens, completion tokens)."""
    encoded = loaded.tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    prompt = list(encoded["input_ids"] if not isinstance(encoded, list) else encoded)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the server runs: the same kernels, the same rounding
    try:
        tokens = greedy_reference(loaded.model, prompt, max_tokens)
    finally:
        torch.set_num_threads(threads)
    return loaded.tokenizer.decode(tokens, skip_special_tokens=True), len(prompt), len(tokens)


def stream_content(client: openai.OpenAI, **kwargs) -> tuple[str, str | None, object]:
    text, finish, usage = [], None, None
    for chunk in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs):
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    return "".join(text), finish, usage


def assert_usage_adds_up(usage, prompt_tokens: int, completion_tokens: int) -> None:
    assert usage.prompt_tokens == prompt_tokens
    assert usage.completion_tokens == completion_tokens
    assert usage.total_tokens == prompt_tokens + completion_tokens
    details = usage.completion_tokens_details
    assert details.accepted_prediction_tokens >= 0 and details.rejected_prediction_tokens >= 0
    assert details.accepted_prediction_tokens <= completion_tokens


def test_models_and_health(server):
    client = client_for(server)
    ids = [model.id for model in client.models.list()]
    assert ids == [model_name(server), "rewriter-apply"]  # the loaded model first, for clients that take it
    assert client.models.retrieve(ids[0]).id == ids[0]
    health = server.health()
    assert health["status"] == "ok" and health["waiting"] == 0


def test_greedy_content_equals_in_process_decoding(server, tiny_loaded):
    client = client_for(server)
    model = model_name(server)
    expected, prompt_tokens, completion_tokens = reference(tiny_loaded, MESSAGES, 24)

    plain = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=24, temperature=0)
    assert plain.choices[0].message.content == expected
    assert plain.choices[0].finish_reason == ("length" if completion_tokens == 24 else "stop")
    assert_usage_adds_up(plain.usage, prompt_tokens, completion_tokens)
    assert plain.usage.completion_tokens_details.accepted_prediction_tokens == 0  # no prediction given

    streamed, finish, usage = stream_content(client, model=model, messages=MESSAGES, max_completion_tokens=24)
    assert streamed == expected
    assert finish == plain.choices[0].finish_reason
    assert_usage_adds_up(usage, prompt_tokens, completion_tokens)

    # A prediction that is the answer itself: most of it is accepted, the output is unchanged.
    predicted = client.chat.completions.create(
        model=model, messages=MESSAGES, max_tokens=24, temperature=0,
        prediction={"type": "content", "content": [{"type": "text", "text": expected}]})
    assert predicted.choices[0].message.content == expected
    assert_usage_adds_up(predicted.usage, prompt_tokens, completion_tokens)
    assert predicted.usage.completion_tokens_details.accepted_prediction_tokens >= completion_tokens // 2
    # The same prompt again: its prefix comes from the cache.
    assert predicted.usage.prompt_tokens_details.cached_tokens > 0

    # A wrong prediction costs rejected tokens, never a different output.
    wrong, _, usage = stream_content(client, model=model, messages=MESSAGES, max_tokens=24,
                                     prediction={"type": "content", "content": "def f(y):\n    return y + 1\n"})
    assert wrong == expected
    assert_usage_adds_up(usage, prompt_tokens, completion_tokens)


def test_stop_strings_trim_the_text(server, tiny_loaded):
    client = client_for(server)
    model = model_name(server)
    full, _, _ = reference(tiny_loaded, MESSAGES, 30)
    stop = full[len(full) // 2:len(full) // 2 + 3]
    expected = full[:full.find(stop)]
    plain = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=30, stop=[stop, "\x00never"])
    assert plain.choices[0].message.content == expected
    assert plain.choices[0].finish_reason == "stop"
    streamed, finish, _ = stream_content(client, model=model, messages=MESSAGES, max_tokens=30, stop=stop)
    assert (streamed, finish) == (expected, "stop")


def post(server: Server, body, path: str = "/v1/chat/completions", **kwargs) -> httpx.Response:
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return httpx.post(f"{server.url}{path}", content=content, timeout=60,
                      headers={"Content-Type": "application/json", **kwargs.pop("headers", {})}, **kwargs)


def assert_error(response: httpx.Response, status: int, code: str | None = None, param: str | None = None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    if code:
        assert error["code"] == code, error
    if param:
        assert error["param"] == param, error
    return error


def test_malformed_requests_get_openai_errors(server):
    model = model_name(server)
    ok = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    assert post(server, ok).status_code == 200

    assert_error(post(server, b"{not json"), 400, "invalid_json")
    assert_error(post(server, b"\xff\xfe"), 400, "invalid_json")
    assert_error(post(server, "[1, 2]"), 400, "invalid_json")
    assert_error(post(server, {**ok, "model": "gpt-4o"}), 404, "model_not_found", "model")
    assert_error(post(server, {k: v for k, v in ok.items() if k != "model"}), 400, param="model")
    assert_error(post(server, {**ok, "model": 7}), 400, "invalid_type", "model")
    assert_error(post(server, {**ok, "messages": []}), 400, "empty_array", "messages")
    assert_error(post(server, {k: v for k, v in ok.items() if k != "messages"}), 400, param="messages")
    assert_error(post(server, {**ok, "messages": "hi"}), 400, "invalid_type", "messages")
    assert_error(post(server, {**ok, "messages": ["hi"]}), 400, "invalid_type", "messages[0]")
    assert_error(post(server, {**ok, "messages": [{"role": "wizard", "content": "hi"}]}), 400, param="messages[0].role")
    assert_error(post(server, {**ok, "messages": [{"role": "user"}]}), 400, param="messages[0].content")
    assert_error(post(server, {**ok, "messages": [{"role": "user", "content": 5}]}), 400,
                 "invalid_type", "messages[0].content")
    assert_error(post(server, {**ok, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}),
                 400, param="messages[0].content[0]")
    assert_error(post(server, {**ok, "max_tokens": "5"}), 400, "invalid_type", "max_tokens")
    assert_error(post(server, {**ok, "max_tokens": 0}), 400, param="max_tokens")
    assert_error(post(server, {**ok, "max_tokens": 10**9}), 400, "integer_above_max_value", "max_tokens")
    assert_error(post(server, {**ok, "max_tokens": 35000}), 400, "context_length_exceeded", "max_tokens")
    assert_error(post(server, {**ok, "temperature": "hot"}), 400, "invalid_type", "temperature")
    assert_error(post(server, {**ok, "temperature": 3}), 400, param="temperature")
    assert_error(post(server, {**ok, "top_p": 0}), 400, param="top_p")
    assert_error(post(server, {**ok, "stream": "yes"}), 400, "invalid_type", "stream")
    assert_error(post(server, {**ok, "stream_options": {"include_usage": True}}), 400, param="stream_options")
    assert_error(post(server, {**ok, "stop": 5}), 400, "invalid_type", "stop")
    assert_error(post(server, {**ok, "stop": ["a", "b", "c", "d", "e"]}), 400, param="stop")
    assert_error(post(server, {**ok, "seed": 1.5}), 400, "invalid_type", "seed")
    assert_error(post(server, {**ok, "prediction": "code"}), 400, "invalid_type", "prediction")
    assert_error(post(server, {**ok, "prediction": {"type": "file", "content": "x"}}), 400, param="prediction.type")
    assert_error(post(server, {**ok, "prediction": {"type": "content", "content": 3}}), 400,
                 "invalid_type", "prediction.content")
    assert_error(post(server, {**ok, "tools": [{"type": "function"}]}), 400, "unsupported_parameter", "tools")
    assert_error(post(server, {**ok, "response_format": {"type": "json_object"}}), 400, param="response_format")
    assert_error(post(server, ok, path="/v1/nothing"), 404)
    assert_error(httpx.delete(f"{server.url}/v1/chat/completions"), 405)
    big = {**ok, "messages": [{"role": "user", "content": "x" * 70000}]}
    assert_error(post(server, big), 413, "request_too_large")
    # Nothing above hurt the server.
    assert post(server, ok).status_code == 200
    assert server.process.poll() is None


@pytest.mark.parametrize("field, value", [
    ("n", 2), ("logprobs", True), ("top_logprobs", 2), ("presence_penalty", 0.5), ("frequency_penalty", 1.0),
    ("tools", [{"type": "function", "function": {"name": "f", "parameters": {}}}]), ("audio", {"voice": "alloy"}),
    ("modalities", ["text", "audio"]),
])
def test_parameters_refused_with_a_prediction(server, field, value):
    client = client_for(server)
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model=model_name(server), messages=MESSAGES, max_tokens=2,
                                       prediction={"type": "content", "content": "def f(x): pass"},
                                       extra_body={field: value})
    assert raised.value.status_code == 400
    error = raised.value.body
    assert error["param"] == field and error["type"] == "invalid_request_error"
    assert "predicted outputs" in error["message"]


def test_a_sampled_request_is_served(server):
    response = post(server, {"model": model_name(server), "messages": MESSAGES, "max_tokens": 3, "temperature": 0.7,
                             "seed": 3})
    assert response.status_code == 200, response.text
    assert 1 <= response.json()["usage"]["completion_tokens"] <= 3


LONG = 30000  # more tokens than the tests ever wait for: the request must be cancelled to end


def test_disconnect_frees_the_engine_within_a_step(server):
    body = {"model": model_name(server), "messages": MESSAGES, "max_tokens": LONG, "stream": True}
    with httpx.Client(timeout=60) as http:
        with http.stream("POST", f"{server.base_url}/chat/completions", json=body) as response:
            lines = response.iter_lines()
            received = sum(1 for _, line in zip(range(12), lines) if line.startswith("data:"))
            assert received >= 5
            assert server.health()["running"]
        closed = time.perf_counter()  # the client hung up mid-stream
    quick = client_for(server).chat.completions.create(model=model_name(server), messages=MESSAGES, max_tokens=2)
    waited = time.perf_counter() - closed
    assert quick.choices[0].message.content is not None
    health = server.health()
    assert not health["running"] and health["cancelled"] >= 1
    # The worker stopped at the step after the cancel; a step of the tiny model takes milliseconds.
    assert health["last_cancel_latency_s"] <= health["last_cancelled_step_s"] + 0.25
    assert waited < 10  # the long request alone would take minutes


def test_load_concurrent_streams_match_their_serial_runs(server):
    model = model_name(server)
    prompts = [[{"role": "user", "content": f"Task {i}: rewrite `x = {i}` as `x = {i * 7}`."}] for i in range(16)]
    quitters = {3, 7, 11, 15}  # these disconnect after a few chunks

    async def one(http: httpx.AsyncClient, i: int) -> str | None:
        body = {"model": model, "messages": prompts[i], "max_tokens": LONG if i in quitters else 16,
                "stream": True}
        text = []
        async with http.stream("POST", f"{server.base_url}/chat/completions", json=body) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                choices = json.loads(line[6:])["choices"]
                text.extend(c["delta"].get("content") or "" for c in choices)
                if i in quitters and len(text) >= 4:
                    return None  # hang up mid-stream
        return "".join(text)

    async def run_all() -> list[str | None]:
        async with httpx.AsyncClient(timeout=120) as http:
            return await asyncio.wait_for(asyncio.gather(*(one(http, i) for i in range(16))), timeout=240)

    client = client_for(server)
    serial = {i: client.chat.completions.create(model=model, messages=prompts[i], max_tokens=16).choices[0]
              .message.content for i in range(16) if i not in quitters}
    baseline = server.rss_bytes()
    concurrent = asyncio.run(run_all())
    for i, text in enumerate(concurrent):
        if i in quitters:
            assert text is None
        else:
            assert text == serial[i], f"request {i} differs from its serial run"
    deadline = time.monotonic() + 30
    while (health := server.health())["running"] or health["waiting"]:
        assert time.monotonic() < deadline, f"the engine is still busy: {health}"
        time.sleep(0.1)
    assert server.rss_bytes() - baseline < 64 * 2**20  # memory returns to about its baseline


def test_full_queue_answers_429_with_retry_after(keyed_server):
    server = keyed_server
    key = {"Authorization": f"Bearer {API_KEY}"}
    model = model_name(server)
    body = {"model": model, "messages": MESSAGES, "max_tokens": LONG, "stream": True}
    stop = threading.Event()

    def hold(responses: list) -> None:
        with httpx.Client(timeout=120, headers=key) as http:
            with http.stream("POST", f"{server.base_url}/chat/completions", json=body) as response:
                responses.append(response.status_code)
                for _ in response.iter_lines():
                    if stop.is_set():
                        return

    def wait_for(condition) -> None:
        deadline = time.monotonic() + 30
        while not condition(server.health()):
            assert time.monotonic() < deadline
            time.sleep(0.05)

    running, queued = [], []
    threads = [threading.Thread(target=hold, args=(running,))]
    threads[0].start()
    try:
        wait_for(lambda h: h["running"])
        threads.append(threading.Thread(target=hold, args=(queued,)))
        threads[1].start()
        wait_for(lambda h: h["waiting"] == 1)
        refused = post(server, {**body, "stream": False}, headers=key)
        error = assert_error(refused, 429, "server_busy")
        assert int(refused.headers["Retry-After"]) >= 1 and "busy" in error["message"]
        with pytest.raises(openai.RateLimitError):  # what the openai package makes of a 429
            client_for(server, API_KEY).chat.completions.create(model=model, messages=MESSAGES, max_tokens=2)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    assert running == [200]
    wait_for(lambda h: not h["running"] and h["waiting"] == 0)


def test_api_key_required_and_never_logged(keyed_server):
    server = keyed_server
    with pytest.raises(openai.AuthenticationError):
        client_for(server, "wrong").models.list()
    assert_error(httpx.get(f"{server.base_url}/models"), 401, "invalid_api_key")
    answer = client_for(server, API_KEY).chat.completions.create(
        model=model_name(server), messages=MESSAGES, max_tokens=2)
    assert answer.usage.completion_tokens == 2
    assert API_KEY not in server.log.read_text()


def test_prompt_token_limit(keyed_server):
    key = {"Authorization": f"Bearer {API_KEY}"}
    long = [{"role": "user", "content": "word " * 400}]
    body = {"model": model_name(keyed_server), "messages": long, "max_tokens": 2}
    error = assert_error(post(keyed_server, body, headers=key), 400, "context_length_exceeded", "messages")
    assert "300" in error["message"]
    rewrite = {"text": "x = 1\n" * 100, "instruction": "add comments"}
    assert_error(post(keyed_server, rewrite, path="/v1/rewrites", headers=key), 400, "invalid_rewrite", "text")
    assert post(keyed_server, {**body, "messages": MESSAGES}, headers=key).status_code == 200


def test_off_loopback_needs_an_api_key(tiny_dir):
    env = {k: v for k, v in __import__("os").environ.items() if k != "REWRITER_API_KEY"}
    result = subprocess.run([sys.executable, "-m", "rewriter.cli", "serve", "--model", str(tiny_dir),
                             "--host", "0.0.0.0", "--port", "1"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2
    assert "API key" in result.stderr and "REWRITER_API_KEY" in result.stderr


def test_remote_engine_maps_errors(server):
    from rewriter.answer import NoCodeBlock
    from rewriter.decoding.rewrite import Progress, RewriteError
    from rewriter.engine import EditRequest
    from rewriter.remote import RemoteRewriter

    for protocol in ("auto", "openai"):
        with RemoteRewriter(server.url, model=model_name(server), protocol=protocol) as engine:
            assert engine.protocol == ("rewriter" if protocol == "auto" else "openai")
            events = []
            # The random model writes no code block: the same error as the local engine's.
            with pytest.raises(NoCodeBlock):
                for event in engine.stream(EditRequest("x = 1\n", "add a comment", "python", max_new_tokens=6)):
                    events.append(event)
            assert events and all(isinstance(e, Progress) for e in events)
            with pytest.raises(RewriteError):
                list(engine.stream(EditRequest("x = 1\n", "   ")))
    with RemoteRewriter(server.url) as engine:
        with pytest.raises(RewriteError, match="max_tokens"):
            list(engine.stream(EditRequest("x = 1\n", "add a comment", max_new_tokens=10**6)))


def test_rewrites_errors(server):
    assert_error(post(server, {"instruction": "x"}, path="/v1/rewrites"), 400, param="text")
    assert_error(post(server, {"text": "a\n", "instruction": 5}, path="/v1/rewrites"), 400, "invalid_type")
    assert_error(post(server, {"text": "a\n", "instruction": " "}, path="/v1/rewrites"), 400, "invalid_rewrite")
    assert_error(post(server, {"text": "a\nb\n", "instruction": "x", "range": {"start": 1, "end": 5}},
                      path="/v1/rewrites"), 400, param="range.end")
    assert_error(post(server, {"text": "a\nb\n", "instruction": "x", "range": {"start": 0, "end": 1},
                               "context": "a"}, path="/v1/rewrites"), 400, param="range")
    assert_error(post(server, {"text": "a\n" * 40000, "instruction": "x"}, path="/v1/rewrites"),
                 413, "request_too_large")
    too_long = assert_error(post(server, {"text": "a\n" * 20000, "instruction": "x"}, path="/v1/rewrites"),
                            400, "invalid_rewrite")
    assert "too large" in too_long["message"]
    info = httpx.get(f"{server.base_url}/rewrites").json()
    assert info["object"] == "rewriter.service"
