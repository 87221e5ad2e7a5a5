"""uvicorn's HTTP/1.1 protocol with a deadline on request headers.

uvicorn times out only idle keep-alive connections, and stops that timer at the first byte:
a client that opens a connection and sends nothing, or sends its headers a byte at a time
(slowloris), would hold the connection for ever. Here a connection waiting for a request's
headers is closed once `timeout_s` has passed since it started waiting. The body has its own
deadline where it is read (rewriter.serve.request_body.read_json).
"""
from __future__ import annotations

import asyncio

from uvicorn.protocols.http.h11_impl import H11Protocol


class HeaderDeadlineProtocol(H11Protocol):
    header_timeout_s = 30.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_deadline: asyncio.TimerHandle | None = None
        self._expect_headers()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._waiting_for_headers():
            self._expect_headers()
        elif self._header_deadline is not None:  # the headers are in
            self._header_deadline.cancel()
            self._header_deadline = None

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._expect_headers()  # the next request on this connection gets its own deadline

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
        super().connection_lost(exc)

    def _waiting_for_headers(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _expect_headers(self) -> None:
        if self._header_deadline is None and self._waiting_for_headers():
            self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _headers_late(self) -> None:
        self._header_deadline = None
        if self._waiting_for_headers() and not self.transport.is_closing():
            self.logger.info("closing a connection whose request headers took over %gs", self.header_timeout_s)
            self.transport.close()


def with_header_timeout(timeout_s: float) -> type[HeaderDeadlineProtocol]:
    """The protocol class for uvicorn.run(http=...), with this deadline."""
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), {"header_timeout_s": timeout_s})
