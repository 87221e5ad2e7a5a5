"""Tree-sitter grammars and node kinds: which grammar a language uses, which node types are a
function, method or class there, what a definition's name is, and tree-sitter queries.

rewriter.edits.scopes turns these nodes into spans; the language server finds "the function at
the cursor" through it, so both see the same nodes.
"""
from __future__ import annotations

from functools import cache
from pathlib import PurePath
from typing import TYPE_CHECKING

from ..prompt import language_for

if TYPE_CHECKING:
    from tree_sitter import Node


class ScopeError(ValueError):
    """A scope that cannot be applied to a file; the message says why."""


# Our language names (rewriter.prompt) that tree-sitter knows under another name.
TREE_SITTER_NAMES = {"jsx": "javascript"}

COMMENTS = {"comment", "line_comment", "block_comment"}
# Nodes that carry a definition plus what belongs to it (decorators, templates, export).
WRAPPERS = {"decorated_definition", "template_declaration", "export_statement"}
# Rust attributes (#[derive(..)]) stand before their item as siblings.
LEADING_SIBLINGS = COMMENTS | {"attribute_item"}

JS_FUNCTIONS = {"function_declaration", "generator_function_declaration", "method_definition"}
# Functions as values; a definition only when a variable names them (`const f = () => ...`).
JS_VALUE_FUNCTIONS = {"arrow_function", "function_expression", "function", "generator_function"}
JS_LANGUAGES = {"javascript", "typescript", "tsx"}

# alias -> language -> node types. Methods are refined by `is_method`.
ALIASES: dict[str, dict[str, set[str]]] = {
    "function": {
        "python": {"function_definition"},
        "javascript": JS_FUNCTIONS | JS_VALUE_FUNCTIONS,
        "typescript": JS_FUNCTIONS | JS_VALUE_FUNCTIONS,
        "tsx": JS_FUNCTIONS | JS_VALUE_FUNCTIONS,
        "go": {"function_declaration", "method_declaration"},
        "rust": {"function_item"},
        "java": {"method_declaration", "constructor_declaration"},
        "c": {"function_definition"},
        "cpp": {"function_definition"},
        "csharp": {"method_declaration", "constructor_declaration", "local_function_statement"},
        "ruby": {"method", "singleton_method"},
    },
    "method": {
        "python": {"function_definition"},
        "javascript": {"method_definition"},
        "typescript": {"method_definition"},
        "tsx": {"method_definition"},
        "go": {"method_declaration"},
        "rust": {"function_item"},
        "java": {"method_declaration", "constructor_declaration"},
        "cpp": {"function_definition"},
        "csharp": {"method_declaration", "constructor_declaration"},
        "ruby": {"method", "singleton_method"},
    },
    "class": {
        "python": {"class_definition"},
        "javascript": {"class_declaration"},
        "typescript": {"class_declaration", "abstract_class_declaration", "interface_declaration"},
        "tsx": {"class_declaration", "abstract_class_declaration", "interface_declaration"},
        "go": {"type_declaration"},
        "rust": {"struct_item", "enum_item", "union_item", "trait_item", "impl_item"},
        "java": {"class_declaration", "interface_declaration", "enum_declaration", "record_declaration"},
        "cpp": {"class_specifier", "struct_specifier"},
        "csharp": {"class_declaration", "struct_declaration", "interface_declaration", "record_declaration"},
        "ruby": {"class", "module"},
    },
}
# Where a function is a method: the nearest enclosing definition is one of these.
METHOD_CONTAINERS = {
    "python": {"class_definition"},
    "rust": {"impl_item", "trait_item"},
    "cpp": {"class_specifier", "struct_specifier"},
    "ruby": {"class", "module"},
}
DEFINITIONS = {
    "function_definition", "function_item", "class_definition", "impl_item", "trait_item",
    "class_specifier", "struct_specifier", "method", "class", "module",
}


def tree_language(path: str | PurePath) -> str | None:
    """The tree-sitter grammar for a file name, or None when there is none."""
    return grammar_for(language_for(path))


def grammar_for(language: str) -> str | None:
    """The tree-sitter grammar for one of our language names ("python", "jsx"), or None."""
    if not language:
        return None
    name = TREE_SITTER_NAMES.get(language, language)
    return name if grammar(name) is not None else None


@cache
def grammar(name: str):
    """The tree-sitter Language of a grammar name, or None when the installed pack lacks it."""
    try:
        from tree_sitter_language_pack import get_language
        return get_language(name)  # type: ignore[arg-type]  # any name: an unknown one raises
    except Exception:  # unknown name, or a grammar the installed pack lacks
        return None


@cache
def parser(name: str):
    from tree_sitter import Parser
    return Parser(grammar(name))


def kinds_for(language: str) -> list[str]:
    return sorted(alias for alias, languages in ALIASES.items() if language in languages)


def of_kind(nodes, alias: str, language: str) -> list[Node]:
    """The nodes that are an `alias` (function, method, class) in `language`."""
    types = ALIASES[alias].get(language, set())
    found = [n for n in nodes if n.type in types]
    if language in JS_LANGUAGES:
        found = [n for n in found if n.type not in JS_VALUE_FUNCTIONS or is_named_function_value(n)]
    if alias == "method":
        found = [n for n in found if is_method(n, language)]
    return found


def name_of(node) -> str:
    current = node
    for _ in range(4):  # the name sits in the node or a declarator a few levels down
        named = current.child_by_field_name("name") or (
            current.child_by_field_name("type") if current.type == "impl_item" else None)
        if named is not None:
            return named.text.decode("utf-8", "replace")
        declarator = current.child_by_field_name("declarator")
        if declarator is None:
            break
        if declarator.type in {"identifier", "field_identifier", "qualified_identifier",
                               "destructor_name", "operator_name"}:
            return declarator.text.decode("utf-8", "replace")
        current = declarator
    return ""


def _nearest_definition(node):
    parent = node.parent
    while parent is not None and parent.type not in DEFINITIONS:
        parent = parent.parent
    return parent


def is_method(node, language: str) -> bool:
    containers = METHOD_CONTAINERS.get(language)
    if containers is None:
        return True  # the alias's node types are methods already
    if language == "cpp" and node.type == "function_definition":
        declarator = node.child_by_field_name("declarator")
        inner = declarator.child_by_field_name("declarator") if declarator is not None else None
        if inner is not None and inner.type == "qualified_identifier":
            return True  # int Widget::size() const { ... } outside the class
    outer = _nearest_definition(node)
    return outer is not None and outer.type in containers


def is_named_function_value(node) -> bool:
    """An arrow function or function expression given a name: `const f = () => ...`."""
    declarator = node.parent
    if declarator is None or declarator.type != "variable_declarator":
        return False
    return declarator.child_by_field_name("value") == node


def query_nodes(language: str, root, source: str) -> list:
    """The nodes a tree-sitter query captures (those captured as @scope when there are any)."""
    from tree_sitter import Query, QueryCursor

    try:
        query = Query(grammar(language), source)
    except Exception as error:  # QueryError, with the position of the problem
        raise ScopeError(f"bad tree-sitter query for {language}: {error}") from error
    captures = QueryCursor(query).captures(root)
    if "scope" in captures:  # @scope names what to rewrite when a query captures more
        return list(captures["scope"])
    return [node for nodes in captures.values() for node in nodes]


def walk(root):
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))
