"""A live `rewriter serve` (a tiny random Qwen2, on 127.0.0.1) under bodies that never end: the
server stops reading at its limit and answers 413 at once, and serves the next client."""
from __future__ import annotations

import select
import socket
import time

import pytest

from rewriter.serve.schema import Limits
from tests.helpers.service import Server

LIMIT = Limits().max_body_bytes
CHUNK = b"x" * 65536


@pytest.fixture(scope="module")
def server(tiny_dir, tmp_path_factory):
    server = Server(str(tiny_dir), log=tmp_path_factory.mktemp("faults") / "server.log")
    try:
        yield server.wait_ready()
    finally:
        server.stop()


def send_until_answered(server: Server, head: bytes, chunked: bool, most: int) -> tuple[bytes, int, float]:
    """Send `head`, then body bytes until the server answers (or `most` bytes went): its first
    bytes, how many body bytes were sent, and the seconds it took."""
    sent, started = 0, time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head)
        sock.settimeout(0.2)
        while sent < most:
            if select.select([sock], [], [], 0)[0]:  # the answer, once the server has one
                return sock.recv(4096), sent, time.monotonic() - started
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK) if chunked else CHUNK)
                sent += len(CHUNK)
            except TimeoutError:
                continue  # the server reads no more: its answer comes next
            except OSError:
                break  # it closed the connection
        sock.settimeout(5)
        return sock.recv(4096), sent, time.monotonic() - started


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
