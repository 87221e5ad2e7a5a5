"""Benchmark cases and reports, shared by the benchmarks. Torch-free: `rewriter bench --endpoint`
measures servers without loading a model stack."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

Selected = TypeVar("Selected")  # any kind of case: benchmark cases, snippet cases
Parsed = TypeVar("Parsed")


@dataclass
class Case:
    id: str
    language: str
    before: str
    instruction: str
    tests: str | None = None  # Python run after the edited code; it passes when the program exits 0


def read_jsonl(path: str | Path, what: str, parse: Callable[[dict], Parsed]) -> list[Parsed]:
    """`parse` of each non-blank line's JSON object; a line it cannot take names the file, the line
    and `what` a line should be."""
    parsed = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                parsed.append(parse(json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise ValueError(f"{path}:{number}: not {what} ({error})") from error
    return parsed


def load_cases(path: str | Path) -> list[Case]:
    return read_jsonl(path, "a benchmark case", lambda row: Case(
        str(row["id"]), row.get("language", ""), row["before"], row["instruction"], row.get("tests")))


def select(cases: list[Selected], every: int | None = None, limit: int | None = None) -> list[Selected]:
    """`--every N` (the 1st, the N+1th, ...), then `--limit N`."""
    if every:
        cases = cases[::every]
    return cases[:limit] if limit else cases


def run_cases(cases: list[Case], measure, format_one, summarize_rows, format_all, json_path: str | None,
              out) -> dict:
    """Measure case after case, printing each row, then the summary; the JSON report is rewritten
    after every case, so a long run that is stopped keeps what it measured."""
    rows = []
    for case in cases:
        rows.append(measure(case))
        print(format_one(rows[-1]), file=out, flush=True)
        if json_path:
            write_report(json_path, rows, summarize_rows(rows))
    summary = summarize_rows(rows)
    print(format_all(summary), file=out, flush=True)
    if json_path:
        write_report(json_path, rows, summary)
    return {"summary": summary, "cases": rows}


def write_report(path: str, rows: list[dict], summary: dict) -> None:
    Path(path).write_text(json.dumps({"summary": summary, "cases": rows}, indent=2) + "\n", encoding="utf-8")
