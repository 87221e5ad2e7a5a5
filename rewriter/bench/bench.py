"""`rewriter bench`: plain greedy, transformers' prompt lookup and ours, side by side.

Each case is decoded three ways on the same model, prompt and stopping rule (end of turn or
the closing fence). Figures are per case and, in the summary, medians and ratios. When the model
runs in another dtype than float32 (int8 on a CPU), plain greedy decoding of the float32 model
runs too: the reference for what the user gains, and for how often the outputs differ.
"""
from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import StoppingCriteria, StoppingCriteriaList

from ..answer import NoCodeBlock, extract_code
from ..decoding.prefix_cache import PrefixCache
from ..decoding.rewrite import Rewriter
from ..engine import EditRequest
from ..passes import has_row_independent_prompts
from ..prompt import SourceText
from .cases import Case, run_cases
from .feedback import feedback_prompt, output_tail
from .summary import (
    FEEDBACK_COLUMNS,
    REFERENCE_COLUMNS,
    TABLE_COLUMNS,
    TESTS_TABLE_COLUMNS,
    format_pass_costs,
    format_row,
    format_summary,
    format_tests_row,
    format_tests_summary,
    summarize,
    summarize_sampling,
    summarize_tests,
)
from .testrun import DEFAULT_TIMEOUT_S, run_tests


class FenceCriteria(StoppingCriteria):
    """transformers-side twin of the decoder's closing-fence stop, for the baselines."""

    def __init__(self, rewriter: Rewriter, prompt_length: int):
        self.stop = rewriter.stop
        self.prompt_length = prompt_length

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.Tensor:
        done = self.stop(input_ids[0, self.prompt_length:].tolist()) is not None
        return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)


class PassCounter:
    """Counts the forward passes of `model` until closed (transformers' generate makes them)."""

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
    counter = PassCounter(model)
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


def _decode_warm(rewriter: Rewriter, case: Case, code: str, prompt_ids: list[int], prediction: list[int],
                 budget: int):
    """Ours again, once the prompt up to the instruction was computed ahead (Rewriter.prefill), as an
    editor does while the file is open; nothing kept from the runs before is reused."""
    decoder = rewriter.decoder
    kept = decoder.prefix_cache
    decoder.prefix_cache = PrefixCache(has_row_independent_prompts(decoder.model))
    try:
        rewriter.prefill(EditRequest(code, case.instruction, case.language))
        return _decode_ours(rewriter, prompt_ids, prediction, budget)
    finally:
        decoder.prefix_cache = kept


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
    warm_tokens, warm_stats, _ = _decode_warm(rewriter, case, code, prompt_ids, prediction, budget)

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
        "ttft_warm_s": warm_stats.ttft_s,  # the prompt up to the instruction computed ahead
        "warm_cached_prompt_tokens": warm_stats.cached_prompt_tokens,
        "identical_warm": warm_tokens == tokens,
        "finish_reason": stats.finish_reason,
        **versus_float32,
    }
    return row, tokens


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
        return format_summary(summary) + (format_pass_costs(pass_costs) if pass_costs else "")

    return run_cases(cases, lambda case: run_case(rewriter, case, max_new_tokens, float32_reference),
                      format_row, summarize_with_costs, format_with_costs, json_path, out)


# Edit quality ----------------------------------------------------------------------------------
# `rewriter bench CASES --tests`: is the edit right? Each case's tests run on the edited code.

# The integrity guard's verdict on an answer: the reason it is refused, or None.
Refusal = Callable[[Case, str], str | None]


def integrity_refusal(case: Case, edited: str) -> str | None:
    """The integrity check and the syntax guard as `rewriter apply` runs them on a whole-file rewrite."""
    from ..edits.checks.integrity import FileIntegrity
    from ..edits.node_kinds import grammar_for

    integrity = FileIntegrity(case.before, grammar_for(case.language))
    verdict = integrity.check(0, len(case.before), edited, case.instruction)
    if verdict.refused:
        return verdict.reason
    problem = integrity.syntax.problem(0, len(case.before), verdict.text) if verdict.text != case.before else None
    return f"the rewrite does not parse ({problem.describe()})" if problem else None


def judge_answer(case: Case, answer: str, refusal: Refusal | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    """The outcome of one answer, and why. A refused edit is no pass, but its tests run too:
    `refused_tests_passed` tells a refusal of a right edit (a false refusal) from a catch."""
    try:
        code = extract_code(answer)
    except NoCodeBlock:
        return {"outcome": "no_code_block"}
    edited = SourceText.from_text(case.before).restore(code)
    reason = refusal(case, edited) if refusal else None
    if not reason and edited == case.before:
        return {"outcome": "unchanged"}
    result = run_tests(edited, case.tests or "", timeout_s)
    outcome = "passed" if result.passed else "timed_out" if result.timed_out else "failed"
    verdict = {"outcome": outcome, "edited": edited, "test_s": result.seconds}
    if reason:
        verdict = {**verdict, "outcome": "refused", "reason": reason, "refused_tests_passed": result.passed}
    if not result.passed:
        verdict["test_output"] = output_tail(result.output)
    return verdict


def run_tests_case(rewriter: Rewriter, case: Case, max_new_tokens: int | None, baselines: bool = False,
                   refusal: Refusal | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                   feedback: bool = False) -> dict:
    """One case decoded and judged; with `feedback`, a first answer that did not pass gets a
    second try (feedback.py), judged the same way, under "feedback"."""
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
    row = {**row, "answer": answer, **judge_answer(case, answer, refusal, timeout_s)}
    if feedback and row["outcome"] != "passed":
        row["feedback"] = _second_try(rewriter, case, answer, row, max_new_tokens, refusal, timeout_s)
    if feedback:
        row["after_feedback"] = row["feedback"]["outcome"] if "feedback" in row else row["outcome"]
    return row


def _second_try(rewriter: Rewriter, case: Case, first_answer: str, verdict: dict, max_new_tokens: int | None,
                refusal: Refusal | None, timeout_s: float) -> dict:
    """The answer after feedback on the first, judged."""
    prompt_ids, prediction, budget = rewriter.fit(feedback_prompt(case, first_answer, verdict, timeout_s),
                                                  max_new_tokens)
    tokens, stats, seconds = _decode_ours(rewriter, prompt_ids, prediction, budget)
    answer: str = rewriter.tokenizer.decode(tokens, skip_special_tokens=True)  # type: ignore[assignment]  # one sequence
    return {"prompt_tokens": len(prompt_ids), "output_tokens": len(tokens), "ours_s": seconds,
            "finish_reason": stats.finish_reason, "answer": answer, **judge_answer(case, answer, refusal, timeout_s)}


def run_tests_bench(rewriter: Rewriter, cases: list[Case], max_new_tokens: int | None, json_path: str | None,
                    baselines: bool = False, refusal: Refusal | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S, out=sys.stdout, feedback: bool = False) -> dict:
    _prefill_seconds(rewriter, rewriter.tokenizer.encode("def warm_up():\n    return 1\n") * 8)
    columns = TESTS_TABLE_COLUMNS + (FEEDBACK_COLUMNS if feedback else [])
    print(" | ".join(title for title, _, _ in columns), file=out, flush=True)

    def one(case: Case) -> dict:
        return run_tests_case(rewriter, case, max_new_tokens, baselines, refusal, timeout_s, feedback)

    return run_cases(cases, one, format_tests_row, summarize_tests, format_tests_summary, json_path, out)


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
