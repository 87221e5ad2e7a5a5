"""The language server's pure parts: options, the lines a rewrite takes, comment instructions, change tracking."""
from __future__ import annotations

import pytest

from lsp.document_sync import changed_lines
from lsp.options import DEFAULT_PRESETS, parse_options
from lsp.targets import comment_instruction, enclosing_definition, lines_after_comment, selection_lines
from rewriter.edits.scopes import SyntaxTree, kind_spans, select_nodes
from rewriter.engine import DEFAULT_BRANCHES

PY = '''import os


@cache
def load(path):
    # rewrite: make this async
    with open(path) as f:
        return f.read()


class Store:
    def get(self, key):
        return self.items[key]
'''


def test_options_are_typed_and_bad_values_fall_back_with_warnings():
    options, warnings = parse_options({
        "engine": {"kind": "service", "url": "http://localhost:8000", "apiKeyEnv": "KEY", "timeoutS": 30},
        "presets": ["Add logging"], "maxRewriteLines": 50, "streamEdits": "never", "maxNewTokens": 200,
        "branches": 0,
    })
    assert warnings == [] and options.branches == 0
    assert (options.engine.kind, options.engine.url, options.engine.api_key_env, options.engine.timeout_s) == \
        ("service", "http://localhost:8000", "KEY", 30.0)
    assert options.presets == ["Add logging"] and options.max_rewrite_lines == 50
    assert options.stream_edits == "never" and options.max_new_tokens == 200

    options, warnings = parse_options({"presets": [], "maxRewriteLines": True, "contextChars": "big",
                                       "engine": {"kind": "openai"}, "colour": "blue", "branches": -1})
    assert options.presets == list(DEFAULT_PRESETS) and options.max_rewrite_lines == 400
    assert options.branches == DEFAULT_BRANCHES
    assert options.context_chars == 0 and options.engine.kind == "embedded"
    joined = " | ".join(warnings)
    for name in ("presets", "maxRewriteLines", "contextChars", "needs engine.url", "'colour'", "branches"):
        assert name in joined
    assert parse_options("fast")[0].engine.kind == "embedded" and parse_options("fast")[1]


def test_engine_dtype_is_an_option_and_reaches_the_embedded_engine():
    from lsp.engine_choice import make_engine

    options, warnings = parse_options({"engine": {"dtype": "float32"}})
    assert warnings == [] and make_engine(options.engine).dtype == "float32"
    options, warnings = parse_options({"engine": {"dtype": "int3"}})
    assert options.engine.dtype == "auto" and "engine.dtype" in warnings[0]


def test_suggestions_get_the_0_5b_beside_the_default_1_5b_and_the_rewrites_model_elsewhere(monkeypatch):
    from lsp import engine_choice
    from rewriter import CODER_1_5B_NAME, EMBEDDED_NAME

    monkeypatch.delenv(engine_choice.FACTORY_ENV, raising=False)
    monkeypatch.setattr(engine_choice, "default_model", lambda say: CODER_1_5B_NAME)
    monkeypatch.setattr(engine_choice, "available_memory", lambda: 16 << 30)

    def suggesting(raw: dict) -> str | None:
        options, warnings = parse_options(raw)
        assert warnings == []
        own = engine_choice.suggestion_engine_options(options)
        return None if own is None else f"{own.kind} {own.model} {own.dtype}"

    assert suggesting({}) == f"embedded {EMBEDDED_NAME} auto"
    assert suggesting({"engine": {"dtype": "float32"}}) == f"embedded {EMBEDDED_NAME} float32"
    assert suggesting({"nextEditModel": "same"}) is None
    assert suggesting({"engine": {"model": "/models/mine"}}) is None  # the model the user named suggests
    assert suggesting({"engine": {"model": "/models/mine"}, "nextEditModel": "/models/mine"}) is None
    assert suggesting({"nextEditModel": "/models/sweep-next-edit-0.5b"}) == "embedded /models/sweep-next-edit-0.5b auto"
    remote = {"engine": {"kind": "service", "url": "http://localhost:8000"}}
    assert suggesting(remote) is None
    assert suggesting({**remote, "nextEditModel": "/models/zeta"}) == "embedded /models/zeta auto"
    monkeypatch.setattr(engine_choice, "available_memory", lambda: 8 << 30)  # the 1.5B's start and no more
    assert suggesting({}) is None
    monkeypatch.setattr(engine_choice, "available_memory", lambda: 16 << 30)
    monkeypatch.setattr(engine_choice, "default_model", lambda say: EMBEDDED_NAME)  # the rewrites get the 0.5B
    assert suggesting({}) is None
    options, warnings = parse_options({"nextEditModel": ""})
    assert options.next_edit_model == "auto" and "nextEditModel" in warnings[0]


def test_prefill_ahead_and_the_prefix_cache_budget_are_options_that_reach_the_engine():
    from lsp.engine_choice import make_engine

    options, warnings = parse_options({"prefillAhead": False, "engine": {"prefixCacheMb": 64}})
    assert warnings == [] and options.prefill_ahead is False
    assert make_engine(options.engine).settings.prefix_cache_mb == 64
    options, warnings = parse_options({"prefillAhead": "yes", "engine": {"prefixCacheMb": -1}})
    assert options.prefill_ahead is True and options.engine.prefix_cache_mb == 512
    assert any("prefillAhead" in w for w in warnings) and any("engine.prefixCacheMb" in w for w in warnings)


