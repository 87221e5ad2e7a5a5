"""Initialization options: typed, with defaults; a bad value falls back to its default with a warning.

Editors send `initializationOptions` as JSON in camelCase, e.g.

    {"engine": {"kind": "embedded"}, "presets": ["Add docstrings", ...], "maxRewriteLines": 400}
"""
from __future__ import annotations

from dataclasses import dataclass, field

from rewriter.engine import DEFAULT_BRANCHES, PREFIX_CACHE_MB
from rewriter.next_edit.formats import FORMATS

ENGINE_KINDS = ("embedded", "service", "openai")
NEXT_EDIT_FORMATS = ("auto", *FORMATS)  # auto: the format the model's name calls for
STREAM_MODES = ("auto", "always", "never")

DEFAULT_PRESETS = (
    "Add docstrings",
    "Add type hints",
    "Simplify",
    "Fix the diagnostic here",
)
# The one preset whose instruction is built from the diagnostics in the code action's context.
DIAGNOSTIC_PRESET = "Fix the diagnostic here"


@dataclass
class EngineOptions:
    # embedded: the model in this process; service: our HTTP service; openai: any compatible endpoint
    kind: str = "embedded"
    model: str | None = None  # embedded: a path, hub id or .gguf (default: the embedded model); remote: the model name
    device: str | None = None  # embedded only: cpu, cuda, ...
    dtype: str = "auto"  # embedded only: auto (CPU: fastest as measured; GPU: bfloat16), or one of DTYPES
    url: str | None = None  # service / openai: the base URL
    api_key_env: str | None = None  # the name of the environment variable holding the API key
    timeout_s: float = 120.0
    prefix_cache_mb: int = PREFIX_CACHE_MB  # embedded only: what the caches of recent prompts may hold


@dataclass
class InitializationOptions:
    """The server's typed initializationOptions, each with its default."""

    engine: EngineOptions = field(default_factory=EngineOptions)
    presets: list[str] = field(default_factory=lambda: list(DEFAULT_PRESETS))
    max_rewrite_lines: int = 400  # refuse larger regions with a clear message
    # Send the whole file as context with a part when the file is at most this long; 0: never. Off by
    # default: the embedded 0.5B model tends to echo the context instead of editing the part.
    context_chars: int = 0
    max_new_tokens: int | None = None
    stream_edits: str = "auto"  # auto: stream when the client declares versioned document changes
    # Rewrites become proposals the user accepts or rejects hunk by hunk (docs/editors.md, the review
    # protocol); off: they are applied directly, for clients that show no review.
    review: bool = False
    # Embedded engine: compute the prompt of the open document (and of the code a code action was
    # asked for) in the background once the model is loaded, so that a rewrite prefills only its instruction.
    prefill_ahead: bool = True
    # An answer that comes back unchanged: branches to try where the model hesitated (edits/session.py).
    branches: int = DEFAULT_BRANCHES
    # Next-edit suggestions (textDocument/inlineCompletion, lsp/next_edits.py), in this format.
    next_edits: bool = True
    next_edit_format: str = "auto"
    # The model that suggests, in an engine of its own: `auto` the embedded 0.5B where the rewrites
    # get the default 1.5B (2.4x faster suggestions, as often right: docs/next-edit.md), `same` the
    # rewrites' engine, or a model (a path, hub id or .gguf) loaded in this process.
    next_edit_model: str = "auto"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _get(raw: dict, name: str):
    for key in (_camel(name), name):
        if key in raw:
            return True, raw[key]
    return False, None


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def parse_options(raw) -> tuple[InitializationOptions, list[str]]:
    """Options from the client's JSON, and a warning for every value that was ignored."""
    options = InitializationOptions()
    warnings: list[str] = []
    if raw is None:
        return options, warnings
    if not isinstance(raw, dict):
        return options, [f"initializationOptions must be an object, got {type(raw).__name__}; using defaults"]

    def bad(name: str, value, expected: str, default) -> None:
        warnings.append(f"{_camel(name)}: expected {expected}, got {value!r}; using the default {default!r}")

    found, engine = _get(raw, "engine")
    if found:
        if isinstance(engine, str):
            engine = {"kind": engine}
        if not isinstance(engine, dict):
            bad("engine", engine, "an object", "embedded")
        else:
            options.engine = _parse_engine(engine, warnings)

    found, presets = _get(raw, "presets")
    if found:
        if isinstance(presets, list) and presets and all(isinstance(p, str) and p.strip() for p in presets):
            options.presets = [p.strip() for p in presets]
        else:
            bad("presets", presets, "a non-empty list of instructions", options.presets)

    for name, least in (("max_rewrite_lines", 1), ("context_chars", 0), ("branches", 0)):
        found, value = _get(raw, name)
        if found:
            if isinstance(value, int) and not isinstance(value, bool) and value >= least:
                setattr(options, name, value)
            else:
                bad(name, value, f"an integer >= {least}", getattr(options, name))

    found, value = _get(raw, "max_new_tokens")
    if found and value is not None:
        if _positive_int(value):
            options.max_new_tokens = value
        else:
            bad("max_new_tokens", value, "a positive integer or null", None)

    for name, choices in (("stream_edits", STREAM_MODES), ("next_edit_format", NEXT_EDIT_FORMATS)):
        found, value = _get(raw, name)
        if found:
            if value in choices:
                setattr(options, name, value)
            else:
                bad(name, value, " or ".join(choices), getattr(options, name))

    found, value = _get(raw, "next_edit_model")
    if found:
        if isinstance(value, str) and value.strip():
            options.next_edit_model = value.strip()
        else:
            bad("next_edit_model", value, '"auto", "same" or a model', options.next_edit_model)

    for name in ("review", "prefill_ahead", "next_edits"):
        found, value = _get(raw, name)
        if found:
            if isinstance(value, bool):
                setattr(options, name, value)
            else:
                bad(name, value, "true or false", getattr(options, name))

    warnings.extend(_unknown_options(raw))
    return options, warnings


