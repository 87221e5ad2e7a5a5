"""Edit integrity: answers that lose or duplicate the user's code are stripped or refused.

A scripted engine plays each failure shape seen with the embedded model (an answer that
repeats the whole file, re-indented or not, or the part before or after the span; a span
replaced by a copy of another function; dropped methods; duplicated imports; a cut node) through
`rewriter apply`, and the controls that must still be applied.
"""
from __future__ import annotations

import json
import sys

import pytest

from rewriter.apply.batch import apply_command
from rewriter.apply.plans import Options
from rewriter.decoding.decode import Stats
from rewriter.decoding.rewrite import Progress, RewriteResult
from rewriter.edits.checks.integrity import FileIntegrity, Status
from tests.helpers.oracles import check_edit

SHAPES = '''"""Shapes and helpers."""
import math
import os

__version__ = "1.2.3"


class Rectangle:
    """An axis-aligned rectangle."""

    def __init__(self, width, height):
        self.width = width
        self.height = height

    @property
    def area(self):
        return self.width * self.height

    def perimeter(self):
        return 2 * (self.width + self.height)


def circle_area(radius):
    return math.pi * radius ** 2


def walk(root):
    def visit(path):
        entries = sorted(os.listdir(path))
        return [os.path.join(path, e) for e in entries]
    return visit(root)


def clamp(value, low, high):
    if value < low:
        return low
    if value > high:
        return high
    return value
'''


def span_of(text: str, first: str, last_line: str) -> tuple[int, int]:
    """The characters from the line holding `first` to the end of the line holding `last_line`."""
    start = text.rfind("\n", 0, text.index(first)) + 1
    end = text.index("\n", text.index(last_line, start)) + 1
    return start, end


class Engine:
    """Answers each request with `answer(code, context)`, as the model would, with no indentation
    added back (the batch layer does that)."""

    def __init__(self, answer):
        self.answer = answer
        self.requests = []

    def close(self):
        pass

    def stream(self, request):
        text, context, instruction = request.code, request.context, request.instruction
        self.requests.append((text, context, instruction))
        stats = Stats(output_tokens=10, total_s=0.01, finish_reason="stop")
        yield Progress("```\n", stats)
        yield RewriteResult(text=self.answer(text, context), answer="", stats=stats)


@pytest.fixture
def shapes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "shapes.py"
    path.write_text(SHAPES)
    return path


def apply(path, engine, capsys=None, **options) -> int:
    settings = dict(instruction="Keep the code exactly as it is", write=True)
    settings.update(options)
    json_output = settings.pop("json_output", False)
    return apply_command([str(path)], Options(**settings), lambda: engine, json_output=json_output,
                         say=lambda message: print(f"rewriter: {message}", file=sys.stderr))


def dedented(code: str) -> str:
    import textwrap

    return textwrap.dedent(code)


# ---- echo of the surroundings -------------------------------------------------------------

def test_whole_file_echo_reindented_into_a_method_is_stripped_to_the_method(shapes, capsys):
    # The model, shown a method dedented with the file as context, answers with the whole file;
    # re-indented as a method, it matches the context no more, and would nest the module in the class.
    def answer(code, context):
        return context.replace("return self.width * self.height", "return self.height * self.width")

    start, _ = span_of(SHAPES, "    @property", "return self.width * self.height")
    line = SHAPES.count("\n", 0, start) + 1
    assert apply(shapes, Engine(answer), lines=(line, line + 2), expand=True) == 0
    assert shapes.read_text() == SHAPES.replace("return self.width * self.height", "return self.height * self.width")


def test_whole_file_echo_inside_a_nested_function_is_stripped(shapes):
    def answer(code, context):
        return context.replace("entries = sorted(os.listdir(path))", "entries = sorted(os.listdir(path), reverse=True)")

    line = SHAPES[: SHAPES.index("        entries =")].count("\n") + 1
    assert apply(shapes, Engine(answer), lines=(line, line + 1), expand=True) == 0
    assert shapes.read_text() == SHAPES.replace("sorted(os.listdir(path))", "sorted(os.listdir(path), reverse=True)")


