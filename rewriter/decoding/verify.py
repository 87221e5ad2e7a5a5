"""Verifiers: given the model's logits over the last token and a draft, decide what to keep.

A verifier returns how many draft tokens are accepted and the token that follows them (the
model's own next token: the "extra token" every step yields). Sampling verifiers plug in here.
"""
from __future__ import annotations

from typing import Protocol

import torch

from drafters.base import Draft


class Verifier(Protocol):
    def first_token(self, logits: torch.Tensor) -> int:
        """The next token from the logits of one position (after the prompt)."""

    def verify(self, logits: torch.Tensor, draft: Draft) -> tuple[int, int]:
        """`logits` has len(draft.tokens) + 1 rows; returns (accepted count, next token)."""


class GreedyVerifier:
    """Accept the longest draft prefix that equals the model's argmax: output is exactly greedy."""

    def first_token(self, logits: torch.Tensor) -> int:
        return int(logits.argmax(-1))

    def verify(self, logits: torch.Tensor, draft: Draft) -> tuple[int, int]:
        choices = logits.argmax(-1).tolist()
        accepted = 0
        for drafted, chosen in zip(draft.tokens, choices):
            if drafted != chosen:
                break
            accepted += 1
        return accepted, choices[accepted]


class LogitsShaper:
    """Turns logits into the sampling distribution: temperature, then top-k, then top-p.

    Verification compares draft tokens against this shaped distribution, so sampling with
    drafts gives exactly the distribution of plain sampling with the same settings.
    """

    def __init__(self, temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0):
        if not temperature > 0:
            raise ValueError(f"a sampling distribution needs temperature > 0, got {temperature}")
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """Probabilities for each row of `logits` (float32, same shape)."""
        scores = logits.float() / self.temperature
        if self.top_k and self.top_k < scores.shape[-1]:
            kth = torch.topk(scores, self.top_k, dim=-1).values[..., -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        if self.top_p < 1.0:
            # The nucleus is nearly always among the few most likely tokens: sorting only those
            # is exact whenever they reach top_p, and much cheaper than sorting a whole vocabulary.
            ordered, order = probs.topk(min(probs.shape[-1], 1024), dim=-1)
            mass = ordered.cumsum(-1)
            if ordered.shape[-1] < probs.shape[-1] and not bool((mass[..., -1] >= self.top_p).all()):
                ordered, order = probs.sort(dim=-1, descending=True)
                mass = ordered.cumsum(-1)
            # Keep the smallest set of most likely tokens whose mass reaches top_p, and always the
            # most likely one: a tiny top_p rounds to 0 in float32 and would otherwise drop them all.
            drop = (mass - ordered) >= self.top_p
            drop[..., 0] = False
            ordered = ordered.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter_(-1, order, ordered)
            probs = probs / probs.sum(-1, keepdim=True)
        return probs


class _Sampler:
    """A request's source of randomness: seeded means reproducible."""

    def __init__(self, seed: int | None):
        self.seed = seed
        self._generators: dict[torch.device, torch.Generator] = {}

    def generator(self, device: torch.device) -> torch.Generator:
        generator = self._generators.get(device)
        if generator is None:
            generator = torch.Generator(device=device)
            if self.seed is None:
                generator.seed()
            else:
                generator.manual_seed(self.seed)
            self._generators[device] = generator
        return generator

    def uniform(self, device: torch.device) -> float:
        return float(torch.rand((), generator=self.generator(device), device=device))

    def choice(self, weights: torch.Tensor, fallback: torch.Tensor | None = None) -> int:
        """A token drawn with chance proportional to `weights` (or to `fallback` if they vanish)."""
        if not float(weights.sum()) > 0:
            # Only rounding leaves a residual with no mass; the target distribution is then the answer.
            weights = fallback if fallback is not None else torch.ones_like(weights)
        return int(torch.multinomial(weights, 1, generator=self.generator(weights.device)))


def draft_rows(draft: Draft, count: int, vocab: int, device: torch.device) -> torch.Tensor | None:
    """The first `count` draft distributions as a (count, vocab) tensor, or None for one-hot drafts.

    The loop may shorten draft.tokens after the drafter filled draft.probs, so only the first
    rows belong to the draft that is verified.
    """
    if draft.probs is None:
        return None
    rows = draft.probs[:count]
    rows = torch.stack(list(rows)) if not isinstance(rows, torch.Tensor) else rows
    rows = rows.to(device=device, dtype=torch.float32)
    if rows.shape[-1] < vocab:  # a draft model with a smaller embedding table
        rows = torch.nn.functional.pad(rows, (0, vocab - rows.shape[-1]))
    return rows[:, :vocab]


class _SamplingVerifier:
    """Shared by the sampling verifiers: a shaped target distribution and a seeded sampler."""

    def __init__(self, shaper: LogitsShaper, seed: int | None = None):
        self.shaper = shaper
        self.sampler = _Sampler(seed)

    def first_token(self, logits: torch.Tensor) -> int:
        return self.sampler.choice(self.shaper.probs(logits))


class TokenVerifier(_SamplingVerifier):
    """Speculative sampling (Leviathan et al.; Chen et al.): each token kept with chance min(1, p/q).

    On the first rejection the next token comes from the normalised residual max(p - q, 0),
    which makes every output token distributed exactly as in plain sampling from p.
    One-hot drafts (prediction, n-gram) have q = 1 on the drafted token.
    """

    def verify(self, logits: torch.Tensor, draft: Draft) -> tuple[int, int]:
        count = len(draft.tokens)
        p = self.shaper.probs(logits[: count + 1])
        q = draft_rows(draft, count, p.shape[-1], p.device)
        for i, token in enumerate(draft.tokens):
            p_token = float(p[i, token])
            q_token = 1.0 if q is None else float(q[i, token])
            if q_token > 0 and self.sampler.uniform(p.device) * q_token < p_token:
                continue
            if q is None:
                residual = p[i].clone()
                residual[token] = 0.0
            else:
                residual = (p[i] - q[i]).clamp_(min=0.0)
            return i, self.sampler.choice(residual, p[i])
        return count, self.sampler.choice(p[count])


class BlockVerifier(_SamplingVerifier):
    """Block verification (Sun et al., 2024): judges the draft as a whole, never worse than tokens.

    With w_0 = 1 and w_i = min(1, w_{i-1} p_i(X_i) / q_i(X_i)), prefix i is kept with the
    chance h_i = R_i / (R_i + 1 - w_i), R_i = sum_x max(w_i p_{i+1}(x) - q_{i+1}(x), 0), and
    h_gamma = w_gamma; the accepted length is the largest i whose uniform draw is <= h_i. The
    next token comes from p_{gamma+1} if all were kept, else from the normalised residual
    max(w_tau p_{tau+1} - q_{tau+1}, 0). The output distribution is exactly plain sampling's.
    """

    def verify(self, logits: torch.Tensor, draft: Draft) -> tuple[int, int]:
        gamma = len(draft.tokens)
        p = self.shaper.probs(logits[: gamma + 1])
        q = draft_rows(draft, gamma, p.shape[-1], p.device)
        tokens = torch.tensor(draft.tokens, device=p.device)
        positions = torch.arange(gamma, device=p.device)
        p_drafted = p[positions, tokens].double().tolist()
        q_drafted = [1.0] * gamma if q is None else q[positions, tokens].double().tolist()

        weights = [1.0]  # w_0 .. w_gamma
        for p_token, q_token in zip(p_drafted, q_drafted):
            ratio = p_token / q_token if q_token > 0 else 0.0
            weights.append(min(1.0, weights[-1] * ratio))

        accepted = 0
        for i in range(1, gamma + 1):
            if i < gamma:
                w = weights[i]
                if q is None:
                    # q_{i+1} is one-hot on X_{i+1} and w p <= 1, so only the other tokens count.
                    residual_mass = w * (1.0 - p_drafted[i])
                else:
                    residual_mass = float((w * p[i] - q[i]).clamp_(min=0.0).double().sum())
                denominator = residual_mass + 1.0 - w
                h = residual_mass / denominator if denominator > 1e-12 else 1.0
            else:
                h = weights[gamma]
            if self.sampler.uniform(p.device) <= h:
                accepted = i

        if accepted == gamma:
            return gamma, self.sampler.choice(p[gamma])
        w = weights[accepted]
        if q is None:
            residual = w * p[accepted]
            residual[draft.tokens[accepted]] = 0.0  # max(w p - 1, 0) = 0 there
        else:
            residual = (w * p[accepted] - q[accepted]).clamp_(min=0.0)
        return accepted, self.sampler.choice(residual, p[accepted])
