"""`rewriter bench CASES --endpoint ...`: servers measured side by side on fake OpenAI endpoints."""
from __future__ import annotations

import io
import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rewriter.bench.cases import Case
from rewriter.bench.endpoint_bench import (
    ACCEPTED,
    DRAFTED,
    Endpoint,
    counters,
    parse_endpoints,
    run_endpoint_bench,
    summarize,
)
from rewriter.cli import main
from rewriter.remote import ServiceError
from tests.helpers.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]
CASES = [
    {"id": "set/alpha", "language": "python", "before": "def alpha(a):\n    return a\n", "instruction": "Add type hints."},
    {"id": "set/beta", "language": "python", "before": "def beta(b):\n    return b\n", "instruction": "Add type hints."},
    {"id": "set/gamma", "language": "python", "before": "def gamma(c):\n    return c\n", "instruction": "Add type hints."},
]


def hinted(body: dict) -> str:
    """The predicted file with `-> int` added: what every fake answers, unless told otherwise."""
    return body["prediction"]["content"].replace("):", ") -> int:") + "\n"


def unlike_on_gamma(body: dict) -> str:
    answer = hinted(body)
    return answer.replace("return c", "return c  # differs") if "def gamma" in answer else answer


def vllm_metrics(requests: int) -> str:
    """vLLM's counters after `requests` requests, the n-th accepting 5n of 8n drafted tokens; two label
    sets (summed), and look-alike series that must not count."""
    accepted = sum(5 * n for n in range(1, requests + 1))
    drafted = sum(8 * n for n in range(1, requests + 1))
    return textwrap.dedent(f"""\
        # HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
        # TYPE vllm:spec_decode_num_accepted_tokens_total counter
        vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted - 2}.0
        vllm:spec_decode_num_accepted_tokens_total{{engine="1",model_name="m"}} 2.0
        vllm:spec_decode_num_accepted_tokens_created{{engine="0",model_name="m"}} 1.7e9
        vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="0"}} {999 * requests}.0
        vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {drafted}.0
        vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {1000 * requests}.0
        vllm:num_requests_running{{engine="0"}} 0.0
        """)


def three_servers(log: list) -> list[FakeOpenAI]:
    return [
        FakeOpenAI("plain", hinted, log, first_chunk_s=0.05, chunk_gap_s=0.03),
        FakeOpenAI("ngram", unlike_on_gamma, log, first_chunk_s=0.02, chunk_gap_s=0.005, metrics=vllm_metrics),
        FakeOpenAI("ours", hinted, log, first_chunk_s=0.01,
                   usage_details={"accepted_prediction_tokens": 30, "rejected_prediction_tokens": 6}),
    ]


NO_TORCH = "import sys\nsys.modules['torch'] = None  # `import torch` now raises ImportError\n"


