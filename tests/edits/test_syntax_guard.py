"""A rewrite that leaves a definition without its body, or a Python file that no longer compiles,
is never applied (issue 24).

tree-sitter-python parses `def f():` with nothing under it, and Go's grammar a `func` without a
body, so the syntax guard of a Python file that compiled is Python's own compiler, and a header
that lost its body is a lost definition in every language.
"""
from __future__ import annotations

import json
import sys

import pytest

from rewriter.apply.batch import apply_command
from rewriter.apply.plans import Options
from rewriter.bench.integrity_bench import audit
from rewriter.decoding.decode import Stats
from rewriter.decoding.rewrite import Progress, RewriteResult
from rewriter.edits.checks.syntax import compiles
from rewriter.edits.definitions import definitions
from rewriter.edits.pipeline import Refusal, TargetEdit
from rewriter.edits.scopes import SyntaxTree
from rewriter.edits.target import Target
from tests.helpers.oracles import check_edit, syntax_error_line
from tests.helpers.samples import INTRANGES

DOCSTRING_INSTRUCTION = "Add a one-line docstring to each function."
ENCODE = INTRANGES[INTRANGES.index("def _encode_range"): INTRANGES.index("\n\n\ndef _decode_range") + 1]
# The docstring of intranges_from_list (lines 12-17 of the file).
COPIED_DOCSTRING = INTRANGES[INTRANGES.index('    """Represent'): INTRANGES.index("\n\n    sorted_list") + 1]
# What the embedded model answered for `_encode_range` (float32 and int8-fbgemm alike): its header,
# then another function's docstring and no body.
MODEL_ANSWER = ENCODE.splitlines(keepends=True)[0] + COPIED_DOCSTRING


def encode_edit(answer_instruction: str = DOCSTRING_INSTRUCTION) -> TargetEdit:
    start = INTRANGES.index(ENCODE)
    return TargetEdit(Target.of_span(INTRANGES, start, start + len(ENCODE)), answer_instruction, "python")


def test_tree_sitter_accepts_the_emptied_file_and_python_does_not():
    emptied = INTRANGES.replace(ENCODE, ENCODE.splitlines(keepends=True)[0])
    assert syntax_error_line(emptied, "python") is None  # why the old guard let it through
    assert compiles(INTRANGES) and not compiles(emptied)


def test_the_model_answer_is_refused_for_the_lost_body_and_would_not_compile():
    edit = encode_edit()
    decision = edit.finish(MODEL_ANSWER, "stop")
    assert decision.refused and decision.refusal == Refusal.INTEGRITY and decision.text == ENCODE
    assert decision.reason == ("it would lose the body of function _encode_range "
                               "(after it removed the answer's copy of lines 12-17 of the file)")
    assert decision.refused_text == ENCODE.splitlines(keepends=True)[0]
    # Forced past the integrity check, Python's compiler still refuses the header alone.
    forced = edit.finish(MODEL_ANSWER, "stop", force=True)
    assert forced.refused and forced.refusal == Refusal.SYNTAX
    assert "expected an indented block after function definition on line 32" in forced.reason
    assert forced.refused_text == ENCODE.splitlines(keepends=True)[0]


