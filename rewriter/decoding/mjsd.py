"""MJSD (multi-token joint speculative decoding): a quality mode that CHANGES THE OUTPUT.

The draft model proposes the best sequence of a short beam search; the target keeps the
longest prefix whose joint likelihood ratio min(1, p(x_1:j) / q(x_1:j)) reaches tau, then adds
its own greedy token. The answer is neither greedy decoding's nor a sample from the target,
so this is never a default: it is an explicit opt-in wherever it is offered.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from drafters.base import Draft
from drafters.draft_model import DraftModelDrafter

if TYPE_CHECKING:
    from transformers import PreTrainedModel

WARNING = ("MJSD changes the output: the answer is not the one plain decoding would give "
           "(it aims at a higher joint likelihood, a draft model's beam search judged by the target)")


@dataclass
class BeamDraft(Draft):
    # q(x_i | x_<i) of each drafted token under the draft model, for the joint ratio.
    token_q: list[float] = field(default_factory=list)


class BeamDrafter(DraftModelDrafter):
    """Drafts the best beam of a short beam search with the draft model."""

    name = "draft_model_beam"

    def __init__(self, model: PreTrainedModel, beams: int = 4, **options):
        super().__init__(model, shaper=None, **options)
        self.beams = beams

    @torch.inference_mode()
    def propose(self, tokens: Sequence[int], prompt_length: int, limit: int) -> Draft | None:
        count = self._draft_length(tokens, limit)
        if count < 1:
            return None
        first = torch.log_softmax(self.sync(tokens), -1)
        scores, sequences = first.topk(self.beams)  # (beams,), (beams,)
        sequences = sequences[:, None]
        steps = first.expand(self.beams, -1).gather(1, sequences)  # per-token log q
        if count > 1:
            # The beams share the context's cache; a private copy grows along them.
            assert self.cache is not None  # sync made it
            cache = copy.deepcopy(self.cache)
            cache.batch_repeat_interleave(self.beams)
            for _ in range(count - 1):
                ids = sequences[:, -1:].to(self.device)
                logits = self.model(input_ids=ids, cache=cache, use_cache=True).logits[:, -1].float()
                self.forward_passes += 1
                if self.vocab_size:
                    logits = logits[:, : self.vocab_size]
                logq = torch.log_softmax(logits, -1)
                total = (scores[:, None] + logq).flatten()
                scores, flat = total.topk(self.beams)
                origin = flat // logq.shape[-1]
                token = flat % logq.shape[-1]
                steps = torch.cat([steps[origin], logq[origin, token][:, None]], 1)
                sequences = torch.cat([sequences[origin], token[:, None]], 1)
                cache.reorder_cache(origin.to(self.device))  # type: ignore[arg-type]  # a long tensor
        best = int(scores.argmax())
        self._unverified = (len(tokens), sequences[best].tolist())
        return BeamDraft(sequences[best].tolist(), acceptance=self.acceptance, source=self.name,
                         token_q=steps[best].exp().tolist())


class MJSDVerifier:
    """Keeps the longest draft prefix whose joint ratio min(1, p(x_1:j)/q(x_1:j)) is >= tau.

    p is the target's unshaped distribution; q = 1 for one-hot drafts (prediction, n-gram).
    The token after the kept prefix is the target's argmax, so with nothing kept a step is
    a greedy step.
    """

    def __init__(self, tau: float = 0.5):
        if not 0 < tau <= 1:
            raise ValueError(f"MJSD's tau must be in (0, 1], got {tau}")
        self.log_tau = math.log(tau)

    def first_token(self, logits: torch.Tensor) -> int:
        return int(logits.argmax(-1))

    def verify(self, logits: torch.Tensor, draft: Draft) -> tuple[int, int]:
        count = len(draft.tokens)
        logp = torch.log_softmax(logits[: count + 1].float(), -1)
        drafted = torch.tensor(draft.tokens, device=logp.device)
        token_logp = logp[torch.arange(count, device=logp.device), drafted].double().tolist()
        token_q = getattr(draft, "token_q", None) or [1.0] * count
        accepted, log_ratio = 0, 0.0
        for j in range(count):
            log_ratio += token_logp[j] - math.log(max(token_q[j], 1e-300))
            if min(0.0, log_ratio) >= self.log_tau:
                accepted = j + 1
        return accepted, int(logp[accepted].argmax())
