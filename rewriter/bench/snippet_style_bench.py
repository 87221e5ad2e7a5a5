"""`rewriter bench --snippets`: the deterministic snippet merge on every reference edit cut in every
style of snippet_styles.py, each style reported apart. Torch-free.

Per style: cases; exact (the merge's text, normalized, equal to the reference `after`); passes (of
the cases that carry tests, the EditEval ones: the merge passes them); right (exact, or passes
the tests); merged, to the model, refused; merges that lost or duplicated code; which merge path
made the merges; the median and slowest merge. Wrong: merged, and not right (a merge applied
without a model that is neither the reference nor passes its tests). Tests are run only for a
merge that is not exact and only where the reference `after` passes them itself (run once per
case and kept): an exact merge passes as the reference does, and a case whose reference fails
judges nothing.
`python -m rewriter.bench.snippet_style_bench [--styles a,b] [FILE ...]` prints the same report.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from ..edits.snippets.merge import Merged, MergeOutcome, merge_snippet
from ..edits.testrun import DEFAULT_TIMEOUT_S, run_tests
from .snippet_cases import (
    NoReferenceEdits,
    SnippetCase,
    large_file_ms,
    load_reference_edits,
    measure_outcome,
    normalized,
    reference_edit_paths,
)
from .snippet_styles import STYLES, style_cases, unknown_styles

TOP_REASONS = 5


def run_program(code: str, tests: str, timeout_s: float) -> bool:
    return run_tests(code, tests, timeout_s).passed


@dataclass
class PassJudge:
    """Whether merges pass their case's tests; the reference's result and each merge's kept per case."""

    tests: dict[str, str]  # case id -> the tests appended to the code
    timeout_s: float = DEFAULT_TIMEOUT_S
    run: Callable[[str, str, float], bool] = run_program  # (code, tests, time limit) -> passed
    reference: dict[str, bool] = field(default_factory=dict)  # case id -> its reference passes
    merges: dict[tuple[str, str], bool] = field(default_factory=dict)  # (case id, normalized merge) -> passes
    runs: int = 0  # test programs run
    seconds: float = 0.0  # time spent running them

    def passes(self, case: SnippetCase, merged: str | None, exact: bool) -> bool | None:
        """None for a case without tests; False for no merge (`merged` None) or a reference that fails."""
        tests = self.tests.get(case.id)
        if not tests:
            return None
        if case.id not in self.reference:
            self.reference[case.id] = self._run(case.after, tests)
        if merged is None or not self.reference[case.id]:
            return False
        if exact:
            return True
        key = (case.id, normalized(merged))
        if key not in self.merges:
            self.merges[key] = self._run(merged, tests)
        return self.merges[key]

    def _run(self, code: str, tests: str) -> bool:
        began = time.perf_counter()
        passed = self.run(code, tests, self.timeout_s)
        self.seconds += time.perf_counter() - began
        self.runs += 1
        return passed


def measure_style_case(case: SnippetCase, judge: PassJudge, merge: Callable[..., MergeOutcome] = merge_snippet) -> dict:
    row, outcome = measure_outcome(case, merge)
    merged = outcome.text if isinstance(outcome, Merged) else None
    row["passes"] = judge.passes(case, merged, row["exact"])
    row["right"] = row["exact"] or bool(row["passes"])
    return row


def summarize_styles(rows: list[dict]) -> dict:
    times = [row["ms"] for row in rows] or [0.0]
    return {"cases": len(rows), "exact": sum(row["exact"] for row in rows),
            "tested": sum(row["passes"] is not None for row in rows),
            "passes": sum(bool(row["passes"]) for row in rows),
            "right": sum(row["right"] for row in rows),
            "merged": sum(row["outcome"] == "merged" for row in rows),
            "wrong": sum(row["outcome"] == "merged" and not row["right"] for row in rows),
            "to_model": sum(row["outcome"] == "to_model" for row in rows),
            "refused": sum(row["outcome"] == "refused" for row in rows),
            "lost_code": sum(bool(row["lost"]) for row in rows),
            "duplicated_code": sum(bool(row["duplicated"]) for row in rows),
            "unsolvable": sum(bool(row["unsolvable"]) for row in rows),
            "paths": dict(Counter(row["path"] for row in rows if "path" in row).most_common()),
            "median_ms": statistics.median(times), "max_ms": max(times)}


def run_style_bench(cases: list[SnippetCase], judge: PassJudge, say: Callable[[str], None] = lambda message: None,
                    large_file: bool = True, merge: Callable[..., MergeOutcome] = merge_snippet) -> dict:
    """Every case merged (by `merge`, called as merge_snippet) and judged; the report per style (in the
    order the cases bring them) and in all."""
    began = time.perf_counter()
    by_style: dict[str, list[dict]] = defaultdict(list)
    for number, case in enumerate(cases, 1):
        by_style[case.style].append(measure_style_case(case, judge, merge))
        if number % 500 == 0:
            say(f"{number}/{len(cases)} merged ({judge.runs} test programs run)")
    rows = [row for group in by_style.values() for row in group]
    return {"styles": {style: summarize_styles(group) for style, group in by_style.items()},
            "summary": summarize_styles(rows), "large_file_ms": large_file_ms() if large_file else None,
            "test_runs": judge.runs, "test_seconds": judge.seconds,
            "reference_fails": sorted(case_id for case_id, passed in judge.reference.items() if not passed),
            "seconds": time.perf_counter() - began, "cases": rows}


