"""What a rewrite produces, shared by every engine: stats, streamed progress, the result.

Torch-free on purpose: the remote engine (rewriter.remote), the language server and
`rewriter apply --endpoint` use these without loading a model stack.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass


class RewriteError(ValueError):
    """A request that cannot be served as given; the message says why."""


class ContextTooLarge(RewriteError):
    """The code (with its context) does not fit the model's context; a smaller part may."""


class UnsupportedSampling(RewriteError):
    """Sampling settings an engine cannot honour (an endpoint's API has no word for them)."""


class ServiceError(RuntimeError):
    """A remote endpoint refused or failed a request; `status` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0, code: str | None = None,
                 retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.retry_after = retry_after


class ModelError(RuntimeError):
    """A model could not be found, verified or loaded; the message says why."""


# What a local model's weights may run in (auto: on a CPU the fastest of float32 and the int8 paths
# as measured on the machine, see rewriter/weights/cpu_choice.py; bfloat16 on a GPU). Here so
# that front ends can offer the choice without loading torch.
DTYPES = ("auto", "float32", "bfloat16", "float16", "int8", "int8-bf16", "int8-fbgemm")


@dataclass
class Stats:
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0  # prompt tokens whose KV cache was reused from an earlier request
    output_tokens: int = 0
    forward_passes: int = 0
    accepted_prediction_tokens: int = 0  # drafted from the prediction and accepted
    rejected_prediction_tokens: int = 0  # drafted from the prediction and rejected
    accepted_draft_tokens: int = 0  # from any drafter
    rejected_draft_tokens: int = 0
    prefill_s: float = 0.0
    ttft_s: float = 0.0
    total_s: float = 0.0
    finish_reason: str = ""
    # Characters of answer dropped because they copied the file after the span (answer.echo_scan).
    echo_dropped_chars: int = 0

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.total_s if self.total_s else 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "tokens_per_s": self.tokens_per_s}


@dataclass
class RewriteResult:
    text: str  # the edited code, in the original's line endings
    answer: str  # the model's raw answer
    stats: Stats
    mean_log_prob: float | None = None  # a branch's, from its branch point on (decoding/branches.py)


@dataclass
class Progress:
    """A streamed increment of the model's answer."""

    text: str
    stats: Stats


@dataclass
class Completion:
    """A prompt's whole answer, as the model wrote it (a next-edit suggestion's, say)."""

    text: str
    stats: Stats
    stopped: bool = False  # given up midway because the caller said so: `text` is not an answer
