"""Sampling: the verifier a request's settings pick, and draft-model drafters."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..engine import SamplingParams

if TYPE_CHECKING:  # the verifiers bring in torch; settings are checked without it
    from .verify import LogitsShaper, Verifier


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
    does not. `mjsd_tau` turns on MJSD, which CHANGES THE OUTPUT (see mjsd.py); it needs
    a draft model and greedy settings.
    """
    from drafters.draft_model import PredictionThenModelDrafter, check_same_tokenizer

    options: dict = {"sampling": params}
    if mjsd_tau is not None:
        from .mjsd import MJSDVerifier

        if draft_model is None:
            raise ValueError("MJSD needs a draft model (--draft-model)")
        if not params.greedy:
            raise ValueError("MJSD replaces sampling: use it with temperature 0")
        options["verifier"] = MJSDVerifier(mjsd_tau)
    if draft_model is None:
        return options
    check_same_tokenizer(rewriter.tokenizer, draft_model.tokenizer)

    def drafter(prediction: list[int]):
        small = model_drafter(rewriter, draft_model, params, beam=mjsd_tau is not None)
        return PredictionThenModelDrafter(rewriter.drafter(prediction), small)

    options["drafter"] = drafter
    return options


def model_drafter(rewriter, draft_model, params: SamplingParams, beam: bool = False):
    """A fresh drafter on the draft model for one request: it samples as `params` ask (greedy:
    its argmax), or with `beam` proposes the best beam of a short beam search (MJSD's)."""
    vocab_size = rewriter.loaded.model.config.vocab_size
    lookahead = getattr(getattr(rewriter, "decoder", None), "lookahead", None)
    if beam:
        from .mjsd import BeamDrafter

        return BeamDrafter(draft_model.model, vocab_size=vocab_size, lookahead=lookahead)
    from drafters.draft_model import DraftModelDrafter

    return DraftModelDrafter(draft_model.model, shaper=None if params.greedy else shaper(params),
                             seed=params.seed, vocab_size=vocab_size, lookahead=lookahead)

