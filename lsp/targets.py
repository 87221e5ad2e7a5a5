"""What a code action rewrites: the selected lines, or the function/class around the cursor.

The language server works in whole lines (a `range`, 0-based, end exclusive; see
rewriter/edits/target.py): rewrites are line-based diffs, and whole lines keep positions free
of the client's character encoding. `document_target` turns them into the rewrite's Target.
"""
from __future__ import annotations

import re

from rewriter.edits.node_kinds import grammar_for
from rewriter.edits.scopes import SyntaxTree, definition_at
from rewriter.edits.target import Target

from .document_sync import document_lines

# `# rewrite: make this async`, `// rewrite: ...`, `-- rewrite: ...`, `/* rewrite: ... */`
COMMENT_INSTRUCTION = re.compile(r"^\s*(?:#+|//+|--|;+|/\*+|\*)\s*rewrite:\s*(?P<instruction>.*?)\s*(?:\*/)?\s*$")
COMMENT_START = re.compile(r"^\s*(?:#|//|--|;|/\*|\*)")


def document_target(source: str, lines: range) -> Target:
    """The target for `lines` of a document, in its text with LF line endings (what the model sees)."""
    return Target.of_lines(source.replace("\r\n", "\n"), lines)


def document_context(source: str, lines: range, line_count: int, context_chars: int) -> str | None:
    """The whole document, which goes along as the rewrite's context when only a part of it is
    rewritten and it is at most `context_chars` long; else None."""
    whole = lines.start == 0 and lines.stop >= line_count
    return source if not whole and len(source) <= context_chars else None


def selection_lines(start_line: int, start_char: int, end_line: int, end_char: int, line_count: int) -> range:
    """The whole lines a selection covers; a selection ending at a line's start leaves that line out."""
    if (end_line, end_char) < (start_line, start_char):
        start_line, start_char, end_line, end_char = end_line, end_char, start_line, start_char
    last = end_line if end_char > 0 or end_line == start_line else end_line - 1
    start = min(start_line, max(line_count - 1, 0))
    return range(start, max(start + 1, min(last + 1, line_count)))


def enclosing_definition(text: str, language: str, line: int) -> range | None:
    """The lines of the innermost function or class around `line`: those `rewriter apply --each
    function` (or class) would rewrite for it, decorators and doc comments included."""
    found = _definition_at(text, language, line)
    return None if found is None else found.lines


def _definition_at(text: str, language: str, line: int) -> Target | None:
    grammar = grammar_for(language)
    if grammar is None or not 0 <= line < len(document_lines(text)):
        return None
    return definition_at(SyntaxTree(text, grammar), line)


def comment_instruction(lines: list[str], target_lines: range) -> str | None:
    """A `rewrite: ...` comment inside the target's lines or in the comment lines just above them."""
    for index in range(target_lines.start, min(target_lines.stop, len(lines))):
        match = COMMENT_INSTRUCTION.match(lines[index])
        if match and match.group("instruction"):
            return match.group("instruction")
    index = target_lines.start - 1
    while index >= 0 and COMMENT_START.match(lines[index]):
        match = COMMENT_INSTRUCTION.match(lines[index])
        if match and match.group("instruction"):
            return match.group("instruction")
        index -= 1
    return None


def lines_after_comment(text: str, language: str, line: int) -> range | None:
    """With the cursor on a `rewrite:` comment, the definition (or line) right below the comment block."""
    lines = document_lines(text)
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
    found = _definition_at(text, language, below)
    # The definition right below the comment block (it may count the block as its doc comment);
    # the block, instruction included, stays out of the target.
    if found is not None and top <= found.lines.start <= below:
        return range(below, found.lines.stop)
    return range(below, below + 1)
