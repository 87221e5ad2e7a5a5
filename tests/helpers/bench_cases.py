"""What the `rewriter bench --tests` tests share: a function and its right edit, model answers and
report rows built from them, cases files, and the bench command run on a checkpoint."""
from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.cli import run_cli

MEAN = "def mean(values):\n    return sum(values) / len(values)\n"
TOTAL = "\n\ndef total(values):\n    return sum(values)\n"  # a second function, after MEAN
INSTRUCTION = "Return 0.0 for an empty list."
AFTER = "def mean(values):\n    if not values:\n        return 0.0\n    return sum(values) / len(values)\n"  # MEAN so edited
# The least a cases file's row needs to be run with --tests.
MINIMAL_CASE = {"id": "a", "before": "x", "instruction": "y", "tests": "pass"}


def fenced(code: str) -> str:
    """A model's answer: the code in a Python fence."""
    return f"```python\n{code}```"


def row(outcome: str, **more) -> dict:
    """A report's row for one case answered with `outcome`; `more` adds or overrides fields."""
    return {"dtype": "int8", "output_tokens": 10, "ours_s": 1.0, "ours_tokens_per_s": 10.0,
            "forward_passes_per_token": 0.5, "accepted_prediction_tokens": 5, "rejected_prediction_tokens": 0,
            "finish_reason": "stop", "outcome": outcome, **more}


def write_cases(folder: Path, rows: list[dict]) -> Path:
    """A cases file (JSON lines) in folder with these rows."""
    path = folder / "cases.jsonl"
    path.write_text("".join(json.dumps(case) + "\n" for case in rows))
    return path


def run_bench(cases: Path, report: Path, model: Path, *options: str):
    """`rewriter bench` over cases with model, its JSON report written to report."""
    return run_cli("bench", str(cases), "--json", str(report), "--model", str(model), *options)
