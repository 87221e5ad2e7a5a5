"""`rewriter bench --next-edit`: a clear refusal where the suggestion path is missing, and the
runner's rows on a tiny model through a suggestion function written here."""
from __future__ import annotations

import io
import json
import sys
import types

from rewriter.bench.next_edit_bench import run_next_edit_bench
from rewriter.bench.next_edit_cases import cases_of
from rewriter.cli import main
from rewriter.decoding.rewrite import Rewriter
from rewriter.engine import CompletionRequest
from rewriter.next_edit.formats import FORMATS

ROW = {"id": "demo/1", "language": "python",
       "before": "def total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n",
       "after": "def total(values):\n    s = 0\n    for x in values:\n        s += x\n    return s\n"}


def test_the_bench_says_the_suggestion_path_is_missing_rather_than_measure_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "rewriter.next_edit.suggest", None)  # importing it raises ImportError
    path = tmp_path / "edits.jsonl"
    path.write_text(json.dumps(ROW) + "\n")
    assert main(["bench", "--next-edit", str(path)]) == 2
    told = capsys.readouterr()
    assert "rewriter.next_edit.suggest.suggest(engine, request, fmt) is not in this build" in told.out + told.err


def window_suggestion(engine, request, fmt):
    """A suggestion as the product's path is assumed to give one: the format's prompt completed on
    the engine, its window read back, None when it does not follow the format or changes nothing."""
    prompt = fmt.render(request)
    pieces = list(engine.complete(CompletionRequest(prompt.raw, prompt.prediction, 8, prompt.stop)))
    window = fmt.window_of("".join(piece.text for piece in pieces), request)
    if window is None or window == request.window_text:
        return None
    return request.window[0], request.window[1], window


def test_the_runner_reports_each_case_and_checks_the_prompt_against_plain_greedy(tiny_loaded, monkeypatch):
    monkeypatch.setitem(sys.modules, "rewriter.next_edit.suggest", types.SimpleNamespace(suggest=window_suggestion))
    out = io.StringIO()
    report = run_next_edit_bench(Rewriter(tiny_loaded, prefix_cache=True), cases_of(ROW), FORMATS["sweep"], None, out,
                                 max_new_tokens=8)  # a random model writes to its budget: keep it short
    rows, summary = report["cases"], report["summary"]
    assert [row["id"] for row in rows] == ["demo/1#0", "demo/1#no-op"]
    assert all(row["verdict"] in ("right", "wrong", "none", "quiet") for row in rows)
    assert all(row["identical"] for row in rows)  # the drafted decoding is plain greedy's, token for token
    assert all(row["same_when_ahead"] and row["ahead_tokens"] > 0 for row in rows)
    assert summary["cases"] == 2 and summary["no_op_cases"] == 1 and summary["identical_to_greedy"] == 2
    assert summary["right"] + summary["wrong"] + summary["none"] + summary["quiet"] == 2
    assert "identical to greedy 2/2" in out.getvalue()
