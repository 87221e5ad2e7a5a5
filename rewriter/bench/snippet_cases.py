"""Snippet cases from reference edits, and what the deterministic snippet merge makes of them.

Each reference edit (`before`, `after`) becomes the snippet a chat model would write for it, in
one of the styles they write, picked per case by a seeded choice among those that fit the edit:

- whole_definitions: each changed function whole, markers for the rest (a method inside its
  class's header line, with markers for the other methods);
- inner_lines: the changed lines with two lines of context, grown to whole statements, under the
  headers of the definitions around them, markers for the unchanged head and tail of the body;
- imports_at_top: the new imports at the top, the rest as whole_definitions;
- new_definition: a new function after the header of its neighbour, the rest as whole_definitions.

The cases are made from the diff alone, not tuned to the merge. Torch-free:
`rewriter bench --snippets` (or `python -m rewriter.bench.snippet_cases`) prints the report;
snippet_model.py measures the model's merges of the same cases. snippet_styles.py cuts every
reference edit in every style of a fixed list instead (the default report of `bench --snippets`).

The reference edits: the files named, else those in `$REWRITER_BENCH_DIR`, else in
`../shared/bench` from the working directory (reference_edit_paths).
"""
from __future__ import annotations

import os
import random
import re
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path

from ..edits.checks.lint import FileLint
from ..edits.checks.syntax import compile_regression
from ..edits.markers import is_marker
from ..edits.scopes import SyntaxTree, expand_to_nodes
from ..edits.snippets.lines import Node, definition_tree, indent_of
from ..edits.snippets.merge import Merged, MergeOutcome, merge_snippet
from ..edits.target import Target
from .cases import read_jsonl

REFERENCE_FILES = ("editeval_tests.jsonl", "nofuneval_maintainability.jsonl")
BENCH_DIR_VARIABLE = "REWRITER_BENCH_DIR"
WHOLE, INNER, IMPORTS, NEW = "whole_definitions", "inner_lines", "imports_at_top", "new_definition"
MARKERS = ("# ... existing code ...", "# ...", "# ... rest of the code unchanged ...", "...",
           "# rest of the code unchanged")
CONTEXT_LINES = 2
IMPORT = re.compile(r"(import|from)\s")


@dataclass(frozen=True)
class SnippetCase:
    id: str
    language: str
    before: str
    after: str
    instruction: str
    snippet: str
    style: str
    unsolvable: str = ""  # why no merge could give `after` from this snippet; "" when one could


class NoReferenceEdits(ValueError):
    """No file of reference edits was named or found where they are looked for."""


def reference_edit_paths(given: list[str] | None = None, environ=None, cwd: Path | None = None) -> list[Path]:
    """The files named, else the reference files in `$REWRITER_BENCH_DIR`, else in `../shared/bench`
    (from `cwd`, the working directory); NoReferenceEdits where none of them is there."""
    if given:
        missing = [path for path in given if not Path(path).is_file()]
        if missing:
            raise NoReferenceEdits(f"no such file of reference edits: {', '.join(missing)}")
        return [Path(path) for path in given]
    environ = os.environ if environ is None else environ
    where = environ.get(BENCH_DIR_VARIABLE)
    folder = Path(where) if where else ((cwd or Path.cwd()) / ".." / "shared" / "bench").resolve()
    found = [folder / name for name in REFERENCE_FILES if (folder / name).is_file()]
    if not found:
        told = f"${BENCH_DIR_VARIABLE} ({where})" if where else f"{folder} (${BENCH_DIR_VARIABLE} is not set)"
        raise NoReferenceEdits(f"no reference edits ({' or '.join(REFERENCE_FILES)}) in {told}: name a JSONL file "
                               f"of reference edits (id, before, after), or set ${BENCH_DIR_VARIABLE} to their folder")
    return found


def load_reference_edits(paths=None) -> list[dict]:
    paths = reference_edit_paths() if paths is None else paths
    return [row for path in paths for row in read_jsonl(path, "a reference edit (id, before, after)", _reference_edit)]


def _reference_edit(row: dict) -> dict:
    if not all(isinstance(row[key], str) for key in ("before", "after")) or "id" not in row:
        raise KeyError("id, before and after")
    return row


