"""`rewriter bench CASES --tests --branches N`: each unchanged answer's branches, every one decoded
and judged, and the blind rules of edits/candidate_rules.py side by side.

A candidate is a branch that changes the code and that the checks let through (the bench's
refusal: integrity and syntax). Each rule picks one candidate without its tests; then the tests
say whether that pick was right. The row's own outcome is `closest`'s, the rule `rewriter apply
--branches` uses, and its `tried` and `seconds` are what apply spends: it stops at the first
candidate.
"""
from __future__ import annotations

import time
from collections.abc import Callable

from ..edits.candidate_rules import RULES, Candidate, closest
from ..engine import EditRequest
from ..prompt import SourceText
from .cases import Case

# (case, answer) -> the answer judged (bench.judge_answer with the run's refusal and time limit)
Judge = Callable[[Case, str], dict]
# (case, edited text) -> why the checks refuse it, or None
Refusal = Callable[[Case, str], str | None]


def branched(rewriter, case: Case, first: dict, max_new_tokens: int | None, count: int,
             refusal: Refusal | None, judge: Judge) -> dict:
    """The branches of an unchanged answer (`first`, judged), each rule's pick judged by the
    tests; {} for an answer that changed the code."""
    if first["outcome"] != "unchanged":
        return {}
    source = SourceText.from_text(case.before)
    request = EditRequest(source.code, case.instruction, case.language, max_new_tokens=max_new_tokens)
    branches: list[dict] = []
    began = time.perf_counter()
    for branch in rewriter.branches(request, count):
        edited = source.restore(branch.text)
        branches.append({"answer": branch.answer, "edited": edited, "mean_log_prob": branch.mean_log_prob,
                         "candidate": edited != case.before and not (refusal and refusal(case, edited)),
                         "seconds": time.perf_counter() - began})
    candidates = [b for b in branches if b["candidate"]]
    verdicts = [judge(case, b["answer"]) for b in candidates]
    picks = {name: rule([Candidate(b["edited"], b["mean_log_prob"]) for b in candidates]) if candidates else None
             for name, rule in RULES.items()}
    row = {"decoded": len(branches), "all_seconds": branches[-1]["seconds"] if branches else 0.0,
           "candidates": [{"branch": branches.index(b), "mean_log_prob": b["mean_log_prob"], "outcome": v["outcome"]}
                          for b, v in zip(candidates, verdicts, strict=True)],
           "rules": {name: None if pick is None else verdicts[pick]["outcome"] for name, pick in picks.items()}}
    chosen = picks[closest.__name__]
    if chosen is None:
        return {**row, "tried": len(branches), "seconds": row["all_seconds"]}
    through = branches.index(candidates[chosen])
    return {**row, "tried": through + 1, "seconds": branches[through]["seconds"],
            "answer": candidates[chosen]["answer"], **verdicts[chosen]}
