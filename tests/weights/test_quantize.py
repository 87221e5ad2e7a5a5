"""int8 weights (int8, int8-bf16, int8-fbgemm): close to float32, bit-identical in passes of any width, and
exact under drafts."""
import functools
import random

import pytest
import torch
from transformers import DynamicCache

from drafters import CombinedDrafter, PredictionDrafter, PromptLookupDrafter
from rewriter.decoding.decode import Decoder
from rewriter.decoding.verify import BlockVerifier, LogitsShaper
from rewriter.lookahead import Lookahead
from rewriter.passes import (
    CPU_INT8_BF16_PRIOR,
    CPU_INT8_PRIOR,
    CPU_PRIOR,
    GPU_PRIOR,
    INT8_ATTENTION,
    INT8_ROW_ATTENTION,
    PROMPT_CHUNK,
    WIDEST_DECODING_PASS,
)
from rewriter.results import Stats
from rewriter.weights import attention, int8_kernels, quantize, shared_products
from rewriter.weights.cpu_choice import pass_costs
from rewriter.weights.models import ModelError, load_model, resolve_dtype
from rewriter.weights.quantize import (
    INT8_KINDS,
    FbgemmInt8Linear,
    Int8Linear,
    QuantizationUnavailable,
    WeightInt8Linear,
    int8_kind,
    quantize_int8,
)
from tests.helpers.exactness import KINDS, edited
from tests.helpers.models import CharTokenizer, greedy_reference, tiny_model
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

LAYERS = {"int8": Int8Linear, "int8-bf16": WeightInt8Linear, "int8-fbgemm": FbgemmInt8Linear}


@pytest.mark.parametrize("kind", INT8_KINDS)
@pytest.mark.parametrize("inputs", [96, 72])  # 72: not a whole number of _weight_int8pack_mm's groups of 16
def test_int8_linear_is_close_to_float(kind, inputs):
    torch.manual_seed(0)
    linear = torch.nn.Linear(inputs, 80)
    x = torch.randn(5, inputs)
    error = (LAYERS[kind](linear)(x) - linear(x)).norm() / linear(x).norm()
    assert error < (0.03 if kind == "int8-fbgemm" else 0.02)  # fbgemm: 7-bit activations


@pytest.fixture(params=int8_kernels.FBGEMM_LEVELS)
def fbgemm_levels(request, monkeypatch):
    """Each of int8-fbgemm's activation precisions this machine's FBGEMM sums exactly (63 levels
    always: the AVX2 kernels' precision, whatever the CPU)."""
    if request.param > int8_kernels.fbgemm_levels():
        pytest.skip(f"FBGEMM here sums only {int8_kernels.fbgemm_levels()} levels a side exactly")
    monkeypatch.setattr(int8_kernels, "_FBGEMM_LEVELS_HERE", [request.param])
    return request.param


def test_fbgemm_gives_each_row_its_exact_integer_sum(fbgemm_levels):
    # What makes int8-fbgemm exact: the op's per-tensor input scaling is the identity, for the
    # largest sums a row can have as well (4864 inputs: the 0.5B model's down projection).
    generator = torch.Generator().manual_seed(0)
    weight = torch.randint(-127, 128, (48, 4864), dtype=torch.int8, generator=generator)
    weight[0], weight[1] = 127, -127
    layer = FbgemmInt8Linear(torch.nn.Linear(4864, 48, bias=False), weights=(weight, torch.ones(48)))
    assert layer.levels == fbgemm_levels
    rows = torch.randint(-fbgemm_levels, fbgemm_levels + 1, (5, 4864), generator=generator).float()
    rows[0], rows[1] = fbgemm_levels, -fbgemm_levels
    rows[2, ::2] = 0  # a row whose own range is narrower than the levels
    exact = (rows.double() @ weight.double().t()).float()
    assert torch.equal(layer.integer_sums(rows), exact)
    assert torch.equal(torch.cat([layer.integer_sums(rows[i:i + 1]) for i in range(5)]), exact)