def make_cases(paths=None, seed: int = 0) -> list[SnippetCase]:
    return [snippet_case(row, seed) for row in load_reference_edits(paths)]


def snippet_case(row: dict, seed: int = 0) -> SnippetCase:
    """The snippet for one reference edit, in a style chosen by `seed` and the case's id."""
    before, after = row["before"], row["after"]
    lines = after.splitlines(keepends=True)
    changed = _changed_lines(before, after)
    tree = definition_tree(SyntaxTree(after, "python"), lines)
    choose = random.Random(f"{seed}:{row['id']}")
    added_imports = {line.strip() for line in lines if IMPORT.match(line)} - {
        line.strip() for line in before.splitlines() if IMPORT.match(line)}
    old_names = {node.key() for node in definition_tree(SyntaxTree(before, "python"),
                                                          before.splitlines(keepends=True)).children}
    new_nodes = [node for node in tree.children if node.key() not in old_names]
    styles = [WHOLE, INNER] + ([IMPORTS] if added_imports else []) + ([NEW] if new_nodes else [])
    style = choose.choice(styles)
    marker = choose.choice(MARKERS)
    syntax = SyntaxTree(after, "python")
    shown: set[int] = set()
    for line in changed:
        if style == INNER:
            shown |= _with_context(syntax, lines, line, CONTEXT_LINES)
        else:
            shown |= _whole_function(syntax, tree, lines, line)
    if style == IMPORTS:
        shown |= {i for i, line in enumerate(lines) if IMPORT.match(line)}
    if style == NEW:
        at = tree.children.index(new_nodes[0])
        if at:
            shown |= set(_header(tree.children[at - 1], lines))
    shown |= {line for node in _around(tree, shown) for line in _header(node, lines)}
    snippet = _with_markers(lines, shown, marker)
    named = {node.key() for node in tree.walk() if node is not tree and node.head in shown}
    return SnippetCase(str(row["id"]), row.get("language", "python"), before, after, row.get("instruction", ""),
                       snippet, style, _unsolvable(before, snippet, lines, shown, named))


def definitions_snippet(before: str, after: str, marker: str = MARKERS[0]) -> str:
    """The whole_definitions style with one marker: each changed function whole, markers for the rest."""
    lines = after.splitlines(keepends=True)
    syntax = SyntaxTree(after, "python")
    tree = definition_tree(syntax, lines)
    shown: set[int] = set()
    for line in _changed_lines(before, after):
        shown |= _whole_function(syntax, tree, lines, line)
    shown |= {line for node in _around(tree, shown) for line in _header(node, lines)}
    return _with_markers(lines, shown, marker)


def _changed_lines(before: str, after: str) -> list[int]:
    """The lines of `after` that the edit wrote, and for a deletion the code lines on both sides
    of it (past blank lines, which place nothing: a chat model shows code around a deletion)."""
    old = [line.rstrip() for line in before.splitlines()]
    new = [line.rstrip() for line in after.splitlines()]
    changed = []
    for op, _, _, low, high in SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if high > low:
            changed += list(range(low, high))
            continue
        above, below = max(low - 1, 0), min(low, len(new) - 1)
        while above > 0 and not new[above]:
            above -= 1
        while below < len(new) - 1 and not new[below]:
            below += 1
        changed += [above, below]
    return [line for line in changed if 0 <= line < len(new)]


def _with_context(syntax: SyntaxTree, lines: list[str], line: int, context: int) -> set[int]:
    low, high = max(line - context, 0), min(line + context, len(lines) - 1)
    grown = expand_to_nodes(syntax, Target.of_lines("".join(lines), range(low, high + 1)))
    return set(grown.lines)


def _whole_function(syntax: SyntaxTree, tree: Node, lines: list[str], line: int) -> set[int]:
    """The outermost function around the line, whole; a line in no function, with one line of context."""
    node = tree
    while node.innermost(line) is not node:
        node = next(child for child in node.children if child.lo <= line < child.hi)
        if node.kind == "function":
            return set(range(node.lo, node.hi))
    return _with_context(syntax, lines, line, 1)


