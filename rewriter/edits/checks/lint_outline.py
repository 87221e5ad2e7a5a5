"""The lint check's short way (lint.py): pyflakes on outlines of the file before and after an edit,
the bodies of the functions the edit left as they were cut to `pass`.

pyflakes reads a function's body last (deferred), against the module's names as they stand at the
end, and nothing in a body changes those names but `global` and `nonlocal`. So a top-level
function, or a method of a top-level class, that is the same statement before and after the edit
finds the same errors in both where the names its body reads mean the same: errors the file
already had, which never count (lint.py compares by kind and name). Cutting those bodies leaves
pyflakes the module-level code and the edited definitions: the same new errors at the same lines
(a cut body keeps its line count), in a fraction of the time for a long file.

No outline (the whole file is read) where this may not hold: `global`, `nonlocal` or the future
`barry_as_FLUFL` (it changes how `!=` parses) outside comments and strings, pyflakes' doctests
on, tree-sitter and Python seeing the functions differently, a star import or `from __future__
import annotations` come or gone, or a module name that came, went or changed kind (an import
for a function) occurring in a cut body.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyflakes.checker import Checker, ModuleScope

if TYPE_CHECKING:
    from tree_sitter import Node

    from ..scopes import SyntaxTree

UNSAFE = re.compile(rb"\b(global|nonlocal|barry_as_FLUFL)\b")
NOT_CODE = {"comment", "string_content"}  # where an UNSAFE word is harmless


@dataclass(frozen=True)
class Outline:
    after: str  # the edited file, the bodies of its functions the edit left as they were cut
    after_lines: frozenset[int]  # the line of each `pass` that stands for a cut body
    cut: bytes  # the cut bodies' text, as the edited file holds them
    same_names: bool  # what the edit touched defines the same functions, nothing else: module names stay
    data: bytes  # the file, as it was
    bodies: tuple[Node, ...]  # the file's bodies to cut, the same functions'

    def before(self) -> tuple[str, frozenset[int]] | None:
        """The file's outline, and the line of each `pass` in it (read only where needed)."""
        return _cut(self.data, list(self.bodies))


def outline(before: SyntaxTree, after: SyntaxTree, start: int, end: int, new: str) -> Outline | None:
    """The outline of `after` (`before` with its characters [start, end) replaced by `new`); None
    where the short way may not give what the whole file gives, or cuts nothing."""
    if before.has_errors() or after.has_errors() or _unsafe(before) or _unsafe(after):
        return None
    head = before.byte(start)
    old_tail, new_tail = before.byte(end), head + len(new.encode("utf-8"))
    originals = {(node.start_byte, node.end_byte): node for node in before.root.children if node.type != "comment"}
    before_bodies: list[Node] = []
    after_bodies: list[Node] = []
    touched: list[Node] = []
    for node in after.root.children:
        if node.type == "comment":
            continue
        shift = 0 if node.end_byte <= head else new_tail - old_tail
        original = originals.get((node.start_byte - shift, node.end_byte - shift))
        if node.start_byte < new_tail and node.end_byte > head or original is None or original.type != node.type:
            touched.append(node)  # read whole
            continue
        cut_before, cut_after = _bodies(original), _bodies(node)
        if len(cut_before) != len(cut_after):
            return None
        del originals[(original.start_byte, original.end_byte)]
        before_bodies += cut_before
        after_bodies += cut_after
    cut = _cut(after.data, after_bodies) if after_bodies else None
    if cut is None:
        return None
    defined = _functions(after.data, touched)
    same = defined is not None and defined == _functions(before.data, list(originals.values()))
    text = b"\n".join(after.data[body.start_byte:body.end_byte] for body in after_bodies)
    return Outline(cut[0], cut[1], text, same, before.data, tuple(before_bodies))


def _functions(data: bytes, statements: list[Node]) -> set[str] | None:
    """The names of the functions `statements` define where they define nothing else at module
    level (no other statement, no `:=` outside a body); None otherwise."""
    names = set()
    for statement in statements:
        node = _defined(statement)
        body = node.child_by_field_name("body") if node is not None else None
        name = node.child_by_field_name("name") if node is not None else None
        if node is None or node.type != "function_definition" or body is None or name is None \
                or b":=" in data[statement.start_byte:body.start_byte]:
            return None
        names.add(data[name.start_byte:name.end_byte].decode("utf-8", "replace"))
    return names


