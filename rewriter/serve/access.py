"""Who the HTTP service answers: the API key (from a file or $REWRITER_API_KEY), the bearer token
a request sends, and the Host names served without a key (loopback, and --allowed-host)."""
from __future__ import annotations

import ipaddress
import os

API_KEY_ENV = "REWRITER_API_KEY"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_api_key(path: str | None = None) -> str | None:
    """The API key from a file (first line) or the REWRITER_API_KEY environment variable."""
    if path:
        with open(path, encoding="utf-8") as handle:
            key = handle.readline().strip()
        if not key:
            raise ValueError(f"the API key file {path} is empty")
        return key
    return os.environ.get(API_KEY_ENV, "").strip() or None  # blank is no key, not a key of spaces


def host_name(header: str) -> str:
    """The name in a Host header, without the port: `[::1]:8000` -> `::1`."""
    if header.startswith("["):
        return header[1:].partition("]")[0].lower()
    return header.rpartition(":")[0].lower() if header.count(":") == 1 else header.lower()


def bearer_token(header: str) -> str | None:
    """The credentials of an `Authorization: Bearer ...` header; the scheme is case-insensitive."""
    scheme, _, token = header.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None