def test_partial_echo_of_the_part_before_and_after_is_stripped():
    start, end = span_of(SHAPES, "    def perimeter", "return 2 * (self.width")
    method = SHAPES[start:end].replace("2 * (self.width + self.height)", "2 * self.width + 2 * self.height")
    check = FileIntegrity(SHAPES, "python")
    head = SHAPES[SHAPES.index("class Rectangle"): start]  # the class so far, then the rewrite
    verdict = check.check(start, end, head + method, "Simplify")
    assert (verdict.status, verdict.text) == (Status.STRIPPED, method)
    assert "lines 8-17 of the file" in verdict.reason
    tail = SHAPES[end: SHAPES.index("def walk")]  # the rewrite, then what follows it
    verdict = check.check(start, end, method + tail, "Simplify")
    assert (verdict.status, verdict.text) == (Status.STRIPPED, method)


def test_an_answer_that_only_starts_like_the_span_is_no_echo():
    text = "x = compute(1)\ny = compute(2)\nx = compute(1)\ny = compute(2)\n"
    start = text.index("x = compute(1)", 1)
    answer = "x = compute(1)\ny = compute(3)\n"  # the span's own first line, rewritten after it
    verdict = check_edit(text, start, len(text), answer, "change 2 to 3", "python")
    assert (verdict.status, verdict.text) == (Status.APPLIED, answer)
    # Nor one that ends with lines the span holds too (two methods that begin alike, in the bench).
    text = ("class A:\n    def __init__(self, *args):\n        super().__init__(*args)\n        self.a = None\n\n"
            "class B:\n    def __init__(self, *args):\n        super().__init__(*args)\n        self.b = {}\n")
    start, end = span_of(text, "    def __init__", "self.a = None")
    answer = "    def __init__(self, *args):\n        super().__init__(*args)\n"
    assert check_edit(text, start, end, answer, "Simplify", "python").status == Status.APPLIED


# ---- a span replaced by other code ----------------------------------------------------------

def test_two_functions_replaced_by_a_copy_of_a_third_are_refused(shapes, capsys):
    # "Delete every closing parenthesis", which the model could not follow: it answered with `clamp`.
    def answer(code, context):
        return SHAPES[SHAPES.index("def clamp"):]

    first = SHAPES[: SHAPES.index("def circle_area")].count("\n") + 1
    last = SHAPES[: SHAPES.index("    return visit(root)")].count("\n") + 1
    code = apply(shapes, Engine(answer), capsys, lines=(first, last), instruction="Delete every closing parenthesis",
                 show_refused=True)
    assert code == 1
    assert shapes.read_text() == SHAPES
    out, err = capsys.readouterr()
    assert "copy of lines 34-39 of the file" in err and "not applied" in err
    # The refused answer is not lost: its diff is shown, with the reason.
    assert "# refused, not applied: shapes.py" in out and "+def clamp(value, low, high):" in out


def test_a_property_replaced_by_a_changed_copy_of_another_function_is_refused(shapes, capsys):
    def answer(code, context):
        if "def area" not in code:
            return code
        return dedented('''\
            def perimeter(self):
                """The perimeter."""
                return 2 * (self.width + self.height)
            ''')

    assert apply(shapes, Engine(answer), each="function", instruction="Add a one-line docstring") == 1
    assert shapes.read_text() == SHAPES
    err = capsys.readouterr().err
    assert "it would lose method Rectangle.area" in err
    assert "it would duplicate code that occurs once in the file: 'def perimeter(self):'" in err


