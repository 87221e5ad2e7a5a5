"""Where the language server's rewrites come from: its `engine` options handed to the one engine
factory (rewriter/engine_factory.py): the model in this process (loaded once, lazily) or a remote
endpoint; or an engine factory of your own (REWRITER_ENGINE_FACTORY)."""
from __future__ import annotations

import dataclasses
import importlib
import os

from rewriter import CODER_1_5B_NAME, EMBEDDED_NAME
from rewriter.engine import Engine
from rewriter.engine_factory import (
    DEFAULT_MODEL_MEMORY,
    EngineError,
    EngineSettings,
    api_key,
    available_memory,
    build_engine,
    default_model,
)

from .options import EngineOptions, InitializationOptions

__all__ = ["FACTORY_ENV", "EngineError", "make_engine", "suggestion_engine_options"]

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


# What the 0.5B suggesting beside the 1.5B needs free besides the 1.5B's own start: its peak
# resident memory on a start from the cache (about 1.2 GB), with room to spare.
SUGGESTION_MODEL_MEMORY = 2 << 30


def suggestion_engine_options(options: InitializationOptions) -> EngineOptions | None:
    """The engine of next-edit suggestions (`nextEditModel`) where it is one of its own, in this
    process; None where the rewrites' engine suggests too.

    `auto`: the embedded 0.5B where the rewrites get the default 1.5B and the memory allows both
    (measured: suggestions 2.4x faster, as often right; docs/next-edit.md); elsewhere the rewrites'
    model (a model the user named, an endpoint, an engine factory's) suggests."""
    engine, chosen = options.engine, options.next_edit_model
    if chosen == "same" or chosen == engine.model and engine.kind == "embedded":
        return None
    if chosen == "auto":
        if engine.kind != "embedded" or engine.model is not None or os.environ.get(FACTORY_ENV):
            return None
        free = available_memory()
        if free is not None and free < DEFAULT_MODEL_MEMORY + SUGGESTION_MODEL_MEMORY:
            return None
        if default_model(lambda message: None) != CODER_1_5B_NAME:
            return None
        chosen = EMBEDDED_NAME
    return dataclasses.replace(engine, kind="embedded", model=chosen, url=None)


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
