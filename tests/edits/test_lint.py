"""The lint check (rewriter/edits/checks/lint.py) in the edit pipeline, and the session's second try for an
answer the lint check or the syntax guard refused."""
from __future__ import annotations

import io
import json

from rewriter.apply.batch import apply_command
from rewriter.apply.plans import Options
from rewriter.edits.checks.integrity import Status
from rewriter.edits.checks.lint import FileLint, lint_errors
from rewriter.edits.pipeline import Refusal, TargetEdit
from rewriter.edits.session import EditSession, Finished
from rewriter.edits.target import Target
from tests.helpers.samples import SHAPES
from tests.helpers.scripted import ScriptedEngine

UNIT = "def unit():\n    return Circle(1)\n"


def unit_edit(text: str = SHAPES, grammar: str | None = "python") -> TargetEdit:
    start = text.index(UNIT)
    return TargetEdit(Target.of_span(text, start, start + len(UNIT)), "Use a bigger circle", grammar)


def unit_line(text: str = SHAPES) -> int:
    return text[: text.index(UNIT)].count("\n") + 1


def test_only_pyflakes_error_messages_count():
    source = ("import os\nimport os\n__all__ = ['gone']\nx = 1\n"
              "def f():\n    print(x)\n    x = 2\n    return missing\n")
    found = {(error.kind, error.name) for error in lint_errors(source) or []}
    # The unused and redefined import are style: not counted.
    assert found == {("undefined name in __all__", "gone"), ("local variable used before assignment", "x"),
                     ("undefined name", "missing")}
    assert lint_errors("def f(:\n") is None  # does not compile: no verdict


def test_a_new_undefined_name_is_refused_naming_it_and_its_line():
    edit = unit_edit()
    answer = "def unit():\n    return Circle(radius_default)\n"
    decision = edit.finish(answer, "stop")
    assert decision.status == Status.REFUSED and decision.refusal == Refusal.LINT and decision.may_force
    assert decision.text == UNIT and decision.refused_text == answer
    assert f"undefined name 'radius_default' at line {unit_line() + 1}" in decision.reason
    # --force applies it anyway, saying what it overrode.
    forced = edit.finish(answer, "stop", force=True)
    assert forced.status == Status.APPLIED and forced.forced and forced.text == answer
    assert "radius_default" in forced.reason


def test_a_local_used_before_assignment_is_refused():
    answer = "def unit():\n    print(math)\n    math = 2\n    return Circle(math)\n"
    decision = unit_edit().finish(answer, "stop")
    assert decision.refusal == Refusal.LINT and "local variable used before assignment 'math'" in decision.reason


def test_an_undefined_name_the_file_already_had_is_not_new():
    text = SHAPES + "\n\ndef legacy():\n    return helper()\n"
    answer = "def unit():\n    return helper(Circle(1))\n"
    assert unit_edit(text).finish(answer, "stop").status == Status.APPLIED
    assert unit_edit().finish(answer, "stop").refusal == Refusal.LINT  # where it is new
    # The same name in a new kind of error is new.
    assert FileLint(text).new_errors(0, 0, "__all__ = ['helper']\n")[0].kind == "undefined name in __all__"


def test_names_defined_elsewhere_in_the_file_and_builtins_are_fine():
    answer = "def unit():\n    return Circle(math.sqrt(len(str(Circle))))\n"
    assert unit_edit().finish(answer, "stop").status == Status.APPLIED


def test_a_file_with_a_star_import_is_not_judged_for_names():
    # pyflakes cannot tell an undefined name from a star-imported one, so neither can the check.
    text = "from math import *\n\n\n" + SHAPES
    answer = "def unit():\n    return Circle(tau)\n"
    assert unit_edit(text).finish(answer, "stop").status == Status.APPLIED
    assert unit_edit().finish(answer, "stop").refusal == Refusal.LINT


def test_other_languages_and_files_that_did_not_compile_are_unaffected():
    text = "function unit() {\n  return circle(1);\n}\n"
    edit = TargetEdit(Target.whole(text), "Use a bigger circle", "javascript")
    assert edit.integrity.lint is None
    assert edit.finish("function unit() {\n  return circle(undefinedThing);\n}\n", "stop").status == Status.APPLIED
    broken = SHAPES + "\nprint 'python 2'\n"
    assert unit_edit(broken).finish("def unit():\n    return Circle(nowhere)\n", "stop").status == Status.APPLIED


BAD, FIXED = "def unit():\n    return Circle(radius_default)\n", "def unit():\n    return Circle(2)\n"


def session_events(rules: list[dict], **run_options) -> tuple[list, Finished, ScriptedEngine]:
    engine = ScriptedEngine(rules)
    requests = []
    stream = engine.stream
    engine.stream = lambda request: (requests.append(request), stream(request))[1]  # type: ignore[method-assign]
    start = SHAPES.index(UNIT)
    session = EditSession(engine, Target.of_span(SHAPES, start, start + len(UNIT)), "Use a bigger circle",
                          "python", grammar="python")
    events = list(session.run(**run_options))
    finished = events[-1]
    assert isinstance(finished, Finished)
    return requests, finished, engine


