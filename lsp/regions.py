"""What a code action rewrites: the selected lines, or the function/class around the cursor.

Regions are whole lines, [start, end) 0-based: rewrites are line-based diffs, and whole lines
keep positions free of the client's character encoding.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import cache

log = logging.getLogger(__name__)

# `# rewrite: make this async`, `// rewrite: ...`, `-- rewrite: ...`, `/* rewrite: ... */`
COMMENT_INSTRUCTION = re.compile(r"^\s*(?:#+|//+|--|;+|/\*+|\*)\s*rewrite:\s*(?P<instruction>.*?)\s*(?:\*/)?\s*$")
COMMENT_START = re.compile(r"^\s*(?:#|//|--|;|/\*|\*)")

# tree-sitter node types that are a function or class worth rewriting as a whole
DEFINITION_WORDS = ("function", "method", "class", "struct", "impl", "trait", "interface", "enum", "module")
DEFINITION_SUFFIXES = ("definition", "declaration", "item", "specifier", "_spec")
PARSER_NAMES = {"jsx": "javascript"}


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


@cache
def _parser(language: str):
    try:
        from tree_sitter_language_pack import get_parser

        return get_parser(PARSER_NAMES.get(language, language))  # type: ignore[arg-type]  # unknown: raises
    except Exception as error:  # an unknown language or a grammar that will not load
        log.info("no tree-sitter parser for %r: %s", language, error)
        return None


def _is_definition(node_type: str) -> bool:
    if node_type == "decorated_definition":  # the cursor on a decorator
        return True
    return any(w in node_type for w in DEFINITION_WORDS) and node_type.endswith(DEFINITION_SUFFIXES)


def enclosing_definition(text: str, language: str, line: int) -> Region | None:
    """The innermost function or class containing `line` (with its decorators), if the language parses."""
    parser = _parser(language) if language else None
    if parser is None:
        return None
    lines = text.splitlines(keepends=True)
    if not lines or line >= len(lines):
        return None
    tree = parser.parse(text.encode("utf-8"))
    # Aim at the line's first non-blank character so that indentation does not land in the parent.
    column = len(lines[line].encode("utf-8")) - len(lines[line].lstrip().encode("utf-8"))
    node = tree.root_node.descendant_for_point_range((line, column), (line, column))
    found = None
    while node is not None:
        if _is_definition(node.type):
            found = node
            break
        node = node.parent
    if found is None:
        return None
    if found.parent is not None and found.parent.type == "decorated_definition":
        found = found.parent
    end = found.end_point[0] + (1 if found.end_point[1] > 0 else 0)
    return Region(found.start_point[0], max(end, found.start_point[0] + 1))


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
    found = enclosing_definition(text, language, below)
    return found if found is not None and found.start == below else Region(below, below + 1)
