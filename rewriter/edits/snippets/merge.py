"""Merging a snippet into a file without a model: the changed part of a file, as chat models and
agents write it, with markers ("# ... existing code ...") for what stays.

Two merges read a snippet, each sure or saying why not. By definitions (definitions.py):
the snippet's definitions matched to the file's by kind and name, which places whole changed
functions and classes wherever the file has them. By lines (hunks.py): each stretch
between markers placed by its first and last lines, as a diff hunk is applied, which reads
fragments that do not parse alone. The first merge that changes the file and passes the checks
(integrity, syntax, lint: as any edit's span) is the answer, saying which merged; in a snippet
without markers, a blank line may stand for code left out, so a merge that removes code where
the snippet brings a blank line is not one either (nor where it brings any blank line there and
changes the file both before and after: two hunks may meet there). A snippet that
is not text, or holds nothing but markers, is refused; anything else goes to the model (ToModel,
with both merges' reasons), whose answer the same checks judge.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from difflib import SequenceMatcher

from ...prompt import common_indent
from ..checks.integrity import FileIntegrity
from ..checks.lost_code import instruction_allows_removal
from ..checks.syntax import compiles
from ..markers import is_marker, says_more
from ..node_kinds import grammar_for
from ..scopes import SyntaxTree
from .by_definitions import DefinitionMerge
from .by_lines import excerpts_file, merge_by_lines
from .lines import (
    LINE_COMMENTS,
    Unclear,
    changed_definitions,
    definition_tree,
    indent_of,
    is_bare_ellipsis,
    marker_out_of_block,
)

DEFINITIONS, LINES = "definitions", "lines"  # which merge merged (Merged.path)


@dataclass(frozen=True)
class Merged:
    text: str  # the whole file, merged
    seconds: float = 0.0
    path: str = DEFINITIONS  # DEFINITIONS or LINES: which merge read the snippet


@dataclass(frozen=True)
class ToModel:
    """Neither merge is sure of the snippet (`reason` says why): a model should merge it."""

    reason: str
    seconds: float = 0.0


@dataclass(frozen=True)
class Refused:
    """The snippet is not one that anything could merge; the file stays as it is."""

    reason: str
    seconds: float = 0.0


MergeOutcome = Merged | ToModel | Refused


@dataclass(frozen=True)
class _Snippet:
    """The snippet's lines, at the file's newline, its common indentation taken off."""

    lines: list[str]
    markers: set[int]  # lines that stand for code left out
    maybe: set[int]  # bare `...` lines in Python: markers or code, as the file decides
    indented: bool  # every code line was indented: lines from inside a block


def merge_snippet(file_text: str, snippet: str | bytes, language: str, instruction: str = "") -> MergeOutcome:
    """Merge `snippet` into `file_text` (in `language`, as rewriter.prompt names languages).
    `instruction`, when there is one, lets the integrity check accept removals it asks for."""
    began = time.perf_counter()
    outcome = _merge(file_text, snippet, language, instruction)
    return replace(outcome, seconds=time.perf_counter() - began)


def _merge(file_text: str, snippet: str | bytes, language: str, instruction: str) -> MergeOutcome:
    if isinstance(snippet, bytes):
        try:
            snippet = snippet.decode("utf-8")
        except UnicodeDecodeError:
            return Refused("the snippet is not UTF-8 text")
    if "\0" in snippet or "\0" in file_text:
        return Refused("the snippet is binary (it holds NUL bytes)" if "\0" in snippet else "the file is binary")
    grammar = grammar_for(language)
    if grammar is None:
        return ToModel(f"no grammar for {language or 'a file without a language'}: definitions cannot be matched")
    newline = "\r\n" if "\r\n" in file_text else "\n"
    file_lines = file_text.splitlines(keepends=True)
    parts = _read(_first_line_indented(snippet.replace("\r\n", "\n"), file_lines), newline, grammar,
                  {line.strip() for line in file_lines})
    if not any(line.strip() for i, line in enumerate(parts.lines) if i not in parts.markers | parts.maybe):
        return Refused("the snippet holds only markers" if parts.markers | parts.maybe else "the snippet is empty")
    if file_lines and not file_lines[-1].endswith("\n"):
        file_lines[-1] += newline
    integrity = FileIntegrity(file_text, grammar)  # the file parsed once, for the merges and their checks
    removals = instruction if instruction_allows_removal(instruction) else ""
    outcomes: list[Merged | ToModel] = []
    # By lines first: where its context places a stretch, that is surer than names alone.
    for merge, path in ((_by_lines, LINES), (_by_definitions, DEFINITIONS)):
        try:
            merged = merge(integrity, file_lines, parts, removals)
        except Unclear as unclear:
            outcomes.append(ToModel(str(unclear)))
            continue
        if not file_text.endswith("\n"):
            merged = merged.removesuffix(newline)
        if not parts.markers | parts.maybe and (gone := _blank_for_code(file_lines, merged)) is not None:
            # without markers, a blank line is all a snippet has to stand for the code it leaves
            # out between two hunks: code removed with a blank in its place may be that, or removed
            outcomes.append(ToModel(f"the merge removes the file's code from line {gone + 1} with a blank line of "
                                    "the snippet's in its place and no marker: code left out between two hunks, "
                                    "or removed, is unclear"))
            continue
        outcome = _judged(integrity, merged, instruction)
        if isinstance(outcome, Merged) and outcome.text != file_text:
            return replace(outcome, path=path)
        outcomes.append(outcome)
    return _unmerged(outcomes, parts, file_lines, file_text)


def _first_line_indented(snippet: str, file_lines: list[str]) -> str:
    """A snippet copied from the middle of its first line (a selection that starts at the code, not
    at the line's start) has that line without its indentation while the lines after it keep
    theirs. The first line gets it back where the file tells how far it stands from the next
    (`_step_in_a_row`, else `_step_from_held`); elsewhere the snippet stays as it is."""
    lines = snippet.splitlines(keepends=True)
    code = [i for i, line in enumerate(lines) if line.strip() and not is_marker(line)]
    # A later line at column 0 may be one the file has there (a function after the method the
    # first line opens): the lines the file holds then say whether the snippet stands where it does.
    if len(code) < 2 or lines[code[0]][:1] in " \t" or lines[code[1]][:1] not in " \t":
        return snippet
    file_code = [line for line in file_lines if line.strip()]
    if not all(lines[i][:1] in " \t" for i in code[1:]):
        at_column_0 = {line.strip() for line in file_code if line[:1] not in " \t"}
        if not all(lines[i].strip() in at_column_0 for i in code[1:] if lines[i][:1] not in " \t"):
            return snippet
        step = _step_from_held(lines[code[0]].strip(), [lines[i] for i in code[1:]], file_code)
        return _indented_by(lines, code, step) if step is not None else snippet
    first, second = lines[code[0]].strip(), lines[code[1]]
    step = _step_in_a_row(first, second, file_code)
    if step is None:
        step = _step_from_held(first, [lines[i] for i in code[1:]], file_code)
    return _indented_by(lines, code, step) if step is not None else snippet


def _indented_by(lines: list[str], code: list[int], step: int) -> str:
    """The snippet with its first code line `step` deeper than the next (as it is where that is at column 0 or less)."""
    indent = indent_of(lines[code[1]])
    width = len(indent) + step
    if width > 0:
        lines[code[0]] = (indent[:width] if width <= len(indent) else indent + indent[-1] * (width - len(indent))) + \
            lines[code[0]]
    return "".join(lines)


def _step_in_a_row(first: str, second: str, file_code: list[str]) -> int | None:
    """How much deeper `first` stands than `second` where the file holds the two in a row, at one
    step wherever it does; else None."""
    steps = {len(indent_of(file_code[k])) - len(indent_of(file_code[k + 1])) for k in range(len(file_code) - 1)
             if file_code[k].strip() == first and file_code[k + 1].strip() == second.strip()}
    return steps.pop() if len(steps) == 1 else None


def _step_from_held(first: str, later: list[str], file_code: list[str]) -> int | None:
    """How much deeper `first` stands than the next line (`later[0]`) where the file holds `first`
    at one indentation only, and every later line it holds at one indentation only stands as far
    from it as the others (how far the snippet stands from the file); or where it holds none of
    them (every later line is new: `first` alone tells) and the next line stands where `first`,
    so indented, lets it. Else None."""
    widths: dict[str, set[int]] = {}
    for line in file_code:
        widths.setdefault(line.strip(), set()).add(len(indent_of(line)))
    offsets = {len(indent_of(line)) - min(widths[line.strip()]) for line in later
               if len(widths.get(line.strip(), ())) == 1}
    if len(widths.get(first, ())) != 1 or len(offsets) > 1:
        return None
    width, next_width = min(widths[first]), len(indent_of(later[0]))
    if not offsets and not _opens_to(first, width, next_width):
        return None  # a definition given dedented, its body new: the snippet's own indentation
    return width + (offsets.pop() if offsets else 0) - next_width


def _opens_to(line: str, width: int, next_width: int) -> bool:
    """Whether a line at `width` may be followed by one at `next_width`: deeper after a line that
    opens a block or a bracket, not deeper after any other."""
    return next_width > width if line.rstrip().endswith((":", "{", "(", "[")) else next_width <= width


def _read(snippet: str, newline: str, grammar: str, held: set[str]) -> _Snippet:
    """The snippet's lines (its newlines "\n", as `_merge` makes them), in the file's newline."""
    indent = common_indent(snippet)
    lines = [(line[len(indent):] if line.startswith(indent) else line.lstrip(" \t")).replace("\n", newline)
             for line in snippet.splitlines(keepends=True)]
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += newline
    markers = {i for i, line in enumerate(lines) if is_marker(line) and not (says_more(line) and line.strip() in held)
               or grammar != "python" and is_bare_ellipsis(line)}
    maybe = {i for i, line in enumerate(lines) if grammar == "python" and is_bare_ellipsis(line)}
    code = [line for i, line in enumerate(snippet.splitlines()) if line.strip() and not is_marker(line)]
    return _Snippet(lines, markers, maybe, bool(code) and all(line[:1] in " \t" for line in code))


def _by_definitions(integrity: FileIntegrity, file_lines: list[str], parts: _Snippet, removals: str) -> str:
    tree = _parsed(parts.lines, parts.markers, integrity.grammar or "")
    if tree is None:
        raise Unclear(f"the snippet does not parse as {integrity.grammar} on its own")
    assert integrity.tree is not None  # a grammar was found
    file_tree = definition_tree(integrity.tree, file_lines, found=integrity.definitions)
    snippet_tree = definition_tree(tree, parts.lines, parts.markers)
    if integrity.grammar == "python" and (out_of_block := marker_out_of_block(snippet_tree, parts.lines,
                                                                             parts.markers)) is not None:
        node, marker = out_of_block
        raise Unclear(f"the snippet's marker at line {marker + 1} stands outside {node.kind} {node.name} (no deeper "
                      "than its header), yet the lines after it parse as that one's: whose lines they are is unclear")
    merger = DefinitionMerge(file_lines, file_tree, parts.lines, snippet_tree,
                             parts.markers, parts.maybe, removals=removals,
                             indented=parts.indented)
    try:
        merged = "".join(merger.root())
    except Unclear:
        if not merger.anchored:
            raise Unclear("no definition or line of the snippet matches the file") from None
        raise
    if not merger.anchored:
        raise Unclear("no definition or line of the snippet matches the file")
    outside = [i for i, line in enumerate(parts.lines) if line.strip() and i not in parts.markers | parts.maybe
               and not any(child.lo <= i < child.hi for child in snippet_tree.children)]
    if merger.anchored == merger.by_edge and (parts.indented or outside and indent_of(parts.lines[outside[0]])):
        # lines from inside a block (all of them, or the first outside the snippet's own
        # definitions), placed by nothing but a marker: added after the file's end, or
        # replacing the end of that block? Nothing tells
        raise Unclear("only a marker places the snippet, and its lines are indented as inside a block")
    return merged


def _by_lines(integrity: FileIntegrity, file_lines: list[str], parts: _Snippet, removals: str) -> str:
    # a bare `...` where the file has none is a marker, not the file's code
    literal = any(is_bare_ellipsis(line) for line in file_lines)
    markers = parts.markers | (set() if literal else parts.maybe)
    heads = {integrity.text.count("\n", 0, definition.start) for definition in integrity.definitions}
    return "".join(merge_by_lines(file_lines, parts.lines, markers, heads, removals))


def _unmerged(outcomes: list[Merged | ToModel], parts: _Snippet, file_lines: list[str],
              file_text: str) -> Merged | ToModel:
    """Neither merge changed the file and passed the checks: the file as it is where the snippet
    is the whole file as it stands, or the model. A snippet of the file's lines with markers for
    the rest changes nothing that can be seen, yet it was sent to change something: most likely a
    line it leaves out next to a marker is meant to go, which only a reading of the instruction tells."""
    literal = any(is_bare_ellipsis(line) for line in file_lines)
    markers = parts.markers | (set() if literal else parts.maybe)
    if not markers and _code(parts.lines) == _code(file_lines):
        return Merged(file_text)
    unseen = ("it changes nothing: the snippet is the file's lines as they stand, with markers for the rest "
              "(a line left out next to a marker may be meant to go)" if excerpts_file(file_lines, parts.lines, markers)
              else "it changes nothing, yet the snippet is not the file's lines as they stand (it may remove some)")
    reasons = [outcome.reason if not isinstance(outcome, Merged) else unseen for outcome in outcomes]
    return ToModel(f"by lines, {reasons[0]}; by definitions, {reasons[1]}")


def _code(lines: list[str]) -> list[str]:
    return [line.rstrip() for line in lines if line.strip()]


def _blank_for_code(file_lines: list[str], merged: str) -> int | None:
    """The first file line of a run of code lines that the merge removed with more blank lines in
    their place than the file held around them: a blank line that is the snippet's, not the
    file's own, stands there; or with any blank line there where the merge changes the file
    before them and after them too (two hunks may meet there, their context the file's blank
    lines). None where there is none."""
    old = [(at, line.strip()) for at, line in enumerate(file_lines) if line.strip()]
    new = [(at, line.strip()) for at, line in enumerate(merged.splitlines()) if line.strip()]
    old_keys, new_keys = [text for _, text in old], [text for _, text in new]
    opcodes = SequenceMatcher(None, old_keys, new_keys, autojunk=False).get_opcodes()
    for at, (tag, i1, i2, j1, _) in enumerate(opcodes):
        if tag != "delete":
            continue
        # the snippet changes the file before the removal and after it: two hunks may meet at its
        # blank line, a joint standing for the code between them, however many blank lines the
        # file held there besides
        joint = any(other[0] != "equal" for other in opcodes[:at]) and any(
            other[0] != "equal" for other in opcodes[at + 1:])
        while i1 > 0 and j1 > 0 and old_keys[i1 - 1] == old_keys[i2 - 1]:  # the same removal, said earlier
            i1, i2, j1 = i1 - 1, i2 - 1, j1 - 1
        while i2 < len(old) and j1 < len(new) and old_keys[i1] == old_keys[i2]:  # each place it may stand
            if _blank_in_place(old, new, i1, i2, j1, joint):
                return old[i1][0]
            i1, i2, j1 = i1 + 1, i2 + 1, j1 + 1
        if _blank_in_place(old, new, i1, i2, j1, joint):
            return old[i1][0]
    return None


def _blank_in_place(old: list[tuple[int, str]], new: list[tuple[int, str]], i1: int, i2: int, j1: int,
                    joint: bool) -> bool:
    """Whether the merge puts a blank line of the snippet's where it removes the file's code lines
    [i1, i2) (kept lines j1 - 1 and j1 around it): more blank lines than the file held around them,
    or any at a `joint`."""
    if not (0 < i1 and i2 < len(old) and 0 < j1 < len(new)):
        return False
    blanks = new[j1][0] - new[j1 - 1][0] - 1
    return blanks > (0 if joint else (old[i1][0] - old[i1 - 1][0] - 1) + (old[i2][0] - old[i2 - 1][0] - 1))


def _parsed(lines: list[str], markers: set[int], grammar: str) -> SyntaxTree | None:
    """The snippet parsed, each marker as a comment (in Python, next as `...`, which an empty
    block needs); None when neither parses."""
    stand_ins = [LINE_COMMENTS.get(grammar, "//") + " ..."] + (["..."] if grammar == "python" else [])
    for stand_in in stand_ins:
        text = "".join(indent_of(line) + stand_in + "\n" if i in markers else line for i, line in enumerate(lines))
        tree = SyntaxTree(text, grammar)
        if not tree.has_errors():
            return tree
    return None


def _judged(integrity: FileIntegrity, merged: str, instruction: str) -> Merged | ToModel:
    """The merge, unless the integrity check, the syntax guard or the lint check objects to the
    lines it changed (as for any edit's span, in pipeline.py's order): then the model's turn."""
    file_text = integrity.text
    if merged == file_text:
        return Merged(merged)
    assert integrity.tree is not None
    start, end, new = changed_definitions(integrity.tree, merged)
    parsed = SyntaxTree(merged, integrity.tree.language)  # once, for both checks
    verdict = integrity.check(start, end, new, instruction, parsed)
    if verdict.refused:
        return ToModel(f"the merge {verdict.reason.removeprefix('it ')}")
    if verdict.text != new:
        return ToModel(f"the merge repeats the file around it ({verdict.reason})")
    # A merge that parses (and compiles, in Python) passes the syntax guard whatever the file
    # did: only otherwise is the file's own compile, which the guard asks for, needed.
    clean = not parsed.has_errors() and (parsed.language != "python" or compiles(merged) is True)
    if not clean:
        problem = integrity.syntax.problem(start, end, new)
        if problem is not None:
            return ToModel(f"the merge does not parse ({problem.describe()})")
    # the lint check may read outlines of the file where the merge compiles (checks/lint_outline.py)
    lint = integrity.lint.problem(start, end, new, "the merge", parsed if clean else None) \
        if integrity.lint is not None else ""
    if lint:
        return ToModel(lint)
    return Merged(merged)
