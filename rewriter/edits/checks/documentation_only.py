"""The documentation-only check: where the instruction asks for documentation and nothing else
("Add docstrings"), the span's code must stay token for token (comments, docstrings, `pass` and
layout aside).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..definitions import is_docstring, is_placeholder
from ..node_kinds import COMMENTS

if TYPE_CHECKING:
    from ..scopes import SyntaxTree


# Instructions that ask for documentation and nothing else ("Add docstrings", "Write comments").
DOCUMENTATION_ONLY = re.compile(r"\s*(please\s+)?((add|write|insert|generate|update|improve)\b.*"
                                r"\b(docstrings?|comments?|documentation)\b|document\b)", re.IGNORECASE)
ASKS_MORE = re.compile(r"\b(and|also|then|plus|but|fix|change|rename|refactor|simplify|replace|remove|delete|"
                       r"type|types|hints?|annotations?|convert|make|use)\b|[,;]", re.IGNORECASE)


def instruction_asks_documentation_only(instruction: str) -> bool:
    return bool(DOCUMENTATION_ONLY.match(instruction)) and not ASKS_MORE.search(instruction)


def changed_code_line(old: SyntaxTree, start: int, end: int, new: SyntaxTree, new_end: int) -> str | None:
    """The first line of the new text whose code (comments, docstrings, `pass` and layout aside)
    differs from the old text's; None when the code is the same token for token."""
    old_tokens, new_tokens = _code_tokens(old, start, end), _code_tokens(new, start, new_end)
    for at, (token, line) in enumerate(new_tokens):
        if at >= len(old_tokens) or old_tokens[at][0] != token:
            return line
    return old_tokens[len(new_tokens)][1] if len(old_tokens) > len(new_tokens) else None


def _code_tokens(tree: SyntaxTree, start: int, end: int) -> list[tuple[bytes, str]]:
    """The leaves of the tree in [start, end) that are code, each with its line (stripped)."""
    low, high = tree.byte(start), tree.byte(end)
    tokens = []
    stack = [tree.root]
    while stack:
        node = stack.pop()
        if node.end_byte <= low or node.start_byte >= high:
            continue
        if node.type in COMMENTS or is_docstring(node) or is_placeholder(node):
            continue  # a docstring may take the place of `pass`
        if node.child_count == 0:
            line_start = tree.data.rfind(b"\n", 0, node.start_byte) + 1
            line_end = tree.data.find(b"\n", node.start_byte)
            line = tree.data[line_start: line_end if line_end >= 0 else len(tree.data)]
            tokens.append((tree.data[node.start_byte: node.end_byte], line.decode("utf-8", "replace").strip()))
        stack.extend(reversed(node.children))
    return tokens
