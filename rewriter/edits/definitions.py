"""The functions, methods and classes a file defines, found by one tree-sitter query: each one's
name within its enclosing definitions, its header line and whether it kept its body. The edit
checks compare them before and after a rewrite; code that came without a language name is told
by them too (guess_language).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from .node_kinds import ALIASES, COMMENTS, JS_VALUE_FUNCTIONS, grammar, grammar_for, is_named_function_value, name_of
from .scopes import SyntaxTree

# A definition's body: FULL holds code; EMPTY is `{}` (or only comments, `pass`, `...` or a docstring);
# NONE is a header alone (`def f():` with nothing under it, Go's `func f()`): no body node, or an
# empty one.
FULL, EMPTY, NONE = "full", "empty", "none"


@dataclass(frozen=True)
class Definition:
    kind: str  # "function" or "class" (methods are functions)
    path: tuple[str, ...]  # the enclosing definitions' names, then its own: ("Shape", "area")
    start: int  # character offset of the node itself (after decorators and doc comments)
    header: str  # the line it starts on, stripped: `def area(self) -> float:`
    body: str = FULL  # FULL, EMPTY or NONE

    @property
    def name(self) -> str:
        return ".".join(self.path)


def definitions(tree: SyntaxTree, start: int = 0, end: int | None = None) -> list[Definition]:
    """Every named function, method and class in the file, in order (nested ones included);
    with `start`/`end` (character offsets), only those that start there."""
    found_query = _definition_query(tree.language)
    if found_query is None:
        return []
    from tree_sitter import QueryCursor

    query, kinds = found_query
    low, high = tree.byte(start), tree.byte(len(tree.text) if end is None else end)
    cursor = QueryCursor(query)
    cursor.set_byte_range(low, high)
    named: dict[int, str] = {}  # node id -> its name as a definition, "" where it is none
    found: list[tuple[int, int, Definition]] = []
    for node in cursor.captures(tree.root).get("definition", []):
        if not low <= node.start_byte < high or not _definition_name(node, named):
            continue
        # an enclosing definition names those inside it, in range or not
        path, depth, outer = [named[node.id]], 0, node.parent
        while outer is not None:
            depth += 1
            if outer.type in kinds and _definition_name(outer, named):
                path.append(named[outer.id])
            outer = outer.parent
        at = tree.char(node.start_byte)
        line_start = tree.text.rfind("\n", 0, at) + 1
        line_end = tree.text.find("\n", at)
        header = tree.text[line_start: line_end if line_end >= 0 else len(tree.text)].strip()
        found.append((node.start_byte, depth, Definition(kinds[node.type], tuple(reversed(path)), at,
                                                         header, _body_of(node))))
    return [definition for _, _, definition in sorted(found, key=lambda entry: entry[:2])]


@cache
def _definition_query(language: str):
    """A tree-sitter query for the language's function and class nodes, and each node type's
    kind; None where the language has none."""
    from tree_sitter import Query

    known = grammar(language)
    kinds = {node_type: alias for alias in ("class", "function") for node_type in ALIASES[alias].get(language, ())
             if known is not None and known.id_for_node_kind(node_type, True) is not None}
    if not kinds:
        return None
    return Query(known, "[" + " ".join(f"({node_type})" for node_type in sorted(kinds)) + "] @definition"), kinds


def _definition_name(node, named: dict[int, str]) -> str:
    """The node's name as a definition ("" for an unnamed one: an anonymous arrow function)."""
    if node.id not in named:
        nameless = node.type in JS_VALUE_FUNCTIONS and not is_named_function_value(node)
        named[node.id] = "" if nameless else name_of(node.parent if node.type in JS_VALUE_FUNCTIONS else node)
    return named[node.id]


def _body_of(node) -> str:
    body = node.child_by_field_name("body")
    if body is None or body.start_byte == body.end_byte:
        return NONE
    if body.child_count == 0:
        return FULL  # an expression body: `() => 1`
    # the first two statements that do something tell (a body that is only its docstring does
    # nothing); read one by one, as a long body's statements need not all be made
    code = (child for child in map(body.named_child, range(body.named_child_count))
            if child is not None and child.type not in COMMENTS and not is_placeholder(child))
    first = next(code, None)
    if first is not None and _is_string_statement(first):
        first = next(code, None)
    return FULL if first is not None else EMPTY


def _expression(statement):
    if statement.type == "expression_statement" and statement.named_child_count == 1:
        return statement.named_children[0]
    return statement


def _is_string_statement(statement) -> bool:
    return _expression(statement).type in {"string", "concatenated_string"}


def is_docstring(node) -> bool:
    """A Python docstring: a string first in a module's, class's or function's body."""
    if not _is_string_statement(node):
        return False
    statement = node.parent if node.parent is not None and node.parent.type == "expression_statement" else node
    body = statement.parent
    if body is None or body.type not in {"module", "block"}:
        return False
    if body.type == "block" and (body.parent is None
                                 or body.parent.type not in {"function_definition", "class_definition"}):
        return False
    first = next((child for child in body.named_children if child.type not in COMMENTS), None)
    return first is not None and first.id == statement.id


def is_placeholder(statement) -> bool:
    """`pass` or `...`: a body that stands for none (a docstring may replace it)."""
    return statement.type == "pass_statement" or _expression(statement).type == "ellipsis"


def guess_language(text: str) -> str:
    """The language of code that came without a name: of the languages whose definitions we know,
    the one whose grammar parses `text` without an error and finds the most definitions in it
    (ties go to the earlier in ALIASES: JavaScript before TypeScript, C before C++). "" when none
    parses it or finds a definition: a guess would then check nothing and could refuse good code."""
    best, most = "", 0
    for language in ALIASES["function"]:
        grammar = grammar_for(language)
        if grammar is None:
            continue
        tree = SyntaxTree(text, grammar)
        if tree.has_errors():
            continue
        found = len(definitions(tree))
        if found > most:
            best, most = language, found
    return best