def test_three_servers_side_by_side_through_the_cli_without_torch(tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(case) + "\n" for case in CASES))
    report = tmp_path / "report.json"
    log: list = []
    servers = three_servers(log)
    for server in servers:
        server.__enter__()
    try:
        argv = ["bench", str(cases), "--every", "2", "--max-new-tokens", "300", "--model", "served-model",
                "--json", str(report), "--settle", "0", *(arg for s in servers for arg in ("--endpoint", f"{s.name}={s.url}"))]
        script = NO_TORCH + textwrap.dedent(f"""
            from rewriter.cli import main
            code = main({argv!r})
            print(json.dumps({{"code": code, "torch": sys.modules.get("torch") is not None}}))
        """)
        done = subprocess.run([sys.executable, "-c", "import json\n" + script], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        for server in servers:
            server.__exit__()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"code": 0, "torch": False}

    # Warm-ups first, then each case to every server in turn, all with the same request.
    # The budget goes as max_tokens, which every local server honours.
    assert [(name, body["max_tokens"], "max_completion_tokens" in body) for name, body in log[:3]] == [
        ("plain", 64, False), ("ngram", 64, False), ("ours", 64, False)]
    measured = log[3:]
    assert [name for name, _ in measured] == ["plain", "ngram", "ours"] * 2
    assert ["def alpha" in body["prediction"]["content"] for _, body in measured] == [True] * 3 + [False] * 3
    for start in (0, 3):
        bodies = [body for _, body in measured[start:start + 3]]
        assert bodies[0] == bodies[1] == bodies[2]
        assert bodies[0]["temperature"] == 0 and bodies[0]["max_tokens"] == 300
        assert bodies[0]["model"] == "served-model"

    data = json.loads(report.read_text())
    rows, summary = data["cases"], data["summary"]
    assert [row["id"] for row in rows] == ["set/alpha", "set/gamma"]  # --every 2
    for row in rows:
        assert list(row["endpoints"]) == ["plain", "ngram", "ours"]
        for result in row["endpoints"].values():
            assert "error" not in result
            assert result["output_tokens"] == 40
            assert result["tokens_per_s"] == pytest.approx(40 / result["seconds"])
            assert 0.0 < result["ttft_s"] < result["seconds"]
            assert result["finish_reason"] == "stop"
            assert result["answer"].startswith("```python\ndef ") and ") -> int:" in result["answer"]
        assert row["endpoints"]["plain"]["ttft_s"] >= 0.05
        plain, ngram, ours = (row["endpoints"][name] for name in ("plain", "ngram", "ours"))
        assert plain["identical_to_reference"] is True and ours["identical_to_reference"] is True
        assert ngram["identical_to_reference"] is (row["id"] == "set/alpha")
        # No speculation figures where the server gives none.
        assert (plain["accepted_tokens"], plain["drafted_tokens"], plain["speculation_from"]) == (None, None, None)
        assert plain["metrics_draft_tokens"] is None and plain["accepted_prediction_tokens"] is None
        # vLLM's counters: this case's deltas only (the warm-up was request 1, then 2 and 3).
        n = 2 if row["id"] == "set/alpha" else 3
        assert (ngram["accepted_tokens"], ngram["drafted_tokens"], ngram["speculation_from"]) == (5 * n, 8 * n, "metrics")
        assert ngram["accepted_prediction_tokens"] is None
        # OpenAI-style usage.
        assert (ours["accepted_tokens"], ours["drafted_tokens"], ours["speculation_from"]) == (30, 36, "usage")
        assert (ours["accepted_prediction_tokens"], ours["rejected_prediction_tokens"]) == (30, 6)
        assert ours["metrics_accepted_tokens"] is None

    assert summary["cases"] == 2 and summary["reference"] == "plain" and summary["max_new_tokens"] == 300
    figures = summary["endpoints"]
    assert [figures[name]["identical_to_reference"] for name in ("plain", "ngram", "ours")] == [2, 1, 2]
    assert (figures["ngram"]["accepted_tokens"], figures["ngram"]["drafted_tokens"]) == (25, 40)
    assert figures["ngram"]["acceptance_rate"] == pytest.approx(25 / 40)
    assert figures["ours"]["acceptance_rate"] == pytest.approx(60 / 72)
    assert figures["plain"]["acceptance_rate"] is None and figures["plain"]["drafted_tokens"] is None
    for name in ("plain", "ngram", "ours"):
        rates = [row["endpoints"][name]["tokens_per_s"] for row in rows]
        assert figures[name]["median_tokens_per_s"] == pytest.approx(statistics.median(rates))
        assert figures[name]["errors"] == 0 and figures[name]["cut_at_token_limit"] == 0
    ratios = summary["median_tokens_per_s_ratio"]
    assert set(ratios) == {"plain", "ngram", "ours"} and set(ratios["plain"]) == {"ngram", "ours"}
    for mine in ratios:
        for theirs, ratio in ratios[mine].items():
            assert ratio == pytest.approx(statistics.median(
                row["endpoints"][mine]["tokens_per_s"] / row["endpoints"][theirs]["tokens_per_s"] for row in rows))
    # The fakes' pace: plain streams slowest, ours fastest.
    assert ratios["ngram"]["plain"] > 1.5 and ratios["plain"]["ngram"] < 0.7 and ratios["ours"]["ngram"] > 1.2

    lines = done.stdout.splitlines()
    assert lines[0] == "case | endpoint | out | s | tok/s | ttft s | acc/drafted | same"
    assert any(line.startswith("gamma | ngram | 40 | ") and line.endswith(" | 15/24 | False") for line in lines)
    assert any(line.startswith("ngram | ") and "25/40 (62%) | 1/2 | 0 | 0 | " in line for line in lines)
    assert "answers identical to plain's" in done.stdout


