"""`rewriter bench`: plain greedy, transformers' prompt lookup and ours, side by side.

Each case is decoded three ways on the same model, prompt and stopping rule (end of turn or
the closing fence). Figures are per case and, in the summary, medians and ratios. When the model
runs in another dtype than float32 (int8 on a CPU), plain greedy decoding of the float32 model
runs too: the reference for what the user gains, and for how often the outputs differ.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import asdict

import torch
from transformers import StoppingCriteria, StoppingCriteriaList

from ..answer import NoCodeBlock, extract_code
from ..decoding.prefix_cache import PrefixCache
from ..decoding.rewrite import Rewriter
from ..edits.options import EditOptions
from ..edits.testrun import DEFAULT_TIMEOUT_S, run_tests
from ..engine import EditRequest
from ..passes import has_row_independent_prompts
from ..prompt import SourceText
from ..results import Stats
from .as_apply import case_session, judged
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
    summarize_tests,
)
from .tries import later_tries, passed_on_try


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


def warm_up(rewriter: Rewriter) -> None:
    """One pass so the first case does not pay for allocator and kernel start-up."""
    _prefill_seconds(rewriter, rewriter.tokenizer.encode("def warm_up():\n    return 1\n") * 8)


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
    row = {
        "id": case.id,
        "dtype": rewriter.loaded.dtype,
        "prompt_tokens": len(prompt_ids),
        "prediction_tokens": len(prediction),
        **_speed_columns(greedy, lookup, tokens, ours_seconds),
        "decode_speedup_vs_greedy": _decode_rate(ours_seconds, stats.prefill_s, len(tokens))
        / _decode_rate(greedy["seconds"], prefill, len(greedy["tokens"])),
        **_pass_columns(greedy, lookup, stats, len(tokens)),
        "prefill_s": prefill,
        "ttft_s": stats.ttft_s,
        "ttft_warm_s": warm_stats.ttft_s,  # the prompt up to the instruction computed ahead
        "warm_cached_prompt_tokens": warm_stats.cached_prompt_tokens,
        "identical_warm": warm_tokens == tokens,
        "finish_reason": stats.finish_reason,
        **(_versus_float32(reference, tokens, ours_seconds) if reference else {}),
    }
    return row, tokens


def _speed_columns(greedy: dict, lookup: dict, tokens: list[int], ours_seconds: float) -> dict:
    """Our output and time against plain greedy's and prompt lookup's."""
    n = len(greedy["tokens"])
    return {
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
    }


def _decode_rate(seconds: float, prefill_s: float, count: int) -> float:
    """Tokens per second after the first: the prompt's pass left out."""
    return (count - 1) / max(seconds - prefill_s, 1e-9)


def _pass_columns(greedy: dict, lookup: dict, stats: Stats, output_tokens: int) -> dict:
    """Forward passes each way, and what became of our drafts."""
    return {
        "greedy_forward_passes": greedy["forward_passes"],
        "prompt_lookup_forward_passes": lookup["forward_passes"],
        "ours_forward_passes": stats.forward_passes,
        "forward_passes_per_token": stats.forward_passes / max(output_tokens, 1),
        "accepted_prediction_tokens": stats.accepted_prediction_tokens,
        "rejected_prediction_tokens": stats.rejected_prediction_tokens,
        "accepted_draft_tokens": stats.accepted_draft_tokens,
        "rejected_draft_tokens": stats.rejected_draft_tokens,
    }


def _versus_float32(reference: dict, tokens: list[int], ours_seconds: float) -> dict:
    """Ours against plain greedy decoding of the float32 model."""
    return {
        "float32_greedy_s": reference["seconds"],
        "float32_greedy_tokens_per_s": len(reference["tokens"]) / reference["seconds"],
        "speedup_vs_float32_greedy": reference["seconds"] / ours_seconds,
        "identical_to_float32_greedy": tokens == reference["tokens"],
    }


def run_bench(rewriter: Rewriter, cases: list[Case], max_new_tokens: int | None, json_path: str | None,
              out=sys.stdout, float32_reference: Rewriter | None = None, pass_costs: dict | None = None) -> dict:
    """`pass_costs`: the CPU paths' pass costs and auto's pick (rewriter.cli), kept in the summary."""
    warm_up(rewriter)
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


def run_tests_case(rewriter: Rewriter, case: Case, options: EditOptions, baselines: bool = False,
                   refusal: Refusal | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                   feedback: bool = False, tries: int = 1) -> dict:
    """One case's file rewritten as `rewriter apply` rewrites it with `options` (as_apply.py), and
    judged by its tests; with `baselines`, plain greedy and prompt lookup decode its first request
    too, for speed; with `feedback`, an answer that did not pass gets a second try (feedback.py),
    judged the same way, under "feedback"; with `tries` above 1, an answer that fails its tests is
    asked again as `apply --test --tries` asks (tries.py), under "tries", and "passed_on_try" says
    which answer passed."""
    row: dict = {"id": case.id, "dtype": rewriter.loaded.dtype}
    if baselines:
        row = {**_measure_case(rewriter, case, options.max_new_tokens)[0], **row}
    verdict = judged(case_session(rewriter, case, options), case, timeout_s)
    seconds = verdict.pop("seconds")
    row = {**row, **verdict, "ours_s": seconds,
           "ours_tokens_per_s": verdict["output_tokens"] / seconds if seconds else 0.0,
           "forward_passes_per_token": verdict.get("forward_passes", 0) / max(verdict["output_tokens"], 1)}
    if tries > 1:
        row["tries_allowed"] = tries
        row["tries"] = later_tries(rewriter, case, row, tries, options, timeout_s)
        row["passed_on_try"] = passed_on_try(row["outcome"], row["tries"])
    if feedback and row["outcome"] != "passed":
        row["feedback"] = _second_try(rewriter, case, row.get("answer", ""), row, options.max_new_tokens, refusal,
                                      timeout_s)
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


def run_tests_bench(rewriter: Rewriter, cases: list[Case], options: EditOptions, json_path: str | None,
                    baselines: bool = False, refusal: Refusal | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S, out=None, feedback: bool = False,
                    tries: int = 1) -> dict:
    out = out or sys.stdout  # looked up now: the stream of the call, not of the import
    warm_up(rewriter)
    columns = TESTS_TABLE_COLUMNS + (FEEDBACK_COLUMNS if feedback else [])
    print(" | ".join(title for title, _, _ in columns), file=out, flush=True)

    def one(case: Case) -> dict:
        return run_tests_case(rewriter, case, options, baselines, refusal, timeout_s, feedback, tries)

    def summarized(rows: list[dict]) -> dict:  # the report names the options it ran
        return {**summarize_tests(rows), "edit_options": asdict(options), "as_apply": options.describe()}

    return run_cases(cases, one, format_tests_row, summarized, format_tests_summary, json_path, out)
