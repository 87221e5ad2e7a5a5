"""The service under hostile but fair input: refusals before queueing, origins, keys, slow clients.

Most run the app in this process (Starlette's TestClient, a tiny random Qwen2); the slow-client
tests need uvicorn itself and talk raw sockets to a server on 127.0.0.1.
"""
from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest
from starlette.testclient import TestClient

from rewriter.results import Stats
from rewriter.serve.access import read_api_key
from rewriter.serve.app import create_app
from rewriter.serve.backend import Backend, rejected_prediction_tokens
from rewriter.serve.schema import Limits
from rewriter.serve.worker import MAX_RETRY_AFTER_S, QueueFull, Worker
from tests.helpers.service import Server

LOOPBACK = "http://127.0.0.1:8000"
CHAT = "/v1/chat/completions"


def app_client(loaded, base_url: str = LOOPBACK, **options) -> TestClient:
    limits = options.pop("limits", Limits(max_output_tokens=4000))
    return TestClient(create_app(loaded, limits, **options), base_url=base_url)


def chat_body(loaded, **extra) -> dict:
    return {"model": loaded.name, "messages": [{"role": "user", "content": "Rename x to y: x = 1"}],
            "max_tokens": 3, **extra}


def error_of(response, status: int, param: str | None = None, code: str | None = None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert param is None or error["param"] == param, error
    assert code is None or error["code"] == code, error
    return error


@pytest.fixture(scope="module")
def full(tiny_loaded):
    """A server whose queue is always full: whatever is refused with 400 here was refused before queueing."""
    with app_client(tiny_loaded, limits=Limits(max_queue=0, max_prompt_tokens=300)) as client:
        yield client


def test_unservable_input_is_refused_before_it_takes_a_queue_slot(full, tiny_loaded):
    ok = chat_body(tiny_loaded)
    assert full.post(CHAT, json=ok).status_code == 429  # it would have queued
    lone = "\ud800"
    cases = [
        ({**ok, "messages": [{"role": "user", "content": f"x{lone}"}]}, CHAT, "messages[0].content"),
        ({**ok, "prediction": {"type": "content", "content": [{"type": "text", "text": lone}]}}, CHAT,
         "prediction.content[0].text"),
        ({"text": f"a = 1{lone}\n", "instruction": "x"}, "/v1/rewrites", "text"),
        ({**ok, "temperature": 1, "seed": 2**80}, CHAT, "seed"),
        ({**ok, "messages": [{"role": "user", "content": "word " * 400}]}, CHAT, "messages"),
        ({"text": "x = 1\n" * 100, "instruction": "add comments"}, "/v1/rewrites", "text"),
    ]
    for body, path, param in cases:
        error_of(full.post(path, content=json.dumps(body), headers={"content-type": "application/json"}), 400, param)


def test_deep_nesting_and_non_finite_numbers_are_refused(full, tiny_loaded):
    headers = {"content-type": "application/json"}
    error_of(full.post(CHAT, content="[" * 100000, headers=headers), 400, code="invalid_json")
    nested = json.dumps({**chat_body(tiny_loaded), "metadata": json.loads("{\"a\":" * 40 + "1" + "}" * 40)})
    assert "nests" in error_of(full.post(CHAT, content=nested, headers=headers), 400, code="invalid_json")["message"]
    for number in ("NaN", "Infinity", "-Infinity", "1e999"):
        body = json.dumps(chat_body(tiny_loaded))[:-1] + f', "temperature": {number}}}'
        error_of(full.post(CHAT, content=body, headers=headers), 400, "temperature", "invalid_value")
    error_of(full.post(CHAT, json=chat_body(tiny_loaded, temperature=-1)), 400, "temperature",
             "decimal_below_min_value")
    rewrite = {"text": "a\nb\n", "instruction": "x"}
    error_of(full.post("/v1/rewrites", json={**rewrite, "range": {"start": "0", "end": 1}}), 400, "range.start",
             "invalid_type")
    error_of(full.post("/v1/rewrites", json={**rewrite, "range": {"start": 0}}), 400, "range.end")


def test_a_vanishing_top_p_decodes_as_greedy(tiny_loaded):
    with app_client(tiny_loaded) as client:
        body = chat_body(tiny_loaded, max_tokens=12)
        greedy = client.post(CHAT, json=body).json()["choices"][0]["message"]["content"]
        sampled = client.post(CHAT, json={**body, "temperature": 1, "top_p": 1e-46, "seed": 5})
        assert sampled.status_code == 200, sampled.text
        assert sampled.json()["choices"][0]["message"]["content"] == greedy


def test_without_a_key_only_loopback_hosts_and_json_bodies_are_served(tiny_loaded):
    body = chat_body(tiny_loaded, max_tokens=1)
    with app_client(tiny_loaded, base_url="http://rebound.example:8000") as client:
        error_of(client.post(CHAT, json=body), 403, code="host_not_allowed")
        error_of(client.get("/health"), 403)
    for url in ("http://localhost:8000", "http://127.0.0.1", "http://[::1]:8000"):
        with app_client(tiny_loaded, base_url=url) as client:
            assert client.post(CHAT, json=body).status_code == 200, url
            # A web page may post text/plain cross-site without a preflight.
            error_of(client.post(CHAT, content=json.dumps(body), headers={"content-type": "text/plain"}), 415)
            error_of(client.post(CHAT, content=json.dumps(body), headers={"content-type": ""}), 415)
    with app_client(tiny_loaded, base_url="http://box.lan:8000", allowed_hosts=("box.lan",)) as client:
        assert client.post(CHAT, json=body).status_code == 200
    with app_client(tiny_loaded, base_url="http://box.lan:8000", api_key="k3y") as client:  # a key guards it
        assert client.post(CHAT, json=body, headers={"authorization": "Bearer k3y"}).status_code == 200


def test_api_keys_blank_is_none_and_the_scheme_is_case_insensitive(tiny_loaded, monkeypatch):
    monkeypatch.setenv("REWRITER_API_KEY", "  \t")
    assert read_api_key() is None
    monkeypatch.setenv("REWRITER_API_KEY", " k3y \n")
    assert read_api_key() == "k3y"
    with app_client(tiny_loaded, api_key="k3y") as client:
        for header in ("Bearer k3y", "bearer k3y", "BEARER  k3y"):
            assert client.get("/v1/models", headers={"authorization": header}).status_code == 200, header
        for header in ("Bearer k3y2", "Basic k3y", "k3y", ""):
            error_of(client.get("/v1/models", headers={"authorization": header}), 401)
    with app_client(tiny_loaded, api_key="   ") as client:  # blank: no key (and loopback only)
        assert client.get("/v1/models").status_code == 200


def test_rejected_prediction_tokens_counts_prediction_tokens_missing_from_the_completion():
    assert rejected_prediction_tokens([1, 2, 3, 4], [1, 2, 3, 4]) == 0
    assert rejected_prediction_tokens([1, 2, 3, 4], [1, 9, 3, 4, 5]) == 1
    assert rejected_prediction_tokens([1, 2, 3, 4], []) == 4
    assert rejected_prediction_tokens([1, 2, 3, 4, 5, 6], [1, 9, 3], final=False) == 1  # 4.. not reached yet


@pytest.mark.parametrize("prediction_words, max_tokens", [(3, 40), (150, 4)])
def test_usage_reports_rejected_prediction_tokens_as_openai_defines_them(tiny_loaded, prediction_words, max_tokens):
    prediction = " ".join(f"value_{i} = {i}" for i in range(prediction_words))
    size = len(tiny_loaded.tokenizer.encode(prediction, add_special_tokens=False))
    with app_client(tiny_loaded) as client:
        answer = client.post(CHAT, json=chat_body(tiny_loaded, max_tokens=max_tokens,
                                                  prediction={"type": "content", "content": prediction}))
        assert answer.status_code == 200, answer.text
        usage = answer.json()["usage"]
        details = usage["completion_tokens_details"]
        rejected, accepted = details["rejected_prediction_tokens"], details["accepted_prediction_tokens"]
        assert accepted + rejected <= size  # every prediction token is in the completion or not, once
        assert rejected >= size - usage["completion_tokens"]  # the completion cannot hold more of it
        health = client.get("/health").json()
        assert health["rejected_prediction_tokens"] == rejected
        assert health["accepted_prediction_tokens"] == accepted


def test_health_counts_rejected_drafts_apart_from_the_rejected_tokens_openai_reports():
    backend = Backend.__new__(Backend)  # only the counters
    backend.totals = {"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0, "rejected_prediction_drafts": 0}
    backend._count(Stats(accepted_prediction_tokens=5, rejected_prediction_tokens=7), rejected=2)
    backend._count(Stats(accepted_prediction_tokens=1, rejected_prediction_tokens=0), rejected=3)
    assert backend.totals == {"accepted_prediction_tokens": 6, "rejected_prediction_tokens": 5,
                              "rejected_prediction_drafts": 7}


def run_engine(body) -> None:
    async def main():
        engine = Worker(max_queue=2)
        try:
            await body(engine)
        finally:
            engine.close()

    asyncio.run(main())


def timed_work(seconds: float, release=None):
    def work():
        started = time.perf_counter()
        while time.perf_counter() - started < seconds or (release is not None and not release.is_set()):
            time.sleep(0.01)
        yield "done"
    return work


def test_retry_after_follows_the_recent_pace_and_the_queued_tokens():
    import threading

    async def body(engine: Worker):
        job = engine.submit(timed_work(0.3), tokens=300)  # 1 ms a token
        while await job.next() != "done":
            pass
        await asyncio.sleep(0.05)
        release = threading.Event()
        engine.submit(timed_work(0, release), tokens=500)
        while engine.running is None:
            await asyncio.sleep(0.01)
        engine.submit(timed_work(0), tokens=2000)
        engine.submit(timed_work(0), tokens=1500)
        with pytest.raises(QueueFull) as busy:
            engine.submit(timed_work(0), tokens=10)
        release.set()
        # About (500 + 2000 + 1500) tokens at 1 ms: 4 s, not "requests x mean request time".
        assert 3 <= busy.value.retry_after <= 6
        engine.counters.seconds_per_token = 10.0
        with pytest.raises(QueueFull) as slow:
            engine.submit(timed_work(0), tokens=10)
        assert slow.value.retry_after == MAX_RETRY_AFTER_S

    run_engine(body)


# Slow and vanishing clients against uvicorn itself ----------------------------------------------


@pytest.fixture(scope="module")
def strict_server(tiny_dir, tmp_path_factory):
    log = tmp_path_factory.mktemp("strict") / "server.log"
    server = Server(str(tiny_dir), "--read-timeout", "1", "--max-connections", "4", log=log)
    try:
        yield server.wait_ready()
    finally:
        server.stop()


def connect(server: Server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return sock


def closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> float:
    """Seconds until the server closes `sock` (sending `trickle` a byte at a time meanwhile)."""
    started = time.monotonic()
    sock.settimeout(0.25)
    while time.monotonic() - started < seconds:
        if trickle:
            try:
                sock.sendall(trickle[:1])
            except OSError:
                return time.monotonic() - started
            trickle = trickle[1:]
        try:
            if sock.recv(4096) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue
        except OSError:
            return time.monotonic() - started
    raise AssertionError(f"the connection was still open after {seconds}s")


def test_stalled_and_trickled_headers_are_cut_off(strict_server):
    with connect(strict_server) as silent:
        assert closed_within(silent, 6) < 4
    with connect(strict_server) as slow:
        slow.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        assert closed_within(slow, 6, trickle=b"X-Slow: " + b"a" * 40) < 4
    assert strict_server.health()["status"] == "ok"


def test_a_stalled_body_gets_408_and_a_vanished_one_one_info_line(strict_server):
    head = (f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Content-Length: 100\r\n\r\n").encode()
    with connect(strict_server) as stalled:
        stalled.sendall(head + b'{"model": ')
        stalled.settimeout(6)
        started = time.monotonic()
        reply = stalled.recv(4096)
        assert reply.startswith(b"HTTP/1.1 408") and time.monotonic() - started < 4
    with connect(strict_server) as gone:
        gone.sendall(head + b'{"model": ')
        time.sleep(0.2)
    deadline = time.monotonic() + 5
    while "hung up" not in strict_server.log.read_text():
        assert time.monotonic() < deadline, strict_server.log.read_text()
        time.sleep(0.1)
    log = strict_server.log.read_text()
    assert "Traceback" not in log and "ERROR" not in log, log
    assert strict_server.health()["status"] == "ok"


def test_connections_beyond_the_cap_are_answered_503(strict_server):
    idle = [connect(strict_server) for _ in range(4)]
    try:
        time.sleep(0.2)
        with connect(strict_server) as extra:
            extra.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            extra.settimeout(5)
            assert extra.recv(4096).startswith(b"HTTP/1.1 503")
    finally:
        for sock in idle:
            sock.close()


def test_the_prefix_caches_stay_within_the_budget_the_service_was_given(tiny_loaded):
    backend = Backend(tiny_loaded, Limits(prefix_cache_mb=7))
    assert backend.decoder.prefix_cache is not None and backend.decoder.prefix_cache.budget == 7 << 20
