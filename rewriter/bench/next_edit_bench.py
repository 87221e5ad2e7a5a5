"""`rewriter bench --next-edit`: the next-edit cases (next_edit_cases.py) through the product's own
suggestion path, rewriter.next_edit.suggest.suggest, as the language server calls it: right, wrong,
none and no-op quiet; its latency cold (no prefix kept) and with the prompt's stable part computed
ahead (Rewriter.prefill_prompt, as the server's prefill ahead does); and the same prompt decoded by
plain greedy decoding: tokens/s side by side, and whether the answers are identical. Loads the
decoding core when run, never when imported."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..next_edit.base import NextEditFormat, NextEditPrompt
from ..next_edit.suggest import Outcome, Suggestion, suggest
from .cases import run_cases
from .next_edit_cases import NextEditCase, judge

if TYPE_CHECKING:
    from ..decoding.rewrite import Rewriter


def forget_prefixes(rewriter: Rewriter) -> None:
    """Empty the decoder's prefix cache: the next request starts cold."""
    if rewriter.decoder.prefix_cache is not None:
        rewriter.decoder.prefix_cache.kept.clear()


def suggested_document(text: str, suggestion: Suggestion | None) -> str | None:
    """The document once the suggestion is applied; None when there is none."""
    if suggestion is None:
        return None
    lines = text.splitlines(keepends=True)

    def offset(position: tuple[int, int]) -> int:
        line, column = position
        return sum(len(kept) for kept in lines[:line]) + column

    return text[:offset(suggestion.start)] + suggestion.text + text[offset(suggestion.end):]


def timed(action: Callable[[], object]) -> tuple[object, float]:
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started


def plain_greedy(rewriter: Rewriter, prompt: NextEditPrompt) -> dict:
    """The prompt decoded cold by plain greedy decoding (no draft), with the suggestion's budget and stops."""
    from ..decoding.rendered import GROWTH, prompt_ids, stop_check
    from ..prompt import prediction_ids

    ids = prompt_ids(rewriter, prompt)
    budget = min(len(prediction_ids(rewriter.tokenizer, prompt.prediction)) + GROWTH,
                 rewriter.loaded.context_length - len(ids))
    forget_prefixes(rewriter)
    text, stats = "", None
    for step in rewriter.decoder.generate(ids, None, budget, stop_check(rewriter.tokenizer, prompt)):
        text, stats = text + step.text, step.stats
    return {"text": text, "stats": stats, "prompt_tokens": len(ids)}


def speed(stats) -> dict:
    decoding_s = max(stats.total_s - stats.ttft_s, 1e-9)
    return {"seconds": stats.total_s, "prefill_s": stats.ttft_s, "forward_passes": stats.forward_passes,
            "output_tokens": stats.output_tokens,
            "decode_tokens_per_s": max(stats.output_tokens - 1, 0) / decoding_s}


def measure_case(rewriter: Rewriter, case: NextEditCase, fmt: NextEditFormat) -> dict:
    forget_prefixes(rewriter)
    cold, cold_s = timed(lambda: suggest(rewriter, fmt, case.request))
    assert isinstance(cold, Outcome)
    verdict = judge(case, suggested_document(case.request.text, cold.suggestion))
    prompt = fmt.render(case.request)
    forget_prefixes(rewriter)
    ahead_tokens = rewriter.prefill_prompt(prompt)
    again, ahead_s = timed(lambda: suggest(rewriter, fmt, case.request))
    assert isinstance(again, Outcome)
    greedy = plain_greedy(rewriter, prompt)
    return {"id": case.id, "no_op": case.no_op, "verdict": verdict, "reason": cold.reason,
            "cold_s": cold_s, "ahead_s": ahead_s, "ahead_tokens": ahead_tokens,
            "same_when_ahead": again.answer == cold.answer, "prompt_tokens": greedy["prompt_tokens"],
            "identical": greedy["text"] == cold.answer, "ours": speed(cold.stats), "greedy": speed(greedy["stats"])}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))] if ordered else 0.0


def summarize(rows: list[dict]) -> dict:
    verdicts = [row["verdict"] for row in rows]
    tokens = {way: sum(row[way]["output_tokens"] for row in rows) for way in ("ours", "greedy")}
    seconds = {way: sum(row[way]["seconds"] - row[way]["prefill_s"] for row in rows) for way in ("ours", "greedy")}
    return {
        "cases": len(rows), "no_op_cases": sum(row["no_op"] for row in rows),
        **{name: verdicts.count(name) for name in ("right", "wrong", "none", "quiet")},
        "cold_p50_s": percentile([row["cold_s"] for row in rows], 0.5),
        "cold_p95_s": percentile([row["cold_s"] for row in rows], 0.95),
        "ahead_p50_s": percentile([row["ahead_s"] for row in rows], 0.5),
        "ahead_p95_s": percentile([row["ahead_s"] for row in rows], 0.95),
        "decode_tokens_per_s": {way: tokens[way] / seconds[way] if seconds[way] else 0.0 for way in tokens},
        "identical_to_greedy": sum(row["identical"] for row in rows),
        "prompt_tokens_median": statistics.median(row["prompt_tokens"] for row in rows) if rows else 0,
    }


def format_row(row: dict) -> str:
    return (f"{row['id']:<44} {row['verdict']:<6} cold {row['cold_s']:6.2f}s ahead {row['ahead_s']:6.2f}s  "
            f"{row['prompt_tokens']:5d} prompt tokens, {row['ours']['output_tokens']:4d} out: "
            f"{row['ours']['decode_tokens_per_s']:6.1f} vs greedy {row['greedy']['decode_tokens_per_s']:6.1f} tok/s"
            f"{'' if row['identical'] else '  NOT IDENTICAL'}")


def format_summary(summary: dict) -> str:
    speed = summary["decode_tokens_per_s"]
    return (f"{summary['cases']} cases ({summary['no_op_cases']} no-op): right {summary['right']}, wrong "
            f"{summary['wrong']}, none {summary['none']}, no-op quiet {summary['quiet']}\n"
            f"latency cold p50 {summary['cold_p50_s']:.2f}s p95 {summary['cold_p95_s']:.2f}s; with the prefix "
            f"computed ahead p50 {summary['ahead_p50_s']:.2f}s p95 {summary['ahead_p95_s']:.2f}s\n"
            f"decoding {speed['ours']:.1f} tok/s against plain greedy {speed['greedy']:.1f}; identical to greedy "
            f"{summary['identical_to_greedy']}/{summary['cases']}")


def run_next_edit_bench(rewriter: Rewriter, cases: list[NextEditCase], fmt: NextEditFormat,
                        json_path: str | None, out) -> dict:
    def measure(case: NextEditCase) -> dict:
        return measure_case(rewriter, case, fmt)

    return run_cases(cases, measure, format_row,  # type: ignore[arg-type]
                     summarize, format_summary, json_path, out)