def _unknown_options(raw: dict) -> list[str]:
    """A warning for each key of `raw` that names no option, in camelCase or snake_case."""
    fields = InitializationOptions.__dataclass_fields__
    known = {_camel(n) for n in fields} | set(fields)
    return [f"unknown option {key!r} ignored" for key in raw if key not in known]


def _parse_engine(raw: dict, warnings: list[str]) -> EngineOptions:
    engine = EngineOptions()
    if not _set_choice(engine, raw, "kind", ENGINE_KINDS, warnings):
        return engine  # the other fields belong to an engine we are not using
    for name in ("model", "device", "url", "api_key_env"):
        found, value = _get(raw, name)
        if found and value is not None:
            if isinstance(value, str) and value.strip():
                setattr(engine, name, value.strip())
            else:
                warnings.append(f"engine.{_camel(name)}: expected a non-empty string, got {value!r}; ignored")
    from rewriter.results import DTYPES

    _set_choice(engine, raw, "dtype", DTYPES, warnings)
    found, value = _get(raw, "timeout_s")
    if found:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            engine.timeout_s = float(value)
        else:
            warnings.append(f"engine.timeoutS: expected a positive number, got {value!r}; using {engine.timeout_s}")
    found, value = _get(raw, "prefix_cache_mb")
    if found:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            engine.prefix_cache_mb = value
        else:
            warnings.append(f"engine.prefixCacheMb: expected an integer >= 0, got {value!r}; "
                            f"using {engine.prefix_cache_mb}")
    if engine.kind != "embedded" and not engine.url:
        warnings.append(f"engine.kind {engine.kind!r} needs engine.url; using the embedded model instead")
        return EngineOptions()
    return engine


def _set_choice(engine: EngineOptions, raw: dict, name: str, choices, warnings: list[str]) -> bool:
    """Set engine.<name> from raw when it is one of `choices`; another value keeps the default,
    with a warning, and answers False."""
    found, value = _get(raw, name)
    if found and value not in choices:
        warnings.append(f"engine.{_camel(name)}: expected one of {', '.join(choices)}, got {value!r}; "
                        f"using {getattr(engine, name)!r}")
        return False
    if found:
        setattr(engine, name, value)
    return True
