"""Where the language server's rewrites come from: its `engine` options handed to the one engine
factory (rewriter/engine_factory.py): the model in this process (loaded once, lazily) or a remote
endpoint; or an engine factory of your own (REWRITER_ENGINE_FACTORY)."""
from __future__ import annotations

import importlib
import os

from rewriter.engine import Engine
from rewriter.engine_factory import EngineError, EngineSettings, api_key, build_engine

from .options import EngineOptions

__all__ = ["FACTORY_ENV", "EngineError", "make_engine"]

# "module:callable" returning an engine of your own (tests use it for a scripted engine)
FACTORY_ENV = "REWRITER_ENGINE_FACTORY"


def make_engine(options: EngineOptions) -> Engine:
    factory = os.environ.get(FACTORY_ENV)
    if factory:
        return _engine_from_factory(factory)
    if options.kind == "embedded":
        # An editor asks again and again about its open files: keep recent requests' caches (a
        # refine reuses its whole first turn, answer included), and those prefilled ahead.
        return build_engine(EngineSettings(model=options.model, device=options.device, dtype=options.dtype,
                                           lazy=True, prefix_cache=True, prefix_cache_mb=options.prefix_cache_mb))
    key = api_key(options.api_key_env, "engine.apiKeyEnv")
    if not options.url:
        raise EngineError(f"engine.kind {options.kind!r} needs engine.url")
    protocol = "rewriter" if options.kind == "service" else "openai"
    try:
        return build_engine(EngineSettings(url=options.url, model=options.model, api_key=key, protocol=protocol,
                                           timeout_s=options.timeout_s))
    except EngineError as error:  # the URL: the protocol is ours to name
        raise EngineError(f"engine.url: {error}") from error


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
