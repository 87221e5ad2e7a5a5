"""The draft-model drafter: exact under greedy, the target's distribution under sampling,
a KV cache that follows rejections, and MJSD (an opt-in mode that changes the output)."""
from __future__ import annotations

import copy
import itertools
import random
from collections import Counter

import pytest
import torch

from drafters import CombinedDrafter, PredictionDrafter, PromptLookupDrafter
from drafters.draft_model import DraftModelDrafter, PredictionThenModelDrafter, TokenizerMismatch, check_same_tokenizer
from rewriter.decoding.decode import Decoder
from rewriter.decoding.mjsd import BeamDraft, BeamDrafter, MJSDVerifier
from rewriter.decoding.sampling import SamplingParams, make_verifier, shaper
from rewriter.lookahead import Lookahead
from tests.helpers.models import CharTokenizer, greedy_reference, tiny_model

# one_thread is test_sampling's autouse fixture: imported, it applies here too.
from tests.helpers.sampling import (
    ALPHA,
    PROMPT,
    VOCAB,
    chi_square_p_value,
    exact_distribution,
    logits_table,
    one_thread,  # noqa: F401
    peaky_model,
)


class NoEosTokenizer(CharTokenizer):
    def __init__(self):
        super().__init__(eos_token_id=None)


class FullWindow(Lookahead):
    """Verify every drafted token, so the tests exercise long drafts."""

    def window(self, acceptance: float, available: int, context: int = 0) -> int:
        return available


def noisy_copy(model, scale: float, seed: int = 0):
    """A draft model that mostly agrees with the target, as a small model of its family does."""
    draft = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        draft.lm_head.weight.add_(scale * torch.randn(draft.lm_head.weight.shape, generator=generator))
    return draft


def decode(decoder, prompt, drafter, max_new_tokens, verifier=None):
    tokens = []
    for step in decoder.generate(prompt, drafter, max_new_tokens, verifier=verifier):
        tokens.extend(step.tokens)
    return tokens


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("draft_kind", ["similar", "unrelated"])
def test_greedy_output_is_unchanged_with_a_draft_model(seed, draft_kind):
    target = tiny_model(seed=seed, eos_token_id=255)
    draft = noisy_copy(target, 0.05, seed) if draft_kind == "similar" else tiny_model(seed=seed + 50, eos_token_id=255)
    rng = random.Random(seed)
    prompt = [rng.randrange(1, 255) for _ in range(24)]
    reference = greedy_reference(target, prompt, 80)
    decoder = Decoder(target, NoEosTokenizer(), lookahead=FullWindow())
    tokens = []
    for step in decoder.generate(prompt, DraftModelDrafter(draft), 80):
        tokens.extend(step.tokens)
        stats = step.stats
    assert tokens == reference
    if draft_kind == "similar":
        assert stats.accepted_draft_tokens > 40


def test_greedy_output_is_unchanged_with_prediction_then_draft_model():
    target = tiny_model(seed=3, eos_token_id=255)
    prompt = list(range(10, 40))
    reference = greedy_reference(target, prompt, 90)
    prediction = reference[:30] + [7, 7, 7] + reference[40:]  # an edit the prediction lacks
    drafter = PredictionThenModelDrafter(CombinedDrafter(PredictionDrafter(prediction), PromptLookupDrafter()),
                                         DraftModelDrafter(noisy_copy(target, 0.05)))
    decoder = Decoder(target, NoEosTokenizer(), lookahead=FullWindow())
    tokens = []
    for step in decoder.generate(prompt, drafter, 90):
        tokens.extend(step.tokens)
        stats = step.stats
    assert tokens == reference
    assert stats.accepted_prediction_tokens > 40  # the prediction did the copying
    assert stats.accepted_draft_tokens > stats.accepted_prediction_tokens  # the model filled the edit


class Recorder:
    """Wraps a draft-model drafter and checks each draft against cache-free greedy decoding."""

    def __init__(self, drafter: DraftModelDrafter, model):
        self.drafter = drafter
        self.model = model
        self.name = drafter.name
        self.checked = 0

    def propose(self, tokens, prompt_length, limit):
        draft = self.drafter.propose(tokens, prompt_length, limit)
        if draft is not None:
            assert draft.tokens == greedy_reference(self.model, list(tokens), len(draft.tokens))
            self.checked += 1
        return draft

    def feedback(self, draft, accepted):
        self.drafter.feedback(draft, accepted)


