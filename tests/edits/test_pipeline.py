"""The edit pipeline on its own: what a span sends to the model and what of an answer may be
applied. Each front end's tests (test_front_ends.py) check that they all use it."""
from __future__ import annotations

import pytest

from rewriter.edits.checks.integrity import Status
from rewriter.edits.definitions import guess_language
from rewriter.edits.pipeline import (
    Refusal,
    TargetEdit,
    context_for,
    dedent,
    grammar_of,
    keep_trailing_blank_lines,
    reindent,
)
from rewriter.edits.target import Target
from rewriter.prompt import common_indent
from tests.helpers.samples import SHAPES

AREA = SHAPES[SHAPES.index("    def area"): SHAPES.index("\n\ndef unit") + 2]  # with its two blank lines


def area_edit(instruction: str = "Add a docstring") -> TargetEdit:
    start = SHAPES.index(AREA)
    return TargetEdit(Target.of_span(SHAPES, start, start + len(AREA)), instruction, "python")


def test_an_indented_span_goes_in_dedented_and_comes_back_indented():
    edit = area_edit()
    assert edit.code == "def area(self):\n    return math.pi * self.radius ** 2\n\n\n"
    assert edit.context() == SHAPES and edit.context(0) is None
    docstring = 'def area(self):\n    """The area."""\n    return math.pi * self.radius ** 2\n'
    decision = edit.finish(docstring, "stop")
    assert decision.status == Status.APPLIED and not decision.refused
    # Indented back, and the blank lines before `def unit` kept (the engine trims them).
    assert decision.text == '    def area(self):\n        """The area."""\n        return math.pi * self.radius ** 2\n\n\n'
    # An answer that kept the indentation is left as it is.
    assert edit.finish(reindent(docstring, "    "), "stop").text == decision.text


def test_dedent_reindent_and_blank_lines():
    method = "    def get(self, key):\n\n        return self.items[key]\n"
    assert common_indent(method) == "    "
    assert dedent(method, "    ") == "def get(self, key):\n\n    return self.items[key]\n"
    assert reindent(dedent(method, "    "), "    ") == method
    assert reindent(method, "    ") == method  # already there: decided by the first code line
    assert common_indent("\tif x:\n\t\ty()\n") == "\t" and common_indent("a\n  b\n") == ""
    assert keep_trailing_blank_lines("def f():\n    pass\n\n\n", "def f():\n    return 1\n") == \
        "def f():\n    return 1\n\n\n"
    assert keep_trailing_blank_lines("x = 1\r\n\r\n", "x = 2\r\n") == "x = 2\r\n\r\n"


def test_partial_text_waits_for_the_opening_fence_line_and_indents_as_it_grows():
    edit = area_edit()
    assert edit.partial_text("```pyt") is None
    assert edit.partial_text("Sure") is None
    assert edit.partial_text("```python\ndef area(self):\n    ret") == "    def area(self):\n        ret"
    crlf = TargetEdit(Target.of_span("x = 1\r\ny = 2\r\n", 0, 14), "x")
    assert crlf.partial_text("```\nx = 1\ny = 3\n```\n") == "x = 1\r\ny = 3\r\n"


def test_each_refusal_with_its_reason_and_the_refused_text():
    edit = area_edit()
    cut = edit.finish("def area(self):\n    return math.pi", "length")
    assert (cut.status, cut.refusal, cut.reason) == (Status.REFUSED, Refusal.CUT, "the answer stopped at the token limit")
    assert cut.text == AREA and cut.refused_text.startswith("    def area(self):") and not cut.may_force

    broken = edit.finish("def area(self:\n    return math.pi * self.radius ** 2\n", "stop")
    assert broken.refusal == Refusal.SYNTAX and broken.reason.startswith("the rewrite does not parse (syntax error at line 8")
    assert broken.text == AREA and "def area(self:" in broken.refused_text and broken.may_force
    assert edit.finish("def area(self:\n    pass\n", "stop", allow_syntax_errors=True).status == Status.APPLIED

    lost = edit.finish('"""Nothing here."""\n', "stop")
    assert lost.refusal == Refusal.INTEGRITY and lost.reason == "it would lose method Circle.area"
    forced = edit.finish('"""Nothing here."""\n', "stop", force=True)
    assert forced.status == Status.APPLIED and forced.forced and forced.reason == "it would lose method Circle.area"

    echo = edit.finish("def unit():\n    return Circle(1)\n", "stop")
    assert echo.refusal == Refusal.INTEGRITY and echo.reason.startswith("the answer is a copy of lines 12-13 of the file")

    stripped = area_edit("Use math.tau").finish("def area(self):\n    return math.tau * self.radius ** 2 / 2\n\n\n"
                                                "def unit():\n    return Circle(1)\n", "stop")
    assert stripped.status == Status.STRIPPED and "lines 12-13 of the file" in stripped.reason
    assert stripped.text == "    def area(self):\n        return math.tau * self.radius ** 2 / 2\n\n\n"

    # An answer that changes nothing is no refusal, even at the token limit.
    unchanged = edit.finish(edit.code, "length")
    assert unchanged.status == Status.APPLIED and unchanged.text == AREA


def test_a_file_that_does_not_parse_gets_no_syntax_refusal():
    broken = SHAPES + "\nconst = ;\n"
    start = broken.index(AREA)
    edit = TargetEdit(Target.of_span(broken, start, start + len(AREA)), "x", "python")
    assert edit.finish("def area(self:\n    pass\n", "stop").status == Status.APPLIED


@pytest.mark.parametrize("language, text", [
    ("python", SHAPES),
    ("javascript", "function add(a, b) {\n  return a + b;\n}\n"),
    ("typescript", "function add(a: number, b: number): number {\n  return a + b;\n}\n"),
    ("go", 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hi")\n}\n'),
    ("rust", 'fn main() {\n    println!("{}", 5);\n}\n'),
    ("java", "class A {\n  int f(int x) { return x + 1; }\n}\n"),
    ("ruby", "def add(a, b)\n  a + b\nend\n"),
    ("", "x = 1\n"),  # parses in many grammars and defines nothing: no guess
    ("", "def f(:\n"),  # parses in none
])
def test_the_language_of_code_without_a_name_is_guessed_from_its_definitions(language, text):
    assert guess_language(text) == language
    assert grammar_of("", text) == (language or None)
    assert grammar_of("go", SHAPES) == "go"  # a named language is taken as named


def test_context_windows_keep_the_span_and_say_what_was_left_out():
    text = "".join(f"line {i}\n" for i in range(1, 201))
    span = Target.of_lines(text, range(99, 101))
    assert context_for(text, span.start, span.end, None) == text
    assert context_for(text, span.start, span.end, 0) is None
    assert context_for(text, 0, len(text), None) is None  # a whole file has no context
    trimmed = context_for(text, span.start, span.end, 60)
    assert "line 100\nline 101\n" in trimmed
    assert trimmed.startswith("... (") and "lines above not shown" in trimmed
    assert trimmed.rstrip().endswith("lines below not shown) ...")
    assert len(trimmed) < 250
