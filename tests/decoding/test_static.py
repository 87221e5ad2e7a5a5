"""The static path (rewriter/decoding/static.py): fixed-shape passes on a preallocated cache give
exactly the tokens of plain greedy decoding.

On a CPU the passes run eagerly, which checks everything but the graph capture; the CUDA cases
(on a GPU) capture and replay graphs, the path a GPU decodes through by default.
"""
import random

import pytest
import torch
from transformers import DynamicCache

from drafters import CombinedDrafter, PredictionDrafter, PromptLookupDrafter
from rewriter.decoding.decode import Decoder
from rewriter.decoding.static import StaticCache, StaticPass
from rewriter.weights.batch_invariant import make_batch_invariant
from tests.helpers.exactness import KINDS, edited
from tests.helpers.models import CharTokenizer, tiny_model

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _model(device: str, seed: int = 3):
    if device == "cuda":
        return make_batch_invariant(tiny_model(seed=seed, eos_token_id=255).to("cuda", torch.bfloat16))
    return make_batch_invariant(tiny_model(seed=seed, eos_token_id=255), rows=16)


@pytest.fixture(scope="module", params=DEVICES)
def model(request):
    return _model(request.param)


@pytest.fixture(autouse=True)
def one_thread():
    # A CPU's kernels split a sum across threads by the shape of the product: with several
    # threads, the patch keeps rows' bits on a CPU no more than transformers' own forward does.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _greedy(model, prompt: list[int], max_new_tokens: int) -> list[int]:
    device = next(model.parameters()).device
    ids = torch.tensor([prompt], device=device)
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=max_new_tokens, eos_token_id=[0, 255])  # the decoder stops on both
    return out[0, len(prompt):].tolist()


def _decode(decoder: Decoder, prompt: list[int], drafter, max_new_tokens: int):
    tokens, stats = [], None
    for step in decoder.generate(prompt, drafter, max_new_tokens):
        tokens += step.tokens
        stats = step.stats
    return tokens, stats


def test_the_decoder_takes_the_static_path_only_for_a_batch_invariant_model(model):
    assert Decoder(model, CharTokenizer(), static=True).static is not None
    assert Decoder(model, CharTokenizer(), static=False).static is None
    assert Decoder(tiny_model(seed=3), CharTokenizer(), static=True).static is None  # not patched
    default = Decoder(model, CharTokenizer())
    assert (default.static is not None) == (next(model.parameters()).device.type == "cuda")


@pytest.mark.parametrize("start", [5, 250, 530])
def test_a_pass_of_any_width_gives_the_models_own_logits(model, start):
    # Widths between the padded ones, passes that cross a span of keys (256, 512) and a prompt
    # longer than the widest pass, fed in chunks.
    device = next(model.parameters()).device
    rng = random.Random(start)
    decoder = Decoder(model, CharTokenizer(), static=True)
    assert decoder.static is not None and decoder.static.confirmed()
    for width in (1, 3, 16, 17, 100, 300):
        tokens = [rng.randrange(1, 255) for _ in range(start + width)]
        with torch.inference_mode():
            cache = decoder.static.fresh(len(tokens))
            decoder._forward(tokens[:start], cache, last_only=True)
            ours = decoder._forward(tokens[start:], cache)
            theirs = model(input_ids=torch.tensor([tokens], device=device), cache=DynamicCache(config=model.config),
                           use_cache=True).logits[0, start:].float()
        assert cache.get_seq_length() == len(tokens)
        assert torch.equal(ours, theirs), width


@pytest.mark.parametrize("kind", KINDS)
def test_greedy_with_drafts_equals_plain_greedy(model, kind):
    rng = random.Random(7)
    prompt = [rng.randrange(1, 255) for _ in range(230)]  # the answer crosses the 256- and 512-key spans
    reference = _greedy(model, prompt, 300)
    decoder = Decoder(model, CharTokenizer(), static=True)
    drafter = CombinedDrafter(PredictionDrafter(edited(reference, kind, rng)), PromptLookupDrafter())
    tokens, stats = _decode(decoder, prompt, drafter, 300)
    assert tokens == reference
    assert decoder.static is not None and decoder.static.cache is not None
    if next(model.parameters()).device.type == "cuda":
        assert decoder.static.captured  # the passes replayed graphs
    if kind == "unchanged":
        assert stats.forward_passes < len(reference) // 8


def test_plain_greedy_through_the_static_pass(model):
    prompt = [random.Random(8).randrange(1, 255) for _ in range(600)]  # a prompt wider than any pass
    tokens, stats = _decode(Decoder(model, CharTokenizer(), static=True), prompt, None, 80)
    assert tokens == _greedy(model, prompt, 80)
    assert stats.forward_passes == len(tokens)


def test_a_request_sharing_a_prefix_reuses_the_cache_even_when_it_grows(model):
    rng = random.Random(9)
    first = [rng.randrange(1, 255) for _ in range(200)]
    second = first[:150] + [rng.randrange(1, 255) for _ in range(40)]
    decoder = Decoder(model, CharTokenizer(), prefix_cache=True, static=True)
    assert decoder.static is not None
    tokens, _ = _decode(decoder, first, PromptLookupDrafter(), 40)
    assert tokens == _greedy(model, first, 40)
    small = decoder.static.cache
    assert small is not None
    # A longer answer needs a larger cache: the shared prefix moves with it.
    tokens, stats = _decode(decoder, second, PromptLookupDrafter(), 1200)
    assert decoder.static.cache is not small and decoder.static.cache.capacity > small.capacity
    assert stats.cached_prompt_tokens == 150
    assert tokens == _greedy(model, second, 1200)


def test_a_request_after_a_different_one_does_not_reuse_what_was_overwritten(model):
    rng = random.Random(10)
    prompt = [rng.randrange(1, 255) for _ in range(120)]
    other = prompt[:60] + [rng.randrange(1, 255) for _ in range(60)]
    decoder = Decoder(model, CharTokenizer(), prefix_cache=True, static=True)
    for request in (prompt, other, prompt):
        tokens, stats = _decode(decoder, request, PromptLookupDrafter(), 30)
        assert tokens == _greedy(model, request, 30)
    assert stats.cached_prompt_tokens == 60  # the positions after 60 held the other prompt's


def test_a_pass_that_differs_from_the_models_forward_is_not_used(monkeypatch):
    model = _model("cpu")
    decoder = Decoder(model, CharTokenizer(), static=True)
    assert decoder.static is not None
    right = decoder.static.rotate
    decoder.static.rotate = lambda query, key, cos, sin: right(query, key, cos * 1.001, sin)
    prompt = [random.Random(11).randrange(1, 255) for _ in range(50)]
    with pytest.warns(RuntimeWarning, match="differs from the model's forward"):
        tokens, _ = _decode(decoder, prompt, PromptLookupDrafter(), 40)
    assert decoder.static is None
    assert tokens == _greedy(model, prompt, 40)


def test_the_cache_refuses_a_pass_past_its_end():
    model = _model("cpu")
    static = StaticPass.for_model(model)
    assert static is not None
    cache = static.fresh(10)
    cache.length = cache.capacity - 3
    with pytest.raises(ValueError, match="holds"):
        static([1, 2, 3, 4], cache)


def test_crop_keeps_a_prefix_as_transformers_caches_do():
    cache = StaticCache(tiny_model().config, 256, torch.device("cpu"), torch.float32)
    cache.length = 100
    cache.crop(-30)
    assert cache.get_seq_length() == 70
    cache.crop(80)
    assert cache.get_seq_length() == 70
    cache.crop(10)
    assert cache.get_seq_length() == 10
