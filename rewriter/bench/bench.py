"""`rewriter bench`: plain greedy, transformers' prompt lookup and ours, side by side.

Each case is decoded three ways on the same model, prompt and stopping rule (end of turn or
the closing fence). Figures are per case and, in the summary, medians and ratios. When the model
runs in another dtype than float32 (int8 on a CPU), plain greedy decoding of the float32 model
runs too: the reference for what the user gains, and for how often the outputs differ.
"""
from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import StoppingCriteria, StoppingCriteriaList

from ..decoding.rewrite import Rewriter
from ..prompt import NoCodeBlock, SourceText, extract_code
from .cases import Case, run_cases
from .testrun import DEFAULT_TIMEOUT_S, run_tests


class FenceCriteria(StoppingCriteria):
    """transformers-side twin of the decoder's closing-fence stop, for the baselines."""

    def __init__(self, rewriter: Rewriter, prompt_length: int):
        self.stop = rewriter.stop
        self.prompt_length = prompt_length

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.Tensor:
        done = self.stop(input_ids[0, self.prompt_length:].tolist()) is not None
        return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)


class _PassCounter:
    def __init__(self, model: torch.nn.Module):
        self.count = 0
        self._hook = model.register_forward_pre_hook(self._seen)

    def _seen(self, module, args):
        self.count += 1

    def close(self):
        self._hook.remove()


def _baseline(rewriter: Rewriter, prompt_ids: list[int], budget: int, **options) -> dict:
    model = rewriter.loaded.model
    ids = torch.tensor([prompt_ids], device=rewriter.loaded.device)
    counter = _PassCounter(model)
    start = time.perf_counter()
    try:
        with torch.inference_mode():
            out = model.generate(  # type: ignore[operator]  # a causal LM: GenerationMixin's generate
                ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=budget,
                eos_token_id=sorted(rewriter.decoder.eos_ids), pad_token_id=rewriter.tokenizer.pad_token_id,
                stopping_criteria=StoppingCriteriaList([FenceCriteria(rewriter, len(prompt_ids))]),
                **options,
            )
    finally:
        counter.close()
    seconds = time.perf_counter() - start
    tokens = out[0, len(prompt_ids):].tolist()
    return {"tokens": tokens, "seconds": seconds, "forward_passes": counter.count}


def _prefill_seconds(rewriter: Rewriter, prompt_ids: list[int]) -> float:
    model = rewriter.loaded.model
    ids = torch.tensor([prompt_ids], device=rewriter.loaded.device)
    start = time.perf_counter()
    with torch.inference_mode():
        model(input_ids=ids, logits_to_keep=1)
    return time.perf_counter() - start


def _decode_ours(rewriter: Rewriter, prompt_ids: list[int], prediction: list[int], budget: int):
    """Our decoding of one prompt: output tokens, the decoder's stats, wall-clock seconds."""
    start = time.perf_counter()
    tokens: list[int] = []
    for step in rewriter.decoder.generate(prompt_ids, rewriter.drafter(prediction), budget, rewriter.stop):
        tokens.extend(step.tokens)
        stats = step.stats
    return tokens, stats, time.perf_counter() - start


def run_case(rewriter: Rewriter, case: Case, max_new_tokens: int | None,
             float32_reference: Rewriter | None = None) -> dict:
    return _measure_case(rewriter, case, max_new_tokens, float32_reference)[0]