def test_the_draft_models_cache_follows_rejections():
    target = tiny_model(seed=4, eos_token_id=255)
    draft_model = tiny_model(seed=5, eos_token_id=255)  # disagrees often: many rollbacks
    recorder = Recorder(DraftModelDrafter(draft_model), draft_model)
    decoder = Decoder(target, NoEosTokenizer(), lookahead=FullWindow())
    for step in decoder.generate(list(range(1, 20)), recorder, 60):
        stats = step.stats
    assert recorder.checked > 10 and stats.rejected_draft_tokens > 10


def test_a_draft_model_with_another_tokenizer_is_refused():
    class Vocab:
        eos_token_id = 0

        def __init__(self, vocab):
            self.vocab = vocab

        def get_vocab(self):
            return dict(self.vocab)

    check_same_tokenizer(Vocab({"a": 0, "b": 1}), Vocab({"a": 0, "b": 1}))
    with pytest.raises(TokenizerMismatch, match="tokenizer differs"):
        check_same_tokenizer(Vocab({"a": 0, "b": 1}), Vocab({"a": 0, "c": 1}))
    with pytest.raises(TokenizerMismatch, match="tokenizer differs"):
        check_same_tokenizer(Vocab({"a": 0, "b": 1}), Vocab({"a": 0, "b": 1, "c": 2}))
    other_eos = Vocab({"a": 0, "b": 1})
    other_eos.eos_token_id = 1
    with pytest.raises(TokenizerMismatch, match="end-of-text"):
        check_same_tokenizer(Vocab({"a": 0, "b": 1}), other_eos)


@pytest.mark.parametrize("verification, drafts", [("block", "model"), ("token", "prediction")])
def test_sampling_through_the_decoder_has_the_target_distribution(verification, drafts):
    """End to end: 4 tokens sampled (a 2-token draft verified at the second step); the first 3 compared."""
    target = peaky_model(seed=7)
    params = SamplingParams(temperature=0.9, top_k=6, verification=verification)
    shape = shaper(params)
    exact = exact_distribution(logits_table(target), shape)
    decoder = Decoder(target, NoEosTokenizer(), lookahead=FullWindow())
    draft_model = noisy_copy(target, 1.0)
    prediction = greedy_reference(target, PROMPT, 6)  # as a file the answer mostly copies
    counts: Counter = Counter()
    accepted = 0
    for trial in range(1500):
        if drafts == "model":
            drafter = DraftModelDrafter(draft_model, shaper=shape, seed=trial, start_length=2)
        else:
            drafter = PredictionDrafter(prediction)
        verifier = make_verifier(SamplingParams(**{**params.__dict__, "seed": trial}))
        tokens = []
        for step in decoder.generate(PROMPT, drafter, 4, verifier=verifier):
            tokens.extend(step.tokens)
        accepted += step.stats.accepted_draft_tokens
        counts[tuple(tokens[:3])] += 1
    assert chi_square_p_value(counts, exact) > ALPHA
    assert accepted > 200  # drafts were used


def test_a_seed_makes_decoding_reproducible():
    target = peaky_model(seed=7)
    decoder = Decoder(target, NoEosTokenizer(), lookahead=FullWindow())

    def run(seed):
        params = SamplingParams(temperature=1.0, seed=seed)
        drafter = DraftModelDrafter(noisy_copy(target, 1.0), shaper=shaper(params), seed=seed)
        return decode(decoder, PROMPT, drafter, 30, make_verifier(params))

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_beam_drafts_are_the_draft_models_most_likely_sequence():
    draft_model = peaky_model(seed=8)
    q = logits_table(draft_model, depth=2)
    drafter = BeamDrafter(draft_model, beams=VOCAB, start_length=2)  # beams = vocab: exact for 2 tokens
    draft = drafter.propose(PROMPT, len(PROMPT), 2)

    def joint(pair):
        first = torch.softmax(q[()], -1)[pair[0]]
        return float(first * torch.softmax(q[(pair[0],)], -1)[pair[1]])

    best = max(itertools.product(range(VOCAB), repeat=2), key=joint)
    assert tuple(draft.tokens) == best
    assert draft.token_q[0] * draft.token_q[1] == pytest.approx(joint(best), rel=1e-4)


