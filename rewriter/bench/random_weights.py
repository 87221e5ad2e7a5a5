"""`rewriter bench --random-weights SHAPE`: the decoding core measured on randomly initialised
models at the packaged models' shapes, where no packaged model is at hand (a GPU machine).

A seeded random model's own greedy continuation of a random prompt is the reference; the
prediction is that reference unchanged (the machinery's ceiling) or with three edits in its middle
(recovery and realignment). Side by side, one model at a time: transformers' plain greedy and its
prompt lookup, our loop without a draft, ours with each prediction, on the static path (fixed-shape
passes, CUDA graphs on a GPU) and on the dynamic one (the model's own forward), each checked token
for token against the reference; and one pass of each width after the prompt, on both paths.
"""
from __future__ import annotations

import json
import random
import statistics
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch

# The packaged models' shapes (Qwen2.5-Coder-0.5B and -1.5B), and a tiny one for a quick check
# (a small vocabulary too: on a CPU the output layer would cost most of its time).
SHAPES = {
    "0.5b": dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                 intermediate_size=4864),
    "1.5b": dict(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
                 intermediate_size=8960),
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=128, vocab_size=4096),
}
VOCAB = 151936  # the packaged models' vocabulary
PASS_WIDTHS = (1, 16, 64, 256)

Say = Callable[[str], None]


def _special_ids(vocab: int) -> tuple[int, int]:
    """The start and end tokens: the packaged models' (<|endoftext|>, <|im_end|>), else the last two
    ids. A random model rarely ends on them, so answers run to their length."""
    return (151643, 151645) if vocab == VOCAB else (vocab - 2, vocab - 1)


class _Tokenizer:
    """What the decoding loop reads of a tokenizer; a random model's text is not measured."""

    def __init__(self, eos: int):
        self.eos_token_id = self.pad_token_id = eos

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(0x4E00 + i % 20000) for i in ids if not (skip_special_tokens and i == self.eos_token_id))


def build_model(shape: str, device: torch.device, seed: int = 0):
    """A seeded random Qwen2 model of `shape`, as the project loads one on `device`: bfloat16 and
    batch-invariant on a GPU, float32 (batch-invariant too, so the static path applies) on a CPU."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from ..weights.batch_invariant import make_batch_invariant

    layers: dict[str, Any] = {"vocab_size": VOCAB, **SHAPES[shape]}
    bos, eos = _special_ids(layers["vocab_size"])
    config = Qwen2Config(max_position_embeddings=32768, tie_word_embeddings=True,
                         rope_parameters={"rope_type": "default", "rope_theta": 1e6}, rms_norm_eps=1e-6,
                         initializer_range=0.02, bos_token_id=bos, eos_token_id=eos, pad_token_id=eos,
                         use_sliding_window=False, **layers)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen2ForCausalLM._from_config(config, dtype=dtype)
    model = model.to(device).eval()
    for key, value in (("eos_token_id", eos), ("pad_token_id", eos), ("bos_token_id", bos)):
        setattr(model.generation_config, key, value)
    return make_batch_invariant(model)


def _tokens(rng: random.Random, count: int, vocab: int) -> list[int]:
    """Random ids clear of the special tokens at either end of the vocabulary."""
    return [rng.randrange(min(256, vocab // 4), vocab - min(300, vocab // 4)) for _ in range(count)]


def edited_prediction(reference: list[int], rng: random.Random, vocab: int = VOCAB) -> list[int]:
    """The reference with three edits: 6 tokens the prediction lacks at 30%, 3 replaced by 4 at
    50%, 6 the prediction has in excess at 70%."""
    n = len(reference)
    prediction = list(reference)
    prediction[int(n * 0.7):int(n * 0.7)] = _tokens(rng, 6, vocab)
    prediction[n // 2:n // 2 + 3] = _tokens(rng, 4, vocab)
    del prediction[int(n * 0.3):int(n * 0.3) + 6]
    return prediction


class _Clock:
    def __init__(self, device: torch.device):
        self.device = device

    def __call__(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()


def _generate(model, prompt: list[int], max_new: int, clock: _Clock, **options) -> tuple[list[int], float, int]:
    """transformers' generate, greedy: the tokens, seconds and forward passes."""
    from .bench import PassCounter

    eos = model.generation_config.eos_token_id
    counter = PassCounter(model)
    ids = torch.tensor([prompt], device=clock.device)
    try:
        start = clock()
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=max_new,
                                 eos_token_id=[eos], pad_token_id=eos, **options)
        seconds = clock() - start
    finally:
        counter.close()
    return out[0, len(prompt):].tolist(), seconds, counter.count