def test_fbgemm_precision_is_checked_on_the_cpu_whatever_the_default_device(monkeypatch):
    # The first layer built may be a shell on the meta device (the cached-weights check); the
    # precision check must still run real products, not decide from meta tensors.
    monkeypatch.setattr(int8_kernels, "_FBGEMM_LEVELS_HERE", [])
    with torch.device("meta"):
        shell = FbgemmInt8Linear(in_features=4864, out_features=16)
    assert shell.levels in int8_kernels.FBGEMM_LEVELS and int8_kernels.fbgemm_levels() == shell.levels


@pytest.mark.parametrize("kind", KINDS)
def test_fbgemm_output_equals_its_own_plain_greedy_at_each_precision(fbgemm_levels, kind):
    model = quantize_int8(tiny_model(seed=2, eos_token_id=255), "int8-fbgemm")
    rng = random.Random(2)
    prompt = [rng.randrange(1, 255) for _ in range(48)]
    reference = greedy_reference(model, prompt, 120)
    drafter = CombinedDrafter(PredictionDrafter(edited(reference, kind, rng)), PromptLookupDrafter())
    tokenizer = CharTokenizer(eos_token_id=255)
    tokens = []
    for step in Decoder(model, tokenizer, pass_costs=pass_costs(model)).generate(prompt, drafter, 120):
        tokens.extend(step.tokens)
    assert tokens == reference


@pytest.mark.parametrize("kind", INT8_KINDS)
def test_int8_linear_rows_do_not_depend_on_their_neighbours(kind):
    # The property that makes drafts exact: a row's result is the same in any batch, bit for bit.
    torch.manual_seed(1)
    layer = LAYERS[kind](torch.nn.Linear(896, 4864))  # the 0.5B model's MLP shape: the kernels' real blocking
    rows = torch.randn(130, 896)
    rows[4] *= 1000  # an outlier row would coarsen every other row under per-tensor scaling
    alone = torch.cat([layer(rows[i:i + 1]) for i in range(len(rows))])
    for width in (2, 16, 33, 64, 130):
        assert torch.equal(layer(rows[:width]), alone[:width]), width


@pytest.fixture(scope="module", params=INT8_KINDS)
def int8_model(request):
    return quantize_int8(tiny_model(seed=3, eos_token_id=255), request.param)


def grouped_like_the_default(seed: int = 3, kind: str = "int8-fbgemm"):
    """A tiny int8 model whose heads are the embedded 0.5B's: 2 key heads of width 64, 7 query
    heads to each. Its decoding attention runs in float32 where this machine's kernels keep rows
    (the tiny model's groups of 2 run in float64 here)."""
    return quantize_int8(tiny_model(seed=seed, eos_token_id=255, hidden=896, heads=14, key_heads=2), kind)


@pytest.fixture(scope="module", params=INT8_KINDS)
def grouped_int8_model(request):
    return grouped_like_the_default(kind=request.param)


def test_quantize_replaces_every_linear(int8_model):
    assert int8_kind(int8_model) in INT8_KINDS
    assert not any(type(module) is torch.nn.Linear for module in int8_model.modules())


@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("start,width", [(10, 2), (20, 16), (30, 40), (30, WIDEST_DECODING_PASS), (50, 90)])
def test_a_wide_pass_gives_the_logits_of_one_token_passes(int8_model, grouped_int8_model, grouped, start, width):
    # (50, 90): rows on both sides of a key bucket's bound (64, 128), blocks cut there.
    int8_model = grouped_int8_model if grouped else int8_model
    tokens = [random.Random(start).randrange(1, 255) for _ in range(start + width)]
    with torch.inference_mode():
        wide_cache, step_cache = DynamicCache(config=int8_model.config), DynamicCache(config=int8_model.config)
        int8_model(input_ids=torch.tensor([tokens[:start]]), cache=wide_cache, use_cache=True)
        int8_model(input_ids=torch.tensor([tokens[:start]]), cache=step_cache, use_cache=True)
        wide = int8_model(input_ids=torch.tensor([tokens[start:]]), cache=wide_cache, use_cache=True).logits[0]
        steps = torch.cat([int8_model(input_ids=torch.tensor([[t]]), cache=step_cache, use_cache=True).logits[0]
                           for t in tokens[start:]])
    assert torch.equal(wide, steps)