def test_a_class_body_replaced_by_a_docstring_is_refused_naming_the_lost_methods(shapes, capsys):
    def answer(code, context):
        return 'class Rectangle:\n    """An axis-aligned rectangle with an area and a perimeter."""\n'

    assert apply(shapes, Engine(answer), each="class", instruction="Add docstrings", json_output=True) == 1
    assert shapes.read_text() == SHAPES
    report = json.loads(capsys.readouterr().out)
    span = report["files"][0]["spans"][0]
    assert span["status"] == "refused"
    assert ("it would lose method Rectangle.__init__, method Rectangle.area, method Rectangle.perimeter"
            in span["reason"])
    assert "-    def __init__(self, width, height):" in span["refused_diff"]


def test_imports_and_version_copied_into_a_function_are_refused(shapes, capsys):
    def answer(code, context):
        if "def circle_area" not in code:
            return code
        return ("import math\n\n__version__ = \"1.2.3\"\n\n"
                + code.replace("def circle_area(radius):", "def circle_area(radius: float) -> float:"))

    assert apply(shapes, Engine(answer), each="function", instruction="Add type hints to every function") == 1
    assert shapes.read_text() == SHAPES
    err = capsys.readouterr().err
    assert "duplicate code that occurs once in the file: 'import math', '__version__ = \"1.2.3\"'" in err


# ---- cut nodes ------------------------------------------------------------------------------

def test_a_line_range_that_cuts_a_node_is_grown_to_whole_nodes(shapes, capsys):
    # Lines of `if value < low:` without its body: a model completes the node, and without
    # growing the range the line after it would be in the file twice.
    first = SHAPES[: SHAPES.index("    if value < low:")].count("\n") + 1

    def answer(code, context):
        completed = code if "return low" in code else code + "        return low\n"
        return completed.replace("low:", "low:  # below the range")

    assert apply(shapes, Engine(answer), lines=(first, first)) == 0
    new = shapes.read_text()
    assert new == SHAPES.replace("if value < low:", "if value < low:  # below the range")
    assert new.count("return low") == 1
    err = capsys.readouterr().err
    assert f"lines {first}-{first} cut a syntax node in two; rewriting lines {first}-{first + 1} instead" in err


def test_one_loop_header_written_again_inside_new_code_is_applied():
    # From an EditEval answer that passed its tests: a second loop over the same range.
    text = ("def best(values, n):\n    for i in range(1, n):\n        values[i] += values[i - 1]\n"
            "    return values\n")
    answer = ("def best(values, n):\n    for i in range(1, n):\n        values[i] += values[i - 1]\n"
              "    top = values[0]\n    for i in range(1, n):\n        top = max(top, values[i])\n    return top\n")
    assert check_edit(text, 0, len(text), answer, "Return the largest running sum.", "python").status == Status.APPLIED
    # The loop header and its accumulator update again: common lines, new code (issue 37: answers
    # like this passed their tests and were refused).
    again = answer.replace("        top = max(top, values[i])", "        values[i] += values[i - 1]")
    assert check_edit(text, 0, len(text), again, "Return the largest running sum.", "python").status == Status.APPLIED


def test_copied_runs_are_refused_by_their_length_or_a_line_of_the_file_s_own():
    text = ("def total(items):\n    result_total = 0\n    for item in sorted(items):\n"
            "        result_total += price_of(item)\n        count_seen = count_seen + 1\n"
            "    return result_total\n\n\ndef price_of(item):\n    return item.price\n")
    span_end = text.index("\n\n\n") + 1
    body = "    for item in sorted(items):\n        result_total += price_of(item)\n        count_seen = count_seen + 1\n"
    instruction = "Count the items twice."

    def answer(new_code: str) -> str:
        return text[:span_end].replace("    return result_total\n", new_code + "    return result_total\n")

    # Three lines of the file written again in its order: a copy, however common each line is.
    verdict = check_edit(text, 0, span_end, answer(body), instruction, "python")
    assert verdict.refused and "'for item in sorted(items):'" in verdict.reason
    # Two, one of them calling the file's own price_of: a copy too.
    two = "    for item in sorted(items):\n        result_total += price_of(item)\n"
    verdict = check_edit(text, 0, span_end, answer(two), instruction, "python")
    assert verdict.refused and "'result_total += price_of(item)'" in verdict.reason
    # A loop header and an accumulator update, common code: applied (issue 37), as are the
    # three lines out of the file's order.
    common = "    for item in sorted(items):\n        count_seen = count_seen + 1\n"
    assert check_edit(text, 0, span_end, answer(common), instruction, "python").status == Status.APPLIED
    shuffled = ("    for item in sorted(items):\n        count_seen = count_seen + 1\n"
                "        result_total += price_of(item)\n")
    assert check_edit(text, 0, span_end, answer(shuffled), instruction, "python").status == Status.APPLIED


