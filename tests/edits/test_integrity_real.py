"""Edit integrity on the embedded model: failures seen with it, reproduced on small files.

Greedy output is deterministic, so each answer below is the one the model gives; the test checks
that `rewriter apply` strips or refuses it and the file keeps every definition.
"""
from __future__ import annotations

import json

import pytest

from rewriter.apply.batch import apply_command
from rewriter.apply.plans import Options
from rewriter.edits.checks.syntax import compiles
from rewriter.edits.definitions import definitions
from rewriter.edits.options import EditOptions
from rewriter.edits.scopes import SyntaxTree
from tests.helpers.samples import INTRANGES

pytestmark = pytest.mark.real_model

RECTANGLE = '''class Rectangle:
    def __init__(self, width, height):
        self.width = width
        self.height = height

    def area(self):
        return self.width * self.height
'''

STORE = '''import json


def load(path):
    with open(path) as handle:
        return json.load(handle)


class Store:
    def __init__(self, path):
        self.path = path
        self.items = load(path)

    def get(self, key):
        return self.items.get(key)

    def put(self, key, value):
        self.items[key] = value
        self.save()

    def save(self):
        with open(self.path, "w") as handle:
            json.dump(self.items, handle)
'''


def apply_json(path, rewriter, capsys, **options) -> tuple[int, dict]:
    code = apply_command([str(path)], Options(write=True, **options), lambda: rewriter, json_output=True)
    return code, json.loads(capsys.readouterr().out)


def names(text: str) -> list[str]:
    return [d.name for d in definitions(SyntaxTree(text, "python"))]


def test_docstrings_that_replace_a_class_body_are_refused_and_asked_again(tmp_path, embedded_rewriter, capsys):
    # The "Add docstrings" preset on a small class: the model answers with the class and a
    # docstring only, __init__ and area gone.
    path = tmp_path / "rectangle.py"
    path.write_text(RECTANGLE)
    code, report = apply_json(path, embedded_rewriter, capsys, instruction="Add docstrings", each="class")
    span = report["files"][0]["spans"][0]
    lost = "it would lose method Rectangle.__init__, method Rectangle.area"
    # Refused, then asked once more, told so: the second answer is refused too or keeps every method.
    assert lost in span.get("retried", "") or lost in span["reason"], span
    if span["status"] == "refused":
        assert code == 1 and path.read_text() == RECTANGLE
    else:
        written = path.read_text()
        assert names(written) == names(RECTANGLE)
        assert all(d.body == "full" for d in definitions(SyntaxTree(written, "python")))


def test_a_method_asked_to_stay_as_it_is_does_not_come_back_as_the_whole_file(tmp_path, embedded_rewriter, capsys):
    # `--lines 17-19 --expand -i "Keep the code exactly as it is"` on a method: the model used to
    # answer with the whole file (spliced in, it would nest the module inside the class), which
    # the integrity check stripped. With the answer's opening prefilled it now answers with the
    # method alone. The strip itself is tested on such answers in test_integrity.py.
    # No branches: an unchanged answer's branches (on by default) would make it change by design
    # (the 1.5B then drops `self.save()`; the 0.5B changes it too), and what is tested is the first answer.
    path = tmp_path / "store.py"
    path.write_text(STORE)
    code, report = apply_json(path, embedded_rewriter, capsys, instruction="Keep the code exactly as it is",
                              lines=(17, 19), expand=True, edit=EditOptions(branches=0))
    span = report["files"][0]["spans"][0]
    assert code == 0 and span["status"] == "unchanged", span
    assert path.read_text() == STORE
    assert names(path.read_text()) == names(STORE)


def test_docstrings_on_idna_intranges_never_write_a_function_without_its_body(tmp_path, embedded_rewriter, capsys):
    # `rewriter apply intranges.py --each function -i "Add a one-line docstring to each function."
    # --write`: for `_encode_range` the model writes the docstring of the function above it and
    # no body; stripped as an echo, that left the header alone, and the file was written.
    path = tmp_path / "intranges.py"
    path.write_text(INTRANGES)
    code, report = apply_json(path, embedded_rewriter, capsys, instruction="Add a one-line docstring to each function.",
                              each="function")
    spans = {span["name"]: span for span in report["files"][0]["spans"]}
    encode_range = spans["_encode_range"]
    # Refused, then asked once more, told so: refused again, or an answer that keeps the body.
    lost = "it would lose the body of function _encode_range"
    assert lost in encode_range.get("retried", "") or lost in encode_range["reason"], encode_range
    assert code == (1 if any(span["status"] == "refused" for span in spans.values()) else 0)
    written = path.read_text()
    assert compiles(written)
    assert all(d.body == "full" for d in definitions(SyntaxTree(written, "python")))
    assert names(written) == names(INTRANGES)
