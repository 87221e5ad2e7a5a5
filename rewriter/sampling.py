"""Sampling settings shared by the CLI, the service and the decoder, validated in one place."""
from __future__ import annotations

from dataclasses import dataclass

from .verify import BlockVerifier, GreedyVerifier, LogitsShaper, TokenVerifier, Verifier


@dataclass(frozen=True)
class SamplingParams:
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
        if self.verification not in ("token", "block"):
            raise ValueError(f"verification must be 'token' or 'block', got {self.verification!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def make_verifier(params: SamplingParams) -> Verifier:
    """The verifier for one request's settings."""
    if params.greedy:
        return GreedyVerifier()
    verifier = TokenVerifier if params.verification == "token" else BlockVerifier
    return verifier(shaper(params), seed=params.seed)


def shaper(params: SamplingParams) -> LogitsShaper:
    """The sampling distribution these settings ask for (temperature > 0)."""
    return LogitsShaper(params.temperature, params.top_p, params.top_k)
