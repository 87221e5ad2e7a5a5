"""Sampling verifiers keep the target's distribution exactly, whatever the draft.

Statistical tests: tiny models with an 8-token vocabulary, continuations of 3 tokens, so the
exact probability of each of the 512 continuations is known by enumeration. A chi-square test
at false-alarm rate ALPHA = 0.001 compares sampled counts with it (cells with fewer than 5
expected samples pooled). Seeds are fixed, so each test is deterministic; a correct verifier
fails one with chance 0.1% per seed choice. The same test catches a classic bug (resampling
from p instead of the residual after a rejection), so it can fail.
"""
from __future__ import annotations

import pytest
import torch

from drafters.base import Draft
from rewriter.decoding.sampling import SamplingParams, make_verifier, shaper
from rewriter.decoding.verify import BlockVerifier, GreedyVerifier, LogitsShaper, TokenVerifier
from tests.helpers.sampling import (
    ALPHA,
    TARGET_SEED,
    DraftSource,
    chi_square_p_value,
    exact_distribution,
    logits_table,
    peaky_model,
    sample_with_verifier,
)

TRIALS = 6000


class ResampleFromTarget(TokenVerifier):
    """A known-wrong verifier: after a rejection it samples from p, not the residual."""

    def verify(self, logits, draft):
        p = self.shaper.probs(logits[: len(draft.tokens) + 1])
        for i, token in enumerate(draft.tokens):
            if self.sampler.uniform(p.device) >= float(p[i, token]):
                return i, self.sampler.choice(p[i])
        return len(draft.tokens), self.sampler.choice(p[-1])


SHAPES = {
    "plain": LogitsShaper(1.0),
    "shaped": LogitsShaper(temperature=0.8, top_p=0.9, top_k=5),
}


@pytest.fixture(scope="module")
def target_table():
    return logits_table(peaky_model(seed=TARGET_SEED))


@pytest.mark.parametrize("verifier_class", [TokenVerifier, BlockVerifier])
@pytest.mark.parametrize("draft_kind", ["one-hot", "model"])
@pytest.mark.parametrize("shape_name", ["plain", "shaped"])
def test_verified_sampling_has_the_target_distribution(target_table, verifier_class, draft_kind, shape_name):
    shape = SHAPES[shape_name]
    generator = torch.Generator().manual_seed(1234)
    drafts = DraftSource(draft_kind, shape, generator)
    verifier = verifier_class(shape, seed=5678)
    counts, mean_accepted = sample_with_verifier(verifier, target_table, shape, drafts, TRIALS, generator)
    p_value = chi_square_p_value(counts, exact_distribution(target_table, shape))
    assert p_value > ALPHA, f"distribution differs from the target's (p = {p_value:.2g})"
    assert mean_accepted > 0.2  # the drafts were really used, not all rejected


def test_the_distribution_test_catches_a_wrong_verifier(target_table):
    shape = SHAPES["plain"]
    generator = torch.Generator().manual_seed(1234)
    drafts = DraftSource("one-hot", shape, generator)
    counts, _ = sample_with_verifier(ResampleFromTarget(shape, seed=5678), target_table, shape, drafts,
                                     TRIALS, generator)
    assert chi_square_p_value(counts, exact_distribution(target_table, shape)) < ALPHA


def test_block_verification_accepts_at_least_as_much_as_token_verification():
    """On the same drafts, over many target/draft pairs, the mean accepted length is never lower."""
    shape = SHAPES["plain"]
    token_means, block_means = [], []
    for seed in range(12):
        table = logits_table(peaky_model(seed=seed, sharpness=2.0), depth=4)
        generator = torch.Generator().manual_seed(seed)
        drafts = DraftSource("model", shape, generator, length=3, target_seed=seed)
        drafted = [drafts() for _ in range(400)]
        means = []
        for verifier in (TokenVerifier(shape, seed=seed), BlockVerifier(shape, seed=seed)):
            accepted = []
            for draft in drafted:
                logits = torch.stack([table[tuple(draft.tokens[:i])] for i in range(len(draft.tokens) + 1)])
                accepted.append(verifier.verify(logits, draft)[0])
            means.append(torch.tensor(accepted, dtype=torch.float64))
        token, block = means
        difference = block - token
        standard_error = float(difference.std() / len(drafted) ** 0.5) + 1e-9
        # Never significantly below, seed by seed.
        assert float(difference.mean()) > -3 * standard_error, f"seed {seed}: block {block.mean()}, token {token.mean()}"
        token_means.append(float(token.mean()))
        block_means.append(float(block.mean()))
    assert sum(block_means) > sum(token_means)  # and better on the whole


