"""The lines of a file or of a snippet, as a tree of definitions: what the snippet merge aligns.

A snippet's markers ("# ... existing code ...", "// ...", "/* ... */", "rest of the code
unchanged", a bare `...`) stand for code that stays. A bare `...` is also real Python (Ellipsis in
a stub or a Protocol), so it is only a candidate here; the merge decides by what the file holds.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..definitions import Definition, definitions
from ..markers import COMMENT_LINE, ELLIPSES
from ..node_kinds import WRAPPERS, walk
from ..scopes import SyntaxTree, definitions_around

# What holds a definition and belongs to it: decorators, `export`, the declaration naming a value.
_HOLDERS = WRAPPERS | {"variable_declarator", "lexical_declaration", "variable_declaration"}
# Where a marker line is replaced before the snippet is parsed: a comment the grammar knows.
LINE_COMMENTS = {"python": "#", "ruby": "#", "bash": "#", "r": "#", "lua": "--", "sql": "--", "haskell": "--"}


def is_bare_ellipsis(line: str) -> bool:
    return line.strip() in ELLIPSES


def indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def named_in(line: str, instruction: str) -> bool:
    """Whether the instruction quotes the line, whole: a line of brackets or punctuation alone
    (`]`, `)`) is in any text with a bracket, so only a line with a word can be quoted, and
    `import os` is not quoted by `import os.path` (a name goes on after it)."""
    key = line.strip()
    return any(c.isalnum() for c in key) and re.search(rf"(?<![\w.]){re.escape(key)}(?![\w.])", instruction) is not None


def is_comment(line: str) -> bool:
    return COMMENT_LINE.fullmatch(line.strip()) is not None


@dataclass
class Node:
    """A definition's whole lines [lo, hi) (decorators included, doc comments not) and those
    nested in it; the root stands for the whole text."""

    kind: str
    name: str
    lo: int
    hi: int
    head: int  # the line the definition itself starts on (after its decorators)
    children: list[Node] = field(default_factory=list)
    _starts: dict[int, Node] | None = field(default=None, repr=False, compare=False)

    def key(self) -> tuple[str, str]:
        return self.kind, self.name

    def walk(self):
        return walk(self)  # the same depth-first order as a tree-sitter tree's

    def child_at(self, line: int) -> Node | None:
        if self._starts is None or len(self._starts) != len(self.children):
            self._starts = {child.lo: child for child in reversed(self.children)}  # the first at a line wins
        return self._starts.get(line)

    def innermost(self, line: int) -> Node:
        for child in self.children:
            if child.lo <= line < child.hi:
                return child.innermost(line)
        return self


def definition_tree(tree: SyntaxTree, lines: list[str], markers: set[int] | frozenset[int] = frozenset(),
                    found: list[Definition] | None = None) -> Node:
    """The named functions and classes of a parsed text as nested Nodes (`found`: its
    definitions, where they are known already)."""
    nodes: dict[tuple[int, int], Node] = {}
    for definition in definitions(tree) if found is None else found:
        aim = tree.byte(definition.start)
        node = tree.root.descendant_for_byte_range(aim, aim)
        while node is not None and not (node.start_byte == aim and node.child_by_field_name("body")):
            node = node.parent
        if node is None:
            continue
        head = node.start_point.row
        while node.parent is not None and node.parent.type in _HOLDERS:
            node = node.parent  # decorators, `export`, `const f = () => ...`
        lo, hi = node.start_point.row, node.end_point.row + (1 if node.end_point.column else 0)
        # a marker among its decorators (parsed as a comment) hides the file's lines there: the
        # decorators before it are another definition's, the one it hides
        lo = max([lo, *(line + 1 for line in markers if lo <= line < head)])
        while lo < head and (lo in markers or not lines[lo].strip() or is_comment(lines[lo])):
            lo += 1
        nodes.setdefault((lo, hi), Node(definition.kind, definition.path[-1], lo, max(hi, head + 1), head))
    root = Node("", "", 0, len(lines), -1)
    stack = [root]
    for found_node in sorted(nodes.values(), key=lambda n: (n.lo, -n.hi)):
        while stack[-1] is not root and found_node.lo >= stack[-1].hi:
            stack.pop()
        stack[-1].children.append(found_node)
        stack.append(found_node)
    if tree.language == "python":
        _take_trailing_markers(root, lines, markers)
    return root


def _take_trailing_markers(node: Node, lines: list[str], markers: set[int] | frozenset[int]) -> None:
    """A Python block ends at its last statement; a marker indented under the definition's
    header right after it still belongs to it ("    # ... the other methods"). Outer
    definitions take theirs first, so that an inner one may take what lies inside the outer."""
    for child in node.children:
        depth = len(indent_of(lines[child.head]))
        for line in range(child.hi, node.hi):
            if line in markers and len(indent_of(lines[line])) > depth:
                child.hi = line + 1
            elif lines[line].strip():
                break
        _take_trailing_markers(child, lines, markers)


def marker_out_of_block(tree: Node, lines: list[str], markers: set[int] | frozenset[int]) -> tuple[Node, int] | None:
    """A Python definition of a snippet with a marker inside it that stands no deeper than its
    header, code of the definition after it: the marker hides code outside the definition (its
    indentation is the first hidden line's), while the parser, to which a comment has no
    indentation, reads the lines after it as the definition's own. Whose lines they are (the end
    of another definition behind the marker, as a hunk cut mid-block shows them) is unclear. The
    first such definition and marker line, or None."""
    for node in tree.walk():
        if node is tree:
            continue
        depth = len(indent_of(lines[node.head]))
        for line in range(node.head + 1, node.hi):
            if line in markers and len(indent_of(lines[line])) <= depth and any(
                    lines[later].strip() and later not in markers for later in range(line + 1, node.hi)):
                return node, line
    return None


class Unclear(Exception):
    """Raised inside a merge where the snippet can be read more than one way."""


LINE, DEF, MARKER, BLANK = "line", "def", "marker", "blank"
EDGE_LINES = 3  # file code lines a snippet may replace at the file's start or end without a marker there


@dataclass(frozen=True)
class Item:
    """A region's line or nested definition; `key` matches it to the other side's (None: never)."""

    kind: str  # LINE, DEF, MARKER or BLANK
    line: int
    node: Node | None = None
    key: tuple | None = None


def changed_definitions(tree: SyntaxTree, merged: str) -> tuple[int, int, str]:
    """The changed span grown to the smallest definition holding both its ends (an insertion:
    the lines on either side of it), else to the definitions each end falls in, so the checks
    judge a snippet's function as a rewrite of it: a new function may end in the `return` of
    the one before it, and a method may replace another in its class ("make it a generator")."""
    start, end, new = changed_span(tree.text, merged)
    first_line = tree.text.count("\n", 0, start) - (start == end)
    last_line = tree.text.count("\n", 0, max(start, end - 1))
    around_first = list(definitions_around(tree, first_line))
    around_last = list(definitions_around(tree, last_line))
    both = [target for target in around_first if last_line in target.lines]
    grown = both[:1] or around_first[:1] + around_last[:1]
    grown_start = min([start] + [target.start for target in grown])
    grown_end = max([end] + [target.end for target in grown])
    # Outside [start, end) the two texts are the same, so the grown span's ends map one to one.
    return grown_start, grown_end, merged[grown_start:len(merged) - (len(tree.text) - grown_end)]


def changed_span(old: str, new: str) -> tuple[int, int, str]:
    """The old text's whole lines [start, end) that `new` changes, and what it has there."""
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    same = 0
    while same < min(len(old_lines), len(new_lines)) and old_lines[same] == new_lines[same]:
        same += 1
    tail = 0
    while tail < min(len(old_lines), len(new_lines)) - same and old_lines[-1 - tail] == new_lines[-1 - tail]:
        tail += 1
    start = sum(map(len, old_lines[:same]))
    end = len(old) - sum(map(len, old_lines[len(old_lines) - tail:]))
    return start, end, "".join(new_lines[same:len(new_lines) - tail])


def own_lines(node: Node) -> list[int]:
    """The lines of a region that no nested definition holds."""
    nested = {line for child in node.children for line in range(child.lo, child.hi)}
    return [line for line in range(node.lo, node.hi) if line not in nested]


def strip_blank(items: list[Item], from_end: bool) -> list[Item]:
    """The items without their blank lines at one end."""
    items = list(items)
    while items and items[-1 if from_end else 0].kind == BLANK:
        items.pop(-1 if from_end else 0)
    return items


def code_lines(lines: list[str], start: int, end: int) -> set[str]:
    return {line.strip() for line in lines[start:end] if line.strip()}


def mostly_same(body: set[str], other: set[str]) -> bool:
    """Whether most of `body`'s code lines (three in five, and two at least) are `other`'s."""
    return len(body) >= 2 and len(body & other) * 5 >= len(body) * 3


def without_self(lines: set[str]) -> set[str]:
    """Code lines with white space and `self.` taken out: a method's lines as its function's were."""
    return {"".join(line.replace("self.", "").split()) for line in lines}
