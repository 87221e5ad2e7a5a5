"""The decoder's output must equal plain greedy decoding, token for token, whatever the draft."""
import random

import pytest

from drafters import CombinedDrafter, PredictionDrafter, PromptLookupDrafter
from rewriter.decoding.decode import Decoder
from rewriter.decoding.prefix_cache import cache_bytes
from tests.helpers.exactness import KINDS, edited
from tests.helpers.models import CharTokenizer, greedy_reference, tiny_model

LENGTH = 120
# The models end at 255, where plain greedy stops; CharTokenizer's own end, 0, would stop ours early.


@pytest.fixture(scope="module", params=[0, 1, 2])
def setup(request):
    seed = request.param
    model = tiny_model(seed=seed, eos_token_id=255)
    rng = random.Random(seed)
    prompt = [rng.randrange(1, 255) for _ in range(48)]
    return model, prompt, greedy_reference(model, prompt, LENGTH), rng


def decode(decoder, prompt, drafter, max_new_tokens):
    tokens = []
    for step in decoder.generate(prompt, drafter, max_new_tokens):
        tokens.extend(step.tokens)
    return tokens, step.stats


@pytest.mark.parametrize("kind", KINDS)
def test_output_equals_plain_greedy(setup, kind):
    model, prompt, reference, rng = setup
    prediction = edited(reference, kind, rng)
    drafter = CombinedDrafter(PredictionDrafter(prediction), PromptLookupDrafter())
    tokens, stats = decode(Decoder(model, CharTokenizer(eos_token_id=255)), prompt, drafter, LENGTH)
    assert tokens == reference
    assert stats.output_tokens == len(reference)
    # Each pass yields its accepted draft tokens plus one of its own (the last may fall past the end).
    assert len(reference) <= stats.accepted_draft_tokens + stats.forward_passes <= len(reference) + 1


@pytest.mark.parametrize("limit", [1, 2, 17, 64])
def test_max_token_cut_off_matches_greedy(setup, limit):
    model, prompt, reference, _ = setup
    tokens, stats = decode(Decoder(model, CharTokenizer(eos_token_id=255)), prompt, PredictionDrafter(reference), limit)
    assert tokens == greedy_reference(model, prompt, limit)
    if len(tokens) == limit and reference[limit - 1] != 255:
        assert stats.finish_reason == "length"


def test_an_unchanged_prediction_takes_few_forward_passes(setup):
    model, prompt, reference, _ = setup
    _, stats = decode(Decoder(model, CharTokenizer(eos_token_id=255)), prompt, PredictionDrafter(reference), LENGTH)
    assert stats.forward_passes <= len(reference) / 8
    assert stats.rejected_prediction_tokens == 0
    assert len(reference) <= stats.accepted_prediction_tokens + stats.forward_passes <= len(reference) + 1


def test_realignment_recovers_within_a_few_tokens_of_an_edit(setup):
    model, prompt, reference, rng = setup
    prediction = edited(reference, "replacement_middle", rng)
    _, stats = decode(Decoder(model, CharTokenizer(eos_token_id=255)), prompt, PredictionDrafter(prediction), LENGTH)
    # Without realignment every token after the edit would cost a pass of its own.
    assert stats.forward_passes <= len(reference) // 3


def test_prompt_lookup_alone_is_exact(setup):
    model, prompt, reference, _ = setup
    tokens, _ = decode(Decoder(model, CharTokenizer(eos_token_id=255)), prompt, PromptLookupDrafter(), LENGTH)
    assert tokens == reference


def test_reused_prompt_prefix_gives_the_same_tokens(setup):
    model, prompt, reference, _ = setup
    decoder = Decoder(model, CharTokenizer(eos_token_id=255), prefix_cache=True)
    other = 1 if prompt[40] != 1 else 2
    decode(decoder, prompt[:40] + [other] * 3, None, 5)  # shares 40 tokens with the prompt
    tokens, stats = decode(decoder, prompt, PredictionDrafter(reference), LENGTH)
    assert stats.cached_prompt_tokens == 40
    assert tokens == reference
    tokens, stats = decode(decoder, prompt, None, LENGTH)  # the same prompt again
    assert stats.cached_prompt_tokens == len(prompt) - 1
    assert tokens == reference


def test_requests_on_several_files_in_turn_each_reuse_their_own_prefix(setup):
    model, prompt, reference, rng = setup
    other = [rng.randrange(1, 255) for _ in range(60)]  # another file: nothing in common
    decoder = Decoder(model, CharTokenizer(eos_token_id=255), prefix_cache=True)
    decode(decoder, prompt, None, 10)
    decode(decoder, other, None, 10)
    tokens, stats = decode(decoder, prompt[:-1] + [prompt[-1]], PredictionDrafter(reference), LENGTH)
    assert stats.cached_prompt_tokens == len(prompt) - 1  # the first file's cache was still kept
    assert tokens == reference
    tokens, stats = decode(decoder, other, None, 10)
    assert stats.cached_prompt_tokens == len(other) - 1
    assert tokens == greedy_reference(model, other, 10)
    # The same request's prompt, kept at its prefill, gives way to its prompt and answer.
    assert len(decoder.prefix_cache.kept) == 2


def test_the_least_recently_used_cache_goes_first_when_the_budget_is_spent(setup, caplog):
    model, prompt, _, _ = setup
    rng = random.Random(prompt[0])  # its own draws: the module's rng is where the tests before left it
    files = [[rng.randrange(1, 255) for _ in range(50)] for _ in range(3)]
    decoder = Decoder(model, CharTokenizer(eos_token_id=255), prefix_cache=True)
    decode(decoder, files[0], None, 4)
    decoder.prefix_cache.budget = int(2.5 * cache_bytes(decoder.prefix_cache.kept[0].cache))  # two files' room
    decode(decoder, files[1], None, 4)
    decode(decoder, files[0], None, 4)  # used again: the second file is now the least recent
    with caplog.at_level("INFO", logger="rewriter.decoding.prefix_cache"):
        decode(decoder, files[2], None, 4)
    assert "dropped the least recently used cache, 53 tokens" in caplog.text  # the prompt and 3 tokens fed
    assert [kept.tokens[:50] for kept in decoder.prefix_cache.kept] == [files[0], files[2]]
    tokens, stats = decode(decoder, files[1], None, 20)
    assert stats.cached_prompt_tokens == 0 and tokens == greedy_reference(model, files[1], 20)


def test_streamed_text_adds_up_to_the_decoded_output(setup):
    model, prompt, reference, _ = setup
    tokenizer = CharTokenizer(eos_token_id=255)
    pieces = [step.text for step in Decoder(model, tokenizer).generate(prompt, PredictionDrafter(reference), LENGTH)]
    assert "".join(pieces) == tokenizer.decode(reference)


def test_stop_check_cuts_the_output_where_it_says(setup):
    model, prompt, reference, _ = setup
    stop_at = 33

    def stop(output):
        return stop_at if len(output) >= stop_at else None

    steps = list(Decoder(model, CharTokenizer(eos_token_id=255)).generate(prompt, PredictionDrafter(reference), LENGTH, stop))
    tokens = [t for step in steps for t in step.tokens]
    assert tokens == reference[:stop_at]
    assert steps[-1].done and steps[-1].stats.finish_reason == "stop"