def test_greedy_settings_give_the_greedy_verifier():
    assert isinstance(make_verifier(SamplingParams()), GreedyVerifier)
    assert isinstance(make_verifier(SamplingParams(temperature=0.7, verification="token")), TokenVerifier)
    assert isinstance(make_verifier(SamplingParams(temperature=0.7)), BlockVerifier)  # block by default


@pytest.mark.parametrize("settings, message", [
    ({"temperature": -0.1}, "temperature"),
    ({"temperature": float("nan")}, "temperature"),
    ({"top_p": 0.0}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"top_k": -1}, "top_k"),
    ({"verification": "tree"}, "verification"),
    ({"temperature": 1.0, "seed": 2**80}, "seed"),
    ({"temperature": 1.0, "seed": -2**63 - 1}, "seed"),
])
def test_invalid_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        SamplingParams(**settings)


def test_shaping_cuts_top_k_and_top_p():
    logits = torch.log(torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05]))
    top_k = shaper(SamplingParams(temperature=1.0, top_k=2)).probs(logits)
    assert torch.allclose(top_k, torch.tensor([5 / 7, 2 / 7, 0, 0, 0]))
    top_p = shaper(SamplingParams(temperature=1.0, top_p=0.8)).probs(logits)
    assert torch.allclose(top_p, torch.tensor([0.5, 0.2, 0.15, 0, 0]) / 0.85)
    cold = shaper(SamplingParams(temperature=0.5)).probs(logits)
    assert torch.allclose(cold, torch.softmax(logits / 0.5, -1))


def test_a_vanishing_top_p_keeps_the_most_likely_token():
    # 1e-46 rounds to 0 in float32: every token would be cut and the distribution be NaN.
    logits = torch.log(torch.tensor([[0.1, 0.6, 0.3], [0.7, 0.2, 0.1]]))
    probs = shaper(SamplingParams(temperature=1.0, top_p=1e-46)).probs(logits)
    assert torch.equal(probs, torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))
    verifier = make_verifier(SamplingParams(temperature=1.0, top_p=1e-46, seed=3))
    assert [verifier.first_token(logits[0]) for _ in range(20)] == [1] * 20


def test_the_largest_64_bit_seeds_are_accepted():
    for seed in (2**64 - 1, -2**63):
        verifier = make_verifier(SamplingParams(temperature=1.0, seed=seed))
        assert verifier.first_token(torch.zeros(4)) in range(4)


def test_a_seed_makes_sampling_reproducible(target_table):
    draft = Draft([1, 2], acceptance=0.5, source="prediction")
    logits = torch.stack([target_table[()], target_table[(1,)], target_table[(1, 2)]])

    def run(seed):
        verifier = make_verifier(SamplingParams(temperature=1.0, seed=seed))
        return [verifier.verify(logits, draft) for _ in range(50)] + [verifier.first_token(logits[0]) for _ in range(50)]

    assert run(11) == run(11)
    assert run(11) != run(12)


@pytest.mark.parametrize("flags, message", [
    (["--temperature", "-1"], "temperature"),
    (["--top-p", "0"], "top_p"),
    (["--top-p", "1.01"], "top_p"),
    (["--top-k", "-3"], "top_k"),
    (["--mjsd"], "--draft-model"),
    (["--mjsd", "0.3", "--draft-model", "embedded", "--temperature", "0.7"], "temperature"),
])
def test_the_cli_refuses_bad_settings_before_loading_a_model(tmp_path, capsys, flags, message):
    from rewriter.cli import main

    source = tmp_path / "a.py"
    source.write_text("x = 1\n")
    assert main(["apply", str(source), "-i", "rename x", "--model", str(tmp_path / "no-model"), *flags]) == 2
    assert message in capsys.readouterr().err
    assert source.read_text() == "x = 1\n"


@pytest.mark.parametrize("spread", [0.5, 8.0])  # flat: the nucleus is past the first 1024 tokens
def test_top_p_on_a_large_vocabulary_matches_a_full_sort(spread):
    logits = torch.randn(3, 5000, generator=torch.Generator().manual_seed(0)) * spread
    fast = LogitsShaper(1.0, top_p=0.9).probs(logits)
    probs = torch.softmax(logits, -1)
    ordered, order = probs.sort(dim=-1, descending=True)
    kept = ordered.masked_fill(ordered.cumsum(-1) - ordered >= 0.9, 0.0)
    reference = torch.zeros_like(probs).scatter_(-1, order, kept)
    assert torch.allclose(fast, reference / reference.sum(-1, keepdim=True), atol=1e-6)
