"""`rewriter bench --snippets --model-merge`: the snippet cases the deterministic merge leaves to a
model (with `--model-only`, every case) merged by the model, as `rewriter apply --snippet` merges
them: the region the snippet goes in (edits/snippets/region.py; the whole file where that cannot
be told) is the target and the prediction, the rest of the file its context, the snippet rides in
the instruction, and the answer is judged by the one edit pipeline.

Three counts of exact merges come out: the deterministic merge's, the model's alone (on the
cases it was given), and both together (the deterministic merge where it merged, the model's
where it found the snippet ambiguous), which is what `apply --snippet` delivers. Given the style
bench's judge, the same three counts of right merges (exact, or passing the case's tests) come
out too, per style.
"""
from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable

from ..answer import NoCodeBlock
from ..edits.node_kinds import grammar_for
from ..edits.session import EditSession, Finished
from ..edits.snippets.region import snippet_region
from ..engine import Engine
from ..prompt import merge_instruction
from ..results import RewriteError
from .snippet_cases import SnippetCase, code_damage, normalized
from .snippet_style_bench import PassJudge


def model_merge(engine: Engine, case: SnippetCase, max_new_tokens: int | None = None) -> dict:
    """One case's snippet merged by the model: applied, refused (and why) or failed, and whether exact."""
    grammar = grammar_for(case.language)
    region = snippet_region(case.before, case.snippet, grammar)
    session = EditSession(engine, region, merge_instruction(case.snippet, case.language,
                                                                              case.instruction),
                          case.language, grammar=grammar, max_new_tokens=max_new_tokens,
                          judged_instruction=case.instruction, snippet=case.snippet)
    began = time.perf_counter()
    row = {"id": case.id, "style": case.style, "exact": False, "reason": "", "output_tokens": 0,
           "accepted_prediction_tokens": 0, "lost": [], "duplicated": []}
    try:
        finished = [event for event in session.run() if isinstance(event, Finished)][-1]
    except (NoCodeBlock, RewriteError) as error:
        return {**row, "outcome": "failed", "reason": str(error), "seconds": time.perf_counter() - began}
    decision, stats = finished.decision, finished.result.stats
    text = region.replaced_by(decision.text)
    if not decision.refused:  # what an applied merge lost or duplicated, as for the deterministic one
        row["lost"], row["duplicated"] = code_damage(case.before, case.after, text)
        row["text"] = text
    elif decision.refused_text is not None:  # kept to be read over: what the model wrote
        row["refused_text"] = decision.refused_text
    return {**row, "outcome": "refused" if decision.refused else "applied", "reason": decision.reason,
            "region_lines": len(region.lines),
            "exact": not decision.refused and normalized(text) == normalized(case.after),
            "output_tokens": stats.output_tokens, "accepted_prediction_tokens": stats.accepted_prediction_tokens,
            "seconds": time.perf_counter() - began}


def run_model_merges(engine: Engine, cases: list[SnippetCase], rows: list[dict], every_case: bool,
                     max_new_tokens: int | None = None, say: Callable[[str], None] = lambda message: None,
                     judge: PassJudge | None = None) -> dict:
    """The model's merges of the ambiguous cases (every case with `every_case`); `rows` are the
    deterministic merge's measurements of the same cases, in the same order (with `judge`, the
    style bench's, whose rows say whether each merge was right)."""
    merges: list[dict] = []
    both = 0
    by_style: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(RIGHT_COUNTS, 0))
    for number, (case, row) in enumerate(zip(cases, rows, strict=True), 1):
        model_row = None
        if every_case or row["outcome"] == "to_model":
            model_row = model_merge(engine, case, max_new_tokens)
            text = model_row.pop("text", None)
            if judge is not None:
                passes = judge.passes(case, text, model_row["exact"])
                model_row["right"] = model_row["exact"] or bool(passes)
            if text is not None and not model_row["exact"]:  # kept to be read over: what went wrong
                model_row["merged_text"] = text
            merges.append(model_row)
            say(f"{number}/{len(cases)} {case.id}: model {model_row['outcome']}"
                f"{', exact' if model_row['exact'] else ', right' if model_row.get('right') else ''} "
                f"in {model_row['seconds']:.1f}s")
        if row["outcome"] == "merged":
            both += row["exact"]
        elif row["outcome"] == "to_model" and model_row is not None:
            both += model_row["exact"]
        if judge is not None:
            _count_right(by_style[case.style], row, model_row)
    return {"cases": len(cases), "deterministic_exact": sum(row["exact"] for row in rows),
            "model_cases": len(merges), "model_exact": sum(m["exact"] for m in merges),
            "model_refused": sum(m["outcome"] == "refused" for m in merges),
            "model_failed": sum(m["outcome"] == "failed" for m in merges),
            "model_lost_code": sum(bool(m["lost"]) for m in merges),
            "model_duplicated_code": sum(bool(m["duplicated"]) for m in merges),
            "both_exact": both, "merges": merges,
            **({"right_by_style": {style: dict(counts) for style, counts in by_style.items()}} if judge else {})}


RIGHT_COUNTS = ("cases", "right_without_model", "to_model", "model_right", "right")


def _count_right(counts: dict[str, int], row: dict, model_row: dict | None) -> None:
    """One case in its style's counts: right without the model, handed to it, right by it, right in all."""
    counts["cases"] += 1
    counts["right_without_model"] += row["outcome"] == "merged" and row["right"]
    if row["outcome"] == "to_model" and model_row is not None:
        counts["to_model"] += 1
        counts["model_right"] += model_row["right"]
    counts["right"] += row["right"] if row["outcome"] == "merged" else bool(
        row["outcome"] == "to_model" and model_row is not None and model_row["right"])


def format_model_report(summary: dict) -> str:
    def share(count: int, total: int) -> str:
        return f"{count}/{total} ({100 * count / max(total, 1):.1f}%)"

    return "\n".join([
        f"exact, deterministic merge: {share(summary['deterministic_exact'], summary['cases'])}",
        f"exact, the model alone:     {share(summary['model_exact'], summary['model_cases'])} "
        f"({summary['model_refused']} refused, {summary['model_failed']} failed; applied merges that lost code "
        f"{summary['model_lost_code']}, duplicated code {summary['model_duplicated_code']})",
        f"exact, both (the model where the merge is ambiguous): {share(summary['both_exact'], summary['cases'])}",
        *_right_lines(summary.get("right_by_style", {}), share),
    ])


def _right_lines(by_style: dict[str, dict[str, int]], share: Callable[[int, int], str]) -> list[str]:
    """Per style and in all: right (exact, or passing the tests) without the model, the model alone on
    the cases handed to it, and both together."""
    if not by_style:
        return []
    total: Counter[str] = Counter()
    for counts in by_style.values():
        total.update(counts)
    return ["right (exact or passing the tests): style, without the model, the model alone, both"] + [
        f"  {style:<16} {share(c['right_without_model'], c['cases']):>16}  {share(c['model_right'], c['to_model']):>16}"
        f"  {share(c['right'], c['cases']):>16}" for style, c in [*by_style.items(), ("all", total)]]
