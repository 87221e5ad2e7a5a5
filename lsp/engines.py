"""Where the language server's rewrites come from: the in-process model (loaded once, lazily),
a remote endpoint, or an engine factory of your own (REWRITER_ENGINE_FACTORY). Each is an
Engine (rewriter/engine.py)."""
from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

from rewriter.engine import EditRequest, Engine
from rewriter.results import Progress, RewriteResult

from .options import EngineOptions

if TYPE_CHECKING:  # loaded lazily: the language server with a remote engine needs no torch
    from rewriter.decoding.rewrite import Rewriter

# "module:callable" returning an engine of your own (tests use it for a scripted engine)
FACTORY_ENV = "REWRITER_ENGINE_FACTORY"


class EngineError(RuntimeError):
    """The engine could not be set up; the message says why."""


class EmbeddedEngine:
    """The model in this process: loaded on first use, one rewrite at a time (a Decoder is not thread-safe)."""

    concurrent = False

    def __init__(self, model: str | None = None, device: str | None = None, dtype: str = "auto"):
        self.model_name = model
        self.device = device
        self.dtype = dtype
        self._rewriter: Rewriter | None = None
        self._load_lock = threading.Lock()

    @property
    def ready(self) -> bool:
        return self._rewriter is not None

    def load(self, say: Callable[[str], None]) -> None:
        with self._load_lock:
            if self._rewriter is not None:
                return
            from rewriter.decoding.rewrite import Rewriter
            from rewriter.weights.models import ModelError, hide_progress_bars, load_model

            hide_progress_bars(route_warnings=True)  # `say` reports the load through progress
            try:
                self._rewriter = Rewriter(load_model(self.model_name, device=self.device, dtype=self.dtype,
                                                      progress=say))
            except ModelError as error:
                raise EngineError(str(error)) from error

    def stream(self, request: EditRequest) -> Generator[Progress | RewriteResult, None, None]:
        if self._rewriter is None:
            self.load(lambda message: None)
        assert self._rewriter is not None
        return self._rewriter.stream(request)

    def close(self) -> None:
        """The model stays loaded as long as the server runs."""


def make_engine(options: EngineOptions) -> Engine:
    factory = os.environ.get(FACTORY_ENV)
    if factory:
        return _engine_from_factory(factory)
    if options.kind == "embedded":
        return EmbeddedEngine(options.model, options.device, options.dtype)
    return make_remote_engine(options)


def _engine_from_factory(spec: str) -> Engine:
    module_name, _, attribute = spec.partition(":")
    try:
        target: object = importlib.import_module(module_name)
        for name in attribute.split("."):
            target = getattr(target, name)
    except (ImportError, AttributeError, ValueError) as error:
        raise EngineError(f"{FACTORY_ENV}={spec!r}: {error}") from error
    if not callable(target):
        raise EngineError(f"{FACTORY_ENV}={spec!r} is not callable")
    return target()


def make_remote_engine(options: EngineOptions) -> Engine:
    """Our service (kind "service") or any OpenAI-compatible endpoint (kind "openai"), over HTTP."""
    from rewriter.serve.client import RemoteRewriter

    key = None
    if options.api_key_env:
        key = os.environ.get(options.api_key_env)
        if not key:
            raise EngineError(f"engine.apiKeyEnv names {options.api_key_env}, which is not set in the "
                              "language server's environment")
    if not options.url:
        raise EngineError(f"engine.kind {options.kind!r} needs engine.url")
    protocol = "rewriter" if options.kind == "service" else "openai"
    try:
        return RemoteRewriter(options.url, api_key=key, model=options.model, protocol=protocol,
                            timeout=options.timeout_s)
    except ValueError as error:
        raise EngineError(f"engine.url: {error}") from error