def test_selection_covers_whole_lines():
    assert selection_lines(3, 2, 5, 1, 10) == range(3, 6)
    assert selection_lines(3, 0, 5, 0, 10) == range(3, 5)  # ends at a line start: that line is out
    assert selection_lines(5, 4, 3, 0, 10) == range(3, 6)  # backwards
    assert selection_lines(4, 2, 4, 2, 10) == range(4, 5)
    assert selection_lines(8, 0, 12, 3, 10) == range(8, 10)  # clipped to the document


@pytest.mark.parametrize("line, region", [(6, range(3, 8)), (3, range(3, 8)), (12, range(11, 13)),
                                          (10, range(10, 13)), (0, None)])
def test_enclosing_definition_with_tree_sitter(line, region):
    assert enclosing_definition(PY, "python", line) == region


def test_enclosing_definition_in_other_languages_and_none():
    js = "const a = 1;\nfunction f(x) {\n  return x + 1;\n}\n"
    assert enclosing_definition(js, "javascript", 2) == range(1, 4)
    go = "package main\n\nfunc add(a, b int) int {\n\treturn a + b\n}\n"
    assert enclosing_definition(go, "go", 3) == range(2, 5)
    assert enclosing_definition("x = 1\n", "no-such-language", 0) is None


NESTED = {"python": '''import functools


class Outer:
    """Holds an inner class."""

    class Inner:
        @staticmethod
        def helper(x):
            return x + 1

    @property
    def size(self):
        def count():
            return 1
        return count()


@functools.cache
def top(a):
    return a
''', "javascript": '''import x from "y";

/** Adds one. */
export const addOne = (n) => {
  return n + 1;
};

class Counter {
  // Counts up.
  increment() {
    this.n += 1;
  }
}
''', "rust": '''/// A point.
#[derive(Debug)]
struct Point {
    x: i32,
}

impl Point {
    /// Its length.
    #[inline]
    fn len(&self) -> i32 {
        self.x
    }
}
'''}


@pytest.mark.parametrize("language, line, kind, name", [
    ("python", 3, "class", "Outer"), ("python", 4, "class", "Outer"), ("python", 7, "function", "helper"),
    ("python", 9, "function", "helper"), ("python", 11, "function", "size"), ("python", 15, "function", "size"),
    ("python", 18, "function", "top"), ("python", 20, "function", "top"),
    ("javascript", 2, "function", "addOne"), ("javascript", 4, "function", "addOne"),
    ("javascript", 7, "class", "Counter"), ("javascript", 8, "function", "increment"),
    ("rust", 0, "class", "Point"), ("rust", 1, "class", "Point"), ("rust", 7, "function", "len"),
    ("rust", 8, "function", "len"), ("rust", 12, "class", "Point"),
])
def test_the_definition_at_the_cursor_is_what_each_function_or_class_rewrites(language, line, kind, name):
    """Decorators, doc comments and attributes count as `rewriter apply --each function` counts them."""
    text = NESTED[language]
    spans = [span for span in select_nodes(SyntaxTree(text, language), kind)
             if span.name == name and line in span.lines]
    assert len(spans) == 1
    assert enclosing_definition(text, language, line) == spans[0].lines


@pytest.mark.parametrize("line, kind, name", [(6, "class", "Inner"), (13, "function", "count"),
                                              (14, "function", "count")])
def test_nested_definitions_at_the_cursor_are_the_innermost(line, kind, name):
    """Nested ones, which select_nodes leaves to the outer one, come out as kind_spans finds them."""
    text = NESTED["python"]
    [span] = [span for span in kind_spans(SyntaxTree(text, "python"), kind) if span.name == name]
    assert enclosing_definition(text, "python", line) == span.lines
    assert enclosing_definition(text, "python", 0) is None


def test_comment_instructions_inside_or_just_above():
    lines = PY.splitlines(keepends=True)
    assert comment_instruction(lines, range(3, 8)) == "make this async"
    assert comment_instruction(lines, range(6, 8)) == "make this async"  # the comment right above
    assert comment_instruction(lines, range(10, 13)) is None
    assert comment_instruction(["// rewrite: use const\n", "let a = 1;\n"], range(1, 2)) == "use const"
    assert comment_instruction(["/* rewrite: inline it */\n", "x();\n"], range(0, 2)) == "inline it"
    # With the cursor on a comment above a definition, the definition below is the region.
    text = "# rewrite: add a docstring\ndef f():\n    pass\n"
    assert lines_after_comment(text, "python", 0) == range(1, 3)


def test_changed_lines():
    before = ["a\n", "b\n", "c\n", "d\n"]
    assert changed_lines(before, ["a\n", "B\n", "c\n", "d\n"]) == (1, 2, 0)
    assert changed_lines(before, ["x\n", "y\n"] + before) == (0, 0, 2)
    assert changed_lines(before, ["a\n", "d\n"]) == (1, 3, -2)