def reason_kind(reason: str) -> str:
    """A reason with its names, quoted code and numbers blanked, so that alike reasons count together."""
    reason = re.sub(r"`[^`\n]*`|(?<!\w)'[^'\n]*'(?!\w)|(?<!\w)\"[^\"\n]*\"(?!\w)", "…", reason)
    return re.sub(r"\d+", "N", reason)


def top_reasons(rows: list[dict], count: int = TOP_REASONS) -> list[tuple[str, str, int]]:
    """(outcome, reason kind, cases) for the most frequent reasons the merge gave no merge."""
    kinds = Counter((row["outcome"], reason_kind(row.get("reason", ""))) for row in rows if row["outcome"] != "merged")
    return [(outcome, kind, cases) for (outcome, kind), cases in kinds.most_common(count)]


HEADER = (f"{'style':<16} {'cases':>5} {'exact':>5} {'passes':>8} {'right':>5} {'share':>6} {'merged':>6} "
          f"{'wrong':>5} {'to_model':>8} {'refused':>7} {'lost':>4} {'dup':>4} {'med ms':>7} {'max ms':>7}")


def _table_line(name: str, summary: dict) -> str:
    share = 100 * summary["right"] / max(summary["cases"], 1)
    passes = f"{summary['passes']}/{summary['tested']}"
    return (f"{name:<16} {summary['cases']:>5} {summary['exact']:>5} {passes:>8} {summary['right']:>5} "
            f"{share:>5.1f}% {summary['merged']:>6} {summary['wrong']:>5} {summary['to_model']:>8} "
            f"{summary['refused']:>7} {summary['lost_code']:>4} {summary['duplicated_code']:>4} "
            f"{summary['median_ms']:>7.2f} {summary['max_ms']:>7.2f}")


def format_style_report(report: dict) -> str:
    summary = report["summary"]
    out = [HEADER, *(_table_line(style, s) for style, s in report["styles"].items()), _table_line("all", summary)]
    out.append(f"right merges (exact, or passing the tests): {summary['right']}/{summary['cases']} "
               f"({100 * summary['right'] / max(summary['cases'], 1):.1f}%); to the model: {summary['to_model']} "
               f"cases; refused: {summary['refused']}; merged but wrong: {summary['wrong']}")
    out.append("passes: merged cases passing their tests / cases with tests (exact merges count as the reference; "
               f"{len(report['reference_fails'])} references fail their own tests); "
               f"{report['test_runs']} test programs run in {report['test_seconds']:.1f} s")
    out.append("merged by path: " + "; ".join(
        f"{style} " + ", ".join(f"{path} {count}" for path, count in s["paths"].items())
        for style, s in report["styles"].items()))
    if report["large_file_ms"] is not None:
        out.append(f"a one-function merge into a 1,000-line file: {report['large_file_ms']:.1f} ms (median of 5)")
    out.append(f"the whole bench: {report['seconds']:.1f} s")
    by_style: dict[str, list[dict]] = defaultdict(list)
    for row in report["cases"]:
        by_style[row["style"]].append(row)
    for style, rows in by_style.items():
        if reasons := top_reasons(rows):
            out.append(f"{style}: why not merged (top {TOP_REASONS})")
            out += [f"  {cases:>4} {outcome:<8} {kind}" for outcome, kind, cases in reasons]
    return "\n".join(out)


def parse_styles(text: str | None) -> list[str]:
    """The styles named in `a,b` (all of them for None); ValueError naming the unknown ones."""
    styles = [name.strip() for name in text.split(",") if name.strip()] if text else list(STYLES)
    if unknown := unknown_styles(styles):
        raise ValueError(f"unknown style{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: "
                         f"the styles are {', '.join(STYLES)}")
    if not styles:
        raise ValueError(f"no style named: the styles are {', '.join(STYLES)}")
    return styles


def pass_judge(rows: list[dict], timeout_s: float = DEFAULT_TIMEOUT_S) -> PassJudge:
    """The judge of merges of the reference edits `rows`, by the tests of those that have them."""
    return PassJudge({str(row["id"]): row["tests"] for row in rows if row.get("tests")}, timeout_s)


def style_bench(rows: list[dict], styles: list[str], timeout_s: float = DEFAULT_TIMEOUT_S,
                say: Callable[[str], None] = lambda message: None, judge: PassJudge | None = None) -> dict:
    """The report on the reference edits `rows` (id, before, after; tests where they have them);
    `judge` (pass_judge's, by default) keeps the tests' results for later merges of the same cases."""
    return run_style_bench(style_cases(rows, styles), judge or pass_judge(rows, timeout_s), say)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rewriter.bench.snippet_style_bench", description=__doc__)
    parser.add_argument("files", nargs="*", help="JSONL files of reference edits (id, before, after)")
    parser.add_argument("--styles", help=f"comma-separated, of {', '.join(STYLES)} (default: all)")
    parser.add_argument("--json", help="write the report here")
    args = parser.parse_args(argv)
    try:
        styles = parse_styles(args.styles)
        paths = reference_edit_paths(args.files or None)
    except (ValueError, NoReferenceEdits) as error:
        print(error, file=sys.stderr)
        return 2
    report = style_bench(load_reference_edits(paths), styles, say=lambda message: print(message, file=sys.stderr))
    print(format_style_report(report))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(report, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
