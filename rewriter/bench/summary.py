"""A bench run's figures summed up and shown: each mode's summary (medians, counts, ratios) and table rows."""
from __future__ import annotations

import resource
import statistics

# The greedy comparison (`rewriter bench CASES`) ---------------------------------------------------


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
        "median_ttft_warm_s": median("ttft_warm_s"),
        "identical_warm": sum(row["identical_warm"] for row in rows),
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
        f"peak RSS: {summary['peak_rss_mb']:.0f} MB",
        f"median time to first token: cold {summary['median_ttft_s']:.2f}s, with the prompt up to the "
        f"instruction computed ahead {summary['median_ttft_warm_s']:.2f}s (the same tokens in "
        f"{summary['identical_warm']}/{summary['cases']})",
        f"prediction tokens: {summary['accepted_prediction_tokens']} accepted, "
        f"{summary['rejected_prediction_tokens']} rejected",
        *reference,
    ])


def format_pass_costs(pass_costs: dict) -> str:
    """The CPU paths' pass costs per width, and auto's pick: a line after the summary."""
    widths = sorted({int(w) for measured in pass_costs["ms"].values() for w in measured})
    costs = "; ".join(f"{name} " + "/".join(f"{measured[str(w)]:.0f}" if str(w) in measured else "-"
                                            for w in widths)
                      for name, measured in pass_costs["ms"].items())
    return (f"\npass costs (ms, {'/'.join(map(str, widths))} tokens): {costs}; "
            f"auto picks {pass_costs['auto_choice']} on this machine")


# Edit quality (`--tests`) ---------------------------------------------------------------------

OUTCOMES = ("passed", "failed", "timed_out", "unchanged", "no_code_block", "refused")

def summarize_tests(rows: list[dict]) -> dict:
    counts = {outcome: sum(row["outcome"] == outcome for row in rows) for outcome in OUTCOMES}
    tokens = sum(row["output_tokens"] for row in rows)
    seconds = sum(row["ours_s"] for row in rows)  # each case's whole session: its answers, branches, samples
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
        "false_refusals": sum(bool(row.get("refused_tests_passed")) for row in rows),  # refused, yet right
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
    if rows and "after_feedback" in rows[0]:
        summary["feedback"] = summarize_feedback(rows)
    if any("self_test" in row for row in rows):
        from .blind_rules import summarize_self_test

        summary["self_test"] = summarize_self_test(rows)
    if rows and "passed_on_try" in rows[0]:
        from .tries import summarize_tries

        summary["tries"] = summarize_tries(rows, rows[0]["tries_allowed"])
    return summary


def summarize_feedback(rows: list[dict]) -> dict:
    """The outcomes after feedback: the first answer's where it passed, the second try's elsewhere."""
    second = [row["feedback"] for row in rows if "feedback" in row]
    passed = sum(row["after_feedback"] == "passed" for row in rows)
    return {
        "second_tries": len(second),
        "passed": passed,
        "pass_rate": passed / len(rows),
        "outcomes": {outcome: sum(row["after_feedback"] == outcome for row in rows) for outcome in OUTCOMES},
        "false_refusals": sum(bool(try_.get("refused_tests_passed")) for try_ in second),
        "output_tokens": sum(try_["output_tokens"] for try_ in second),
        "decode_s": sum(try_["ours_s"] for try_ in second),
    }


TESTS_TABLE_COLUMNS = [
    ("case", "id", "{}"), ("out", "output_tokens", "{}"), ("ours s", "ours_s", "{:.1f}"),
    ("tok/s", "ours_tokens_per_s", "{:.1f}"), ("passes/tok", "forward_passes_per_token", "{:.3f}"),
    ("acc", "accepted_prediction_tokens", "{}"), ("rej", "rejected_prediction_tokens", "{}"),
    ("outcome", "outcome", "{}"),
]
FEEDBACK_COLUMNS = [("after feedback", "after_feedback", "{}")]