def _prompt_pass(model, tokens, splits):
    """Last logits and the KV cache of `tokens` fed in passes that start at `splits`."""
    cache = DynamicCache(config=model.config)
    bounds = [0, *splits, len(tokens)]
    with torch.inference_mode():
        for begin, end in zip(bounds, bounds[1:]):
            logits = model(input_ids=torch.tensor([tokens[begin:end]]), cache=cache, use_cache=True).logits
    return logits[0, -1], [(layer.keys, layer.values) for layer in cache.layers]


@pytest.mark.parametrize("splits", [[PROMPT_CHUNK], [PROMPT_CHUNK, 2 * PROMPT_CHUNK]])
@pytest.mark.parametrize("length", [2 * PROMPT_CHUNK + WIDEST_DECODING_PASS + 20, 3 * PROMPT_CHUNK + 1])
def test_a_prompt_computes_the_same_from_whole_cached_chunks_as_in_one_pass(int8_model, splits, length):
    # Prompt passes run attention in float32, chunked at PROMPT_CHUNK: what PrefixCache reuses.
    # (3 chunks and a token: the last chunk is one row, which SDPA's callers handle apart.)
    tokens = [random.Random(7).randrange(1, 255) for _ in range(length)]
    one_logits, one_cache = _prompt_pass(int8_model, tokens, [])
    split_logits, split_cache = _prompt_pass(int8_model, tokens, splits)
    assert torch.equal(one_logits, split_logits)
    for (one_keys, one_values), (split_keys, split_values) in zip(one_cache, split_cache):
        assert torch.equal(one_keys, split_keys) and torch.equal(one_values, split_values)


@pytest.mark.parametrize("length,widths", [(2 * PROMPT_CHUNK + 20, [PROMPT_CHUNK, PROMPT_CHUNK + 20]),
                                           (2 * PROMPT_CHUNK + WIDEST_DECODING_PASS + 1,
                                            [PROMPT_CHUNK, PROMPT_CHUNK, WIDEST_DECODING_PASS + 1])])
def test_the_decoder_feeds_a_long_prompt_a_chunk_a_pass_with_the_bits_of_one_pass(int8_model, length, widths):
    # A short last chunk joins the one before: a pass as narrow as a decoding pass attends another way.
    tokens = [random.Random(5).randrange(1, 255) for _ in range(length)]
    fed: list[int] = []
    hook = int8_model.model.embed_tokens.register_forward_hook(lambda _, args, __: fed.append(args[0].shape[1]))
    try:
        cache, logits = Decoder(int8_model, CharTokenizer())._prefill(tokens, Stats(), len(tokens))
    finally:
        hook.remove()
    one_logits, one_cache = _prompt_pass(int8_model, tokens, [])
    assert fed == widths
    assert torch.equal(logits, one_logits)
    for layer, (one_keys, one_values) in zip(cache.layers, one_cache):
        assert torch.equal(layer.keys, one_keys) and torch.equal(layer.values, one_values)


@pytest.fixture(params=[INT8_ATTENTION, INT8_ROW_ATTENTION])
def prompt_attention(request, int8_model):
    """The int8 model runs the attention named (prompts in chunks, or each row alone) for one test:
    which one the load picks depends on this machine's float32 kernels."""
    before = int8_model.config._attn_implementation
    int8_model.config._attn_implementation = request.param
    yield request.param
    int8_model.config._attn_implementation = before