def test_a_refused_answer_gets_one_more_try_with_the_reason():
    requests, finished, _ = session_events([
        {"instruction": "failed a check", "replace": [["Circle(1)", "Circle(2)"]]},
        {"instruction": "bigger", "replace": [["Circle(1)", "Circle(radius_default)"]]}])
    assert [r.instruction for r in requests][0] == "Use a bigger circle"
    assert "Your previous answer failed a check: " in requests[1].instruction
    assert "'radius_default' at line" in requests[1].instruction and requests[1].code == requests[0].code
    assert finished.decision.status == Status.APPLIED and finished.decision.text == FIXED
    assert finished.restart and "radius_default" in finished.retried
    assert finished.hunks and finished.hunks[0].lines == ("    return Circle(2)\n",)


def test_a_second_bad_answer_is_refused_with_its_reason_and_nothing_applied():
    requests, finished, _ = session_events([
        {"instruction": "failed a check", "replace": [["Circle(1)", "Circle(still_missing)"]]},
        {"instruction": "bigger", "replace": [["Circle(1)", "Circle(radius_default)"]]}])
    assert len(requests) == 2
    decision = finished.decision
    assert decision.refused and decision.refusal == Refusal.LINT and "still_missing" in decision.reason
    assert finished.restart and finished.hunks == [] and decision.text == UNIT


def test_a_syntax_refusal_is_retried_and_a_forced_or_fine_answer_is_not():
    requests, finished, _ = session_events([
        {"instruction": "failed a check", "replace": [["Circle(1)", "Circle(2)"]]},
        {"instruction": "bigger", "replace": [["Circle(1)", "Circle(2"]]}])
    assert "does not parse" in requests[1].instruction and finished.decision.text == FIXED
    bad_then_fixed = [{"instruction": "failed a check", "replace": [["Circle(1)", "Circle(2)"]]},
                      {"instruction": "bigger", "replace": [["Circle(1)", "Circle(2"]]}]
    requests, finished, _ = session_events(bad_then_fixed, allow_syntax_errors=True)
    assert len(requests) == 1 and finished.decision.text == "def unit():\n    return Circle(2\n"
    requests, finished, _ = session_events([{"instruction": "bigger", "replace": [["Circle(1)", "Circle(2)"]]}])
    assert len(requests) == 1 and not finished.restart and not finished.retried


def test_rewriter_apply_refuses_after_the_second_try_and_force_applies(tmp_path):
    path = tmp_path / "shapes.py"
    path.write_text(SHAPES)
    engine = ScriptedEngine([{"instruction": "bigger", "replace": [["Circle(1)", "Circle(radius_default)"]]}])

    def apply(**options) -> dict:
        out = io.StringIO()
        lines = (unit_line(), unit_line() + 1)
        apply_command([str(path)], Options("Use a bigger circle", lines=lines, write=True, **options),
                      lambda: engine, json_output=True, stdout=out, stderr=io.StringIO(), say=lambda message: None)
        return json.loads(out.getvalue())["files"][0]

    [span] = apply()["spans"]
    assert span["status"] == "refused" and "undefined name 'radius_default'" in span["reason"]
    assert "--force applies it anyway" in span["reason"] and path.read_text() == SHAPES
    assert apply(force=True)["status"] == "written" and "Circle(radius_default)" in path.read_text()


# "Fix indent." on a file that does not compile: pyflakes cannot read it, so the names it binds
# (read by tree-sitter) stand for what it had.
UNINDENTED = "from typing import List\n\n\ndef total(xs: List[int]) -> int:\n  n = 0\n    for x in xs:\n        n += x\n    return n\n"
INDENTED = "def total(xs: List[int]) -> int:\n    n = 0\n    for x in xs:\n        n += x\n    return n\n"


def fix_indent(text: str) -> TargetEdit:
    assert lint_errors(text) is None  # the original does not compile
    return TargetEdit(Target.whole(text), "Fix indent.", "python")


def test_an_import_lost_from_a_file_that_did_not_compile_is_refused_naming_it():
    decision = fix_indent(UNINDENTED).finish(INDENTED, "stop")
    assert decision.refused and decision.refusal == Refusal.LINT
    assert decision.reason == "the rewrite would fail when run: undefined name 'List' at line 1"


def test_a_fixed_file_that_keeps_its_bindings_is_applied():
    answer = "from typing import List\n\n\n" + INDENTED
    assert fix_indent(UNINDENTED).finish(answer, "stop").status == Status.APPLIED


def test_a_name_the_file_that_did_not_compile_never_bound_may_be_its_own():
    text = UNINDENTED.replace("return n", "return foo(n)")
    answer = "from typing import List\n\n\n" + INDENTED.replace("return n", "return foo(n)")
    assert fix_indent(text).finish(answer, "stop").status == Status.APPLIED
    # Nor a name it binds in another scope only, still bound there: it may have been undefined where used.
    text = UNINDENTED + "\n\ndef report():\n    return n\n"
    assert fix_indent(text).finish(answer.replace("foo(n)", "n") + "\n\ndef report():\n    return n\n",
                                   "stop").status == Status.APPLIED


def test_a_lost_parameter_or_assignment_of_a_file_that_did_not_compile_is_refused():
    lint = FileLint(UNINDENTED)
    lost_parameter = "from typing import List\n\n\n" + INDENTED.replace("xs: List[int]", "")
    assert [e.name for e in lint.new_errors(0, len(UNINDENTED), lost_parameter)] == ["xs"]
    lost_assignment = "from typing import List\n\n\n" + INDENTED.replace("    n = 0\n", "")
    assert [(e.kind, e.name) for e in lint.new_errors(0, len(UNINDENTED), lost_assignment)] == [
        ("undefined name", "n")]
