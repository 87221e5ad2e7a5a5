"""A prompt's prefix computed ahead (Decoder.prefill, Rewriter.prefill): the request that follows
gives the tokens a cold one gives, and plain greedy decoding; a preempted prefill keeps what it did."""
import random

import pytest
import torch

from drafters import PredictionDrafter
from rewriter.decoding.decode import Decoder
from rewriter.engine import EditRequest
from rewriter.passes import INT8_ATTENTION, INT8_ROW_ATTENTION, PROMPT_CHUNK, attention_of
from rewriter.weights.quantize import quantize_int8
from tests.helpers.models import CharTokenizer, greedy_reference, tiny_model

LENGTH = 40


@pytest.fixture(scope="module", params=[INT8_ROW_ATTENTION, INT8_ATTENTION])
def model(request):
    """A tiny int8 model running the attention named: prompts row by row, or in chunks."""
    model = quantize_int8(tiny_model(seed=5, eos_token_id=255), "int8")
    model.config._attn_implementation = request.param  # both are registered by quantize_int8
    return model


def tokenizer():
    return CharTokenizer(eos_token_id=255)


def decode(decoder: Decoder, prompt: list[int], prediction: list[int] | None = None):
    tokens = []
    drafter = PredictionDrafter(prediction) if prediction else None
    for step in decoder.generate(prompt, drafter, LENGTH):
        tokens.extend(step.tokens)
    return tokens, step.stats


@pytest.mark.parametrize("prefix_length", [130, 600])
def test_a_request_after_its_prefix_was_prefilled_gives_the_cold_tokens(model, prefix_length):
    rng = random.Random(prefix_length)
    prompt = [rng.randrange(1, 254) for _ in range(prefix_length + 60)]
    reference = greedy_reference(model, prompt, LENGTH)
    decoder = Decoder(model, tokenizer(), prefix_cache=True)
    assert decoder.prefill(prompt[:prefix_length]) == prefix_length
    # Asked again, nothing is computed: the prefix is held.
    passes = []
    hook = model.model.layers[0].register_forward_pre_hook(lambda module, args: passes.append(1))
    try:
        assert decoder.prefill(prompt[:prefix_length]) == prefix_length
    finally:
        hook.remove()
    assert passes == []
    tokens, stats = decode(decoder, prompt, reference)
    assert tokens == reference
    if attention_of(model) == INT8_ROW_ATTENTION:  # every row alone: all of the prefix is reused
        assert stats.cached_prompt_tokens == prefix_length
    else:  # prompts in chunks: whole chunks only, leaving the rest of the prompt a wide pass
        assert stats.cached_prompt_tokens == min(prefix_length, len(prompt) - 129) // PROMPT_CHUNK * PROMPT_CHUNK


def test_a_preempted_prefill_keeps_the_passes_it_finished_and_the_request_stays_exact(model):
    rng = random.Random(3)
    prompt = [rng.randrange(1, 254) for _ in range(3 * PROMPT_CHUNK + 40)]
    reference = greedy_reference(model, prompt, LENGTH)
    decoder = Decoder(model, tokenizer(), prefix_cache=True)
    calls = 0
    modules_per_pass = sum(len(list(layer.modules())) for layer in model.model.layers)

    def stopped() -> bool:  # becomes true midway through the second pass
        nonlocal calls
        calls += 1
        return calls > modules_per_pass + 3

    kept = decoder.prefill(prompt[:3 * PROMPT_CHUNK], stopped=stopped)
    assert kept == PROMPT_CHUNK  # the first pass; the second was abandoned within a layer
    [entry] = decoder.prefix_cache.kept
    assert all(layer.get_seq_length() == PROMPT_CHUNK for layer in entry.cache.layers)
    assert decoder.prefill(prompt[:3 * PROMPT_CHUNK]) == 3 * PROMPT_CHUNK  # resumed from what was kept
    tokens, stats = decode(decoder, prompt)
    assert tokens == reference
    assert stats.cached_prompt_tokens >= 2 * PROMPT_CHUNK