def test_a_reused_wide_prompt_prefix_is_exact_and_whole_chunks_where_prompts_are_chunked(int8_model,
                                                                                         prompt_attention):
    rng = random.Random(11)
    prompt = [rng.randrange(1, 254) for _ in range(700)]
    tokenizer = CharTokenizer(eos_token_id=255)
    decoder = Decoder(int8_model, tokenizer, prefix_cache=True)
    list(decoder.generate(prompt[:600] + [254] * 40, None, 2))  # shares 600 tokens with the prompt
    tokens = []
    for step in decoder.generate(prompt, PromptLookupDrafter(), 60):
        tokens.extend(step.tokens)
    assert tokens == greedy_reference(int8_model, prompt, 60)
    if prompt_attention == INT8_ROW_ATTENTION:  # every row alone: all that is shared
        assert step.stats.cached_prompt_tokens == 600
        assert decoder.prefix_cache.take(prompt[:100])[1] == 99
        return
    assert step.stats.cached_prompt_tokens == 2 * PROMPT_CHUNK  # 600 shared, rounded down to whole chunks
    # A narrow prompt computes its rows another way (decoding attention): nothing of a wide one is reused.
    assert decoder.prefix_cache.take(prompt[:100])[1] == 0


def _chat_reference(model, prompt: list[int], narrow_from: int, max_new_tokens: int) -> list[int]:
    """Plain greedy decoding of a conversation's next turn as a chat that keeps its cache does it:
    the first turn's prompt in one pass, then every later token one at a time."""
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([prompt[:narrow_from]]), cache=cache, use_cache=True).logits
        for token in prompt[narrow_from:]:
            logits = model(input_ids=torch.tensor([[token]]), cache=cache, use_cache=True).logits
        tokens = []
        while len(tokens) < max_new_tokens:
            tokens.append(int(logits[0, -1].argmax()))
            if tokens[-1] == model.generation_config.eos_token_id:
                break
            logits = model(input_ids=torch.tensor([[tokens[-1]]]), cache=cache, use_cache=True).logits
    return tokens


