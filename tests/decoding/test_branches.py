"""Branches where the model hesitated: recording them changes no token, and a branch is plain
greedy decoding after its forced tokens, drafted by the prediction at its usual speed."""
import random

import pytest
import torch

from drafters import PredictionDrafter
from rewriter.decoding.branches import Hesitation, HesitationRecorder, mean_log_prob
from rewriter.decoding.decode import Decoder
from rewriter.engine import SamplingParams
from tests.helpers.exactness import edited
from tests.helpers.models import CharTokenizer, greedy_reference, tiny_model

LENGTH = 80
EOS = 255


@pytest.fixture(scope="module", params=[0, 1])
def setup(request):
    model = tiny_model(seed=request.param, eos_token_id=EOS)
    rng = random.Random(request.param)
    prompt = [rng.randrange(1, EOS) for _ in range(48)]
    return model, prompt, up_to_end(greedy_reference(model, prompt, LENGTH), Decoder(model, CharTokenizer())), rng


def up_to_end(tokens: list[int], decoder: Decoder) -> list[int]:
    """Greedy tokens as the decoder ends them: at its first end token (the model's or the tokenizer's)."""
    ends = [i for i, token in enumerate(tokens) if token in decoder.eos_ids]
    return tokens[: ends[0] + 1] if ends else tokens


def decode(decoder, prompt, drafter, max_new_tokens, **options):
    tokens = []
    for step in decoder.generate(prompt, drafter, max_new_tokens, **options):
        tokens.extend(step.tokens)
    return tokens, step.stats


def test_recording_hesitations_leaves_greedy_output_as_it_was(setup):
    model, prompt, reference, rng = setup
    recorder = HesitationRecorder()
    drafter = PredictionDrafter(edited(reference, "replacement_middle", rng))
    tokens, _ = decode(Decoder(model, CharTokenizer()), prompt, drafter, LENGTH, verifier=recorder)
    assert tokens == reference
    assert recorder.answer(len(tokens)) == reference
    assert all(h.margin >= 0 and h.runner_up != h.chosen for h in recorder.hesitations)
    assert [h.position for h in recorder.hesitations[:len(tokens)]] == list(range(len(tokens)))


@pytest.mark.parametrize("at", [0, 1, 7, 30])
def test_a_branch_is_greedy_decoding_after_its_forced_tokens(setup, at):
    model, prompt, reference, _ = setup
    assert at < len(reference)
    recorder = HesitationRecorder()
    decode(Decoder(model, CharTokenizer()), prompt, PredictionDrafter(reference), LENGTH, verifier=recorder)
    point = recorder.hesitations[at]
    forced = recorder.forced(point)
    assert forced == reference[:at] + [point.runner_up]
    decoder = Decoder(model, CharTokenizer())
    tokens, stats = decode(decoder, prompt, PredictionDrafter(reference), LENGTH, forced=forced)
    assert tokens == forced + up_to_end(greedy_reference(model, prompt + forced, LENGTH - len(forced)), decoder)
    assert stats.output_tokens == len(tokens)


@pytest.mark.parametrize("at", [0, 7, 30])
def test_a_branch_scores_its_tokens_by_the_model_s_own_log_probabilities(setup, at):
    """The score is the mean of what one plain forward pass over prompt and answer gives the
    branch's tokens, from the forced runner-up on."""
    model, prompt, reference, _ = setup
    recorder = HesitationRecorder()
    decode(Decoder(model, CharTokenizer()), prompt, PredictionDrafter(reference), LENGTH, verifier=recorder)
    point = recorder.hesitations[at]
    follower = HesitationRecorder()
    tokens, _ = decode(Decoder(model, CharTokenizer()), prompt, PredictionDrafter(reference), LENGTH,
                       forced=recorder.forced(point), verifier=follower)
    with torch.inference_mode():
        logits = model(torch.tensor([prompt + tokens])).logits[0].float()
    log_probs = torch.log_softmax(logits, dim=-1)
    expected = [log_probs[len(prompt) + i - 1, tokens[i]].item() for i in range(at, len(tokens))]
    assert mean_log_prob(point, follower, len(tokens)) == pytest.approx(sum(expected) / len(expected), abs=1e-4)
    assert point.log_prob - point.margin <= point.log_prob <= 0


def test_branch_points_come_closest_first_and_skip_end_tokens():
    recorder = HesitationRecorder()
    recorder.hesitations = [Hesitation(0, 5, 6, 2.0), Hesitation(1, 6, EOS, 0.1), Hesitation(2, 7, 8, 0.5),
                            Hesitation(3, 8, 9, 0.5), Hesitation(4, 9, 10, 0.01)]
    points = recorder.branch_points(4, 2, frozenset({EOS}))  # position 4 lies past the answer's end
    assert [p.position for p in points] == [2, 3]
    assert recorder.forced(points[0]) == [5, 6, 8]


def test_more_forced_tokens_than_the_budget_is_refused(setup):
    model, prompt, _, _ = setup
    with pytest.raises(ValueError, match="forced"):
        decode(Decoder(model, CharTokenizer()), prompt, None, 2, forced=[1, 2, 3])


def test_the_rewriter_decodes_its_branches_closest_first(tiny_loaded, monkeypatch):
    """The greedy answer decoded again with the recorder, then one decode per branch point: the
    closest first, none at an end token, none that leaves no code block, at most `count`; each
    once for the last few requests."""
    from rewriter.answer import NoCodeBlock
    from rewriter.decoding.rewrite import Rewriter
    from rewriter.engine import EditRequest
    from rewriter.results import RewriteResult, Stats

    rewriter = Rewriter(tiny_loaded)
    end = next(iter(rewriter.decoder.eos_ids))
    calls = []

    def stream(request, verifier=None, forced=()):
        calls.append(list(forced))
        if isinstance(verifier, HesitationRecorder):
            verifier.hesitations = [Hesitation(0, 1, 2, 0.9), Hesitation(1, 3, end, 0.0), Hesitation(2, 4, 5, 0.2),
                                    Hesitation(3, 6, 7, 0.5), Hesitation(4, 8, 9, 0.1)]
        if forced == [1, 3, 4, 6, 9]:
            raise NoCodeBlock("no block")
        yield RewriteResult(text=f"{forced}", answer="", stats=Stats(output_tokens=5))

    monkeypatch.setattr(rewriter, "stream", stream)
    request = EditRequest("x = 1\n", "Rename x")
    assert [r.text for r in rewriter.branches(request, 3)] == ["[1, 3, 5]", "[1, 3, 4, 7]"]
    assert calls == [[], [1, 3, 4, 6, 9], [1, 3, 5], [1, 3, 4, 7]]
    # Asked again (a later try, "try another"): only the branch not decoded yet is decoded.
    assert [r.text for r in rewriter.branches(request, 4)] == ["[1, 3, 5]", "[1, 3, 4, 7]", "[2]"]
    assert calls[4:] == [[2]]
    # Another request is decoded from its own greedy answer; the oldest kept request gives way.
    for other in range(4):
        list(rewriter.branches(EditRequest(f"x = {other + 2}\n", "Rename x"), 1))
    del calls[:]
    list(rewriter.branches(request, 1))
    assert calls == [[], [1, 3, 4, 6, 9]]
    with pytest.raises(ValueError, match="greedy"):
        next(rewriter.branches(EditRequest("x = 1\n", "Rename x", sampling=SamplingParams(temperature=0.5)), 1))
