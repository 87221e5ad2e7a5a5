"""Scopes found with tree-sitter: node kinds per language, nesting, line ranges, splits."""
from __future__ import annotations

from pathlib import Path

import pytest

from rewriter.edits.node_kinds import tree_language
from rewriter.edits.scopes import (
    ScopeError,
    expand_to_nodes,
    parse,
    select_nodes,
    split_span,
)
from rewriter.edits.target import Target, parse_line_range
from tests.helpers.oracles import syntax_error_line

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def names(path: str, kind: str) -> list[str]:
    text = (SAMPLES / path).read_text()
    return [span.name for span in select_nodes(parse(text, tree_language(path)), kind)]


@pytest.mark.parametrize("path, grammar", [
    ("a.py", "python"), ("a.js", "javascript"), ("a.jsx", "javascript"), ("a.ts", "typescript"),
    ("a.tsx", "tsx"), ("a.go", "go"), ("a.rs", "rust"), ("A.java", "java"), ("a.c", "c"),
    ("a.h", "c"), ("a.cpp", "cpp"), ("a.hpp", "cpp"), ("notes.txt", None), ("Makefile", None),
])
def test_language_from_the_file_name(path, grammar):
    assert tree_language(path) == grammar


def test_every_sample_parses_cleanly():
    parsed = set()
    for path in SAMPLES.iterdir():
        grammar = tree_language(path)
        if grammar and grammar != "json":
            assert syntax_error_line(path.read_text(), grammar) is None, path
            parsed.add(grammar)
    # one sample per language docs/apply.md lists: an empty or misplaced samples/ fails here
    assert parsed >= {"python", "javascript", "typescript", "go", "rust", "java", "c", "cpp"}


@pytest.mark.parametrize("path, kind, expected", [
    ("inventory.py", "method", ["__init__", "add", "remove", "restock", "low_stock", "to_json"]),
    ("inventory.py", "class", ["Item", "Inventory"]),
    ("report.py", "function", ["cached", "region_of", "load_orders", "__init__", "compute", "show", "main"]),
    ("report.py", "method", ["__init__", "compute", "show"]),
    ("fetch_users.js", "function", ["fetchUsers", "fetchAllUsers"]),
    ("fetch_users.js", "method", []),
    ("cart.ts", "function", ["formatPrice", "add", "remove", "applyDiscount", "total", "summarize"]),
    ("cart.ts", "method", ["add", "remove", "applyDiscount", "total"]),
    ("cart.ts", "class", ["CartItem", "Cart"]),
    ("stats.go", "function", ["Mean", "Max"]),
    ("rate_limiter.rs", "function", ["new", "refill", "try_take", "wait_time", "new", "allow", "describe"]),
    ("rate_limiter.rs", "method", ["new", "refill", "try_take", "wait_time", "new", "allow"]),
    ("rate_limiter.rs", "class", ["Bucket", "Bucket", "Limiter", "Limiter"]),
    ("OrderService.java", "method", ["OrderService", "create", "total", "byCustomer", "Order", "add"]),
    ("OrderService.java", "class", ["OrderService"]),  # Order and Line are nested: handled once
    ("ring_buffer.c", "function", ["ring_init", "ring_push", "ring_pop", "ring_read"]),
    ("matrix.cpp", "method", ["Matrix", "at", "set", "rows", "cols", "Matrix::multiply"]),
    ("matrix.cpp", "function", ["Matrix", "at", "set", "rows", "cols", "Matrix::multiply", "clamp", "identity"]),
    ("matrix.cpp", "class", ["Matrix"]),
])
def test_aliases_per_language(path, kind, expected):
    assert names(path, kind) == expected


def test_nested_matches_are_handled_once():
    text = (SAMPLES / "report.py").read_text()
    spans = select_nodes(parse(text, "python"), "function")
    # `wrapper` lives inside `cached`: it is rewritten as part of it, never on its own.
    assert "wrapper" not in [s.name for s in spans]
    assert any("def wrapper" in text[s.start:s.end] for s in spans)
    for before, after in zip(spans, spans[1:]):
        assert before.end <= after.start


def test_spans_take_decorators_doc_comments_and_whole_lines():
    text = (SAMPLES / "report.py").read_text()
    region_of = select_nodes(parse(text, "python"), "function")[1]
    assert text[region_of.start:region_of.end].startswith("@cached\ndef region_of(country):\n")
    assert text[region_of.end - 1] == "\n"

    rust = (SAMPLES / "rate_limiter.rs").read_text()
    bucket = select_nodes(parse(rust, "rust"), "class")[0]
    assert rust[bucket.start:bucket.end].startswith("/// One bucket")
    assert "#[derive(Debug, Clone)]" in rust[bucket.start:bucket.end]

    method = select_nodes(parse(text, "python"), "method")[1]  # compute, indented in its class
    assert text[method.start:method.end].startswith("    def compute(self):\n")

    go = (SAMPLES / "stats.go").read_text()
    mean = select_nodes(parse(go, "go"), "function")[0]
    assert go[mean.start:mean.end].startswith("// Mean returns")


def test_a_trailing_comment_of_code_is_not_taken_as_a_doc_comment():
    text = "x = 1  # the answer\ndef f():\n    return x\n"
    (span,) = select_nodes(parse(text, "python"), "function")
    assert text[span.start:span.end] == "def f():\n    return x\n"