def test_an_answer_without_a_code_block_is_still_measured_and_a_dead_endpoint_stops_the_run(tmp_path):
    log: list = []
    case = Case(**CASES[0])
    with FakeOpenAI("ref", hinted, log) as ref, FakeOpenAI("chatty", lambda body: "Sure, done!", log) as chatty:
        result = run_endpoint_bench([Endpoint("ref", ref.url), Endpoint("chatty", chatty.url)], [case], None,
                                    None, out=io.StringIO())
        row = result["cases"][0]["endpoints"]["chatty"]
        assert row["answer"] == "Sure, done!" and row["identical_to_reference"] is False and "error" not in row
        assert row["output_tokens"] == 40
        assert log[-1][1]["max_tokens"] == 1024  # the fixed default budget
        with pytest.raises(ServiceError, match="endpoint gone"):
            run_endpoint_bench([Endpoint("ref", ref.url), Endpoint("gone", ref.url.replace("/v1", "/v2"))], [case],
                               None, None, out=io.StringIO())


def test_a_server_without_usage_is_counted_with_the_local_tokenizer(tmp_path, monkeypatch):
    from tokenizers import Tokenizer, models, pre_tokenizers

    from rewriter import EMBEDDED_NAME

    # A word-level tokenizer where the embedded model's prepared checkpoint would be.
    monkeypatch.setenv("REWRITER_CACHE", str(tmp_path))
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    checkpoint = tmp_path / "models" / f"{EMBEDDED_NAME}-0123456789ab"
    checkpoint.mkdir(parents=True)
    tokenizer.save(str(checkpoint / "tokenizer.json"))
    log: list = []
    case = Case(**CASES[0])
    with FakeOpenAI("ours", hinted, log) as ours, FakeOpenAI("llama", hinted, log, completion_tokens=0) as llama:
        result = run_endpoint_bench([Endpoint("ours", ours.url), Endpoint("llama", llama.url)], [case], None,
                                    None, out=io.StringIO())
    row = result["cases"][0]["endpoints"]
    answer = row["llama"]["answer"]
    assert (row["ours"]["output_tokens"], row["ours"]["tokens_from"]) == (40, "usage")
    assert (row["llama"]["output_tokens"], row["llama"]["tokens_from"]) == (len(tokenizer.encode(answer).ids), "tokenizer")
    assert row["llama"]["tokens_per_s"] == pytest.approx(row["llama"]["output_tokens"] / row["llama"]["seconds"])
    monkeypatch.setenv("REWRITER_CACHE", str(tmp_path / "empty"))  # no tokenizer here: not counted
    with FakeOpenAI("llama", hinted, log, completion_tokens=0) as llama:
        result = run_endpoint_bench([Endpoint("llama", llama.url)], [case], None, None, out=io.StringIO())
    assert result["cases"][0]["endpoints"]["llama"]["output_tokens"] is None


def test_each_request_waits_for_the_last_server_to_settle(monkeypatch):
    import rewriter.bench.endpoint_bench as module

    waits: list[float] = []
    monkeypatch.setattr(module.time, "sleep", waits.append)
    log: list = []
    with FakeOpenAI("ours", hinted, log) as ours, FakeOpenAI("llama", hinted, log) as llama:
        run_endpoint_bench([Endpoint("ours", ours.url), Endpoint("llama", llama.url)], [Case(**CASES[0])], None,
                           None, out=io.StringIO(), settle_s=0.5)
    # Before each endpoint's request of the case, not before the warm-ups (the fake servers' own
    # threads sleep 0 s through the same time module).
    assert waits.count(0.5) == 2


def test_counters_sum_label_sets_and_ignore_look_alikes():
    assert counters(vllm_metrics(3)) == {ACCEPTED: 30.0, DRAFTED: 48.0}
    assert counters("# TYPE vllm:spec_decode_num_accepted_tokens_total counter\n") == {}
    assert counters("vllm:spec_decode_num_draft_tokens_total 12 1700000000000\n") == {DRAFTED: 12.0}
    assert counters('vllm:spec_decode_num_draft_tokens_total{model_name="a {b}"} 7.5\n') == {DRAFTED: 7.5}


