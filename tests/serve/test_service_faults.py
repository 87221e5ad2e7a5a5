"""A live `rewriter serve` (a tiny random Qwen2, on 127.0.0.1) under 50 clients at once and under
bodies that never end: a bounded queue, 429 with Retry-After beyond it and no 5xx, memory back
near its baseline; a body read only up to the limit, then 413; the next client served."""
from __future__ import annotations

import select
import socket
import threading
import time

import httpx
import pytest

from rewriter.serve.schema import Limits
from tests.helpers.service import Server

LIMIT = Limits().max_body_bytes
CHUNK = b"x" * 65536
QUEUE = 4
CLIENTS = 50


@pytest.fixture(scope="module")
def server(tiny_dir, tmp_path_factory):
    server = Server(str(tiny_dir), "--max-queue", str(QUEUE), log=tmp_path_factory.mktemp("faults") / "server.log")
    try:
        yield server.wait_ready()
    finally:
        server.stop()


def whole_reply(sock: socket.socket, first: bytes) -> bytes:
    """The reply that starts with `first`, read on to the end of its body (its Content-Length):
    the head and the body may come in separate segments."""
    reply = first
    sock.settimeout(5)
    while True:
        head, ended, body = reply.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        if ended and len(body) >= length:
            return reply
        try:
            more = sock.recv(4096)
        except OSError:
            return reply
        if not more:
            return reply
        reply += more


def send_until_answered(server: Server, head: bytes, chunked: bool, most: int) -> tuple[bytes, int, float]:
    """Send `head`, then body bytes until the server answers (or `most` bytes went): its reply,
    how many body bytes were sent, and the seconds it took."""
    sent, started = 0, time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head)
        sock.settimeout(0.2)
        while sent < most:
            if select.select([sock], [], [], 0)[0]:  # the answer, once the server has one
                seconds = time.monotonic() - started
                return whole_reply(sock, sock.recv(4096)), sent, seconds
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK) if chunked else CHUNK)
                sent += len(CHUNK)
            except TimeoutError:
                continue  # the server reads no more: its answer comes next
            except OSError:
                break  # it closed the connection
        sock.settimeout(5)
        seconds = time.monotonic() - started
        return whole_reply(sock, sock.recv(4096)), sent, seconds


def test_a_chunked_body_that_never_ends_is_cut_off_at_the_limit_with_413(server):
    """No length declared, 64 KiB chunks for as long as the server takes them: it reads its
    limit (what more was sent fills socket buffers at most), answers 413 and stays healthy."""
    most = 64 << 20
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    reply, sent, seconds = send_until_answered(server, head, True, most)
    print(f"413 after {sent >> 10} KiB sent in {seconds:.2f}s (limit {LIMIT >> 10} KiB)")
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert sent < LIMIT + (24 << 20) and seconds < 20, (sent, seconds)
    assert server.health()["status"] == "ok"


def test_a_declared_length_over_the_limit_is_refused_before_any_byte_is_read(server):
    head = (b"POST /v1/rewrites HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (LIMIT + 1))
    reply, sent, seconds = send_until_answered(server, head, chunked=False, most=LIMIT + 1)
    assert reply.startswith(b"HTTP/1.1 413") and seconds < 5, reply[:200]
    assert b"at most" in reply or sent < LIMIT  # refused on the declared length


def test_fifty_clients_at_once_get_answers_or_429_with_retry_after_and_memory_comes_back(server):
    model = server.health()["model"]
    body = {"model": model, "messages": [{"role": "user", "content": "Rename x to y: x = 1"}], "max_tokens": 48}
    baseline = server.rss_bytes()
    statuses: list[int] = []
    waits: list[str | None] = []
    start = threading.Barrier(CLIENTS)

    def client() -> None:
        with httpx.Client(timeout=120) as http:
            start.wait(30)
            response = http.post(f"{server.url}/v1/chat/completions", json=body)
            statuses.append(response.status_code)
            if response.status_code == 429:
                waits.append(response.headers.get("Retry-After"))

    for _ in range(2):  # two waves, the second on a server that served the first
        threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(180)
        assert not any(thread.is_alive() for thread in threads)
    deadline = time.monotonic() + 30
    while (health := server.health())["running"] or health["waiting"]:
        assert time.monotonic() < deadline, health
        time.sleep(0.1)
    after = server.rss_bytes()
    print(f"{statuses.count(200)} answered, {statuses.count(429)} refused with 429 of {len(statuses)}; "
          f"RSS {baseline >> 20} MiB before, {after >> 20} MiB after")
    assert set(statuses) == {200, 429} and len(statuses) == 2 * CLIENTS
    assert statuses.count(200) >= QUEUE + 1  # the one decoding and the queue's, in each wave at least
    assert all(wait is not None and wait.isdigit() and int(wait) >= 1 for wait in waits), waits
    assert after - baseline < 64 * 2**20
    log = server.log.read_text()
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