def _unsafe(tree: SyntaxTree) -> bool:
    for match in UNSAFE.finditer(tree.data):
        node = tree.root.descendant_for_byte_range(match.start(), match.end())
        if node is None or node.type not in NOT_CODE:
            return True
    return False


def _bodies(statement: Node) -> list[Node]:
    """The bodies to cut in a top-level statement: a function's, or its methods' in a class."""
    node = _defined(statement)
    if node is not None and node.type == "class_definition":
        block = node.child_by_field_name("body")
        inner = [_defined(child) for child in block.named_children] if block is not None else []
        return [body for child in inner if child is not None and child.type == "function_definition"
                for body in [child.child_by_field_name("body")] if body is not None]
    if node is not None and node.type == "function_definition":
        body = node.child_by_field_name("body")
        return [body] if body is not None else []
    return []


def _defined(node: Node) -> Node | None:
    return node.child_by_field_name("definition") if node.type == "decorated_definition" else node


def _cut(data: bytes, bodies: list[Node]) -> tuple[str, frozenset[int]] | None:
    """`data` with each body replaced by `pass` and as many line breaks as it held, and the line
    of each `pass` (as Python counts lines); None where bodies are empty or overlap."""
    pieces, lines, at, line = [], set(), 0, 1
    for body in sorted(bodies, key=lambda node: node.start_byte):
        if body.start_byte < at or body.end_byte <= body.start_byte:
            return None
        line += _line_breaks(data[at:body.start_byte])
        lines.add(line)
        breaks = _line_breaks(data[body.start_byte:body.end_byte])
        pieces += [data[at:body.start_byte], b"pass", b"\n" * breaks]
        line += breaks
        at = body.end_byte
    pieces.append(data[at:])
    try:
        return b"".join(pieces).decode("utf-8"), frozenset(lines)
    except UnicodeDecodeError:
        return None


def _line_breaks(data: bytes) -> int:
    return data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")


def cut_as_expected(tree: ast.Module, lines: frozenset[int]) -> bool:
    """Whether Python reads a top-level function or a top-level class's method, its body a lone
    `pass`, at each of `lines`: tree-sitter and Python see the same functions."""
    found = set()
    for statement in tree.body:
        for node in [statement, *(statement.body if isinstance(statement, ast.ClassDef) else [])]:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(node.body) == 1 \
                    and isinstance(node.body[0], ast.Pass):
                found.add(node.body[0].lineno)
    return lines <= found


@dataclass(frozen=True)
class ModuleNames:
    """What a function body's errors depend on besides itself, as pyflakes left the module."""

    kinds: dict[str, type]  # each module name (builtins too) and the kind of its binding
    starred: bool  # a star import: pyflakes reports no undefined name
    future_annotations: bool  # annotations are read as strings

    @classmethod
    def of(cls, checker: Checker) -> ModuleNames | None:
        """None where pyflakes read doctests (function bodies' docstrings) or left no module scope."""
        if checker.withDoctest:
            return None
        scope = next((scope for scope in reversed(checker.deadScopes) if type(scope) is ModuleScope), None)
        if scope is None:
            return None
        return cls({name: type(binding) for name, binding in scope.items()}, bool(scope.importStarred),
                   bool(getattr(scope, "_annotations_future_enabled", False)))

    def read_alike(self, other: ModuleNames, cut: bytes) -> bool:
        """Whether bodies `cut` find the same errors under these names and under `other`'s."""
        if (self.starred, self.future_annotations) != (other.starred, other.future_annotations):
            return False
        changed = self.kinds.keys() ^ other.kinds.keys()
        changed |= {name for name in self.kinds.keys() & other.kinds.keys()
                    if self.kinds[name] is not other.kinds[name]}
        if not changed:
            return True
        if not cut.isascii():  # identifiers are NFKC-normalised: a name may be spelt otherwise
            return False
        words = b"|".join(re.escape(name.encode("utf-8")) for name in sorted(changed))
        return re.search(rb"\b(?:" + words + rb")\b", cut) is None