def test_a_new_function_ending_like_the_one_it_was_modelled_on_is_applied():
    # From an EditEval answer that passed its tests ("Add a function xor"): the new function's
    # last line repeats the old one's. Not a neighbour's line, so not an echo.
    text = ("def common(l1: list, l2: list):\n    ret = set()\n    for e1 in l1:\n        for e2 in l2:\n"
            "            if e1 == e2:\n                ret.add(e1)\n    return sorted(list(ret))\n")
    answer = text + ("\ndef xor(l1: list, l2: list):\n    ret = set()\n    for e1 in l1:\n"
                     "        if e1 not in l2:\n            ret.add(e1)\n    return sorted(list(ret))\n")
    assert check_edit(text, 0, len(text), answer, 'Add a function "xor".', "python").status == Status.APPLIED
    # The same line copied from outside a span, at the answer's end, is still an echo.
    file_text = "def f(a, b):\n    return a + b\n\n\n" + text
    span_end = file_text.index("\n\n")
    verdict = check_edit(file_text, 0, span_end + 1, "def f(a, b):\n    return sorted(list(ret))\n",
                         "Sort the result", "python")
    assert verdict.refused and "return sorted(list(ret))" in verdict.reason


def test_a_duplicated_line_after_the_range_is_refused():
    # Without a tree to grow the range by, the check still sees the line that would be twice.
    text = "first_value = compute_first()\nsecond_value = compute_second()\n"
    end = text.index("second")
    verdict = check_edit(text, 0, end, "first_value = compute_first(1)\nsecond_value = compute_second()\n",
                         "pass 1", None)
    assert verdict.refused and "'second_value = compute_second()'" in verdict.reason


def test_a_method_written_again_in_another_class_is_an_override_and_again_in_its_own_a_copy():
    text = ("class Base:\n    def set(self, key, value):\n        self.data[key] = value\n\n\n"
            "class Child(Base):\n    def other(self):\n        return 1\n")
    override = "    def set(self, key, value):\n        Base.set(self, key, value)\n\n    def other(self):\n"
    at = text.index("    def other(self):\n")
    verdict = check_edit(text, at, at + len("    def other(self):\n"), override, "Override set", "python")
    assert not verdict.refused, verdict.reason
    copy = "    def set(self, key, value):\n        pass\n\n    def set(self, key, value):\n"
    at = text.index("    def set(")
    verdict = check_edit(text, at, at + len("    def set(self, key, value):\n"), copy, "Add pass", "python")
    assert verdict.refused and "'def set(self, key, value):'" in verdict.reason


# ---- controls that must still be applied --------------------------------------------------

def test_a_docstring_added_to_each_function_is_applied(shapes):
    def answer(code, context):
        header, _, rest = code.partition(":\n")
        return f'{header}:\n    """Does its job."""\n{rest}'

    assert apply(shapes, Engine(answer), each="method", instruction="Add a one-line docstring") == 0
    assert shapes.read_text().count('"""Does its job."""') == 3