def test_mjsd_keeps_the_longest_prefix_whose_joint_ratio_reaches_tau():
    logits = torch.log(torch.tensor([
        [0.6, 0.3, 0.1],
        [0.2, 0.7, 0.1],
        [0.1, 0.1, 0.8],
        [0.5, 0.4, 0.1],
    ]))
    draft = BeamDraft([0, 0, 2], acceptance=0.5, source="draft_model_beam", token_q=[0.5, 0.5, 0.4])
    # Joint ratios: 1.2 -> 1, 0.48, 0.96: the longest prefix at or above tau = 0.5 is all three.
    assert MJSDVerifier(tau=0.5).verify(logits, draft) == (3, 0)
    # Above 0.96 only the first token qualifies; the target's argmax follows it.
    assert MJSDVerifier(tau=0.97).verify(logits, draft) == (1, 1)
    # One-hot drafts (q = 1): the target's own joint probability must reach tau.
    from drafters.base import Draft
    assert MJSDVerifier(tau=0.5).verify(logits, Draft([0, 1], 0.5, "prediction")) == (1, 1)


def test_mjsd_decodes_and_is_never_the_default():
    target = peaky_model(seed=7)
    decoder = Decoder(target, NoEosTokenizer())
    tokens = decode(decoder, PROMPT, BeamDrafter(noisy_copy(target, 0.5), beams=3), 20, MJSDVerifier(tau=0.3))
    assert len(tokens) == 20 and all(0 <= t < VOCAB for t in tokens)
    for params in (SamplingParams(), SamplingParams(temperature=1.0)):
        assert not isinstance(make_verifier(params), MJSDVerifier)
    with pytest.raises(ValueError, match="tau"):
        MJSDVerifier(tau=0)


def test_decoding_options_build_what_a_request_asks_for():
    from types import SimpleNamespace

    from rewriter.decoding.sampling import decoding_options
    from rewriter.decoding.verify import BlockVerifier
    from rewriter.engine import EditRequest
    from rewriter.engine_factory import ConfiguredEngine

    class Vocab:
        eos_token_id = 0

        def __init__(self, vocab):
            self.vocab = vocab

        def get_vocab(self):
            return self.vocab

    target = tiny_model(seed=1, vocab_size=VOCAB)
    rewriter = SimpleNamespace(tokenizer=Vocab({"a": 0, "b": 1}), loaded=SimpleNamespace(model=target),
                               drafter=lambda prediction: PredictionDrafter(prediction))
    draft = SimpleNamespace(model=tiny_model(seed=2, vocab_size=VOCAB), tokenizer=Vocab({"a": 0, "b": 1}))
    sampled = decoding_options(rewriter, SamplingParams(temperature=0.8, seed=1), draft)
    drafter = sampled["drafter"]([1, 2, 3])
    assert isinstance(drafter, PredictionThenModelDrafter)
    assert drafter.model_drafter.shaper is not None  # sampled drafts carry their distributions
    assert isinstance(make_verifier(sampled["sampling"]), BlockVerifier)
    mjsd = decoding_options(rewriter, SamplingParams(), draft, mjsd_tau=0.4)
    assert isinstance(mjsd["verifier"], MJSDVerifier)
    assert isinstance(mjsd["drafter"]([1, 2]).model_drafter, BeamDrafter)
    with pytest.raises(ValueError, match="draft model"):
        decoding_options(rewriter, SamplingParams(), None, mjsd_tau=0.4)
    with pytest.raises(ValueError, match="temperature 0"):
        decoding_options(rewriter, SamplingParams(temperature=1.0), draft, mjsd_tau=0.4)
    with pytest.raises(TokenizerMismatch):
        decoding_options(rewriter, SamplingParams(), SimpleNamespace(model=draft.model, tokenizer=Vocab({"x": 0})))

    calls = []
    engine = ConfiguredEngine(SimpleNamespace(stream=lambda request, **kwargs: calls.append((request, kwargs))),
                              {"sampling": 1})
    engine.stream(EditRequest("code", "do it", max_new_tokens=5))
    assert calls == [(EditRequest("code", "do it", max_new_tokens=5, sampling=1), {})]