def _measure_case(rewriter: Rewriter, case: Case, max_new_tokens: int | None,
                  float32_reference: Rewriter | None = None) -> tuple[dict, list[int]]:
    """The three-way comparison's row, and our output tokens."""
    code = SourceText.from_text(case.before).code
    prompt_ids, prediction, budget = rewriter.plan(code, case.instruction, case.language, None, max_new_tokens)
    reference = _baseline(float32_reference, prompt_ids, budget) if float32_reference else None
    prefill = _prefill_seconds(rewriter, prompt_ids)
    greedy = _baseline(rewriter, prompt_ids, budget)
    lookup = _baseline(rewriter, prompt_ids, budget, prompt_lookup_num_tokens=10)
    tokens, stats, ours_seconds = _decode_ours(rewriter, prompt_ids, prediction, budget)

    n = len(greedy["tokens"])

    def decode_rate(seconds: float, prefill_s: float, count: int) -> float:
        return (count - 1) / max(seconds - prefill_s, 1e-9)

    versus_float32 = {}
    if reference:
        versus_float32 = {
            "float32_greedy_s": reference["seconds"],
            "float32_greedy_tokens_per_s": len(reference["tokens"]) / reference["seconds"],
            "speedup_vs_float32_greedy": reference["seconds"] / ours_seconds,
            "identical_to_float32_greedy": tokens == reference["tokens"],
        }
    row = {
        "id": case.id,
        "dtype": rewriter.loaded.dtype,
        "prompt_tokens": len(prompt_ids),
        "prediction_tokens": len(prediction),
        "output_tokens": len(tokens),
        "greedy_output_tokens": n,
        "identical_to_greedy": tokens == greedy["tokens"],
        "identical_lookup_to_greedy": lookup["tokens"] == greedy["tokens"],
        "greedy_s": greedy["seconds"],
        "prompt_lookup_s": lookup["seconds"],
        "ours_s": ours_seconds,
        "greedy_tokens_per_s": n / greedy["seconds"],
        "prompt_lookup_tokens_per_s": len(lookup["tokens"]) / lookup["seconds"],
        "ours_tokens_per_s": len(tokens) / ours_seconds,
        "speedup_vs_greedy": greedy["seconds"] / ours_seconds,
        "speedup_vs_prompt_lookup": lookup["seconds"] / ours_seconds,
        "prompt_lookup_speedup_vs_greedy": greedy["seconds"] / lookup["seconds"],
        "decode_speedup_vs_greedy": decode_rate(ours_seconds, stats.prefill_s, len(tokens))
        / decode_rate(greedy["seconds"], prefill, n),
        "greedy_forward_passes": greedy["forward_passes"],
        "prompt_lookup_forward_passes": lookup["forward_passes"],
        "ours_forward_passes": stats.forward_passes,
        "forward_passes_per_token": stats.forward_passes / max(len(tokens), 1),
        "accepted_prediction_tokens": stats.accepted_prediction_tokens,
        "rejected_prediction_tokens": stats.rejected_prediction_tokens,
        "accepted_draft_tokens": stats.accepted_draft_tokens,
        "rejected_draft_tokens": stats.rejected_draft_tokens,
        "prefill_s": prefill,
        "ttft_s": stats.ttft_s,
        "finish_reason": stats.finish_reason,
        **versus_float32,
    }
    return row, tokens