def test_a_function_renamed_when_asked_is_applied_and_not_when_not_asked(shapes, capsys):
    def answer(code, context):
        return code.replace("def clamp(", "def bounded(")

    first = SHAPES[: SHAPES.index("def clamp")].count("\n") + 1
    assert apply(shapes, Engine(answer), lines=(first, first + 5), instruction="Add type hints") == 1
    assert "it would lose function clamp" in capsys.readouterr().err
    assert shapes.read_text() == SHAPES
    assert apply(shapes, Engine(answer), lines=(first, first + 5), instruction="Rename clamp to bounded") == 0
    assert "def bounded(value, low, high):" in shapes.read_text()


def test_a_rename_in_other_words_and_functions_moved_into_a_class_are_applied():
    # Both from EditEval cases whose right answers were refused before.
    before = "def all_prefixes(s):\n    return [s[:i + 1] for i in range(len(s))]\n"
    renamed = "def all_suffixes(s):\n    return [s[i:] for i in range(len(s))]\n"
    assert check_edit(before, 0, len(before), renamed,
                      "Change the function name to all_suffixes.", "python").status == Status.APPLIED
    assert check_edit(before, 0, len(before), renamed, "Return suffixes instead.", "python").status == Status.REFUSED
    two = "def poly(xs, x):\n    return sum(xs)\n\n\ndef find_zero(xs):\n    return poly(xs, 0)\n"
    wrapped = ("class Solver:\n    def poly(self, xs, x):\n        return sum(xs)\n\n"
               "    def find_zero(self, xs):\n        return self.poly(xs, 0)\n")
    assert check_edit(two, 0, len(two), wrapped, "Encapsulate the functions into a class Solver.",
                      "python").status == Status.APPLIED
    half = "class Solver:\n    def poly(self, xs, x):\n        return sum(xs)\n"
    verdict = check_edit(two, 0, len(two), half, "Encapsulate the functions into a class Solver.", "python")
    assert verdict.status == Status.REFUSED and "find_zero" in verdict.reason


def test_a_method_replaced_by_a_special_method_is_applied_unless_still_called():
    # EditEval/58's reference edit ("Make it a generator."): next_batch gives way to __iter__.
    before = ("class Loader:\n    def __init__(self, data):\n        self.data = data\n\n"
              "    def next_batch(self):\n        return self.data[:4]\n")
    after = ("class Loader:\n    def __init__(self, data):\n        self.data = data\n\n"
             "    def __iter__(self):\n        yield self.data[:4]\n")
    assert check_edit(before, 0, len(before), after, "Make it a generator.", "python").status == Status.APPLIED
    # Code that still calls next_batch would break: lost.
    calling = after + "\n\ndef first(loader):\n    return loader.next_batch()\n"
    verdict = check_edit(before + "\n\ndef first(loader):\n    return loader.next_batch()\n", 0, len(before),
                         calling[: len(after)], "Make it a generator.", "python")
    assert verdict.refused and "method Loader.next_batch" in verdict.reason
    # A method renamed to an ordinary name nobody asked for is still lost.
    plain = after.replace("__iter__", "batches")
    assert check_edit(before, 0, len(before), plain, "Make it a generator.", "python").refused


def test_a_function_replaced_by_the_class_the_instruction_names_is_applied():
    # EditEval/47's reference edit: the function becomes an operator of a new class.
    before = "def total_match(a, b):\n    return a if len(a) <= len(b) else b\n"
    after = ("class MyList:\n    def __init__(self, items):\n        self.items = items\n\n"
             "    def __or__(self, other):\n        return self if len(self.items) <= len(other.items) else other\n")
    asked = 'Make a class MyList and implement this function as an operator "|".'
    assert check_edit(before, 0, len(before), after, asked, "python").status == Status.APPLIED
    assert check_edit(before, 0, len(before), after, "Abstract the code into classes.", "python").status == Status.APPLIED
    assert check_edit(before, 0, len(before), after, "Make it shorter.", "python").refused


