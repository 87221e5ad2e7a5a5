"""The names a Python file binds, read by tree-sitter: for the lint check (lint.py), where the file
does not compile and pyflakes cannot read it."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node

    from ..scopes import SyntaxTree

# (node type, field) whose child is a binding target: `x = `, `for x in`, `as x`, `def x`, `k=1`.
# Not `x += 1`: it needs x bound already.
TARGET_FIELDS = {
    ("assignment", "left"), ("for_statement", "left"),
    ("for_in_clause", "left"), ("as_pattern", "alias"), ("named_expression", "name"),
    ("function_definition", "name"), ("class_definition", "name"), ("aliased_import", "alias"),
    ("default_parameter", "name"), ("typed_default_parameter", "name"),
}
# What a target may nest names in (`a, (b, *c) = ...`); never an attribute or a subscript (`a.b = `).
PATTERNS = {
    "pattern_list", "tuple_pattern", "list_pattern", "list_splat_pattern", "dictionary_splat_pattern",
    "tuple", "list", "expression_list", "parenthesized_expression", "as_pattern_target", "typed_parameter",
}
# Nodes whose plain identifiers bind (`def f(a, *b)`, `global a`).
BINDING_LISTS = {"parameters", "lambda_parameters", "global_statement", "nonlocal_statement"}
# In an ERROR node tree-sitter leaves bare tokens: the name after one of these binds.
BINDING_KEYWORDS = {"def", "class", "as", "import"}


def bound_names(tree: SyntaxTree) -> set[str]:
    """Every name the file binds anywhere, in any scope: imports (`import a.b` binds `a`), defs,
    classes, assignment, loop, `as` and comprehension targets, parameters, globals; read from
    tree-sitter's error-tolerant parse, so broken parts bind what their tokens plainly say."""
    names: set[str] = set()
    stack = [tree.root]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type in ("import_statement", "import_from_statement"):
            for name in node.children_by_field_name("name"):
                if name.type == "dotted_name":  # an aliased_import binds its alias (TARGET_FIELDS)
                    first = name.named_children[0] if node.type == "import_statement" else name.named_children[-1]
                    names.add(_text(first))
        elif node.type in BINDING_LISTS:
            for child in node.named_children:
                names |= _targets(child)
        elif node.type == "ERROR":
            children = node.children
            for before, child, after in zip([None, *children], children, [*children[1:], None]):
                if child.type == "identifier" and (
                        (before is not None and _text(before) in BINDING_KEYWORDS)
                        or (after is not None and after.type == "=")):
                    names.add(_text(child))
        for index, child in enumerate(node.children):
            if (node.type, node.field_name_for_child(index)) in TARGET_FIELDS:
                names |= _targets(child)
    return names


def _targets(node: Node) -> set[str]:
    """The names a binding target binds."""
    if node.type == "identifier":
        return {_text(node)}
    if node.type not in PATTERNS:
        return set()
    return set().union(*(_targets(child) for child in node.named_children))


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")
