"""`rewriter bench --next-edit`: the next-edit cases (next_edit_cases.py) through the product's own
suggestion path, `rewriter.next_edit.suggest.suggest(engine, request, fmt)`, which gives (start line,
end line, text) or None: right, wrong, none and no-op quiet; its latency cold (no prefix kept) and
with the prompt's prefix computed ahead; and the format's prompt decoded again with its prediction
as the draft and by plain greedy decoding, token for token: tokens/s side by side, and identical
or not. Loads the decoding core when run, never when imported."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..engine import CompletionRequest
from ..next_edit.base import NextEditFormat, NextEditPrompt
from .cases import run_cases
from .next_edit_cases import NextEditCase, judge

if TYPE_CHECKING:
    from ..decoding.completion import PlannedCompletion
    from ..decoding.rewrite import Rewriter

Suggest = Callable[..., "tuple[int, int, str] | None"]


class NoSuggestionPath(RuntimeError):
    """This build has no rewriter.next_edit.suggest.suggest to measure."""


def suggestion_path() -> Suggest:
    """The product's suggestion function, imported when the bench runs."""
    try:
        from ..next_edit.suggest import suggest  # type: ignore[import-not-found, unused-ignore]
    except ImportError as error:
        raise NoSuggestionPath(f"the suggestion path rewriter.next_edit.suggest.suggest(engine, request, fmt) is not "
                               f"in this build ({error}); the bench measures the product's own path and reports "
                               "nothing without it") from error
    return suggest


def forget_prefixes(rewriter: Rewriter) -> None:
    """Empty the decoder's prefix cache: the next request starts cold."""
    if rewriter.decoder.prefix_cache is not None:
        rewriter.decoder.prefix_cache.kept.clear()


def planned_prompt(rewriter: Rewriter, prompt: NextEditPrompt, max_new_tokens: int | None = None) -> PlannedCompletion:
    """The format's prompt as a completion: a raw one as it is, chat messages through the template."""
    from ..decoding.completion import PlannedCompletion

    request = CompletionRequest(prompt.raw or "", prompt.prediction, max_new_tokens, prompt.stop)
    if prompt.raw is not None:
        return rewriter.plan_completion(request)
    ids = rewriter.encode_messages(list(prompt.messages or ()))
    prediction = rewriter.tokenizer.encode(prompt.prediction, add_special_tokens=False)
    budget = min(max_new_tokens or 2 * len(prediction) + 256, rewriter.loaded.context_length - len(ids))
    return PlannedCompletion(request, ids, prediction, budget)


def ahead_ids(rewriter: Rewriter, prompt: NextEditPrompt, window: str) -> list[int]:
    """What an editor can compute before the request: the prompt up to where the window (or its
    first line) first appears in it."""
    planned = planned_prompt(rewriter, prompt)
    text = str(rewriter.tokenizer.decode(planned.prompt))
    first_line = window.splitlines(keepends=True)[0] if window else ""
    at = text.find(window) if window in text else text.find(first_line) if first_line else -1
    if at <= 0:
        return []
    return rewriter.tokenizer.encode(text[:at], add_special_tokens=False)


def timed(action: Callable[[], object]) -> tuple[object, float]:
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started


def against_greedy(rewriter: Rewriter, prompt: NextEditPrompt, max_new_tokens: int | None = None) -> dict:
    """The format's prompt decoded with its drafter and by plain greedy, both cold."""
    from ..decoding.completion import decode_completion

    planned = planned_prompt(rewriter, prompt, max_new_tokens)
    runs = {}
    for way, drafter in (("ours", rewriter.completion_drafter(planned)), ("greedy", None)):
        forget_prefixes(rewriter)
        pieces = list(decode_completion(rewriter.decoder, drafter, planned))
        stats = pieces[-1].stats
        decoding_s = max(stats.total_s - stats.ttft_s, 1e-9)
        runs[way] = {"output": pieces[-1].output, "seconds": stats.total_s, "prefill_s": stats.ttft_s,
                     "decode_tokens_per_s": max(stats.output_tokens - 1, 0) / decoding_s,
                     "forward_passes": stats.forward_passes, "output_tokens": stats.output_tokens}
    identical = runs["ours"].pop("output") == runs["greedy"].pop("output")
    return {"prompt_tokens": len(planned.prompt), "identical": identical, **runs}


def measure_case(rewriter: Rewriter, case: NextEditCase, fmt: NextEditFormat, suggest: Suggest,
                 max_new_tokens: int | None = None) -> dict:
    """`max_new_tokens` bounds the decodings against greedy (default: as a rewrite's budget)."""
    forget_prefixes(rewriter)
    suggestion, cold_s = timed(lambda: suggest(rewriter, case.request, fmt))
    verdict = judge(case, suggestion)  # type: ignore[arg-type]  # suggest's answer
    forget_prefixes(rewriter)
    prompt = fmt.render(case.request)
    ids = ahead_ids(rewriter, prompt, case.request.window_text)
    if ids and rewriter.decoder.prefix_cache is not None:
        rewriter.decoder.prefill(ids)
    again, ahead_s = timed(lambda: suggest(rewriter, case.request, fmt))
    return {"id": case.id, "no_op": case.no_op, "verdict": verdict, "cold_s": cold_s, "ahead_s": ahead_s,
            "ahead_tokens": len(ids), "same_when_ahead": again == suggestion,
            **against_greedy(rewriter, prompt, max_new_tokens)}


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
                        json_path: str | None, out, max_new_tokens: int | None = None) -> dict:
    suggest = suggestion_path()

    def measure(case: NextEditCase) -> dict:
        return measure_case(rewriter, case, fmt, suggest, max_new_tokens)

    return run_cases(cases, measure, format_row,  # type: ignore[arg-type]
                     summarize, format_summary, json_path, out)