def test_a_rename_in_words_of_its_own_is_applied_but_not_a_rename_that_drops_a_neighbour():
    before = "def shout(s):\n    return s.upper()\n\n\ndef whisper(s):\n    return s.lower()\n"
    renamed = before.replace("def shout(", "def yell(")
    assert check_edit(before, 0, len(before), renamed, "Call the first function yell.", "python").status == Status.APPLIED
    dropped = "def yell(s):\n    return s.upper()\n"
    verdict = check_edit(before, 0, len(before), dropped, "Call the first function yell.", "python")
    assert verdict.refused and "whisper" in verdict.reason


def test_renaming_one_of_several_definitions_of_a_name_loses_nothing_else():
    # A style checker's test file defines `a` four times (NoFunEval 047): renaming one, the whole-file
    # count said all four were lost.
    from rewriter.edits.checks.lost_code import lost_definitions
    from rewriter.edits.definitions import definitions
    from rewriter.edits.scopes import SyntaxTree

    before = "def a():\n    print\n\n\ndef a():\n    pass\n\n\ndef a():\n    return 1\n"
    rename = "Rename this function to a more descriptive name."

    def lost(after, instruction=rename):
        old, new = definitions(SyntaxTree(before, "python")), definitions(SyntaxTree(after, "python"))
        return [d.name for d in lost_definitions(old, new, instruction)]

    assert lost(before.replace("def a():\n    pass", "def do_nothing():\n    pass")) == []
    assert lost(before.replace("def a():\n    pass\n", "")) == ["a"]  # one went, one is said lost
    assert lost(before.replace("def a():\n    pass", "def do_nothing():\n    pass"), "Add type hints") == ["a"]


def test_a_method_deleted_when_asked_is_applied(shapes):
    def answer(code, context):
        start, end = span_of(code, "    def perimeter", "return 2 * (self.width")
        return code[:start].rstrip("\n") + "\n"

    first = SHAPES[: SHAPES.index("class Rectangle")].count("\n") + 1
    last = SHAPES[: SHAPES.index("def circle_area")].count("\n") - 2
    assert apply(shapes, Engine(answer), lines=(first, last), instruction="Delete the perimeter method") == 0
    new = shapes.read_text()
    assert "def perimeter" not in new and "def area" in new and "def clamp" in new


def test_force_applies_a_refused_answer(shapes):
    def answer(code, context):
        return 'class Rectangle:\n    """A rectangle."""\n'

    assert apply(shapes, Engine(answer), each="class", instruction="Add docstrings", force=True) == 0
    assert "def __init__" not in shapes.read_text()


def test_the_check_is_cheap_on_a_large_file():
    import time

    body = "".join(f"def function_{i}(value):\n    total = value * {i}\n    return total + {i}\n\n\n"
                   for i in range(2000))  # 10,000 lines
    check = FileIntegrity(body, "python")
    start, end = span_of(body, "def function_1000(", "return total + 1000")
    started = time.perf_counter()
    for _ in range(5):
        verdict = check.check(start, end, body[start:end].replace("total", "result"), "Rename total")
    per_span = (time.perf_counter() - started) / 5
    assert verdict.status == Status.APPLIED
    assert per_span < 0.5, f"{per_span:.3f}s per span on 10,000 lines"
    assert check.check(start, end, body[start:end] + body[:200], "x").status in (Status.REFUSED, Status.STRIPPED)


# ---- /v1/rewrites -----------------------------------------------------------------------------

class FakeRewriter:
    """The two calls Backend.rewrite makes of a Rewriter, answering `answer(code)`."""

    def __init__(self, answer):
        self.answer = answer

    eos_token_id = 0

    def plan(self, code, instruction, language, context, max_tokens):
        return [0] * 10, [], 100

    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]

    def stream(self, request):
        code = request.code
        stats = Stats(output_tokens=5, total_s=0.01, finish_reason="stop")
        yield Progress("```\n", stats)
        yield RewriteResult(text=self.answer(code), answer="", stats=stats)