def format_tests_summary(summary: dict) -> str:
    lines = [
        f"cases: {summary['cases']}, tests passed: {summary['tests_passed']} ({100 * summary['pass_rate']:.1f}%), "
        f"failed: {summary['tests_failed']}, timed out: {summary['timed_out']}, unchanged: {summary['unchanged']}, "
        f"no code block: {summary['no_code_block']}, refused: {summary['refused']} "
        f"(false refusals, whose tests pass: {summary['false_refusals']}); "
        f"cut at the token limit: {summary['cut_at_token_limit']}",
        f"tokens/s: {summary['tokens_per_s']:.1f} overall ({summary['output_tokens']} tokens in "
        f"{summary['decode_s']:.1f}s), median {summary['median_tokens_per_s']:.1f}; median forward passes per "
        f"token: {summary['median_forward_passes_per_token']:.3f}; prediction tokens: "
        f"{summary['accepted_prediction_tokens']} accepted, {summary['rejected_prediction_tokens']} rejected; "
        f"peak RSS: {summary['peak_rss_mb']:.0f} MB",
    ]
    if "identical_to_greedy" in summary:
        lines.append(f"identical to greedy: {summary['identical_to_greedy']}/{summary['cases']}, "
                     f"median speed-up vs greedy: {summary['median_speedup_vs_greedy']:.2f}x")
    if "feedback" in summary:
        after = summary["feedback"]
        outcomes = ", ".join(f"{outcome.replace('_', ' ')} {count}" for outcome, count in after["outcomes"].items()
                             if outcome != "passed")
        lines.append(f"after feedback (a second try for the {after['second_tries']} that did not pass, shown "
                     f"their test output or why nothing was applied): passed {after['passed']} "
                     f"({100 * after['pass_rate']:.1f}%) against {summary['tests_passed']} blind; {outcomes}; "
                     f"false refusals {after['false_refusals']}; {after['output_tokens']} more tokens in "
                     f"{after['decode_s']:.1f}s")
    if "self_test" in summary:
        from .blind_rules import format_self_test

        lines.append(format_self_test(summary["self_test"]))
    if "tries" in summary:
        from .tries import format_tries

        lines.append(format_tries(summary["tries"]))
    return "\n".join(lines)


def format_tests_side_by_side(reports: list[dict]) -> str:
    """One line per run (model and path) of `--tests --compare`, and how many cases each judged
    otherwise than the first run."""
    first = {row["id"]: row["outcome"] for row in reports[0]["cases"]}
    lines = ["model | path | passed | after feedback | unchanged | refused | false refusals | failed | timed out | "
             "no code block | median tok/s | outcomes unlike the first run's"]
    for report in reports:
        summary = report["summary"]
        differ = sum(first.get(row["id"]) != row["outcome"] for row in report["cases"])
        after = f"{summary['feedback']['passed']}/{summary['cases']}" if "feedback" in summary else "-"
        lines.append(" | ".join([
            report["model"], str(summary["dtype"]), f"{summary['tests_passed']}/{summary['cases']}", after,
            str(summary["unchanged"]), str(summary["refused"]), str(summary["false_refusals"]),
            str(summary["tests_failed"]), str(summary["timed_out"]), str(summary["no_code_block"]),
            f"{summary['median_tokens_per_s']:.1f}", "-" if report is reports[0] else str(differ)]))
    return "\n".join(lines)


def cascade(reports: list[dict]) -> dict:
    """The runs as a cascade, in their order: each case goes on to the next model only where the
    tests did not pass (failed, refused, unchanged, ...), blind and with each model's second try."""
    outcomes = [{row["id"]: row for row in report["cases"]} for report in reports]
    ids = list(outcomes[0])
    blind = [next((n for n, run in enumerate(outcomes) if run[i]["outcome"] == "passed"), None) for i in ids]
    after = [next((n for n, run in enumerate(outcomes) if run[i].get("after_feedback", run[i]["outcome"]) == "passed"),
                  None) for i in ids]
    return {
        "models": [report["model"] for report in reports],
        "cases": len(ids),
        "passed": sum(n is not None for n in blind),
        "passed_by": [blind.count(n) for n in range(len(reports))],
        "passed_after_feedback": sum(n is not None for n in after)
        if any("after_feedback" in row for row in reports[0]["cases"]) else None,
        # how many cases each model decodes: all for the first, those no earlier model passed for the others
        "decoded_by": [len(ids) - sum(p is not None and p < n for p in blind) for n in range(len(reports))],
    }


def format_cascade(result: dict) -> str:
    after = (f", after feedback {result['passed_after_feedback']}/{result['cases']}"
             if result["passed_after_feedback"] is not None else "")
    order = " then ".join(result["models"])
    return (f"cascade ({order}, each only where the ones before did not pass the tests): passed "
            f"{result['passed']}/{result['cases']} blind ({' + '.join(map(str, result['passed_by']))}){after}; "
            f"cases decoded by each: {' / '.join(map(str, result['decoded_by']))}")


def format_tests_row(row: dict) -> str:
    columns = TESTS_TABLE_COLUMNS + (FEEDBACK_COLUMNS if "after_feedback" in row else [])
    cells = [fmt.format(row[key]) for _, key, fmt in columns]
    return " | ".join([cells[0].rsplit("/", 1)[-1], *cells[1:]])


# Sampling modes ---------------------------------------------------------------------------------


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
