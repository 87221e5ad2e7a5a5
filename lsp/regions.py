"""What a code action rewrites: the selected lines, or the function/class around the cursor.

Regions are whole lines, [start, end) 0-based: rewrites are line-based diffs, and whole lines
keep positions free of the client's character encoding.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from rewriter.edits.node_kinds import grammar_for
from rewriter.edits.scopes import Span, SyntaxTree, definition_at

# `# rewrite: make this async`, `// rewrite: ...`, `-- rewrite: ...`, `/* rewrite: ... */`
COMMENT_INSTRUCTION = re.compile(r"^\s*(?:#+|//+|--|;+|/\*+|\*)\s*rewrite:\s*(?P<instruction>.*?)\s*(?:\*/)?\s*$")
COMMENT_START = re.compile(r"^\s*(?:#|//|--|;|/\*|\*)")


@dataclass(frozen=True)
class Region:
    start: int
    end: int  # exclusive

    def overlaps(self, start: int, end: int) -> bool:
        """Whether lines [start, end) touch this region (an insertion at a boundary counts)."""
        return start <= self.end and end >= self.start


def selection_lines(start_line: int, start_char: int, end_line: int, end_char: int, line_count: int) -> Region:
    """The whole lines a selection covers; a selection ending at a line's start leaves that line out."""
    if (end_line, end_char) < (start_line, start_char):
        start_line, start_char, end_line, end_char = end_line, end_char, start_line, start_char
    last = end_line if end_char > 0 or end_line == start_line else end_line - 1
    start = min(start_line, max(line_count - 1, 0))
    return Region(start, max(start + 1, min(last + 1, line_count)))


def enclosing_definition(text: str, language: str, line: int) -> Region | None:
    """The innermost function or class around `line`: the lines `rewriter apply --each function`
    (or class) would rewrite for it, decorators and doc comments included."""
    span = _definition_span(text, language, line)
    return None if span is None else Region(span.start_line - 1, span.end_line)


def _definition_span(text: str, language: str, line: int) -> Span | None:
    grammar = grammar_for(language)
    if grammar is None or not 0 <= line < len(text.splitlines()):
        return None
    return definition_at(SyntaxTree(text, grammar), line + 1)


def comment_instruction(lines: list[str], region: Region) -> str | None:
    """A `rewrite: ...` comment inside the region or in the comment lines just above it."""
    for index in range(region.start, min(region.end, len(lines))):
        match = COMMENT_INSTRUCTION.match(lines[index])
        if match and match.group("instruction"):
            return match.group("instruction")
    index = region.start - 1
    while index >= 0 and COMMENT_START.match(lines[index]):
        match = COMMENT_INSTRUCTION.match(lines[index])
        if match and match.group("instruction"):
            return match.group("instruction")
        index -= 1
    return None


def region_after_comment(text: str, language: str, line: int) -> Region | None:
    """With the cursor on a `rewrite:` comment, the definition (or line) right below the comment block."""
    lines = text.splitlines(keepends=True)
    if line >= len(lines) or not COMMENT_INSTRUCTION.match(lines[line]):
        return None
    below = line + 1
    while below < len(lines) and (COMMENT_START.match(lines[below]) or not lines[below].strip()):
        below += 1
    if below >= len(lines):
        return None
    top = line
    while top > 0 and COMMENT_START.match(lines[top - 1]):
        top -= 1
    found = _definition_span(text, language, below)
    # The definition right below the comment block (it may count the block as its doc comment);
    # the block, instruction included, stays out of the region.
    if found is not None and top <= found.start_line - 1 <= below:
        return Region(below, found.end_line)
    return Region(below, below + 1)