@pytest.mark.parametrize("first_length", [60, 600])
def test_a_conversations_next_turn_reuses_the_earlier_answer_and_is_its_chats_plain_greedy(int8_model, first_length,
                                                                                           prompt_attention):
    # A refine asks again after the first answer: that answer's cache, from speculative passes,
    # is what a cold prefill of the next turn computes too, so reusing it changes no token.
    rng = random.Random(13)
    tokenizer = CharTokenizer(eos_token_id=255)
    first = [rng.randrange(1, 254) for _ in range(first_length)]
    decoder = Decoder(int8_model, tokenizer, prefix_cache=True)
    answer = [token for step in decoder.generate(first, PromptLookupDrafter(), 50) for token in step.tokens]
    follow_up = [rng.randrange(1, 254) for _ in range(20)]
    prompt = first + answer + follow_up
    reference = _chat_reference(int8_model, prompt, len(first), 40)
    drafter = PredictionDrafter(answer)
    steps = list(decoder.generate(prompt, drafter, 40, narrow_from=len(first)))
    warm = [token for step in steps for token in step.tokens]
    assert steps[-1].stats.cached_prompt_tokens >= len(first) + len(answer) - 1  # all but the answer's last token
    cold_decoder = Decoder(int8_model, tokenizer)
    cold = [token for step in cold_decoder.generate(prompt, PredictionDrafter(answer), 40, narrow_from=len(first))
            for token in step.tokens]
    assert warm == cold == reference
    if prompt_attention == INT8_ROW_ATTENTION:  # asked as a new prompt, every row as it was computed
        assert decoder.prefix_cache.take(prompt)[1] == len(prompt) - 1
    else:  # asked as a new prompt (no bound), the answer's positions are prompt rows: only whole chunks
        assert decoder.prefix_cache.take(prompt)[1] <= (len(first) // PROMPT_CHUNK) * PROMPT_CHUNK


@functools.cache
def _model_and_its_greedy(seed: int, int8: str, grouped: bool):
    """The model, prompt and plain greedy answer that each edit kind's prediction is made from: built
    once for the fourteen kinds (the grouped model's passes are the 0.5B's width)."""
    model = (grouped_like_the_default(seed, int8) if grouped
             else quantize_int8(tiny_model(seed=seed, eos_token_id=255), int8))
    rng = random.Random(seed)
    prompt = [rng.randrange(1, 255) for _ in range(48)]
    return model, prompt, greedy_reference(model, prompt, 120), rng.getstate()


@pytest.mark.parametrize("int8", INT8_KINDS)
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("grouped", [False, True])
def test_int8_output_equals_its_own_plain_greedy(seed, kind, int8, grouped):
    model, prompt, reference, rng_state = _model_and_its_greedy(seed, int8, grouped)
    rng = random.Random()
    rng.setstate(rng_state)
    drafter = CombinedDrafter(PredictionDrafter(edited(reference, kind, rng)), PromptLookupDrafter())
    tokenizer = CharTokenizer(eos_token_id=255)
    tokens = []
    for step in Decoder(model, tokenizer, pass_costs=pass_costs(model)).generate(prompt, drafter, 120):
        tokens.extend(step.tokens)
    assert tokens == reference


@pytest.mark.parametrize("int8", INT8_KINDS)
def test_int8_sampling_keeps_the_target_distribution(int8):
    # The verifier sees the int8 model's logits; with drafts they must be the same as one pass per prefix.
    model = quantize_int8(peaky_model(seed=TARGET_SEED), int8)
    table = logits_table(model)
    shape = LogitsShaper(temperature=0.8, top_p=0.95)
    generator = torch.Generator().manual_seed(4321)
    drafts = DraftSource("model", shape, generator)
    counts, mean_accepted = sample_with_verifier(BlockVerifier(shape, seed=8765), table, shape, drafts, 6000, generator)
    assert chi_square_p_value(counts, exact_distribution(table, shape)) > ALPHA
    assert mean_accepted > 0.2


def test_dtype_auto_is_measured_on_a_cpu_and_bfloat16_on_a_gpu(monkeypatch):
    monkeypatch.delenv("REWRITER_DTYPE", raising=False)
    assert resolve_dtype("auto", torch.device("cpu")) == "auto"  # load_model times the candidates
    assert resolve_dtype(None, torch.device("cuda")) == "bfloat16"
    assert resolve_dtype("float32", torch.device("cpu")) == "float32"
    assert resolve_dtype("int8-bf16", torch.device("cpu")) == "int8-bf16"
    with pytest.raises(ModelError, match="unknown dtype"):
        resolve_dtype("int4", torch.device("cpu"))


def test_rewriter_dtype_overrides_auto_and_the_flag_overrides_it(monkeypatch):
    monkeypatch.setenv("REWRITER_DTYPE", "int8-bf16")
    assert resolve_dtype("auto", torch.device("cpu")) == "int8-bf16"
    assert resolve_dtype(None, torch.device("cpu")) == "int8-bf16"
    assert resolve_dtype("float32", torch.device("cpu")) == "float32"
    monkeypatch.setenv("REWRITER_DTYPE", "int3")
    with pytest.raises(ModelError, match="unknown REWRITER_DTYPE 'int3'"):
        resolve_dtype("auto", torch.device("cpu"))


@pytest.mark.parametrize("kind", INT8_KINDS)
def test_int8_on_a_cpu_loads_quantized(tiny_checkpoint, kind):
    loaded = load_model(str(tiny_checkpoint), dtype=kind)
    assert loaded.dtype == kind and int8_kind(loaded.model) == kind
    prior = Decoder(loaded.model, loaded.tokenizer, pass_costs=loaded.pass_costs()).lookahead.prior
    assert prior is (CPU_INT8_BF16_PRIOR if kind == "int8-bf16" else CPU_INT8_PRIOR)


def test_without_an_int8_backend_loading_falls_back_to_float32_with_one_line(tiny_checkpoint, monkeypatch):
    def broken(a, b):
        raise RuntimeError("no int8 kernel for this CPU")

    monkeypatch.setattr(quantize.torch, "_int_mm", broken)
    said = []
    loaded = load_model(str(tiny_checkpoint), dtype="int8", progress=said.append)
    assert loaded.dtype == "float32" and int8_kind(loaded.model) is None
    warnings = [line for line in said if "int8 is unavailable" in line]
    assert len(warnings) == 1 and "no int8 kernel" in warnings[0] and "using float32" in warnings[0]
    # ...and the float32 model decodes.
    assert loaded.model(input_ids=torch.tensor([[1, 2, 3]])).logits.shape[-1] > 0


def test_a_torch_without_int_mm_is_reported_not_crashed(monkeypatch):
    monkeypatch.delattr(quantize.torch, "_int_mm")
    with pytest.raises(QuantizationUnavailable, match="no int8 matrix product"):
        quantize_int8(tiny_model(seed=0))


def test_the_window_prior_follows_the_device_and_dtype():
    assert Lookahead("cpu").prior is CPU_PRIOR
    assert Lookahead("cpu", prior=CPU_INT8_PRIOR).prior is CPU_INT8_PRIOR  # the weights' prior, handed in
    assert Lookahead("cuda", prior=CPU_INT8_PRIOR).prior is GPU_PRIOR
    measured = {size: 0.01 * size for size in CPU_PRIOR}
    assert Lookahead("cpu", prior=measured).prior is measured


class _GroupedAttention:  # what the attention functions read of a layer: 7 query heads per key head
    num_key_value_groups = 7
    is_causal = True


@pytest.mark.parametrize("rows,keys", [(1, 300), (16, 316), (40, 500), (128, 140), (90, 150)])
@pytest.mark.parametrize("float32", [True, False])
def test_decoding_attention_agrees_with_sdpa_in_float64(rows, keys, float32):
    # Grouped-query heads and the cache's mask, as a decoding pass has them.
    generator = torch.Generator().manual_seed(rows)
    query, key, value = (torch.randn(1, heads, length, 64, generator=generator)
                         for heads, length in ((14, rows), (2, keys), (2, keys)))
    mask = torch.ones(1, 1, rows, keys, dtype=torch.bool).tril(keys - rows)
    decoding = attention._span_attention if float32 else attention._float64_decoding_attention
    ours, _ = decoding(_GroupedAttention(), query, key, value, mask, scaling=0.125)
    sdpa, _ = attention._float64_attention(_GroupedAttention(), query, key, value, mask, scaling=0.125, dropout=0.0)
    assert ours.shape == sdpa.shape == (1, rows, 14, 64)
    assert torch.allclose(ours, sdpa, atol=1e-5 if float32 else 1e-6, rtol=0)
    unmasked, _ = decoding(_GroupedAttention(), query, key, value, None, scaling=0.125)
    assert torch.equal(unmasked, ours)  # no mask: causal from the pass's first row, as the mask says


def test_a_batch_mask_hides_keys_from_float32_decoding_attention():
    generator = torch.Generator().manual_seed(0)
    query, key, value = (torch.randn(1, heads, length, 64, generator=generator)
                         for heads, length in ((14, 3), (2, 80), (2, 80)))
    mask = torch.ones(1, 1, 3, 80, dtype=torch.bool).tril(77)
    mask[..., :5] = False  # left padding
    ours, _ = attention._span_attention(_GroupedAttention(), query, key, value, mask, scaling=0.125)
    sdpa, _ = attention._float64_attention(_GroupedAttention(), query, key, value, mask, scaling=0.125, dropout=0.0)
    assert torch.allclose(ours, sdpa, atol=1e-5, rtol=0)


@pytest.mark.parametrize("context", [0, 63, 500, 2040])
@pytest.mark.parametrize("rows", [3, 16, 40, WIDEST_DECODING_PASS])
def test_float32_decoding_attention_gives_each_row_its_bits_alone(context, rows):
    # What makes float32 decoding attention exact: each row's products have the shapes its own
    # position fixes. This machine's kernels keep them for the default model's heads, as the
    # load-time check found; a machine where they do not runs float64 instead (the test below).
    threads = torch.get_num_threads()
    if not attention._float32_keeps_rows(2, 7, 64, threads):
        pytest.skip("this machine's kernels sum a row by the pass's shape: decoding attends in float64")
    generator = torch.Generator().manual_seed(context + rows)
    query = torch.randn(1, 14, rows, 64, generator=generator) * 3
    key, value = (torch.randn(1, 2, context + rows, 64, generator=generator) * 3 for _ in range(2))
    wide, _ = attention._span_attention(None, query, key, value, None)
    for row in range(rows):
        seen = context + row + 1
        alone, _ = attention._span_attention(None, query[:, :, row:row + 1], key[:, :, :seen],
                                                        value[:, :, :seen], None)
        assert torch.equal(alone[0, 0], wide[0, row]), row


def test_where_float32_would_not_keep_rows_decoding_attends_in_float64(monkeypatch):
    monkeypatch.setattr(attention, "_float32_keeps_rows", lambda key_heads, group, width, threads: False)
    generator = torch.Generator().manual_seed(0)
    query, key, value = (torch.randn(1, heads, length, 64, generator=generator)
                         for heads, length in ((14, 20), (2, 300), (2, 300)))
    chosen, _ = attention._int8_attention(_GroupedAttention(), query, key, value, None, scaling=0.125)
    float64, _ = attention._float64_decoding_attention(_GroupedAttention(), query, key, value, None, scaling=0.125)
    float32, _ = attention._span_attention(_GroupedAttention(), query, key, value, None, scaling=0.125)
    assert torch.equal(chosen, float64) and not torch.equal(chosen, float32)


@pytest.mark.parametrize("kind", ["int8", "int8-fbgemm"])
def test_shared_input_products_change_no_bit_and_keep_nothing(kind):
    plain = quantize_int8(tiny_model(seed=3, eos_token_id=255), kind)
    fused = quantize_int8(tiny_model(seed=3, eos_token_id=255), kind)
    assert shared_products.share_input_products(fused) == 2 * 2  # q/k/v and gate/up in each of 2 layers
    tokens = [random.Random(5).randrange(1, 255) for _ in range(90)]
    with torch.inference_mode():
        for model in (plain, fused):
            model.cache = DynamicCache(config=model.config)
            model.prompt = model(input_ids=torch.tensor([tokens[:80]]), cache=model.cache, use_cache=True).logits
            model.step = model(input_ids=torch.tensor([tokens[80:]]), cache=model.cache, use_cache=True).logits
    assert torch.equal(plain.prompt, fused.prompt) and torch.equal(plain.step, fused.step)
    shared = [module for module in fused.modules() if isinstance(module, shared_products._SharedProduct)]
    assert len(shared) == 4 and all(module.last is None for module in shared)  # no prompt's product held


def test_int8_bf16_products_are_not_shared():
    # Its sums are float: a wider product may round differently.
    assert shared_products.share_input_products(quantize_int8(tiny_model(seed=3, eos_token_id=255), "int8-bf16")) == 0


@pytest.mark.parametrize("kind", INT8_KINDS)
def test_float_weights_read_one_at_a_time_round_as_the_live_ones(kind):
    live = tiny_model(seed=3)
    stored = {name: tensor.clone() for name, tensor in live.state_dict().items()}
    from_file = tiny_model(seed=3)
    for module in from_file.modules():  # the weights the model holds are not the ones rounded
        if isinstance(module, torch.nn.Linear):
            module.weight.data.zero_()
    quantize_int8(live, kind)
    quantize_int8(from_file, kind, float_state=stored)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.inference_mode():
        assert torch.equal(live(input_ids=ids).logits, from_file(input_ids=ids).logits)


def test_int8_weights_rounded_a_block_of_rows_at_a_time_equal_the_whole_weight_rounded_at_once(monkeypatch):
    linear = torch.nn.Linear(48, 37)  # 37 rows: blocks of 8 leave a short last one
    with torch.no_grad():
        linear.weight[3] = 0.0  # a row of zeros keeps its least scale
    weight = linear.weight.detach()
    scale = weight.abs().amax(dim=1).clamp(min=1e-12) / 127.0
    whole = torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8)
    monkeypatch.setattr(quantize, "QUANTIZE_ROWS", 8)
    blocks, block_scale = quantize.int8_weights(linear)
    assert blocks.dtype == torch.int8 and torch.equal(blocks, whole) and torch.equal(block_scale, scale)