def test_raw_node_types_and_queries():
    text = (SAMPLES / "report.py").read_text()
    tree = parse(text, "python")
    ifs = select_nodes(tree, "if_statement")
    assert [s.lines.start for s in ifs] == [12, 49, 58]
    prints = select_nodes(tree, '((call function: (identifier) @name) @scope (#eq? @name "print"))')
    assert [s.lines.start for s in prints] == [28, 41, 45, 50]
    assert all(text[s.start:s.end].lstrip().startswith("print(") for s in prints)


@pytest.mark.parametrize("kind, message", [
    ("method", "c has no 'method'"),
    ("not_a_node", "'not_a_node' is not a c node type"),
    ("(function_definition", "bad tree-sitter query"),
])
def test_bad_kinds_are_explained(kind, message):
    tree = parse((SAMPLES / "ring_buffer.c").read_text(), "c")
    with pytest.raises(ScopeError, match=message.replace("(", r"\(")):
        select_nodes(tree, kind)


def test_line_ranges():
    assert parse_line_range("10-40") == (10, 40)
    assert parse_line_range("7") == (7, 7)
    for bad in ("40-10", "x", "0-3", "-3"):
        with pytest.raises(ScopeError):
            parse_line_range(bad)
    text = "a\nb\nc\nd"
    span = Target.of_lines(text, range(1, 3))
    assert text[span.start:span.end] == "b\nc\n"
    last = Target.of_lines(text, range(3, 9))
    assert text[last.start:last.end] == "d" and last.lines == range(3, 4)
    with pytest.raises(ScopeError, match="past the end"):
        Target.of_lines(text, range(4, 6))


def test_expansion_grows_to_whole_nodes_only_as_far_as_needed():
    text = (SAMPLES / "inventory.py").read_text()
    tree = parse(text, "python")
    # Lines 10-12 are whole statements of the class body: nothing to grow.
    same = expand_to_nodes(tree, Target.of_lines(text, range(9, 12)))
    assert same.lines == range(9, 12)
    # Line 28 is inside `remove`, 31 inside `restock`: both methods, whole.
    grown = expand_to_nodes(tree, Target.of_lines(text, range(27, 31)))
    assert grown.lines == range(23, 32)
    # The header of an if statement alone grows to the statement.
    grown = expand_to_nodes(tree, Target.of_lines(text, range(19, 20)))
    assert grown.lines == range(19, 21)
    assert text[grown.start:grown.end].startswith("        if item.sku")


def test_non_ascii_text_keeps_character_offsets():
    text = 'NOTE = "größe ✓"\n\ndef größe(x):\n    return "ü" + x\n'
    (span,) = select_nodes(parse(text, "python"), "function")
    assert text[span.start:span.end] == 'def größe(x):\n    return "ü" + x\n'


def test_split_cuts_where_a_node_starts_and_covers_everything():
    text = (SAMPLES / "inventory.py").read_text()
    tree = parse(text, "python")
    whole = Target.whole(text)
    first, second = split_span(whole, tree)
    assert (first.start, second.end) == (0, len(text)) and first.end == second.start
    assert text[second.start:].lstrip().startswith(("class", "@"))
    # A class alone is cut between its methods.
    inventory = select_nodes(tree, "class")[1]
    pieces = split_span(inventory, tree)
    assert len(pieces) == 2 and text[pieces[1].start:pieces[1].end].lstrip().startswith("def ")
    # No grammar: cut at a blank line.
    plain = "one\ntwo\n\nthree\nfour\n"
    a, b = split_span(Target.whole(plain))
    assert plain[a.start:a.end] == "one\ntwo\n\n" and plain[b.start:b.end] == "three\nfour\n"
    assert split_span(Target.whole("x = 1\n"), parse("x = 1\n", "python")) == []


def test_syntax_error_line():
    assert syntax_error_line("def f(:\n    pass\n", "python") == 1
    assert syntax_error_line("def f():\n    return (1\n", "python") is not None
    assert syntax_error_line("anything at all", None) is None


# ---- definitions: what the integrity check and the snippet merge list ------------------------

NESTED = '''class Outer:
    """Doc."""

    @staticmethod
    def first():
        def helper():
            pass
        return helper

    def second(self):
        ...


def stub():
    """Only a docstring."""
'''


def test_definitions_are_in_order_with_the_names_around_them_and_their_bodies():
    from rewriter.edits.definitions import definitions

    found = definitions(parse(NESTED, "python"))
    assert [(d.kind, d.name, d.body) for d in found] == [
        ("class", "Outer", "full"), ("function", "Outer.first", "full"),
        ("function", "Outer.first.helper", "empty"), ("function", "Outer.second", "empty"),
        ("function", "stub", "empty")]
    assert found[1].header == "def first():" and NESTED[found[1].start:].startswith("def first")
    start = NESTED.index("def second")
    # a range lists those that start in it, named by the definitions around them all the same
    assert [d.name for d in definitions(parse(NESTED, "python"), start, len(NESTED))] == ["Outer.second", "stub"]
    assert definitions(parse(NESTED, "python"), start, start) == []


def test_javascript_definitions_name_function_values_and_skip_anonymous_ones():
    from rewriter.edits.definitions import definitions

    text = ("const load = (path) => read(path);\n[1, 2].map((x) => x * 2);\n"
            "class Shape {\n  area() { return 0; }\n}\nfunction save() { return function () {}; }\n")
    assert [d.name for d in definitions(parse(text, "javascript"))] == ["load", "Shape", "Shape.area", "save"]
    assert [d.name for d in definitions(parse("x = 1\n", "lua"))] == []
