"""`rewriter bench CASES --integrity`: what the integrity check does with real answers.

Every function of the benchmark's files is rewritten on its own, as `rewriter apply --each
function` does (the span is the prediction, the file the context), with instructions taken in
turn from INSTRUCTIONS. Each answer is judged by the integrity check: applied, stripped (an
echo removed) or refused, and why. The applied ones are then audited on the whole file, apart
from the check's own span-level reasoning: a definition of the file that is gone (and that the
instruction does not allow to lose), a header left without its body, a significant line that
was unique and is now twice, or a Python file that compiled and no longer does counts as damage;
the check is only right if that count is 0.
"""
from __future__ import annotations

import json
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from statistics import median

from ..edits.checks.integrity import FileIntegrity, lost_bodies, lost_definitions, significant
from ..edits.checks.syntax import compile_regression
from ..edits.definitions import definitions
from ..edits.node_kinds import grammar_for
from ..edits.pipeline import Refusal, TargetEdit
from ..edits.scopes import SyntaxTree, select_nodes
from ..edits.target import Target
from ..results import RewriteResult
from .cases import Case

INSTRUCTIONS = (
    "Add a one-line docstring to this function.",
    "Add type hints to this function's parameters and return value.",
    "Rename this function to a more descriptive name.",
    "Simplify this function without changing what it does.",
)


@dataclass
class SpanOutcome:
    case: str
    span: str
    instruction: str
    verdict: str  # applied, stripped, refused, failed (no answer to judge)
    reason: str = ""
    changed: bool = False
    damage: list[str] = field(default_factory=list)  # the audit's findings on an applied answer
    check_ms: float = 0.0
    seconds: float = 0.0  # decoding the answer, prompt included
    output_tokens: int = 0
    forward_passes: int = 0
    echo_dropped_chars: int = 0  # the answer's copy of the lines after the span, dropped
    finish_reason: str = ""
    answer: str = ""  # the model's raw answer, to read why it was refused or cut


def audit(before: str, after: str, grammar: str | None, instruction: str) -> list[str]:
    """Whole-file damage: definitions or bodies lost (unless the instruction allows), unique lines
    now twice, and (Python) a file that compiled and no longer does."""
    found = []
    if grammar:
        old, new = definitions(SyntaxTree(before, grammar)), definitions(SyntaxTree(after, grammar))
        found += [f"lost {d.name}" for d in lost_definitions(old, new, instruction)]
        found += [f"lost the body of {d.name}" for d in lost_bodies(old, new, instruction)]
        headers = {d.header for d in old + new}
    else:
        headers = set()
    error = compile_regression(before, after) if grammar == "python" else None
    if error is not None:
        found.append(f"does not compile: {error.describe()}")
    old_lines = Counter(line.strip() for line in before.splitlines())
    new_lines = Counter(line.strip() for line in after.splitlines())
    found += [f"duplicated {line!r}" for line, count in new_lines.items()
              if count >= 2 and old_lines[line] == 1 and significant(line, headers)]
    return found


def run_integrity_bench(rewriter, cases: list[Case], spans_wanted: int, max_new_tokens: int | None,
                        json_path: str | None,
                        say=lambda message: print(message, file=sys.stderr)) -> list[SpanOutcome]:
    outcomes: list[SpanOutcome] = []
    for turn, (case, grammar, check, span) in enumerate(islice(_functions(cases), spans_wanted)):
        instruction = INSTRUCTIONS[turn % len(INSTRUCTIONS)]
        outcome = SpanOutcome(case.id, span.label(), instruction, "failed")
        outcomes.append(outcome)
        edit = TargetEdit(span, instruction, integrity=check)
        result = _rewrite(rewriter, edit, case, span, outcome, max_new_tokens, say)
        if result is None:
            continue
        _judge(edit, result, case, span, grammar, outcome, say)
        if json_path:  # after every span: a long run stopped early still leaves its figures
            _write_json(json_path, outcomes)
    print(summary(outcomes))
    if json_path:
        _write_json(json_path, outcomes)
    return outcomes


def _functions(cases: list[Case]) -> Iterator[tuple[Case, str, FileIntegrity, Target]]:
    """Each function of the files that parse, with the file's grammar and integrity check; lazily,
    so that no file past the last span wanted is parsed."""
    for case in cases:
        grammar = grammar_for(case.language)
        if grammar is None:
            continue
        tree = SyntaxTree(case.before, grammar)
        if tree.has_errors():
            continue
        check = FileIntegrity(case.before, grammar)
        for span in select_nodes(tree, "function"):
            yield case, grammar, check, span


