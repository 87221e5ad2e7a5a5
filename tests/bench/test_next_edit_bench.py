"""`rewriter bench --next-edit`: the runner's rows on a tiny model through the product's suggestion
path, and a suggestion applied to its document."""
from __future__ import annotations

import io

from rewriter.bench.next_edit_bench import run_next_edit_bench, suggested_document
from rewriter.bench.next_edit_cases import cases_of
from rewriter.decoding.rewrite import Rewriter
from rewriter.next_edit.formats import FORMATS
from rewriter.next_edit.suggest import Suggestion

ROW = {"id": "demo/1", "language": "python",
       "before": "def total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n",
       "after": "def total(values):\n    s = 0\n    for x in values:\n        s += x\n    return s\n"}


def test_the_runner_reports_each_case_through_the_suggestion_path_and_against_plain_greedy(tiny_loaded):
    out = io.StringIO()
    report = run_next_edit_bench(Rewriter(tiny_loaded, prefix_cache=True), cases_of(ROW), FORMATS["instruct"], None, out)
    rows, summary = report["cases"], report["summary"]
    assert [row["id"] for row in rows] == ["demo/1#0", "demo/1#no-op"]
    assert all(row["verdict"] in ("right", "wrong", "none", "quiet") for row in rows)
    assert all(row["identical"] for row in rows)  # the suggestion's answer is plain greedy's
    assert all(row["same_when_ahead"] and row["ahead_tokens"] > 0 for row in rows)
    assert summary["cases"] == 2 and summary["no_op_cases"] == 1 and summary["identical_to_greedy"] == 2
    assert summary["right"] + summary["wrong"] + summary["none"] + summary["quiet"] == 2
    assert "identical to greedy 2/2" in out.getvalue()


def test_a_suggestion_is_applied_to_the_document_by_its_character_range():
    text = "def total(xs):\n    return sum(xs)\n"
    moved = Suggestion(start=(0, 10), end=(0, 12), text="values", window="")
    assert suggested_document(text, moved) == "def total(values):\n    return sum(xs)\n"
    assert suggested_document(text, None) is None