def _ours(decoder, prompt: list[int], prediction: list[int] | None, max_new: int, clock: _Clock) -> dict:
    from drafters import rewrite_drafter

    drafter = rewrite_drafter(prediction) if prediction is not None else None
    start = clock()
    tokens: list[int] = []
    stats = None
    for step in decoder.generate(prompt, drafter, max_new):
        tokens.extend(step.tokens)
        stats = step.stats
    seconds = clock() - start
    assert stats is not None
    return {"tokens": tokens, "seconds": seconds, "passes": stats.forward_passes,
            "accepted": stats.accepted_draft_tokens, "rejected": stats.rejected_draft_tokens}


def pass_times(decoder, prompt: list[int], clock: _Clock, reps: int) -> dict[str, float]:
    """Milliseconds of one decoding pass of each width after `prompt` is in the cache (the median
    of `reps` after one warm-up), through the decoder's own pass."""
    from transformers import DynamicCache

    rng = random.Random(11)
    with torch.inference_mode():
        if decoder.static is not None and decoder.static.confirmed():
            cache = decoder.static.fresh(len(prompt) + max(PASS_WIDTHS))
        else:
            cache = DynamicCache(config=decoder.model.config)
        decoder._forward(prompt, cache, last_only=True)
        times = {}
        for width in PASS_WIDTHS:
            ids = _tokens(rng, width, decoder.model.config.vocab_size)
            samples = []
            for i in range(reps + 1):
                start = clock()
                decoder._forward(ids, cache)
                if i:
                    samples.append(clock() - start)
                cache.crop(-width)
            times[str(width)] = round(statistics.median(samples) * 1e3, 3)
    return times


def _row(runs: list[dict], reference: list[int], greedy_s: float) -> dict:
    median = statistics.median(r["seconds"] for r in runs)
    first = runs[0]
    return {"tokens": len(first["tokens"]), "tokens_per_s": round(len(first["tokens"]) / median, 1),
            "median_s": round(median, 4), "passes": first["passes"], "accepted": first.get("accepted"),
            "rejected": first.get("rejected"), "speedup": round(greedy_s / median, 2),
            "identical": all(r["tokens"] == reference[:len(r["tokens"])] and len(r["tokens"]) == len(reference)
                             for r in runs)}


