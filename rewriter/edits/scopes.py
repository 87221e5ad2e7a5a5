"""Which parts of a file to rewrite, found with tree-sitter: nodes of a kind, line ranges, splits;
each one a Target (target.py) labelled with its kind and name.

Every span covers whole lines where it can (indentation, decorators, doc comments and a
trailing `;` included), so each rewrite sees a self-contained piece of code; spans never
overlap (an outer match swallows its nested matches).
Which node types are a function, method or class in each language is node_kinds' business;
the language server's "function at the cursor" is `definition_at` here, so it and `--each` agree.
The functions, methods and classes a file defines (for the edit checks) are definitions.py's.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .node_kinds import (
    ALIASES,
    JS_VALUE_FUNCTIONS,
    LEADING_SIBLINGS,
    WRAPPERS,
    ScopeError,
    grammar,
    kinds_for,
    name_of,
    of_kind,
    parser,
    query_nodes,
    walk,
)
from .target import Target, line_starts

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tree_sitter import Node


class SyntaxTree:
    """A parsed file with offsets in characters, as Python strings count them."""

    def __init__(self, text: str, language: str):
        self.text = text
        self.language = language
        self.data = text.encode("utf-8")
        self.tree = parser(language).parse(self.data)
        self.root = self.tree.root_node
        self._ascii = len(self.data) == len(text)
        self.line_starts = line_starts(text)

    def char(self, byte_offset: int) -> int:
        return byte_offset if self._ascii else len(self.data[:byte_offset].decode("utf-8", "replace"))

    def byte(self, char_offset: int) -> int:
        return char_offset if self._ascii else len(self.text[:char_offset].encode("utf-8"))

    def has_errors(self) -> bool:
        return self.root.has_error

    def first_error_line(self) -> int | None:
        stack = [self.root]
        while stack:
            node = stack.pop()
            if not node.has_error:
                continue
            if node.type == "ERROR" or node.is_missing:
                return node.start_point.row + 1
            stack.extend(reversed(node.children))
        return None


def parse(text: str, language: str) -> SyntaxTree:
    return SyntaxTree(text, language)


# ---- targets from offsets ----------------------------------------------------------------

_TRAILER = re.compile(r"[ \t]*[;,]?[ \t]*(\r?\n|$)")


def whole_lines(tree_or_text, start: int, end: int, kind: str = "lines", name: str = "") -> Target:
    """The target text[start:end], grown to whole lines where only blanks (or a closing `;`) lie beside it."""
    text = tree_or_text.text if isinstance(tree_or_text, SyntaxTree) else tree_or_text
    line_start = text.rfind("\n", 0, start) + 1
    if not text[line_start:start].strip():
        start = line_start
    trailer = _TRAILER.match(text, end) if end and text[end - 1] != "\n" else None
    if trailer:
        end = trailer.end()
    return Target.of_span(text, start, end, kind, name)


# ---- nodes of a kind ---------------------------------------------------------------------

def _widen(node):
    """The node plus what belongs to it: its declaration, decorators, template, export."""
    if node.type in JS_VALUE_FUNCTIONS:
        declarator = node.parent
        declaration = declarator.parent if declarator is not None else None
        if declaration is not None and declaration.type in {"lexical_declaration", "variable_declaration"} \
                and declaration.named_child_count == 1:
            node = declaration
    while node.parent is not None and node.parent.type in WRAPPERS:
        node = node.parent
    return node


def _leading_start(tree: SyntaxTree, node) -> int:
    """Start byte including doc comments and attributes directly above the node."""
    start = node.start_byte
    row = node.start_point.row
    sibling = node.prev_named_sibling
    while sibling is not None and sibling.type in LEADING_SIBLINGS and sibling.end_point.row >= row - 1:
        line_start = tree.data.rfind(b"\n", 0, sibling.start_byte) + 1
        if tree.data[line_start:sibling.start_byte].strip():
            break  # a comment that trails code on its line belongs to that code
        start, row = sibling.start_byte, sibling.start_point.row
        sibling = sibling.prev_named_sibling
    return start


def _node_target(tree: SyntaxTree, node, kind: str) -> Target:
    if node.type in JS_VALUE_FUNCTIONS and node.parent is not None and node.parent.type == "variable_declarator":
        name = name_of(node.parent)
    else:
        name = name_of(node)
    outer = _widen(node)
    start = tree.char(_leading_start(tree, outer))
    end = tree.char(outer.end_byte)
    if not name:
        name = name_of(outer)
    return whole_lines(tree, start, end, kind, name)


def outermost(targets: list[Target]) -> list[Target]:
    """Keep each outer target once; those inside (or overlapping) one already kept are dropped."""
    kept: list[Target] = []
    for target in sorted(targets, key=lambda t: (t.start, -t.end)):
        if kept and target.start < kept[-1].end:
            continue
        kept.append(target)
    return kept


def select_nodes(tree: SyntaxTree, kind: str) -> list[Target]:
    """Targets of every node of `kind`: an alias (function, method, class), a node type or a query."""
    return outermost(kind_spans(tree, kind))


def kind_spans(tree: SyntaxTree, kind: str) -> list[Target]:
    """Like select_nodes, but nested matches are kept: a method inside a class inside a class."""
    if kind.lstrip().startswith(("(", "[")):
        nodes = query_nodes(tree.language, tree.root, kind)
        label = "match"
    elif kind in ALIASES:
        if tree.language not in ALIASES[kind]:
            known = ", ".join(kinds_for(tree.language)) or "none"
            raise ScopeError(f"{tree.language} has no '{kind}' (aliases there: {known}); "
                             "give a tree-sitter node type or query instead")
        nodes = of_kind(walk(tree.root), kind, tree.language)
        label = kind
    else:
        if grammar(tree.language).id_for_node_kind(kind, True) is None:
            raise ScopeError(f"'{kind}' is not a {tree.language} node type "
                             f"(aliases: {', '.join(kinds_for(tree.language)) or 'none'}; or a query in parentheses)")
        nodes = [n for n in walk(tree.root) if n.type == kind]
        label = kind
    return [_node_target(tree, node, label) for node in nodes]


# ---- the definition around a line -------------------------------------------------------

# Nodes that _widen passes through on its way up from a definition.
_WIDENING = WRAPPERS | {"lexical_declaration", "variable_declaration", "variable_declarator"}


def definition_at(tree: SyntaxTree, line: int, aliases: tuple[str, ...] = ("function", "class")) -> Target | None:
    """The innermost definition of one of `aliases` whose lines hold `line` (0-based): the very
    target kind_spans gives for it (decorators, doc comments and all), labelled with its alias.

    Only the nodes around the line are looked at, not the whole tree: editors ask on every move."""
    return next(definitions_around(tree, line, aliases), None)


def definitions_around(tree: SyntaxTree, line: int,
                       aliases: tuple[str, ...] = ("function", "class")) -> Iterator[Target]:
    """The definitions whose lines hold `line`, innermost first (definition_at's, then outward)."""
    if not any(tree.language in ALIASES[alias] for alias in aliases) or not 0 <= line < len(tree.line_starts):
        return
    line_start = tree.line_starts[line]
    indent = re.match(r"[ \t]*", tree.text[line_start:])
    aim = tree.byte(line_start + (indent.end() if indent else 0))
    node = tree.root.descendant_for_byte_range(aim, aim)
    seen: list[Target] = []  # a node's wrappers widen to the same target
    while node is not None:
        outer = node
        while outer is not None and outer.type in LEADING_SIBLINGS:
            outer = outer.next_named_sibling  # doc comments and attributes belong to what follows
        if outer is not None:
            for alias in aliases:
                for found in of_kind(_widened_to(outer), alias, tree.language):
                    target = _node_target(tree, found, alias)
                    if line in target.lines and target not in seen:
                        seen.append(target)
                        yield target
        node = node.parent


def _widened_to(outer: Node) -> list[Node]:
    """The nodes that _widen grows into `outer`: itself, or ones in its wrappers and declarations."""
    found, stack = [], [outer]
    while stack:
        node = stack.pop()
        found.append(node)
        if node.type in _WIDENING:
            stack.extend(node.named_children)
    return [node for node in found if _widen(node) == outer]


# ---- line ranges grown to whole syntax nodes ---------------------------------------------

def expand_to_nodes(tree: SyntaxTree, target: Target) -> Target:
    """Grow a target until it cuts no syntax node in two (nodes enclosing all of it may stay)."""
    start, end = tree.byte(target.start), tree.byte(target.end)
    while True:
        changed = True
        while changed:
            changed = False
            # The span's code without the blanks at its ends, which belong to no node.
            core = tree.data[start:end]
            core_start = start + len(core) - len(core.lstrip())
            core_end = start + len(core.rstrip())
            stack = [tree.root]
            while stack:
                node = stack.pop()
                if node.end_byte <= core_start or node.start_byte >= core_end:
                    continue  # apart from the span
                if node.start_byte >= start and node.end_byte <= end:
                    continue  # inside it
                if node.start_byte <= core_start and node.end_byte >= core_end:
                    if not _takes_part_of(node, core_start, core_end):
                        stack.extend(node.children)  # around it: look inside
                        continue
                start, end = min(start, node.start_byte), max(end, node.end_byte)
                changed = True
        grown = whole_lines(tree, tree.char(start), tree.char(end))
        grown_start, grown_end = tree.byte(grown.start), tree.byte(grown.end)
        if (grown_start, grown_end) == (start, end):
            break
        start, end = grown_start, grown_end
    return Target.of_span(tree.text, tree.char(start), tree.char(end))


def _takes_part_of(node, start: int, end: int) -> bool:
    """Whether [start, end) holds some parts of a structured node (an if's header, a function's
    signature) but not all: a list of statements or arguments may be taken in part, those not."""
    overlapping = [i for i, child in enumerate(node.children)
                   if child.end_byte > start and child.start_byte < end]
    if len(overlapping) == 1:
        child = node.children[overlapping[0]]
        if child.start_byte <= start and child.end_byte >= end:
            return False  # all inside one child: look there
    return any(node.field_name_for_child(i) for i in overlapping)


# ---- splitting a target that is too large for the model ------------------------------------

def split_span(target: Target, tree: SyntaxTree | None = None) -> list[Target]:
    """Two targets covering `target`, cut at a line where a syntax node starts (near the middle).

    Empty when there is nowhere to cut.
    """
    cuts = _node_cuts(tree, target) if tree is not None else []
    if not cuts:
        cuts = _line_cuts(target, blank_only=True) or _line_cuts(target, blank_only=False)
    if not cuts:
        return []
    middle = (target.start + target.end) / 2
    cut = min(cuts, key=lambda offset: abs(offset - middle))
    return [Target.of_span(target.text, target.start, cut, target.kind, target.name),
            Target.of_span(target.text, cut, target.end, target.kind, target.name)]


def _node_cuts(tree: SyntaxTree, target: Target) -> list[int]:
    start, end = tree.byte(target.start), tree.byte(target.end)
    cuts = set()
    stack = [tree.root]
    while stack:
        node = stack.pop()
        if node.end_byte <= start or node.start_byte >= end:
            continue
        inside = node.start_byte >= start and node.end_byte <= end
        whole = tree.data[start:end].strip() == tree.data[node.start_byte:node.end_byte].strip()
        if inside and not whole:
            line_start = tree.data.rfind(b"\n", 0, node.start_byte) + 1
            if not tree.data[line_start:node.start_byte].strip() and line_start > start:
                cuts.add(tree.char(line_start))
            continue
        stack.extend(node.children)
    return sorted(cuts)


def _line_cuts(target: Target, blank_only: bool) -> list[int]:
    """Line starts inside the span; with blank_only, only those just after a blank line."""
    cuts = []
    lines = target.code.splitlines(keepends=True)
    offset = target.start
    for previous in lines[:-1]:
        offset += len(previous)
        if not blank_only or not previous.strip():
            cuts.append(offset)
    return cuts