def _around(tree: Node, shown: set[int]) -> list[Node]:
    """The definitions that hold a shown line, so that their headers are shown too."""
    return [node for node in tree.walk() if node is not tree and any(node.lo <= line < node.hi for line in shown)]


def _header(node: Node, lines: list[str]) -> list[int]:
    """A definition's decorators and header lines, up to the one that ends in a colon."""
    end = node.head
    while end < node.hi - 1 and not lines[end].split("#")[0].rstrip().endswith(":"):
        end += 1
    return list(range(node.lo, end + 1))


def _with_markers(lines: list[str], shown: set[int], marker: str) -> str:
    """The shown lines, a marker for each run of hidden code (two where the run leaves a block)."""
    out: list[str] = []
    hidden: list[str] = []
    for number, line in enumerate([*lines, ""]):
        if number in shown or number == len(lines):
            code = [text for text in hidden if text.strip()]
            if code:
                depth = indent_of(code[0])
                shallowest = min((indent_of(text) for text in code), key=len)
                out.append(depth + marker + "\n")
                if len(shallowest) < len(depth):
                    out.append(shallowest + marker + "\n")
            else:
                out += hidden
            hidden = []
            out.append(line if line.endswith("\n") or number == len(lines) else line + "\n")
        else:
            hidden.append(line)
    return "".join(out)


def reference_problem(before: str, after: str) -> str:
    """Why the checks refuse the reference `after` itself, whatever the snippet; "" when they take it."""
    if SyntaxTree(after, "python").has_errors():
        return "the reference after does not parse: the syntax guard refuses any merge that gives it"
    if (problem := compile_regression(before, after)) is not None:
        return f"Python does not compile the reference after ({problem.describe()}): the syntax guard refuses it"
    if FileLint(before).new_errors(0, len(before), after):
        return "the reference after brings an undefined name: the lint check refuses any merge that gives it"
    return ""


def _unsolvable(before: str, snippet: str, lines: list[str], shown: set[int], named: set[tuple[str, str]]) -> str:
    """Why no merge can give `after` from the snippet; `named`: the definitions the snippet shows."""
    after = "".join(lines)
    if problem := reference_problem(before, after):
        return problem
    kept = {line.strip() for line in before.splitlines() if line.strip()}
    old_lines = before.splitlines(keepends=True)
    old_tree = definition_tree(SyntaxTree(before, "python"), old_lines)
    edges = [line for line in snippet.splitlines() if line.strip()]
    # a definition matches by kind and name, and a marker at one end (not both) places what
    # follows (precedes) it after (before) the whole file
    if not (any(lines[i].strip() in kept for i in shown if lines[i].strip())
            or named & {node.key() for node in old_tree.walk() if node is not old_tree}
            or edges and is_marker(edges[0]) != is_marker(edges[-1])):
        return "no line, definition or edge marker of the snippet places it in the file"
    return ""


# ---- the measurement -------------------------------------------------------------------------

def normalized(text: str) -> str:
    """Trailing whitespace and runs of blank lines do not count."""
    text = "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")
    return re.sub(r"\n{3,}", "\n\n", text) + "\n"


def code_damage(before: str, after: str, merged: str) -> tuple[list[str], list[str]]:
    """Code lines the merge lost (fewer than both before and after hold) and duplicated (more)."""
    counts = [Counter(line.strip() for line in text.splitlines() if line.strip()) for text in (before, after, merged)]
    old, new, got = counts
    lost = [line for line in old | new if got[line] < min(old[line], new[line])]
    duplicated = [line for line in got if got[line] > max(old[line], new[line])]
    return lost, duplicated


OUTCOMES = {"Merged": "merged", "ToModel": "to_model", "Ambiguous": "to_model", "Refused": "refused"}


def measure(case: SnippetCase) -> dict:
    return measure_outcome(case)[0]