def service_result(answer, **request):
    from rewriter.serve.backend import Backend
    from rewriter.serve.schema import Limits, parse_rewrite

    backend = Backend.__new__(Backend)  # no model: the fake answers, and tokenizes
    backend.rewriter = backend.tokenizer = FakeRewriter(answer)
    backend.limits, backend.max_prompt_tokens = Limits(), 10_000
    backend.totals = {"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0, "rejected_prediction_drafts": 0}
    body = {"instruction": "Add docstrings", "language": "python", **request}
    if isinstance(body.get("range"), tuple):
        body["range"] = {"start": body["range"][0], "end": body["range"][1]}
    events = list(backend.rewrite(backend.prepare_rewrite(parse_rewrite(body))))
    assert events[-1][0] == "result"
    return events[-1][1]


def test_service_returns_a_refused_answer_as_refused_with_the_reason():
    start, end = span_of(SHAPES, "class Rectangle", "return 2 * (self.width")
    lines = (SHAPES.count("\n", 0, start), SHAPES.count("\n", 0, end))
    docstring_only = 'class Rectangle:\n    """A rectangle."""\n'
    result = service_result(lambda code: docstring_only, text=SHAPES, range=lines)
    assert result["integrity"] == "refused" and result["changed"] is False
    assert result["text"] == SHAPES  # applying `text` changes nothing
    assert "it would lose method Rectangle.__init__" in result["refused"]["reason"]
    assert result["refused"]["text"] == docstring_only

    # With the file as context instead of a range, the same answer is judged within it.
    code = SHAPES[start:end]
    result = service_result(lambda code: docstring_only, text=code, context=SHAPES)
    assert result["integrity"] == "refused" and result["text"] == code


def test_service_strips_an_echo_and_applies_a_good_answer():
    start, end = span_of(SHAPES, "def clamp", "return value")
    lines = (SHAPES.count("\n", 0, start), SHAPES.count("\n", 0, end))
    hinted = SHAPES[start:end].replace("def clamp(value, low, high):", "def clamp(value: int, low: int, high: int) -> int:")
    result = service_result(lambda code: SHAPES[:start] + hinted, text=SHAPES, range=lines, instruction="Add type hints")
    assert result["integrity"] == "stripped" and "lines 1-" in result["stripped"]
    assert result["selection"] == hinted and result["text"] == SHAPES[:start] + hinted
    result = service_result(lambda code: hinted, text=SHAPES, range=lines, instruction="Add type hints")
    assert result["integrity"] == "applied" and "refused" not in result and result["changed"]


def test_definitions_are_still_checked_in_a_file_broken_elsewhere():
    broken_elsewhere = SHAPES + "\nconst = ;\n"
    start, end = span_of(broken_elsewhere, "class Rectangle", "return 2 * (self.width")
    verdict = check_edit(broken_elsewhere, start, end, 'class Rectangle:\n    """Doc."""\n', "Add docstrings", "python")
    assert verdict.refused and "it would lose method Rectangle.__init__" in verdict.reason
    # A rewrite that does not parse is the syntax guard's to judge, not counted as lost definitions.
    verdict = check_edit(SHAPES, start, end, SHAPES[start:end].replace("def area(self):", "def area(self:"),
                         "Add docstrings", "python")
    assert not verdict.refused


MODULE = ("import json\nimport os\n\n\ndef load(path):\n    return json.load(open(path))\n\n\n"
          "def save(path, data):\n    json.dump(data, open(path, 'w'))\n\n\n"
          "def dead():\n    return os.getcwd()\n")


@pytest.mark.parametrize("answer, instruction, verdict", [
    # A merge's answer that kept the lines it changed and nothing else (NoFunEval 005 on the 1.5B).
    ("import json\n", "Remove the unused import.", Status.REFUSED),
    ("import json\n", "Delete the functions load, save and dead.", Status.APPLIED),  # named, they may go
    (MODULE.replace("\n\n\ndef dead():\n    return os.getcwd()\n", "\n"), "Remove dead code.", Status.APPLIED),  # a minority
    ("", "Delete this.", Status.REFUSED),  # three definitions, none named: more than half of them unasked
])
def test_a_removal_instruction_lets_go_what_it_names_and_a_minority_of_the_rest(answer, instruction, verdict):
    assert FileIntegrity(MODULE, "python").check(0, len(MODULE), answer, instruction).status == verdict


CLASS = ("class Store:\n    def load(self):\n        return 1\n\n    def save(self):\n        return 2\n\n"
         "    def flush(self):\n        return 3\n\n    def close(self):\n        return 4\n")


def test_naming_a_class_that_stays_does_not_let_its_methods_go():
    integrity = FileIntegrity(CLASS, "python")
    kept = "class Store:\n    def load(self):\n        return 1\n"
    verdict = integrity.check(0, len(CLASS), kept, "In class Store, remove the dead code.")
    assert verdict.refused and "Store.save" in verdict.reason
    # the class named goes, and what it holds with it
    assert integrity.check(0, len(CLASS), "", "Remove the class Store.").status == Status.APPLIED
    # a method named goes
    assert integrity.check(0, len(CLASS), CLASS.replace("\n    def close(self):\n        return 4\n", ""),
                           "In class Store, remove close.").status == Status.APPLIED


def test_a_removal_instruction_lets_the_one_definition_of_a_span_go():
    start = MODULE.index("def dead")
    assert FileIntegrity(MODULE, "python").check(start, len(MODULE), "", "Delete this function.").status == Status.APPLIED


def test_a_removal_instruction_empties_a_minority_of_bodies_not_all():
    def emptied(*names):
        text = MODULE
        for name in names:
            body = text[text.index(f"def {name}("):].split("\n", 2)[1]
            text = text.replace(body, "    pass", 1)
        return text

    integrity = FileIntegrity(MODULE, "python")
    assert integrity.check(0, len(MODULE), emptied("dead"), "Remove the os call.").status == Status.APPLIED
    verdict = integrity.check(0, len(MODULE), emptied("load", "save", "dead"), "Remove the file access.")
    assert verdict.status == Status.REFUSED and "body" in verdict.reason


# An answer that writes a comment standing for code ("# ... existing code ...") in place of the code.
TYPED = "from typing import List\n\n\ndef total(values: List[int]) -> int:\n    return sum(values)\n"


@pytest.mark.parametrize("elision", ["# ... existing code ...", "# ...", "// ... rest of the code unchanged",
                                     "# rest of the file unchanged", "# … existing code …"])
def test_an_answer_that_writes_an_elision_in_place_of_code_is_refused(elision):
    answer = TYPED.replace("from typing import List", elision)
    verdict = FileIntegrity(TYPED, "python").check(0, len(TYPED), answer, "Add a docstring to total.")
    assert verdict.status == Status.REFUSED and repr(elision) in verdict.reason


@pytest.mark.parametrize("comment", ["# Use the existing total", "# Keep the rest of the values", "# TODO: more..."])
def test_ordinary_comments_and_the_file_s_own_markers_are_no_elision(comment):
    answer = TYPED.replace("    return sum(values)", f"    {comment}\n    return sum(values)")
    assert FileIntegrity(TYPED, "python").check(0, len(TYPED), answer, "Comment total.").status == Status.APPLIED
    kept = TYPED + "\n# ... existing code ...\n"
    edited = kept.replace("return sum(values)", "return sum(values, 0)")
    assert FileIntegrity(kept, "python").check(0, len(kept), edited, "Start the sum at 0.").status == Status.APPLIED
