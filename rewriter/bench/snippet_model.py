"""`rewriter bench --snippets --model-merge`: the snippet cases the deterministic merge leaves to a
model (with `--model-only`, every case) merged by the model, as `rewriter apply --snippet` merges
them: the whole file is the target and the prediction, the snippet rides in the instruction, and
the answer is judged by the one edit pipeline.

Three counts of exact merges come out: the deterministic merge's, the model's alone (on the
cases it was given), and both together (the deterministic merge where it merged, the model's
where it found the snippet ambiguous), which is what `apply --snippet` delivers.
"""
from __future__ import annotations

import time
from collections.abc import Callable

from ..answer import NoCodeBlock
from ..edits.node_kinds import grammar_for
from ..edits.session import EditSession, Finished
from ..edits.target import Target
from ..engine import Engine
from ..prompt import merge_instruction
from ..results import RewriteError
from .snippet_cases import SnippetCase, code_damage, normalized


def model_merge(engine: Engine, case: SnippetCase, max_new_tokens: int | None = None) -> dict:
    """One case's snippet merged by the model: applied, refused (and why) or failed, and whether exact."""
    session = EditSession(engine, Target.whole(case.before), merge_instruction(case.snippet, case.language,
                                                                              case.instruction),
                          case.language, grammar=grammar_for(case.language), max_new_tokens=max_new_tokens,
                          judged_instruction=case.instruction)
    began = time.perf_counter()
    row = {"id": case.id, "style": case.style, "exact": False, "reason": "", "output_tokens": 0,
           "accepted_prediction_tokens": 0, "lost": [], "duplicated": []}
    try:
        finished = [event for event in session.run() if isinstance(event, Finished)][-1]
    except (NoCodeBlock, RewriteError) as error:
        return {**row, "outcome": "failed", "reason": str(error), "seconds": time.perf_counter() - began}
    decision, stats = finished.decision, finished.result.stats
    if not decision.refused:  # what an applied merge lost or duplicated, as for the deterministic one
        row["lost"], row["duplicated"] = code_damage(case.before, case.after, decision.text)
    return {**row, "outcome": "refused" if decision.refused else "applied", "reason": decision.reason,
            "exact": not decision.refused and normalized(decision.text) == normalized(case.after),
            "output_tokens": stats.output_tokens, "accepted_prediction_tokens": stats.accepted_prediction_tokens,
            "seconds": time.perf_counter() - began}


def run_model_merges(engine: Engine, cases: list[SnippetCase], rows: list[dict], every_case: bool,
                     max_new_tokens: int | None = None, say: Callable[[str], None] = lambda message: None) -> dict:
    """The model's merges of the ambiguous cases (every case with `every_case`); `rows` are the
    deterministic merge's measurements of the same cases, in the same order."""
    merges: list[dict] = []
    both = 0
    for number, (case, row) in enumerate(zip(cases, rows, strict=True), 1):
        model_row = None
        if every_case or row["outcome"] == "to_model":
            model_row = model_merge(engine, case, max_new_tokens)
            merges.append(model_row)
            say(f"{number}/{len(cases)} {case.id}: model {model_row['outcome']}"
                f"{', exact' if model_row['exact'] else ''} in {model_row['seconds']:.1f}s")
        if row["outcome"] == "merged":
            both += row["exact"]
        elif row["outcome"] == "to_model" and model_row is not None:
            both += model_row["exact"]
    return {"cases": len(cases), "deterministic_exact": sum(row["exact"] for row in rows),
            "model_cases": len(merges), "model_exact": sum(m["exact"] for m in merges),
            "model_refused": sum(m["outcome"] == "refused" for m in merges),
            "model_failed": sum(m["outcome"] == "failed" for m in merges),
            "model_lost_code": sum(bool(m["lost"]) for m in merges),
            "model_duplicated_code": sum(bool(m["duplicated"]) for m in merges),
            "both_exact": both, "merges": merges}


def format_model_report(summary: dict) -> str:
    def share(count: int, total: int) -> str:
        return f"{count}/{total} ({100 * count / max(total, 1):.1f}%)"

    return "\n".join([
        f"exact, deterministic merge: {share(summary['deterministic_exact'], summary['cases'])}",
        f"exact, the model alone:     {share(summary['model_exact'], summary['model_cases'])} "
        f"({summary['model_refused']} refused, {summary['model_failed']} failed; applied merges that lost code "
        f"{summary['model_lost_code']}, duplicated code {summary['model_duplicated_code']})",
        f"exact, both (the model where the merge is ambiguous): {share(summary['both_exact'], summary['cases'])}",
    ])