def _rewrite(rewriter, edit: TargetEdit, case: Case, span: Target, outcome: SpanOutcome, max_new_tokens: int | None,
             say) -> RewriteResult | None:
    """The model's answer for one span, its figures kept in `outcome`; None if it failed (the reason kept)."""
    try:
        result = rewriter.rewrite(edit.code, outcome.instruction, case.language, context=edit.context(),
                                  max_new_tokens=max_new_tokens)
    except Exception as error:  # noqa: BLE001 - one span's failure is counted, not fatal
        outcome.reason = f"{type(error).__name__}: {error}"
        say(f"{case.id} {span.label()}: failed: {outcome.reason}")
        return None
    outcome.seconds = result.stats.total_s
    outcome.output_tokens = result.stats.output_tokens
    outcome.forward_passes = result.stats.forward_passes
    outcome.echo_dropped_chars = result.stats.echo_dropped_chars
    outcome.finish_reason = result.stats.finish_reason
    outcome.answer = result.answer
    return result


def _judge(edit: TargetEdit, result: RewriteResult, case: Case, span: Target, grammar: str, outcome: SpanOutcome,
           say) -> None:
    """The answer's verdict in `outcome`; an applied one is audited on the whole file too."""
    started = time.perf_counter()
    # Judged as every front end judges (integrity check, syntax guard, lint check).
    verdict = edit.finish(result.text, result.stats.finish_reason)
    outcome.check_ms = (time.perf_counter() - started) * 1000
    if verdict.refusal == Refusal.CUT:
        outcome.reason = "stopped at the token limit"
        say(f"{case.id} {span.label()}: {outcome.reason}")
        return
    outcome.verdict, outcome.reason = verdict.status, verdict.reason
    outcome.changed = (verdict.refused_text if verdict.refused else verdict.text) != edit.original
    if not verdict.refused:
        text = case.before
        new_file = text[: span.start] + verdict.text + text[span.end:]
        outcome.damage = audit(text, new_file, grammar, outcome.instruction)
    say(f"{case.id} {span.label()}: {verdict.status}" + ("" if outcome.changed else " (unchanged)")
        + (f": {verdict.reason}" if verdict.reason else "")
        + (f"  DAMAGE: {outcome.damage}" if outcome.damage else ""))


def _write_json(path: str, outcomes: list[SpanOutcome]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        json.dump([outcome.__dict__ for outcome in outcomes], out, indent=2)


def _reason_kind(reason: str) -> str:
    if reason.startswith("the answer is a copy of"):
        return "answer is a copy of other code"
    kinds = [name for pattern, name in ((r"would lose (?!the body)", "loses a definition"),
                                        (r"would lose the body", "loses a body"),
                                        (r"would duplicate", "duplicates code"), (r"does not parse", "does not parse"),
                                        (r"documentation only", "changes code when asked for documentation"))
             if re.search(pattern, reason)]
    return " + ".join(kinds) or reason


def summary(outcomes: list[SpanOutcome]) -> str:
    rows = [("instruction", "spans", "applied", "(changed)", "stripped", "refused", "failed", "damage in applied")]
    for instruction in [*INSTRUCTIONS, None]:
        group = [o for o in outcomes if instruction is None or o.instruction == instruction]
        if not group:
            continue
        count = Counter(o.verdict for o in group)
        rows.append((instruction or "all", str(len(group)), str(count["applied"]),
                     str(sum(1 for o in group if o.verdict == "applied" and o.changed)),
                     str(count["stripped"]), str(count["refused"]), str(count["failed"]),
                     str(sum(1 for o in group if o.damage))))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) for row in rows]
    reasons = Counter(_reason_kind(o.reason) for o in outcomes if o.verdict == "refused")
    if reasons:
        lines.append("refused because: " + ", ".join(f"{kind} {n}" for kind, n in reasons.most_common()))
    timed = [o.seconds for o in outcomes if o.seconds]
    if timed:
        cut = sum(1 for o in outcomes if o.finish_reason == "length")
        lines.append(f"decoding: {median(timed):.1f} s per span (median), {sum(timed):.0f} s in all, "
                     f"{sum(o.output_tokens for o in outcomes)} tokens, "
                     f"{sum(o.forward_passes for o in outcomes)} forward passes; "
                     f"{cut} answer(s) cut at the token limit, "
                     f"{sum(1 for o in outcomes if o.echo_dropped_chars)} stopped where they began to copy the file")
    checked = [o.check_ms for o in outcomes if o.verdict != "failed"]
    if checked:
        lines.append(f"integrity check: {sum(checked) / len(checked):.1f} ms per span on average, "
                     f"{max(checked):.1f} ms at most")
    return "\n".join(lines)
