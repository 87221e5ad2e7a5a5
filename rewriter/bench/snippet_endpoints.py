"""`rewriter bench --snippets --endpoint [NAME=]URL ...`: the snippet cases merged by servers.

Each case becomes the request `rewriter apply --snippet` sends a model: the whole file as the code
(and the prediction), the merge instruction with the snippet in it. The endpoint bench sends it to
every server in turn and times it (endpoint_bench.py); here each server's answer is then judged as
a merge: exact when its code equals the reference `after` (whitespace-normalised, as for the
deterministic merge). Servers answer as they are, unchecked: the edit pipeline's checks are a
client's, and the same for every server. Torch-free.
"""
from __future__ import annotations

from ..answer import NoCodeBlock, extract_code
from ..prompt import merge_instruction
from .cases import Case
from .snippet_cases import SnippetCase, normalized


def merge_requests(cases: list[SnippetCase]) -> list[Case]:
    """The snippet cases as edit cases: the file, and the instruction that merges the snippet into it."""
    return [Case(case.id, case.language, case.before, merge_instruction(case.snippet, case.language, case.instruction))
            for case in cases]


def exact_merges(report: dict, cases: list[SnippetCase]) -> dict[str, dict[str, int]]:
    """Per endpoint: cases answered, and answers whose code is the reference `after`."""
    after = {case.id: normalized(case.after) for case in cases}
    counts: dict[str, dict[str, int]] = {}
    for row in report["cases"]:
        for name, result in row["endpoints"].items():
            count = counts.setdefault(name, {"cases": 0, "exact": 0})
            count["cases"] += 1
            if "error" in result:
                continue
            try:
                code = extract_code(result["answer"])
            except NoCodeBlock:
                continue
            count["exact"] += normalized(code) == after[row["id"]]
    return counts


def format_exact_merges(counts: dict[str, dict[str, int]]) -> str:
    return "merged exactly (the answer's code equal to the reference after): " + ", ".join(
        f"{name} {count['exact']}/{count['cases']}" for name, count in counts.items())
