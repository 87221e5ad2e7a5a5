"""A fake OpenAI-compatible server on 127.0.0.1: streamed chat completions with usage, and
optionally vLLM's Prometheus /metrics. Runs in a thread of the test process."""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeOpenAI:
    """`answer(body)` is the reply to a chat request, streamed `chunk_chars` characters an event;
    `metrics(n)`, the /metrics text after n requests (None: /metrics is 404). Each request is
    appended to `log` as (name, body)."""

    def __init__(self, name: str, answer: Callable[[dict], str], log: list, first_chunk_s: float = 0.0,
                 chunk_gap_s: float = 0.0, completion_tokens: int = 40, usage_details: dict | None = None,
                 metrics: Callable[[int], str] | None = None, chunk_chars: int = 7):
        self.name, self.answer, self.log = name, answer, log
        self.first_chunk_s, self.chunk_gap_s = first_chunk_s, chunk_gap_s
        self.completion_tokens, self.usage_details, self.metrics = completion_tokens, usage_details, metrics
        self.chunk_chars = chunk_chars
        self.requests = 0
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path != "/metrics" or fake.metrics is None:
                    return self._send(404, "text/plain", b"not found")
                with fake.lock:
                    text = fake.metrics(fake.requests)
                self._send(200, "text/plain; version=0.0.4", text.encode())

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path != "/v1/chat/completions":
                    return self._send(404, "application/json", b'{"error": {"message": "no such path"}}')
                fake.log.append((fake.name, body))
                answer = fake.answer(body)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                time.sleep(fake.first_chunk_s)
                size = fake.chunk_chars
                pieces = [answer[i:i + size] for i in range(0, len(answer), size)]
                for piece in pieces:
                    self._event({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
                    time.sleep(fake.chunk_gap_s)
                self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                with fake.lock:
                    fake.requests += 1  # counted before the stream ends, as vLLM's counters are
                usage = {"prompt_tokens": 100, "completion_tokens": fake.completion_tokens,
                         "total_tokens": 100 + fake.completion_tokens}
                if fake.usage_details:
                    usage["completion_tokens_details"] = fake.usage_details
                if fake.completion_tokens:  # 0: no usage at all, as llama-cpp-python's server sends
                    self._event({"choices": [], "usage": usage})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def _event(self, data: dict) -> None:
                chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake", **data}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()

            def _send(self, status: int, kind: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
