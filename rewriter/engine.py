"""The engine interface: the one request every engine takes, and the Protocol engines implement.

An engine turns an `EditRequest` (the model's view of a span: its code, the file around it, the
instruction, sampling and budget) into a stream of `Progress` increments of the model's raw
answer, then one `RewriteResult`. The in-process model (decoding/rewrite.py), the remote client
(remote.py), the language server's lazily loaded model (lsp/engine_choice.py) and the tests'
scripted engines implement it; edits/session.py drives any of them. Torch-free on purpose.
"""
from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Protocol

from .results import Progress, RewriteError, RewriteResult

# What the prefix caches of recent requests may hold at once by default (a setting of every front
# end): about four 2,000-token files of the 1.5B model (its float32 keys and values take 57 KB a
# token), which a laptop with 8 GB can spare.
PREFIX_CACHE_MB = 512
# Branches an editor or `rewriter apply` tries after an answer comes back unchanged (edits/session.py;
# docs/benchmarks.md has what they cost and gain).
DEFAULT_BRANCHES = 4


def instruction_is_empty(instruction: str | None) -> bool:
    """Whether an instruction says nothing (missing or blank): every front end refuses it, each
    in its own words."""
    return not instruction or not instruction.strip()


def require_instruction(instruction: str | None) -> None:
    """An engine's refusal of an instruction that says nothing."""
    if instruction_is_empty(instruction):
        raise RewriteError("the instruction is empty")


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings shared by the CLI, the service and the decoder, validated in one place."""

    temperature: float = 0.0  # 0 means greedy decoding
    top_p: float = 1.0
    top_k: int = 0  # 0 means no top-k cut
    seed: int | None = None
    verification: str = "block"  # "token" or "block" (sampling only)

    def __post_init__(self):
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if self.seed is not None and not -2**63 <= self.seed < 2**64:
            raise ValueError(f"seed must fit in 64 bits (-2**63 to 2**64 - 1), got {self.seed}")
        if self.verification not in ("token", "block"):
            raise ValueError(f"verification must be 'token' or 'block', got {self.verification!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class Turn:
    """An earlier request of the same conversation: the code it was sent and its instruction. Its
    answer is the next turn's code; the last turn's answer is the request's own code."""

    code: str
    instruction: str


@dataclass(frozen=True)
class EditRequest:
    """One rewrite as the model sees it."""

    code: str  # the span's text (dedented: a method is rewritten as if it stood at the top level)
    instruction: str
    language: str = ""  # for the prompt's code fence; "" when unknown
    context: str | None = None  # the file around the span, the span included; None: the code is the file
    max_new_tokens: int | None = None  # None: the engine's own budget for the code's size
    sampling: SamplingParams | None = None  # None: greedy
    # A refine: the turns before this one; `code` is then the last turn's answer, asked to change again.
    conversation: tuple[Turn, ...] = ()


@dataclass(frozen=True)
class CompletionRequest:
    """A raw completion: the prompt decoded as it is, with no chat template (a next-edit model's
    format, /v1/completions). Without a prediction, the answer is drafted from the prompt."""

    prompt: str
    prediction: str | None = None  # the answer the model is expected to give, verified as the draft
    max_new_tokens: int | None = None  # None: the engine's own budget
    stop: tuple[str, ...] = ()  # the answer ends before the first of these
    sampling: SamplingParams | None = None  # None: greedy


class Engine(Protocol):
    """What every engine offers; front ends and the edit session know engines by this alone."""

    @property
    def concurrent(self) -> bool:
        """Two requests may run at once (a server queues them; one in-process model may not)."""

    @property
    def ready(self) -> bool:
        """load() has nothing left to do."""

    def load(self, say: Callable[[str], None]) -> None:
        """Get ready (load a model), reporting through `say`; at once when there is nothing to do."""

    def stream(self, request: EditRequest) -> Generator[Progress | RewriteResult, None, None]:
        """The answer's increments as they are accepted, then the result; RewriteError for a
        request it cannot serve (ContextTooLarge when the code does not fit). Closing the
        generator stops decoding at once."""

    def close(self) -> None:
        """Free what the engine holds (connections); it is not used afterwards."""