def measure_shape(shape: str, device: torch.device, prompt_tokens: int, max_new: int, reps: int, say: Say) -> dict:
    from ..decoding.decode import Decoder

    clock = _Clock(device)
    model = build_model(shape, device)
    rng = random.Random(1)
    vocab = model.config.vocab_size
    prompt = _tokens(rng, prompt_tokens, vocab)
    tokenizer: Any = _Tokenizer(model.generation_config.eos_token_id)  # what the loop reads of one, by shape
    static = Decoder(model, tokenizer, static=True)
    dynamic = Decoder(model, tokenizer, static=False)
    result: dict = {"shape": shape, "device": str(device), "dtype": str(model.dtype).removeprefix("torch."),
                    "parameters_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1),
                    "prompt_tokens": prompt_tokens, "static_path": static.static is not None}
    say(f"{shape}: {result['parameters_m']} M parameters, {result['dtype']} on {device}; passes after "
        f"{prompt_tokens} tokens")
    result["pass_ms"] = {"static": pass_times(static, prompt, clock, reps + 2),
                         "dynamic": pass_times(dynamic, prompt, clock, reps + 2)}
    say(f"  one pass, ms by width: static {result['pass_ms']['static']}, dynamic {result['pass_ms']['dynamic']}")

    _generate(model, prompt, 8, clock)  # warm-up
    reference, greedy_s, greedy_passes = _generate(model, prompt, max_new, clock)
    result["greedy"] = {"tokens": len(reference), "tokens_per_s": round(len(reference) / greedy_s, 1),
                        "median_s": round(greedy_s, 4), "passes": greedy_passes, "speedup": 1.0, "identical": True}
    say(f"  transformers greedy: {result['greedy']['tokens_per_s']} tok/s ({len(reference)} tokens, the reference)")
    tokens, seconds, passes = _generate(model, prompt, max_new, clock, prompt_lookup_num_tokens=10)
    result["prompt_lookup"] = _row([{"tokens": tokens, "seconds": seconds, "passes": passes}], reference, greedy_s)
    say(f"  transformers prompt lookup: {result['prompt_lookup']['tokens_per_s']} tok/s")

    predictions = {"no_draft": None, "unchanged": list(reference),
                   "edited": edited_prediction(reference, random.Random(2), vocab)}
    # The dynamic path is the model's own forward, one launch at a time: one run of each draft
    # shows what the static path changes (its plain greedy is transformers' above).
    runs = [("static", static, name, reps) for name in predictions]
    runs += [("dynamic", dynamic, name, 1) for name in ("unchanged", "edited")]
    for path, decoder, name, count in runs:
        if path == "static":
            _ours(decoder, prompt, predictions[name], max_new, clock)  # warm-up: the graphs' captures
        row = _row([_ours(decoder, prompt, predictions[name], max_new, clock) for _ in range(count)], reference,
                   greedy_s)
        result[f"ours_{path}_{name}"] = row
        say(f"  ours, {path} path, {name.replace('_', ' ')}: {row['tokens_per_s']} tok/s, {row['passes']} "
            f"passes, {row['speedup']}x greedy, identical {row['identical']}")
    if static.static is not None:
        result["graphs_captured"] = len(static.static.captured)
    result["fused_norms"] = getattr(model.model.norm, "fused", None) is not None
    if device.type == "cuda":
        result["peak_gpu_memory_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
    return result


def random_weights_bench(shapes: list[str], device_name: str | None, prompt_tokens: int, max_new: int, reps: int,
                         json_path: str | None, say: Say) -> int:
    """The exit code: 0 when every output equals its reference, 1 when one differs, 2 bad options."""
    from ..weights.models import pick_device

    unknown = [shape for shape in shapes if shape not in SHAPES]
    if unknown:
        say(f"unknown shape {', '.join(unknown)}: choose from {', '.join(SHAPES)}")
        return 2
    device = pick_device(device_name)
    report: dict = {"torch": torch.__version__, "device": str(device), "shapes": {}}
    if device.type == "cuda":
        report["gpu"] = torch.cuda.get_device_name(device)
    failed = False
    for shape in shapes:
        try:
            report["shapes"][shape] = measure_shape(shape, device, prompt_tokens, max_new, reps, say)
        except Exception as error:  # noqa: BLE001  (the next shape still runs; the report says what broke)
            failed = True
            report["shapes"][shape] = {"error": traceback.format_exc()}
            say(f"{shape} failed: {error!r}")
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
    if json_path:
        with open(json_path, "w") as out:
            json.dump(report, out, indent=1)
    rows = [(shape, name.removeprefix("ours_"), row) for shape, result in report["shapes"].items()
            for name, row in result.items() if isinstance(row, dict) and "tokens_per_s" in row]
    say(f"{'shape':6} {'run':22} {'tok/s':>9} {'passes':>6} {'speed-up':>8}  identical")
    for shape, name, row in rows:
        say(f"{shape:6} {name:22} {row['tokens_per_s']:9.1f} {row['passes']:6} {row['speedup']:7.2f}x  "
            f"{row['identical']}")
    return 0 if all(row["identical"] for _, _, row in rows) and not failed else 1