def test_the_hooks_that_preempt_are_gone_once_the_prefill_ends(model):
    decoder = Decoder(model, tokenizer(), prefix_cache=True)
    decoder.prefill(list(range(1, 200)), stopped=lambda: False)
    assert all(not module._forward_pre_hooks for module in model.modules())


def test_prefill_needs_a_prefix_cache(model):
    with pytest.raises(ValueError, match="prefix caches"):
        Decoder(model, tokenizer()).prefill([1, 2, 3])


def test_the_rewriter_prefills_what_any_instruction_on_the_code_shares(int8_tiny_rewriter):
    rewriter = int8_tiny_rewriter
    file = "".join(f"def f{n}(x):\n    return x + {n}\n\n" for n in range(12))
    code = "def f3(x):\n    return x + 3\n"
    request = EditRequest(code, "Rename f3 to g.", "python", file, max_new_tokens=12)
    cold = rewriter.rewrite(code, request.instruction, "python", file, max_new_tokens=12)
    rewriter.decoder.prefix_cache.kept.clear()
    to_code = rewriter.prefill(EditRequest("", "(any)", "python", file), code_known=False)
    to_instruction = rewriter.prefill(request)
    encoded = rewriter.encode(rewriter_prompt(request))
    assert (to_code, to_instruction) == (encoded.code_start, encoded.instruction_start)
    assert rewriter.tokenizer.decode(encoded.ids[to_code:to_instruction]).startswith(code)
    warm = rewriter.rewrite(code, "Rename f3 to g.", "python", file, max_new_tokens=12)
    assert warm.stats.cached_prompt_tokens == to_instruction
    assert warm.answer == cold.answer and warm.stats.output_tokens == cold.stats.output_tokens


def rewriter_prompt(request: EditRequest):
    from rewriter.answer import AnswerStream

    return AnswerStream(request, prefilled=True).prompt


@pytest.fixture(scope="module")
def int8_tiny_rewriter(qwen_tokenizer):
    """A Rewriter on a tiny int8 model with the real tokenizer, prompts computed row by row."""
    from types import SimpleNamespace

    from rewriter.decoding.rewrite import Rewriter
    from tests.helpers.models import QWEN_VOCAB

    model = quantize_int8(tiny_model(seed=2, vocab_size=QWEN_VOCAB, hidden=32, layers=1,
                                     eos_token_id=qwen_tokenizer.eos_token_id), "int8")
    model.config._attn_implementation = INT8_ROW_ATTENTION
    loaded = SimpleNamespace(model=model, tokenizer=qwen_tokenizer, context_length=4096, pass_costs=lambda: None,
                             device=torch.device("cpu"), dtype="int8")
    return Rewriter(loaded, prefix_cache=True)  # type: ignore[arg-type]  # the parts of a LoadedModel it reads


@pytest.mark.parametrize("start", [0, 57, 200, 256, 300, 512])
def test_a_prompt_from_any_start_is_fed_in_wide_passes_bounded_at_whole_chunks(start):
    from rewriter.passes import WIDEST_DECODING_PASS, prompt_passes

    for end in range(start + 1, start + 1200, 37):
        passes = prompt_passes(start, end)
        assert passes[0][0] == start and passes[-1][1] == end
        assert all(a[1] == b[0] for a, b in zip(passes, passes[1:]))
        if len(passes) > 1:  # a cached prefix of any length does not leave one pass the size of the prompt
            assert all(stop - begin > WIDEST_DECODING_PASS for begin, stop in passes)
            assert all(begin % PROMPT_CHUNK == 0 for begin, _ in passes[1:])
            assert all(stop - begin <= PROMPT_CHUNK + WIDEST_DECODING_PASS for begin, stop in passes)
        else:
            assert end - start <= PROMPT_CHUNK + 2 * WIDEST_DECODING_PASS