def summarize(rows: list[dict]) -> dict:
    def median(key: str) -> float:
        return statistics.median(row[key] for row in rows) if rows else 0.0

    with_reference = [row for row in rows if "float32_greedy_s" in row]
    versus_float32 = {}
    if with_reference:
        versus_float32 = {
            "median_speedup_vs_float32_greedy": statistics.median(
                row["speedup_vs_float32_greedy"] for row in with_reference),
            "identical_to_float32_greedy": sum(row["identical_to_float32_greedy"] for row in with_reference),
            "median_float32_greedy_tokens_per_s": statistics.median(
                row["float32_greedy_tokens_per_s"] for row in with_reference),
        }
    return {
        "cases": len(rows),
        "dtype": rows[0]["dtype"] if rows else "",
        **versus_float32,
        "identical_to_greedy": sum(row["identical_to_greedy"] for row in rows),
        "median_speedup_vs_greedy": median("speedup_vs_greedy"),
        "median_speedup_vs_prompt_lookup": median("speedup_vs_prompt_lookup"),
        "min_speedup_vs_prompt_lookup": min((row["speedup_vs_prompt_lookup"] for row in rows), default=0.0),
        "median_prompt_lookup_speedup_vs_greedy": median("prompt_lookup_speedup_vs_greedy"),
        "median_forward_passes_per_token": median("forward_passes_per_token"),
        "median_decode_speedup_vs_greedy": median("decode_speedup_vs_greedy"),
        "median_ttft_s": median("ttft_s"),
        "median_tokens_per_s": {
            "greedy": median("greedy_tokens_per_s"),
            "prompt_lookup": median("prompt_lookup_tokens_per_s"),
            "ours": median("ours_tokens_per_s"),
        },
        "accepted_prediction_tokens": sum(row["accepted_prediction_tokens"] for row in rows),
        "rejected_prediction_tokens": sum(row["rejected_prediction_tokens"] for row in rows),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


TABLE_COLUMNS = [
    ("case", "id", "{}"), ("out", "output_tokens", "{}"), ("greedy s", "greedy_s", "{:.1f}"),
    ("lookup s", "prompt_lookup_s", "{:.1f}"), ("ours s", "ours_s", "{:.1f}"),
    ("tok/s", "ours_tokens_per_s", "{:.1f}"), ("x greedy", "speedup_vs_greedy", "{:.2f}"),
    ("x lookup", "speedup_vs_prompt_lookup", "{:.2f}"), ("passes/tok", "forward_passes_per_token", "{:.3f}"),
    ("acc", "accepted_prediction_tokens", "{}"), ("rej", "rejected_prediction_tokens", "{}"),
    ("same", "identical_to_greedy", "{}"),
]
REFERENCE_COLUMNS = [("f32 s", "float32_greedy_s", "{:.1f}"), ("x f32", "speedup_vs_float32_greedy", "{:.2f}"),
                     ("=f32", "identical_to_float32_greedy", "{}")]


def columns(row: dict) -> list:
    return TABLE_COLUMNS + (REFERENCE_COLUMNS if "float32_greedy_s" in row else [])


def format_row(row: dict) -> str:
    cells = [fmt.format(row[key]) for _, key, fmt in columns(row)]
    cells[0] = cells[0].rsplit("/", 1)[-1]
    return " | ".join(cells)


def format_summary(summary: dict) -> str:
    rates = summary["median_tokens_per_s"]
    reference = []
    if "median_speedup_vs_float32_greedy" in summary:
        reference = [
            f"float32 greedy (the reference): median {summary['median_float32_greedy_tokens_per_s']:.1f} tokens/s; "
            f"ours {summary['median_speedup_vs_float32_greedy']:.2f}x faster; output identical to float32 greedy "
            f"in {summary['identical_to_float32_greedy']}/{summary['cases']} cases"
        ]
    return "\n".join([
        f"dtype: {summary['dtype']}; cases: {summary['cases']}, identical to greedy of the same model: "
        f"{summary['identical_to_greedy']}/{summary['cases']}",
        f"median tokens/s: greedy {rates['greedy']:.1f}, prompt lookup {rates['prompt_lookup']:.1f}, "
        f"ours {rates['ours']:.1f}",
        f"median speed-up: {summary['median_speedup_vs_greedy']:.2f}x vs greedy "
        f"({summary['median_decode_speedup_vs_greedy']:.2f}x decoding only), "
        f"{summary['median_speedup_vs_prompt_lookup']:.2f}x vs prompt lookup "
        f"(lowest {summary['min_speedup_vs_prompt_lookup']:.2f}x); prompt lookup itself "
        f"{summary['median_prompt_lookup_speedup_vs_greedy']:.2f}x vs greedy",
        f"median forward passes per token: {summary['median_forward_passes_per_token']:.3f}, "
        f"median time to first token: {summary['median_ttft_s']:.2f}s, peak RSS: {summary['peak_rss_mb']:.0f} MB",
        f"prediction tokens: {summary['accepted_prediction_tokens']} accepted, "
        f"{summary['rejected_prediction_tokens']} rejected",
        *reference,
    ])


def run_bench(rewriter: Rewriter, cases: list[Case], max_new_tokens: int | None, json_path: str | None,
              out=sys.stdout, float32_reference: Rewriter | None = None, pass_costs: dict | None = None) -> dict:
    """`pass_costs`: the CPU paths' pass costs and auto's pick (rewriter.cli), kept in the summary."""
    # One warm-up pass so the first case does not pay for allocator and kernel start-up.
    _prefill_seconds(rewriter, rewriter.tokenizer.encode("def warm_up():\n    return 1\n") * 8)
    header = TABLE_COLUMNS + (REFERENCE_COLUMNS if float32_reference else [])
    print(" | ".join(title for title, _, _ in header), file=out, flush=True)

    def summarize_with_costs(rows: list[dict]) -> dict:
        return {**summarize(rows), **({"pass_costs": pass_costs} if pass_costs else {})}

    def format_with_costs(summary: dict) -> str:
        text = format_summary(summary)
        if pass_costs:
            widths = sorted({int(w) for measured in pass_costs["ms"].values() for w in measured})
            costs = "; ".join(f"{name} " + "/".join(f"{measured[str(w)]:.0f}" if str(w) in measured else "-"
                                                    for w in widths)
                              for name, measured in pass_costs["ms"].items())
            text += (f"\npass costs (ms, {'/'.join(map(str, widths))} tokens): {costs}; "
                     f"auto picks {pass_costs['auto_choice']} on this machine")
        return text

    return run_cases(cases, lambda case: run_case(rewriter, case, max_new_tokens, float32_reference),
                      format_row, summarize_with_costs, format_with_costs, json_path, out)


# Edit quality ----------------------------------------------------------------------------------
# `rewriter bench CASES --tests`: is the edit right? Each case's tests run on the edited code.

OUTCOMES = ("passed", "failed", "timed_out", "unchanged", "no_code_block", "refused")

# The integrity guard's verdict on an answer: the reason it is refused, or None.
Refusal = Callable[[Case, str], str | None]


def integrity_refusal(case: Case, edited: str) -> str | None:
    """The integrity check and the syntax guard as `rewriter apply` runs them on a whole-file rewrite."""
    from ..edits.integrity import FileIntegrity
    from ..edits.node_kinds import grammar_for

    integrity = FileIntegrity(case.before, grammar_for(case.language))
    verdict = integrity.check(0, len(case.before), edited, case.instruction)
    if verdict.refused:
        return verdict.reason
    problem = integrity.syntax.problem(0, len(case.before), verdict.text) if verdict.text != case.before else None
    return f"the rewrite does not parse ({problem.describe()})" if problem else None


def judge_answer(case: Case, answer: str, refusal: Refusal | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    """The outcome of one answer, and why: the tests run only on a real, accepted edit."""
    try:
        code = extract_code(answer)
    except NoCodeBlock:
        return {"outcome": "no_code_block"}
    edited = SourceText.from_text(case.before).restore(code)
    reason = refusal(case, edited) if refusal else None
    if reason:
        return {"outcome": "refused", "reason": reason, "edited": edited}
    if edited == case.before:
        return {"outcome": "unchanged"}
    result = run_tests(edited, case.tests or "", timeout_s)
    outcome = "passed" if result.passed else "timed_out" if result.timed_out else "failed"
    verdict = {"outcome": outcome, "edited": edited, "test_s": result.seconds}
    if not result.passed:
        verdict["test_output"] = result.output[-600:]
    return verdict


def run_tests_case(rewriter: Rewriter, case: Case, max_new_tokens: int | None, baselines: bool = False,
                   refusal: Refusal | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    if baselines:
        row, tokens = _measure_case(rewriter, case, max_new_tokens)
    else:
        code = SourceText.from_text(case.before).code
        prompt_ids, prediction, budget = rewriter.plan(code, case.instruction, case.language, None, max_new_tokens)
        tokens, stats, seconds = _decode_ours(rewriter, prompt_ids, prediction, budget)
        row = {
            "id": case.id, "dtype": rewriter.loaded.dtype, "prompt_tokens": len(prompt_ids),
            "prediction_tokens": len(prediction), "output_tokens": len(tokens),
            "ours_s": seconds, "ours_tokens_per_s": len(tokens) / seconds,
            "ours_forward_passes": stats.forward_passes,
            "forward_passes_per_token": stats.forward_passes / max(len(tokens), 1),
            "accepted_prediction_tokens": stats.accepted_prediction_tokens,
            "rejected_prediction_tokens": stats.rejected_prediction_tokens,
            "ttft_s": stats.ttft_s, "finish_reason": stats.finish_reason,
        }
    answer: str = rewriter.tokenizer.decode(tokens, skip_special_tokens=True)  # type: ignore[assignment]  # one sequence
    return {**row, "answer": answer, **judge_answer(case, answer, refusal, timeout_s)}


def summarize_tests(rows: list[dict]) -> dict:
    counts = {outcome: sum(row["outcome"] == outcome for row in rows) for outcome in OUTCOMES}
    tokens = sum(row["output_tokens"] for row in rows)
    seconds = sum(row["ours_s"] for row in rows)
    summary = {
        "cases": len(rows),
        "dtype": rows[0]["dtype"] if rows else None,
        "tests_passed": counts["passed"],
        "pass_rate": counts["passed"] / len(rows) if rows else 0.0,
        "tests_failed": counts["failed"],
        "timed_out": counts["timed_out"],
        "unchanged": counts["unchanged"],
        "no_code_block": counts["no_code_block"],
        "refused": counts["refused"],
        "cut_at_token_limit": sum(row["finish_reason"] == "length" for row in rows),
        "tokens_per_s": tokens / seconds if seconds else 0.0,  # all output tokens over all decoding time
        "median_tokens_per_s": statistics.median(row["ours_tokens_per_s"] for row in rows) if rows else 0.0,
        "median_forward_passes_per_token": statistics.median(row["forward_passes_per_token"] for row in rows)
        if rows else 0.0,
        "output_tokens": tokens,
        "decode_s": seconds,
        "accepted_prediction_tokens": sum(row["accepted_prediction_tokens"] for row in rows),
        "rejected_prediction_tokens": sum(row["rejected_prediction_tokens"] for row in rows),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if rows and "identical_to_greedy" in rows[0]:
        summary["identical_to_greedy"] = sum(row["identical_to_greedy"] for row in rows)
        summary["median_speedup_vs_greedy"] = statistics.median(row["speedup_vs_greedy"] for row in rows)
    return summary


TESTS_TABLE_COLUMNS = [
    ("case", "id", "{}"), ("out", "output_tokens", "{}"), ("ours s", "ours_s", "{:.1f}"),
    ("tok/s", "ours_tokens_per_s", "{:.1f}"), ("passes/tok", "forward_passes_per_token", "{:.3f}"),
    ("acc", "accepted_prediction_tokens", "{}"), ("rej", "rejected_prediction_tokens", "{}"),
    ("outcome", "outcome", "{}"),
]


def format_tests_summary(summary: dict) -> str:
    lines = [
        f"cases: {summary['cases']}, tests passed: {summary['tests_passed']} ({100 * summary['pass_rate']:.1f}%), "
        f"failed: {summary['tests_failed']}, timed out: {summary['timed_out']}, unchanged: {summary['unchanged']}, "
        f"no code block: {summary['no_code_block']}, refused: {summary['refused']} "
        f"(cut at the token limit: {summary['cut_at_token_limit']})",
        f"tokens/s: {summary['tokens_per_s']:.1f} overall ({summary['output_tokens']} tokens in "
        f"{summary['decode_s']:.1f}s), median {summary['median_tokens_per_s']:.1f}; median forward passes per "
        f"token: {summary['median_forward_passes_per_token']:.3f}; prediction tokens: "
        f"{summary['accepted_prediction_tokens']} accepted, {summary['rejected_prediction_tokens']} rejected; "
        f"peak RSS: {summary['peak_rss_mb']:.0f} MB",
    ]
    if "identical_to_greedy" in summary:
        lines.append(f"identical to greedy: {summary['identical_to_greedy']}/{summary['cases']}, "
                     f"median speed-up vs greedy: {summary['median_speedup_vs_greedy']:.2f}x")
    return "\n".join(lines)


def run_tests_bench(rewriter: Rewriter, cases: list[Case], max_new_tokens: int | None, json_path: str | None,
                    baselines: bool = False, refusal: Refusal | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S, out=sys.stdout) -> dict:
    _prefill_seconds(rewriter, rewriter.tokenizer.encode("def warm_up():\n    return 1\n") * 8)
    print(" | ".join(title for title, _, _ in TESTS_TABLE_COLUMNS), file=out, flush=True)

    def format_one(row: dict) -> str:
        cells = [fmt.format(row[key]) for _, key, fmt in TESTS_TABLE_COLUMNS]
        return " | ".join([cells[0].rsplit("/", 1)[-1], *cells[1:]])

    return run_cases(cases, lambda case: run_tests_case(rewriter, case, max_new_tokens, baselines, refusal, timeout_s),
                      format_one, summarize_tests, format_tests_summary, json_path, out)


# Sampling modes ---------------------------------------------------------------------------------
# Separate from the greedy comparison above: token vs block verification under sampling,
# prediction vs draft model vs both, and MJSD (which changes the output) against greedy.


class _CountingDrafter:
    """Counts verified drafts and accepted tokens for the mean accepted length."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.drafts = 0
        self.accepted = 0

    def propose(self, tokens, prompt_length, limit):
        return self.inner.propose(tokens, prompt_length, limit)

    def feedback(self, draft, accepted):
        self.drafts += 1
        self.accepted += accepted
        self.inner.feedback(draft, accepted)


def _decode_mode(rewriter: Rewriter, prompt_ids: list[int], budget: int, drafter, verifier) -> dict:
    counting = _CountingDrafter(drafter) if drafter is not None else None
    tokens: list[int] = []
    start = time.perf_counter()
    for step in rewriter.decoder.generate(prompt_ids, counting, budget, rewriter.stop, verifier=verifier):
        tokens.extend(step.tokens)
        stats = step.stats
    seconds = time.perf_counter() - start
    return {
        "tokens": tokens, "output_tokens": len(tokens), "seconds": seconds,
        "tokens_per_s": len(tokens) / seconds, "forward_passes": stats.forward_passes,
        "drafts_verified": counting.drafts if counting else 0,
        "mean_accepted_length": counting.accepted / counting.drafts if counting and counting.drafts else 0.0,
        "accepted_prediction_tokens": stats.accepted_prediction_tokens,
        "accepted_draft_tokens": stats.accepted_draft_tokens,
    }


def perplexity(rewriter: Rewriter, prompt_ids: list[int], output: list[int]) -> float:
    """exp(mean negative log-likelihood) of `output` after the prompt, under the target model."""
    model = rewriter.loaded.model
    ids = torch.tensor([prompt_ids + output], device=rewriter.loaded.device)
    with torch.inference_mode():
        logits = model(input_ids=ids, logits_to_keep=len(output) + 1).logits[0, :-1].float()
    logp = torch.log_softmax(logits, -1).gather(1, torch.tensor(output, device=logits.device)[:, None])
    return float(torch.exp(-logp.mean()))


def run_sampling_case(rewriter: Rewriter, case: Case, max_new_tokens: int | None, params,
                      draft=None, mjsd_tau: float | None = None) -> dict:
    """One case decoded in each sampling mode that the settings ask for."""
    from dataclasses import replace

    from drafters.draft_model import PredictionThenModelDrafter

    from ..decoding.sampling import make_verifier, model_drafter

    code = SourceText.from_text(case.before).code
    prompt_ids, prediction, budget = rewriter.plan(code, case.instruction, case.language, None, max_new_tokens)
    modes: dict[str, dict] = {}

    def verifier(kind: str | None = None):
        return make_verifier(replace(params, verification=kind) if kind else params)

    modes["plain"] = _decode_mode(rewriter, prompt_ids, budget, None, verifier())
    if not params.greedy:
        for verification in ("token", "block"):
            modes[f"prediction/{verification}"] = _decode_mode(rewriter, prompt_ids, budget,
                                                              rewriter.drafter(prediction), verifier(verification))
    if draft is not None:
        def small():
            return model_drafter(rewriter, draft, params)

        kinds = ("token", "block") if not params.greedy else (None,)
        for kind in kinds:
            suffix = f"/{kind}" if kind else ""
            if params.greedy:
                modes["prediction"] = _decode_mode(rewriter, prompt_ids, budget, rewriter.drafter(prediction),
                                                   verifier())
            modes[f"draft_model{suffix}"] = _decode_mode(rewriter, prompt_ids, budget, small(), verifier(kind))
            modes[f"both{suffix}"] = _decode_mode(
                rewriter, prompt_ids, budget, PredictionThenModelDrafter(rewriter.drafter(prediction), small()),
                verifier(kind))
    if mjsd_tau is not None and draft is not None:
        from ..decoding.mjsd import MJSDVerifier

        if params.greedy:
            greedy = modes["plain"]
        else:
            greedy = modes["greedy"] = _decode_mode(rewriter, prompt_ids, budget, None, None)
        mjsd = _decode_mode(rewriter, prompt_ids, budget,
                            PredictionThenModelDrafter(rewriter.drafter(prediction),
                                                       model_drafter(rewriter, draft, params, beam=True)),
                            MJSDVerifier(mjsd_tau))
        modes["mjsd"] = mjsd
        mjsd["perplexity"] = perplexity(rewriter, prompt_ids, mjsd["tokens"])
        greedy["perplexity"] = perplexity(rewriter, prompt_ids, greedy["tokens"])
        mjsd["identical_to_greedy"] = mjsd["tokens"] == greedy["tokens"]
    plain_rate = modes["plain"]["tokens_per_s"]
    for result in modes.values():
        result["speedup_vs_plain"] = result["tokens_per_s"] / plain_rate
        del result["tokens"]
    return {"id": case.id, "prompt_tokens": len(prompt_ids), "prediction_tokens": len(prediction), "modes": modes}


def summarize_sampling(rows: list[dict]) -> dict:
    names = list(rows[0]["modes"]) if rows else []
    summary = {}
    for name in names:
        results = [row["modes"][name] for row in rows if name in row["modes"]]
        entry = {key: statistics.median(r[key] for r in results)
                 for key in ("tokens_per_s", "speedup_vs_plain", "mean_accepted_length", "forward_passes")}
        if "perplexity" in results[0]:
            entry["perplexity"] = statistics.median(r["perplexity"] for r in results)
        summary[name] = entry
    return summary


def run_sampling_bench(rewriter: Rewriter, cases: list[Case], max_new_tokens: int | None, params,
                       draft=None, mjsd_tau: float | None = None, json_path: str | None = None,
                       out=sys.stdout) -> dict:
    _prefill_seconds(rewriter, rewriter.tokenizer.encode("def warm_up():\n    return 1\n") * 8)
    rows = []
    for case in cases:
        row = run_sampling_case(rewriter, case, max_new_tokens, params, draft, mjsd_tau)
        rows.append(row)
        for name, result in row["modes"].items():
            extra = f", perplexity {result['perplexity']:.3f}" if "perplexity" in result else ""
            print(f"{case.id.rsplit('/', 1)[-1]} {name}: {result['output_tokens']} tokens, "
                  f"{result['tokens_per_s']:.2f} tok/s ({result['speedup_vs_plain']:.2f}x plain), "
                  f"mean accepted {result['mean_accepted_length']:.2f} over {result['drafts_verified']} drafts, "
                  f"{result['forward_passes']} passes{extra}", file=out, flush=True)
        if json_path:
            Path(json_path).write_text(json.dumps({"cases": rows}, indent=2) + "\n", encoding="utf-8")
    summary = summarize_sampling(rows)
    print("medians: " + json.dumps(summary, indent=1), file=out, flush=True)
    if json_path:
        Path(json_path).write_text(json.dumps({"summary": summary, "cases": rows}, indent=2) + "\n", encoding="utf-8")
    return {"summary": summary, "cases": rows}