def _result(rate: float | None, identical: bool | None = True, error: str | None = None, accepted=None,
            drafted=None, decode_rate: float | None = None) -> dict:
    result = {"tokens_per_s": rate, "decode_tokens_per_s": decode_rate, "ttft_s": 0.1, "output_tokens": 10,
              "finish_reason": "stop", "identical_to_reference": identical, "accepted_tokens": accepted,
              "drafted_tokens": drafted}
    return {**result, "error": error} if error else result


def test_the_summary_takes_medians_of_per_case_ratios_and_leaves_failures_out():
    rows = [
        {"id": "1", "endpoints": {"a": _result(100.0, decode_rate=150.0),
                                  "b": _result(200.0, accepted=3, drafted=4, decode_rate=600.0)}},
        {"id": "2", "endpoints": {"a": _result(100.0, decode_rate=100.0),
                                  "b": _result(300.0, False, accepted=1, drafted=4, decode_rate=100.0)}},
        {"id": "3", "endpoints": {"a": _result(None, None, error="HTTP 500"), "b": _result(100.0, None)}},
    ]
    summary = summarize(rows, ["a", "b"], 512)
    assert summary["median_tokens_per_s_ratio"] == {"a": {"b": pytest.approx((1 / 2 + 1 / 3) / 2)},
                                                    "b": {"a": pytest.approx(2.5)}}
    assert summary["median_decode_tokens_per_s_ratio"]["b"] == {"a": pytest.approx(2.5)}  # (4 + 1) / 2
    assert summary["endpoints"]["b"]["median_decode_tokens_per_s"] == pytest.approx(350.0)
    a, b = summary["endpoints"]["a"], summary["endpoints"]["b"]
    assert (a["errors"], a["median_tokens_per_s"], a["identical_to_reference"], a["acceptance_rate"]) == (1, 100.0, 2, None)
    assert (b["errors"], b["median_tokens_per_s"], b["identical_to_reference"]) == (0, 200.0, 1)
    assert (b["accepted_tokens"], b["drafted_tokens"], b["acceptance_rate"]) == (4, 8, 0.5)


def test_endpoint_names():
    assert parse_endpoints(["vllm=http://h:8000/v1", "http://127.0.0.1:9000/v1", "http://x/v1?key=1"]) == [
        Endpoint("vllm", "http://h:8000/v1"), Endpoint("127.0.0.1:9000", "http://127.0.0.1:9000/v1"),
        Endpoint("x/v1?key=1", "http://x/v1?key=1")]
    with pytest.raises(ValueError, match="given twice"):
        parse_endpoints(["a=http://h:1/v1", "a=http://h:2/v1"])


@pytest.mark.parametrize("extra, words", [
    (["--tests"], "--tests: for a local model"),
    (["--integrity"], "--integrity: for a local model"),
    (["--temperature", "0.7"], "the sampling and draft-model options"),
    (["--draft-model", "small"], "the sampling and draft-model options"),
    (["--max-file-tokens", "100", "--dtype", "int8"], "--max-file-tokens, --dtype: for a local model"),
])
def test_options_that_need_a_local_model_are_refused(tmp_path, capsys, extra, words):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(CASES[0]) + "\n")
    assert main(["bench", str(cases), "--endpoint", "http://127.0.0.1:9/v1", *extra]) == 2
    assert words in capsys.readouterr().err


def test_cli_exit_codes_for_no_cases_an_unreachable_server_and_a_bad_url(tmp_path, capsys):
    cases = tmp_path / "cases.jsonl"
    cases.write_text("")
    assert main(["bench", str(cases), "--endpoint", "http://127.0.0.1:9/v1"]) == 2
    assert "no cases selected" in capsys.readouterr().err
    cases.write_text(json.dumps(CASES[0]) + "\n")
    assert main(["bench", str(cases), "--endpoint", "down=http://127.0.0.1:9/v1"]) == 1
    assert "endpoint down (http://127.0.0.1:9/v1): cannot reach" in capsys.readouterr().err
    assert main(["bench", str(cases), "--endpoint", "ftp://127.0.0.1/v1"]) == 2
    assert "not an http(s) URL" in capsys.readouterr().err
