"""`rewriter bench --snippets`: the deterministic merge's report without torch, and the model's merges
(a scripted engine here) counted beside it."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rewriter.bench.command import bench_command
from rewriter.cli import build_parser
from rewriter.engine import SamplingParams
from tests.helpers.scripted import ScriptedEngine

ROOT = Path(__file__).resolve().parents[2]
BEFORE = '''def area(width, height):
    return width * height


def perimeter(width, height):
    total = 0
    total += 2 * width
    total += 2 * height
    return total
'''
EDITS = [
    {"id": "simplify", "before": BEFORE, "instruction": "Simplify perimeter",
     "after": BEFORE.replace("    total = 0\n    total += 2 * width\n    total += 2 * height\n    return total\n",
                             "    return 2 * (width + height)\n")},
    {"id": "hints", "before": BEFORE, "instruction": "Add type hints to area",
     "after": BEFORE.replace("def area(width, height):", "def area(width: float, height: float) -> float:")},
]


@pytest.fixture
def edits(tmp_path):
    path = tmp_path / "edits.jsonl"
    path.write_text("".join(json.dumps(edit) + "\n" for edit in EDITS))
    return path


def test_the_deterministic_report_runs_through_the_cli_without_torch(edits):
    script = ("import sys\nsys.modules['torch'] = None  # `import torch` now raises ImportError\n"
              "from rewriter.cli import main\n"
              f"code = main(['bench', '--snippets', {str(edits)!r}])\n"
              "assert sys.modules.get('torch') is None\nsys.exit(code)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:3] == ["style", "cases", "exact"]
    rows = {line.split()[0]: line.split()[1:3] for line in lines[1:] if line and not line.startswith(" ")}
    assert rows["all"][0] == "18"  # each of the 2 edits in each of the 9 snippet styles
    assert rows["definitions"] == ["2", "2"]


def bench(*args: str, engine=None) -> tuple[int, list[str]]:
    said: list[str] = []
    parsed = build_parser().parse_args(["bench", *args])
    code = bench_command(parsed, SamplingParams(), lambda *given, **options: engine, said.append)
    return code, said


def test_the_model_merges_every_case_with_model_only(edits, tmp_path, capsys):
    engine = ScriptedEngine([{"instruction": edit["instruction"], "replace": [[edit["before"], edit["after"]]]}
                             for edit in EDITS])
    report_path = tmp_path / "report.json"
    code, said = bench("--snippets", str(edits), "--model-only", "--json", str(report_path), engine=engine)
    assert code == 0, said
    out = capsys.readouterr().out
    assert "exact, the model alone:     2/2" in out and "exact, both" in out
    model = json.loads(report_path.read_text())["model"]
    assert model["model_cases"] == 2 and model["model_exact"] == 2 and model["both_exact"] == 2


def test_a_model_merge_that_drops_a_line_the_snippet_keeps_is_refused_not_applied(edits, tmp_path):
    # "hints" answered with area's hints but perimeter's `total += 2 * height` gone: a line the
    # snippet's marker keeps, so the merge is refused (asked twice) and not counted as lost code.
    hints = EDITS[1]
    dropped = hints["after"].replace("    total += 2 * height\n", "")
    engine = ScriptedEngine([{"instruction": EDITS[0]["instruction"], "replace": [[BEFORE, EDITS[0]["after"]]]},
                             {"instruction": hints["instruction"], "replace": [[BEFORE, dropped]]}])
    report_path = tmp_path / "report.json"
    code, said = bench("--snippets", str(edits), "--model-only", "--json", str(report_path), engine=engine)
    assert code == 0, said
    model = json.loads(report_path.read_text())["model"]
    assert model["model_exact"] == 1 and model["model_refused"] == 1 and model["model_lost_code"] == 0
    refused = model["merges"][1]
    assert refused["outcome"] == "refused" and "total += 2 * height" in refused["reason"]
    assert "return total" in refused["refused_text"] and "total += 2 * height" not in refused["refused_text"]


def test_model_merge_sends_only_the_cases_left_to_the_model(edits, tmp_path):
    code, said = bench("--snippets", str(edits), "--styles", "definitions", "--model-merge", engine=ScriptedEngine([]))
    assert code == 0 and not any(": model " in line for line in said)  # both merged without a model
    # with no context, the changed lines alone place nothing: the model merges them
    engine = ScriptedEngine([{"instruction": edit["instruction"], "replace": [[edit["before"], edit["after"]]]}
                             for edit in EDITS])
    report_path = tmp_path / "report.json"
    code, said = bench("--snippets", str(edits), "--styles", "hunks_0", "--model-merge", "--json", str(report_path),
                       engine=engine)
    report = json.loads(report_path.read_text())
    left = [row["id"] for row in report["cases"] if row["outcome"] == "to_model"]
    assert code == 0 and left and [merge["id"] for merge in report["model"]["merges"]] == left
    assert report["model"]["model_exact"] == len(left)


@pytest.mark.parametrize("args, words", [
    (["--model-merge"], "add --snippets"),
    ([], "name a JSONL file"),
    (["--snippets", "--tests"], "not for --snippets"),
])
def test_snippet_bench_usage_errors(args, words):
    code, said = bench(*args)
    assert code == 2 and words in said[-1]


def test_a_file_of_other_cases_is_refused_clearly(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps({"id": "1", "before": "x = 1\n", "instruction": "x"}) + "\n")
    with pytest.raises(ValueError, match="not a reference edit"):
        bench("--snippets", str(path))


def test_servers_merge_every_case_side_by_side_and_each_ones_exact_merges_are_counted(edits, tmp_path, capsys):
    from tests.helpers.fake_openai import FakeOpenAI

    after = {edit["instruction"]: edit["after"] for edit in EDITS}

    def merges(body: dict) -> str:  # the reference merge, found by the hint the request carries
        prompt = body["messages"][-1]["content"]
        merged = ["```python\n" + code + "```" for hint, code in after.items() if hint in prompt]
        return (merged or [unchanged(body)])[0]  # the warm-up has no hint: its code unchanged

    def unchanged(body: dict) -> str:
        return body["prediction"]["content"]  # the file in its code block: the answer if nothing changes

    log: list = []
    report_path = tmp_path / "report.json"
    with FakeOpenAI("right", merges, log) as right, FakeOpenAI("lazy", unchanged, log) as lazy:
        code, said = bench("--snippets", str(edits), "--endpoint", f"right={right.url}", "--endpoint",
                           f"lazy={lazy.url}", "--settle", "0", "--json", str(report_path))
    assert code == 0, said
    measured = log[2:]  # after one warm-up each
    assert [name for name, _ in measured] == ["right", "lazy"] * 2
    for _, body in measured:  # the file as the prediction, the snippet in the merge instruction
        assert body["prediction"]["content"] == f"```python\n{BEFORE}```" and "Merge this update into the code" in str(body["messages"])
    assert "merged exactly (the answer's code equal to the reference after): right 2/2, lazy 0/2" in capsys.readouterr().out
    report = json.loads(report_path.read_text())
    assert report["exact_merges"] == {"right": {"cases": 2, "exact": 2}, "lazy": {"cases": 2, "exact": 0}}
    assert [row["id"] for row in report["cases"]] == ["simplify", "hints"]


@pytest.mark.parametrize("args, words", [
    (["--model-merge"], "--model-merge (servers merge every case"),
    (["--dtype", "float32"], "--dtype: for a local model"),
])
def test_options_that_do_not_go_with_servers_are_refused_for_snippets_too(edits, args, words):
    code, said = bench("--snippets", str(edits), "--endpoint", "http://127.0.0.1:9/v1", *args)
    assert code == 2 and words in said[-1]


def test_model_merges_count_right_by_their_tests_per_style(tmp_path):
    # The model's merge of "simplify" is not the reference, yet passes its tests: right, not exact.
    # Its merge of "hints" loses the hints: neither.
    tests = "assert perimeter(2, 3) == 10\nassert area(2, 3) == 6\n"
    path = tmp_path / "edits.jsonl"
    path.write_text("".join(json.dumps({**edit, "tests": tests}) + "\n" for edit in EDITS))
    other = BEFORE.replace("    total = 0\n    total += 2 * width\n    total += 2 * height\n    return total\n",
                           "    total = 0\n    return 2 * (width + height)\n")  # the snippet's line, and a stale one
    engine = ScriptedEngine([{"instruction": EDITS[0]["instruction"], "replace": [[BEFORE, other]]},
                             {"instruction": EDITS[1]["instruction"], "replace": []}])
    report_path = tmp_path / "report.json"
    code, said = bench("--snippets", str(path), "--styles", "hunks_0", "--model-merge", "--json", str(report_path),
                       engine=engine)
    assert code == 0, said
    report = json.loads(report_path.read_text())
    by_id = {merge["id"]: merge for merge in report["model"]["merges"]}
    assert by_id["simplify"]["right"] and not by_id["simplify"]["exact"]
    assert "hints" not in by_id or not by_id["hints"]["right"]
    counts = report["model"]["right_by_style"]["hunks_0"]
    assert counts["cases"] == 2 and counts["model_right"] == 1 and counts["right"] == counts["right_without_model"] + 1
