"""Draft with a small model that shares the target's tokenizer (e.g. 0.5B drafting for 1.5B).

The small model keeps its own KV cache of the tokens it has seen. Each proposal first brings
the cache in line with the real sequence: it drops what the verifier rejected (the cache is
cropped back to the longest shared prefix) and feeds what the target accepted or added, then
drafts token by token. Greedy requests get argmax drafts (one-hot, so greedy output is
unchanged); sampling requests get drafts sampled from the small model's shaped distribution,
with those distributions attached for the verifier.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from transformers import DynamicCache

from .base import Draft, Drafter, laplace

if TYPE_CHECKING:
    from transformers import PreTrainedModel


class TokenizerMismatch(ValueError):
    """The draft model cannot draft for the target: its tokens mean something else."""


def check_same_tokenizer(target_tokenizer, draft_tokenizer) -> None:
    """Refuse a draft model whose token ids do not mean the same text as the target's."""
    target_vocab = target_tokenizer.get_vocab()
    draft_vocab = draft_tokenizer.get_vocab()
    if target_vocab != draft_vocab:
        differing = sorted(set(target_vocab.items()) ^ set(draft_vocab.items()), key=lambda item: item[1])
        example = f"; e.g. token {differing[0][0]!r} = id {differing[0][1]} in only one of them" if differing else ""
        raise TokenizerMismatch(
            f"the draft model's tokenizer differs from the target model's ({len(draft_vocab)} vs "
            f"{len(target_vocab)} tokens{example}); a draft model must share the target's tokenizer"
        )
    if target_tokenizer.eos_token_id != draft_tokenizer.eos_token_id:
        raise TokenizerMismatch(
            f"the draft model's end-of-text token ({draft_tokenizer.eos_token_id}) differs from the "
            f"target's ({target_tokenizer.eos_token_id})"
        )


class DraftModelDrafter:
    name = "draft_model"

    def __init__(self, model: PreTrainedModel, shaper=None, seed: int | None = None,
                 vocab_size: int | None = None, start_length: int = 4, max_length: int = 16,
                 lookahead=None):
        """`shaper` (rewriter.decoding.verify.LogitsShaper) makes sampled drafts; None makes argmax drafts.

        `vocab_size` is the target's: ids past it are never drafted. `lookahead` (the decoder's
        rewriter.lookahead.Lookahead) says how many tokens the loop will verify, so the small
        model does not draft tokens that would be cut off unverified.
        """
        self.lookahead = lookahead
        self.model = model
        self.shaper = shaper
        self.device = next(model.parameters()).device
        self.vocab_size = vocab_size
        self.length = start_length  # adapted like transformers' assisted generation
        self.max_length = max_length
        self.successes = 3.0  # prior: small models of one family agree often
        self.failures = 1.0
        # A draft the loop dropped unverified (its window was 0): judged against what followed.
        self._unverified: tuple[int, list[int]] | None = None
        self.generator = torch.Generator(device=self.device)
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(seed + 1)  # not the verifier's stream
        self.cache: DynamicCache | None = None
        self.fed: list[int] = []  # the tokens whose keys and values are in the cache
        self.forward_passes = 0

    @property
    def acceptance(self) -> float:
        return laplace(self.successes, self.failures)

    @torch.inference_mode()
    def _forward(self, tokens: Sequence[int], cache: DynamicCache) -> torch.Tensor:
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
        logits = self.model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1).logits
        self.forward_passes += 1
        logits = logits[0, -1].float()
        return logits[: self.vocab_size] if self.vocab_size else logits

    def sync(self, tokens: Sequence[int]) -> torch.Tensor:
        """Bring the cache in line with `tokens`; the logits for the token after them."""
        shared = 0
        limit = min(len(self.fed), len(tokens) - 1)  # the last token is fed again for its logits
        while shared < limit and self.fed[shared] == tokens[shared]:
            shared += 1
        if self.cache is None or shared == 0:
            self.cache = DynamicCache(config=self.model.config)
        elif shared < len(self.fed):
            self.cache.crop(shared - len(self.fed))  # roll back what was rejected
        logits = self._forward(tokens[shared:], self.cache)
        self.fed = list(tokens)
        return logits

    def _pick(self, logits: torch.Tensor) -> tuple[int, torch.Tensor | None]:
        if self.shaper is None:
            return int(logits.argmax()), None
        probs = self.shaper.probs(logits)
        return int(torch.multinomial(probs, 1, generator=self.generator)), probs

    def _draft_length(self, tokens: Sequence[int], limit: int) -> int:
        """How many tokens to draft now (0: none), after learning from the last draft."""
        self._judge_unverified(tokens)
        count = min(limit, self.length)
        if count >= 1 and self.lookahead is not None:
            # At least one token: it costs no extra pass (the catch-up pass yields its logits)
            # and keeps the acceptance estimate learning.
            count = max(1, min(count, self.lookahead.window(self.acceptance, count, len(tokens))))
        return max(count, 0)

    def propose(self, tokens: Sequence[int], prompt_length: int, limit: int) -> Draft | None:
        count = self._draft_length(tokens, limit)
        if count < 1:
            return None
        logits = self.sync(tokens)
        drafted: list[int] = []
        rows: list[torch.Tensor] = []
        assert self.cache is not None  # sync made it
        while True:
            token, probs = self._pick(logits)
            drafted.append(token)
            if probs is not None:
                rows.append(probs)
            if len(drafted) == count:
                break
            logits = self._forward([token], self.cache)
            self.fed.append(token)
        self._unverified = (len(tokens), drafted)
        return Draft(drafted, acceptance=self.acceptance, source=self.name,
                     probs=torch.stack(rows) if rows else None)

    def _judge_unverified(self, tokens: Sequence[int]) -> None:
        """Learn from a draft the loop did not verify, so a low estimate can recover."""
        if self._unverified is None:
            return
        start, drafted = self._unverified
        self._unverified = None
        produced = list(tokens[start:start + len(drafted)])
        if not produced:
            return
        matched = 0
        while matched < len(produced) and produced[matched] == drafted[matched]:
            matched += 1
        self._learn(matched, min(len(drafted), len(produced)))

    def feedback(self, draft: Draft, accepted: int) -> None:
        self._unverified = None
        self._learn(accepted, len(draft.tokens))

    def _learn(self, accepted: int, drafted: int) -> None:
        self.successes = 0.9 * self.successes + accepted
        self.failures = 0.9 * self.failures + (accepted < drafted)
        if accepted == drafted:
            self.length = min(self.max_length, self.length + 2)
        else:
            self.length = max(1, self.length - 1)


class PredictionThenModelDrafter:
    """The prediction (and n-gram lookup) where it is trusted, the small model where it is not.

    The small model runs only on steps where the cheap drafter's draft is missing or less
    likely to be accepted than the small model's own record, so copying stays cheap.
    """

    name = "prediction+draft_model"

    def __init__(self, cheap, model_drafter: DraftModelDrafter):
        self.cheap = cheap
        self.model_drafter = model_drafter
        self._owner: Drafter | None = None

    def propose(self, tokens: Sequence[int], prompt_length: int, limit: int) -> Draft | None:
        draft = self.cheap.propose(tokens, prompt_length, limit)
        self._owner = self.cheap
        if draft is not None and draft.acceptance >= self.model_drafter.acceptance:
            return draft
        modelled = self.model_drafter.propose(tokens, prompt_length, limit)
        if modelled is None:
            return draft
        self._owner = self.model_drafter
        return modelled

    def feedback(self, draft: Draft, accepted: int) -> None:
        if self._owner is not None:
            self._owner.feedback(draft, accepted)
        self._owner = None