def measure_outcome(case: SnippetCase, merge: Callable[..., MergeOutcome] = merge_snippet) -> tuple[dict, MergeOutcome]:
    """The case's measurement, and the merge's outcome itself; `merge` as merge_snippet is called."""
    outcome = merge(case.before, case.snippet, case.language, case.instruction)
    name = type(outcome).__name__
    row = {"id": case.id, "style": case.style, "outcome": OUTCOMES.get(name, name.lower()),
           "ms": outcome.seconds * 1000, "unsolvable": case.unsolvable, "exact": False, "lost": [], "duplicated": []}
    if isinstance(outcome, Merged):
        row["exact"] = normalized(outcome.text) == normalized(case.after)
        row["lost"], row["duplicated"] = code_damage(case.before, case.after, outcome.text)
        row["path"] = getattr(outcome, "path", "definitions")  # which deterministic merge made it
    else:
        row["reason"] = outcome.reason
    return row, outcome


def summarize(rows: list[dict]) -> dict:
    times = [row["ms"] for row in rows] or [0.0]
    return {"cases": len(rows), "exact": sum(row["exact"] for row in rows),
            "merged": sum(row["outcome"] == "merged" for row in rows),
            "to_model": sum(row["outcome"] == "to_model" for row in rows),
            "refused": sum(row["outcome"] == "refused" for row in rows),
            "lost_code": sum(bool(row["lost"]) for row in rows),
            "duplicated_code": sum(bool(row["duplicated"]) for row in rows),
            "unsolvable": sum(bool(row["unsolvable"]) for row in rows),
            "median_ms": statistics.median(times), "max_ms": max(times)}


def large_file_ms(functions: int = 100, runs: int = 5) -> float:
    """Median time to merge a one-function snippet into a file of `functions` ten-line functions."""
    body = "".join(f"    value_{k} = argument * {k}\n" for k in range(8))
    text = "\n".join(f"def function_{n}(argument):\n{body}    return value_7\n" for n in range(functions))
    snippet = "# ... existing code ...\n\ndef function_50(argument):\n    # ...\n    return value_7 + 1\n" \
              "\n# ... existing code ...\n"
    times = []
    for _ in range(runs):
        outcome = merge_snippet(text, snippet, "python")
        assert isinstance(outcome, Merged), outcome
        times.append(outcome.seconds * 1000)
    return statistics.median(times)


def run_snippet_bench(cases: list[SnippetCase]) -> dict:
    rows = [measure(case) for case in cases]
    by_style = defaultdict(list)
    for row in rows:
        by_style[row["style"]].append(row)
    styles = {style: summarize(group) for style, group in sorted(by_style.items())}
    return {"summary": summarize(rows), "styles": styles, "large_file_ms": large_file_ms(), "cases": rows}


def format_report(report: dict) -> str:
    def line(name: str, summary: dict) -> str:
        share = 100 * summary["exact"] / max(summary["cases"], 1)
        return (f"{name:<18} {summary['cases']:>5} {summary['exact']:>5} {share:>6.1f}% {summary['merged']:>6} "
                f"{summary['to_model']:>9} {summary['refused']:>7} {summary['lost_code']:>5} "
                f"{summary['duplicated_code']:>5} {summary['unsolvable']:>10} "
                f"{summary['median_ms']:>7.2f} {summary['max_ms']:>7.2f}")
    out = [f"{'style':<18} {'cases':>5} {'exact':>5} {'share':>7} {'merged':>6} {'to_model':>9} {'refused':>7} "
           f"{'lost':>5} {'dup':>5} {'unsolvable':>10} {'med ms':>7} {'max ms':>7}"]
    out += [line(style, summary) for style, summary in report["styles"].items()]
    out.append(line("all", report["summary"]))
    out.append(f"a one-function merge into a 1,000-line file: {report['large_file_ms']:.1f} ms (median of 5)")
    reasons = Counter(row.get("reason", "") for row in report["cases"] if row["outcome"] != "merged")
    out += [f"  {count:>3} x {reason}" for reason, count in reasons.most_common(12)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    report = run_snippet_bench(make_cases(seed=int(args[0]) if args else 0))
    print(format_report(report))
    inexact = [row for row in report["cases"] if not row["exact"] and row["outcome"] == "merged"]
    for row in inexact[:10]:
        print(f"inexact: {row['id']} ({row['style']}) lost {row['lost'][:2]} duplicated {row['duplicated'][:2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