def test_the_cli_writes_the_docstrings_it_may_and_never_a_file_that_does_not_compile(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "intranges.py"
    path.write_text(INTRANGES)

    class Engine:  # the model's answers: the emptied body for _encode_range, a docstring elsewhere
        def close(self):
            pass

        def stream(self, request):
            text = request.code
            stats = Stats(output_tokens=10, total_s=0.01, finish_reason="stop")
            yield Progress("```\n", stats)
            answer = MODEL_ANSWER if text.startswith("def _encode_range") else text
            if text.startswith("def _decode_range"):
                answer = text.replace(":\n", ':\n    """Unpack a range."""\n', 1)
            yield RewriteResult(text=answer, answer="", stats=stats)

    options = Options(instruction=DOCSTRING_INSTRUCTION, write=True, each="function")
    code = apply_command([str(path)], options, lambda: Engine(), json_output=True,
                         say=lambda message: print(message, file=sys.stderr))
    report = json.loads(capsys.readouterr().out)
    spans = {span["name"]: span for span in report["files"][0]["spans"]}
    assert code == 1  # a refused span is not success
    assert spans["_encode_range"]["status"] == "refused"
    assert "it would lose the body of function _encode_range" in spans["_encode_range"]["reason"]
    assert "-    return (start << 32) | end" in spans["_encode_range"]["refused_diff"]
    assert spans["_decode_range"]["status"] == "changed"
    written = path.read_text()
    assert compiles(written) and ENCODE in written and '"""Unpack a range."""' in written


@pytest.mark.parametrize("language, before, after, instruction, lost", [
    # Go accepts a func without a body (a declaration): the rewrite left the header alone.
    ("go", "package m\n\nfunc Add(a, b int) int {\n\treturn a + b\n}\n", "package m\n\nfunc Add(a, b int) int\n",
     "Add a comment", True),
    # An emptied block: damage, unless the instruction asks to remove something.
    ("go", "package m\n\nfunc Log() {\n\tprintln(1)\n}\n", "package m\n\nfunc Log() {}\n", "Add a comment", True),
    ("go", "package m\n\nfunc Log() {\n\tprintln(1)\n}\n", "package m\n\nfunc Log() {}\n", "Remove the prints", False),
    ("java", "class A {\n  int f() { return 1; }\n}\n", "class A {\n  int f();\n}\n", "Tidy", True),
    ("java", "abstract class A {\n  int f() { return 1; }\n}\n", "abstract class A {\n  abstract int f();\n}\n",
     "Make f abstract", False),
    ("javascript", "const f = (x) => {\n  return x + 1;\n};\n", "const f = (x) => x + 1;\n", "Simplify", False),
    ("rust", "fn f() -> u8 {\n    1\n}\n", "fn f() -> u8 {\n}\n", "Add docs", True),
    # Python: a body of `pass`, `...` or a docstring alone does nothing; a docstring may replace `pass`.
    ("python", "def f():\n    return 1\n", 'def f():\n    """Return one."""\n', "Add a docstring", True),
    ("python", "def f():\n    return 1\n", "def f():\n    pass\n", "Remove the implementation", False),
    ("python", "class Oops(Exception):\n    pass\n", 'class Oops(Exception):\n    """Raised on oops."""\n',
     "Add a docstring", False),
    # A renamed function is paired with its new name.
    ("python", "def f():\n    return 1\n\n\ndef g():\n    return 2\n", "def count():\n\n\ndef g():\n    return 2\n",
     "Rename f to count", True),
])
def test_a_header_without_its_body_is_a_lost_definition_in_every_language(language, before, after, instruction,
                                                                           lost):
    verdict = check_edit(before, 0, len(before), after, instruction, language)
    assert verdict.refused is lost, verdict
    if lost:
        assert "it would lose the body of " in verdict.reason


@pytest.mark.parametrize("answer, reason", [
    ("def area(width, width):\n    return width * width\n", "duplicate argument 'width'"),
    ("def area(width, height):\n    nonlocal width\n    return width * height\n", "parameter and nonlocal"),
    ("def area(width, height):\n    return width * height\nreturn 0\n", "'return' outside function"),
])
def test_python_files_are_judged_by_python_s_compiler(answer, reason):
    text = "def area(width, height):\n    return width * height\n"
    assert syntax_error_line(text[:0] + answer, "python") is None  # tree-sitter sees nothing wrong
    decision = TargetEdit(Target.whole(text), "Tidy", "python").finish(answer, "stop")
    assert decision.refused and decision.refusal == Refusal.SYNTAX and reason in decision.reason


def test_warnings_are_no_errors_and_python_2_files_keep_tree_sitter_s_rule():
    text = "def pattern():\n    return 1\n"
    warned = TargetEdit(Target.whole(text), "Tidy", "python").finish('def pattern():\n    return "\\d+"\n', "stop")
    assert not warned.refused  # an invalid escape is a SyntaxWarning, not an error
    python2 = 'def greet(name):\n    print "hello", name\n'
    assert not compiles(python2) and syntax_error_line(python2, "python") is None
    edit = TargetEdit(Target.whole(python2), "Tidy", "python")
    assert not edit.finish('def greet(name):\n    print "hi", name\n', "stop").refused
    broken = edit.finish('def greet(name:\n    print "hi", name\n', "stop")
    assert broken.refused and broken.refusal == Refusal.SYNTAX


def test_the_integrity_bench_audit_counts_a_lost_body_and_a_file_that_no_longer_compiles():
    emptied = INTRANGES.replace(ENCODE, ENCODE.splitlines(keepends=True)[0])
    found = audit(INTRANGES, emptied, "python", DOCSTRING_INSTRUCTION)
    assert "lost the body of _encode_range" in found
    assert any(f.startswith("does not compile: ") for f in found)
    assert audit(INTRANGES, INTRANGES.replace("    return (start", '    """Pack."""\n    return (start'),
                 "python", DOCSTRING_INSTRUCTION) == []
    # Go: a header alone parses, and the audit still counts the body that went.
    go = "package m\n\nfunc Add(a, b int) int {\n\treturn a + b\n}\n"
    assert audit(go, "package m\n\nfunc Add(a, b int) int\n", "go", "Add a comment") == ["lost the body of Add"]


def test_definitions_know_their_bodies():
    text = ('def f():\n\n\ndef g():\n    pass\n\n\nclass C:\n    """Doc."""\n\n\n'
            'def h():\n    """Doc."""\n    return 1\n')
    bodies = {d.name: d.body for d in definitions(SyntaxTree(text, "python"))}
    assert bodies == {"f": "none", "g": "empty", "C": "empty", "h": "full"}


def test_a_class_that_lost_its_methods_is_named_by_its_methods_alone():
    text = "class Rect:\n    def area(self):\n        return 1\n"
    verdict = check_edit(text, 0, len(text), 'class Rect:\n    """A rectangle."""\n', "Add docstrings", "python")
    assert verdict.refused and verdict.reason == "it would lose method Rect.area"


# ---- an instruction for documentation alone leaves the code as it is ----------------------

# NoFunEval 058: asked for a docstring, the model also changed the test's data into the string
# of the test above it (the integrity bench's last damage).
FOUND = '''    def test_found_data_structure(test):
        find(
            string = "ksdkjnsdf;ajndflkj; x = {\\"a\\": 1}\\n ksjndfkjsd",
            name = "x",
            found = ok,
            not_found = fail("should be found"),
        )
'''
MISSING = '''    def test_missing_data_structure(test):
        find(
            string = "ksdkjnsdf;ajndflkj",
            name = "x",
            found = fail("shouldn't be found"),
            not_found = ok,
        )
'''


@pytest.mark.parametrize("instruction, documentation_only", [
    ("Add a one-line docstring to this function.", True),
    ("Add docstrings", True),
    ("Document this class", True),
    ("Add comments explaining the loop", True),
    ("Add docstrings and type hints", False),
    ("Write a docstring, then fix the bug", False),
    ("Add type hints", False),
    ("Simplify this function", False),
])
def test_documentation_only_instructions(instruction, documentation_only):
    from rewriter.edits.checks.documentation_only import instruction_asks_documentation_only

    assert instruction_asks_documentation_only(instruction) is documentation_only


def test_a_docstring_request_that_also_changes_code_is_refused():
    text = "class Test:\n" + MISSING + "\n" + FOUND
    start = text.index(FOUND)
    changed = FOUND.replace(":\n", ':\n        """Find the data structure."""\n', 1).replace(
        '"ksdkjnsdf;ajndflkj; x = {\\"a\\": 1}\\n ksjndfkjsd"', '"ksdkjnsdf;ajndflkj"')
    verdict = check_edit(text, start, len(text), changed, "Add a one-line docstring to this function.", "python")
    assert verdict.refused
    assert verdict.reason == ("the instruction asks for documentation only, and it would change code "
                              "(first at 'string = \"ksdkjnsdf;ajndflkj\",')")
    # Docstrings, comments, `pass` given way to a docstring and a new layout are no code change.
    documented = FOUND.replace(":\n", ':\n        """Find the data structure."""\n', 1).replace(
        "        find(\n", "        # the whole string\n        find(\n")
    assert not check_edit(text, start, len(text), documented, "Add docstrings", "python").refused
    stub = "def later():\n    pass\n"
    assert not check_edit(stub, 0, len(stub), 'def later():\n    """Done later."""\n', "Add docstrings", "python").refused
    # Asked for more than documentation, the same change is applied.
    assert not check_edit(text, start, len(text), changed, "Add a docstring and use the short string", "python").refused
