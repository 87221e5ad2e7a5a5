"""Sampling settings shared by the CLI, the service and the decoder, validated in one place."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the verifiers bring in torch; settings are checked without it
    from .verify import LogitsShaper, Verifier


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
        if self.seed is not None and not -2**63 <= self.seed < 2**64:
            raise ValueError(f"seed must fit in 64 bits (-2**63 to 2**64 - 1), got {self.seed}")
        if self.verification not in ("token", "block"):
            raise ValueError(f"verification must be 'token' or 'block', got {self.verification!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def make_verifier(params: SamplingParams) -> Verifier:
    """The verifier for one request's settings."""
    from .verify import BlockVerifier, GreedyVerifier, TokenVerifier

    if params.greedy:
        return GreedyVerifier()
    verifier = TokenVerifier if params.verification == "token" else BlockVerifier
    return verifier(shaper(params), seed=params.seed)


def shaper(params: SamplingParams) -> LogitsShaper:
    """The sampling distribution these settings ask for (temperature > 0)."""
    from .verify import LogitsShaper

    return LogitsShaper(params.temperature, params.top_p, params.top_k)


def decoding_options(rewriter, params: SamplingParams, draft_model=None, mjsd_tau: float | None = None) -> dict:
    """Keyword arguments for Rewriter.stream: the verifier and drafter one request asks for.

    `draft_model` (a LoadedModel sharing the target's tokenizer) drafts where the prediction
    does not. `mjsd_tau` turns on MJSD, which CHANGES THE OUTPUT (see rewriter.decoding.mjsd); it needs
    a draft model and greedy settings.
    """
    from drafters.draft_model import DraftModelDrafter, PredictionThenModelDrafter, check_same_tokenizer

    options: dict = {"sampling": params}
    if mjsd_tau is not None:
        from .mjsd import BeamDrafter, MJSDVerifier

        if draft_model is None:
            raise ValueError("MJSD needs a draft model (--draft-model)")
        if not params.greedy:
            raise ValueError("MJSD replaces sampling: use it with temperature 0")
        options["verifier"] = MJSDVerifier(mjsd_tau)
    if draft_model is None:
        return options
    check_same_tokenizer(rewriter.tokenizer, draft_model.tokenizer)
    vocab_size = rewriter.loaded.model.config.vocab_size
    lookahead = getattr(getattr(rewriter, "decoder", None), "lookahead", None)

    def drafter(prediction: list[int]):
        small: DraftModelDrafter
        if mjsd_tau is not None:
            small = BeamDrafter(draft_model.model, vocab_size=vocab_size, lookahead=lookahead)
        else:
            small = DraftModelDrafter(draft_model.model, shaper=None if params.greedy else shaper(params),
                                      seed=params.seed, vocab_size=vocab_size, lookahead=lookahead)
        return PredictionThenModelDrafter(rewriter.drafter(prediction), small)

    options["drafter"] = drafter
    return options


class ConfiguredEngine:
    """An engine whose every request decodes with the same options (the CLI's flags)."""

    def __init__(self, engine, options: dict):
        self.engine = engine
        self.options = options

    def stream(self, *args, **kwargs):
        return self.engine.stream(*args, **{**self.options, **kwargs})

    def rewrite(self, *args, **kwargs):
        return self.engine.rewrite(*args, **{**self.options, **kwargs})

    def __getattr__(self, name):
        return getattr(self.engine, name)
