"""How a `rewriter apply` run is shown: the progress bar, the summary table, the JSON report and the exit code."""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import asdict
from typing import TextIO

from ..edits.target import Target
from ..results import Stats
from .plans import FilePlan, FileStatus, Options, RunOutcome, Unit, UnitStatus


class Report:
    """Progress of a run; the base class shows nothing (quiet and --json modes)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.started = time.perf_counter()
        self.files = self.files_done = self.units = self.units_done = 0
        self.tokens_done = 0
        self.live: dict[int, int] = {}  # thread -> tokens of its running request

    def start(self, jobs: list[FilePlan]) -> None:
        self.started = time.perf_counter()
        self.files = sum(1 for j in jobs if j.status == FileStatus.PENDING)
        self.units = sum(len(j.units) for j in jobs if j.status == FileStatus.PENDING)

    def unit_started(self, job: FilePlan, span: Target) -> None:
        with self.lock:
            self.live[threading.get_ident()] = 0
            self.current = f"{job.display}: {span.label()}"
        self.draw()

    def progress(self, job: FilePlan, stats: Stats) -> None:
        with self.lock:
            self.live[threading.get_ident()] = stats.output_tokens
        self.draw()

    def unit_done(self, job: FilePlan, unit: Unit) -> None:
        with self.lock:
            self.live.pop(threading.get_ident(), None)
            self.tokens_done += unit.stats.output_tokens if unit.stats else 0
        self.draw()

    def span_done(self, job: FilePlan) -> None:
        """A planned span is finished (all its pieces, when it had to be cut to fit)."""
        with self.lock:
            self.units_done += 1
        self.draw()

    def split(self, job: FilePlan, span: Target, pieces: int) -> None:
        pass

    def file_done(self, job: FilePlan) -> None:
        with self.lock:
            self.files_done += 1
        self.draw()

    def tokens_per_s(self) -> float:
        elapsed = time.perf_counter() - self.started
        return (self.tokens_done + sum(self.live.values())) / elapsed if elapsed > 0 else 0.0

    def draw(self) -> None:
        pass

    def clear(self) -> None:
        """Make room for other output on the terminal (the next update redraws)."""

    def close(self) -> None:
        pass


class TerminalReport(Report):
    """A progress bar on stderr, redrawn in place at most ten times a second."""

    def __init__(self, stream: TextIO = sys.stderr, width: int = 24):
        super().__init__()
        self.stream = stream
        self.width = width
        self.last_draw = 0.0
        self.current = ""
        self.shown = False

    def draw(self, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self.last_draw < 0.1:
            return
        self.last_draw = now
        with self.lock:
            done = self.units_done / self.units if self.units else 1.0
            filled = int(done * self.width)
            bar = "#" * filled + "-" * (self.width - filled)
            line = (f"[{bar}] {self.files_done}/{self.files} files, {self.units_done}/{self.units} spans, "
                    f"{self.tokens_per_s():.1f} tok/s  {self.current}")
        columns = _columns(self.stream)
        self.stream.write("\r\033[K" + line[: columns - 1])
        self.stream.flush()
        self.shown = True

    def file_done(self, job: FilePlan) -> None:
        super().file_done(job)
        self.draw(force=True)

    def clear(self) -> None:
        with self.lock:
            if self.shown:
                self.stream.write("\r\033[K")
                self.stream.flush()
                self.shown = False

    def close(self) -> None:
        self.clear()


def _columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 100


def add_stats(total: Stats, stats: Stats | None) -> None:
    if stats is None:
        return
    for name in ("prompt_tokens", "cached_prompt_tokens", "output_tokens", "forward_passes",
                 "accepted_prediction_tokens", "rejected_prediction_tokens",
                 "accepted_draft_tokens", "rejected_draft_tokens"):
        setattr(total, name, getattr(total, name) + getattr(stats, name))
    total.total_s += stats.total_s


def file_stats(job: FilePlan) -> Stats:
    total = Stats()
    for unit in job.units:
        add_stats(total, unit.stats)
    return total


def _rate(stats: Stats) -> float:
    return stats.output_tokens / stats.total_s if stats.total_s > 0 else 0.0


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def status_text(job: FilePlan, options: Options) -> str:
    words = {FileStatus.CHANGED: "would change" if not options.write else "changed, not written"}
    text = words.get(job.status, job.status)
    return f"{text}: {job.reason}" if job.reason else text


def outcome_of_tests(job: FilePlan) -> str:
    """--test: the last outcome and the tries it took ("passed on try 2", "failed after 2 tries")."""
    if not job.test_tries:
        return "-"
    if job.test_outcome == RunOutcome.PASSED:
        return f"passed on try {job.test_tries}"
    if job.test_rule:
        return f"fewer failures on try {job.test_tries}"
    return f"{job.test_outcome or 'not run'} after {job.test_tries} {'try' if job.test_tries == 1 else 'tries'}"


def summary_table(jobs: list[FilePlan], options: Options, seconds: float) -> str:
    """The table printed at the end: one row per file, then the totals."""
    tested = options.test is not None
    rows = [("file", "spans", "changed", "prediction acc/rej", "tok/s", "time", *(("tests",) if tested else ()),
             "status")]
    total = Stats()
    for job in jobs:
        stats = file_stats(job)
        add_stats(total, stats)
        changed = sum(1 for u in job.units if u.status == UnitStatus.CHANGED)
        has_units = bool(job.units) and job.status != FileStatus.SKIPPED
        rows.append((
            job.display,
            str(len(job.units)) if has_units else "-",
            str(changed) if has_units else "-",
            f"{stats.accepted_prediction_tokens}/{stats.rejected_prediction_tokens}" if stats.output_tokens else "-",
            f"{_rate(stats):.1f}" if stats.output_tokens else "-",
            f"{job.seconds:.1f}s" if job.seconds else "-",
            *((outcome_of_tests(job),) if tested else ()),
            status_text(job, options),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1] for row in rows]
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.status] = counts.get(job.status, 0) + 1
    order = [FileStatus.WRITTEN, FileStatus.CHANGED, FileStatus.UNCHANGED, FileStatus.SKIPPED, FileStatus.FAILED,
             FileStatus.INTERRUPTED]
    parts = [f"{counts[s]} {'would change' if s == FileStatus.CHANGED and not options.write else s}"
             for s in order if counts.get(s)]
    spans = sum(len(j.units) for j in jobs if j.status != FileStatus.SKIPPED)
    lines.append(
        f"{plural(len(jobs), 'file')} ({', '.join(parts)}), {plural(spans, 'span')}, "
        f"{total.output_tokens} tokens, prediction tokens {total.accepted_prediction_tokens} accepted / "
        f"{total.rejected_prediction_tokens} rejected, {_rate(total):.1f} tok/s, {seconds:.1f}s"
    )
    return "\n".join(lines)


def exit_code(jobs: list[FilePlan], options: Options, completed: bool) -> int:
    if not completed:
        return 130
    if any(j.status == FileStatus.FAILED or j.failed_units for j in jobs):
        return 1
    if options.check and any(j.status in (FileStatus.CHANGED, FileStatus.WRITTEN) for j in jobs):
        return 1
    if options.review is not None and options.review.ran_out:  # hunks left unanswered were not applied
        return 1
    return 0


def _stats_dict(stats: Stats) -> dict:
    return {
        "output_tokens": stats.output_tokens,
        "accepted_prediction_tokens": stats.accepted_prediction_tokens,
        "rejected_prediction_tokens": stats.rejected_prediction_tokens,
        "forward_passes": stats.forward_passes,
        "decoding_s": round(stats.total_s, 3),
        "tokens_per_s": round(_rate(stats), 2),
    }


def json_report(jobs: list[FilePlan], options: Options, seconds: float, code: int) -> str:
    files = []
    total = Stats()
    for job in jobs:
        stats = file_stats(job)
        add_stats(total, stats)
        files.append({
            "path": job.display,
            "language": job.language,
            "status": job.status,
            "reason": job.reason,
            "spans": [{
                "kind": u.target.kind, "name": u.target.name,
                "lines": list(u.target.shown_lines),
                "status": u.status, "reason": u.reason, "part_of": u.part_of,
                **({"candidates": u.candidates} if u.candidates else {}),
                **({"retried": u.retried} if u.retried else {}),
                **({"refused_diff": u.refused_diff} if u.refused_diff else {}),
                **({"stats": _stats_dict(u.stats)} if u.stats else {}),
            } for u in job.units] if job.status != FileStatus.SKIPPED else [],
            "diff": job.diff,
            "notes": job.notes,
            **({"merge": job.merge, "merge_reason": job.merge_reason} if job.merge else {}),
            **({"test": {"tries": job.test_tries, "outcome": job.test_outcome or None,
                         "output_tail": job.test_tail, **({"kept_by": job.test_rule} if job.test_rule else {})}}
               if options.test is not None else {}),
            "stats": _stats_dict(stats),
            "seconds": round(job.seconds, 3),
        })
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.status] = counts.get(job.status, 0) + 1
    return json.dumps({
        "files": files,
        "summary": {"files": len(jobs), **counts, "stats": _stats_dict(total),
                    "seconds": round(seconds, 3), "exit_code": code,
                    "write": options.write, "check": options.check, "edit_options": asdict(options.edit),
                    **({"test": options.test} if options.test is not None else {})},
    }, indent=2)