@pytest.mark.real_model
def test_real_model_greedy_answer_is_unchanged_with_a_draft_model(embedded, embedded_rewriter):
    from rewriter.decoding.sampling import decoding_options

    code = "def add(a, b):\n    return a + b\n"
    plain = embedded_rewriter.rewrite(code, "Add a docstring", "python", max_new_tokens=40)
    # The embedded model drafting for itself: same tokenizer, so it must be accepted as a draft model.
    options = decoding_options(embedded_rewriter, SamplingParams(), embedded)
    drafted = embedded_rewriter.rewrite(code, "Add a docstring", "python", max_new_tokens=40, **options)
    assert drafted.answer == plain.answer
    assert drafted.stats.accepted_draft_tokens > 0


def test_a_draft_the_loop_did_not_verify_still_teaches_the_acceptance_estimate():
    model = tiny_model(seed=6, eos_token_id=255)
    drafter = DraftModelDrafter(model, start_length=4)
    prompt = list(range(1, 12))
    before = drafter.acceptance
    draft = drafter.propose(prompt, len(prompt), 4)  # dropped by the loop: no feedback
    drafter.propose(prompt + draft.tokens + [7], len(prompt), 4)  # the target agreed with all four
    assert drafter.acceptance > before
    worse = DraftModelDrafter(model, start_length=4)
    draft = worse.propose(prompt, len(prompt), 4)
    worse.propose(prompt + [(draft.tokens[0] + 1) % 256], len(prompt), 4)  # disagreed at once
    assert worse.acceptance < before


def test_the_small_model_drafts_only_what_the_loop_will_verify():
    class Window(Lookahead):
        def __init__(self, size):
            super().__init__()
            self.size = size

        def window(self, acceptance, available, context=0):
            return min(self.size, available)

    model = tiny_model(seed=6, eos_token_id=255)
    prompt = list(range(1, 12))
    assert len(DraftModelDrafter(model, start_length=6, lookahead=Window(2)).propose(prompt, 11, 8).tokens) == 2
    # A window of 0 still gets one token: it costs no extra pass and keeps the estimate learning.
    assert len(DraftModelDrafter(model, start_length=6, lookahead=Window(0)).propose(prompt, 11, 8).tokens) == 1


def test_the_sampling_bench_decodes_every_mode_with_the_same_drafters_as_a_request(tiny_loaded):
    """`rewriter bench --draft-model --mjsd` builds its draft-model drafters as decoding_options does."""
    from rewriter.bench.cases import Case
    from rewriter.bench.sampling_bench import run_sampling_case
    from rewriter.decoding.rewrite import Rewriter

    rewriter = Rewriter(tiny_loaded)
    # Every draft verified: a window sized by pass costs timed under load can be 0 (no draft verified).
    rewriter.decoder.lookahead = FullWindow()
    case = Case("tiny", "python", "def add(a, b):\n    return a + b\n", "Add a docstring")
    for params, modes in ((SamplingParams(), {"plain", "prediction", "draft_model", "both", "mjsd"}),
                          (SamplingParams(temperature=0.8, seed=3),
                           {"plain", "prediction/token", "prediction/block", "draft_model/token",
                            "draft_model/block", "both/token", "both/block"})):
        row = run_sampling_case(rewriter, case, 12, params, draft=tiny_loaded,
                                mjsd_tau=0.5 if params.greedy else None)
        assert set(row["modes"]) == modes
        for name in modes:
            if name.startswith(("draft_model", "both", "mjsd")):  # the draft model drafted
                assert row["modes"][name]["drafts_verified"] > 0, name
        if params.greedy:
            assert row["modes"]["draft_model"]["accepted_draft_tokens"] > 0  # the target drafting for itself
            assert row["modes"]["mjsd"]["perplexity"] > 0
