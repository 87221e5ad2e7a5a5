"""The lint check's short way (rewriter/edits/checks/lint_outline.py): pyflakes on outlines of the file,
the bodies the edit left as they were cut, must find every new error the whole file gives, at the
same line; where it cannot be sure, the whole file is read."""
from __future__ import annotations

from pathlib import Path

import pytest

from rewriter.edits.checks import lint
from rewriter.edits.checks.lint import FileLint
from rewriter.edits.scopes import SyntaxTree
from rewriter.edits.snippets.merge import Merged, ToModel, merge_snippet

FILE = '''import os
from typing import Callable

LIMIT = 3
pending: int


def helper(value):
    return value * LIMIT


class Shape:
    """A shape."""

    def area(self):
        return helper(2)

    @property
    def name(self):
        return os.path.basename("shape")


def counted(items: list, check: Callable = helper):
    total = 0
    for item in items:
        total += helper(item)
    return total


def uses_pending():
    return pending


def legacy():
    return missing_before
'''


def judged(text: str, old: str, new: str, lints: tuple[FileLint, FileLint] | None = None) -> tuple[list, list, bool]:
    """The new errors the short way and the whole file give for `old` replaced by `new` in
    `text`, and whether the short way read outlines (it did not hand over to the whole file).
    `lints`: the short and the whole way's checks of `text`, where the caller keeps them."""
    start = text.index(old)
    end = start + len(old)
    merged = text[:start] + new + text[end:]
    short, whole = lints or (FileLint(text, SyntaxTree(text, "python")), FileLint(text))
    parsed = SyntaxTree(merged, "python")
    outlined = short._outlined(start, end, new, parsed) is not None
    return short.new_errors(start, end, new, parsed), whole.new_errors(start, end, new), outlined


def test_a_changed_body_is_read_in_the_outline_and_its_new_name_found_at_its_line():
    old = "    return value * LIMIT\n"
    fine, whole, outlined = judged(FILE, old, "    return value * LIMIT + 1\n")
    assert fine == whole == [] and outlined
    found, whole, outlined = judged(FILE, old, "    return value * LIMT\n")
    assert found == whole and outlined
    assert [(error.kind, error.name, error.line) for error in found] == [("undefined name", "LIMT", 9)]


def test_an_error_the_file_had_in_the_edited_function_is_not_new():
    found, whole, outlined = judged(FILE, "    return missing_before\n", "    return [missing_before]\n")
    assert found == whole == [] and outlined


@pytest.mark.parametrize("old, new, name", [
    # a function renamed: the unchanged ones that call it (cut in the outline) fail
    ("def helper(value):", "def helped(value):", "helper"),
    # a module name gone
    ("LIMIT = 3\n", "", "LIMIT"),
    # a name that only had a value now has none (an annotation alone defines nothing)
    ("LIMIT = 3\n", "LIMIT: int\n", "LIMIT"),
    # an import removed: the method that used it fails
    ("import os\n", "", "os"),
])
def test_a_module_name_gone_is_found_in_the_functions_the_edit_left_alone(old, new, name):
    found, whole, _ = judged(FILE, old, new)
    assert found == whole and ("undefined name", name) in {(error.kind, error.name) for error in found}


def test_a_new_module_name_an_unchanged_function_assigns_after_reading_is_found():
    text = FILE + "\n\ndef shadowing():\n    print(extra)\n    extra = 2\n    return extra\n"
    found, whole, _ = judged(text, "LIMIT = 3\n", "LIMIT = 3\nextra = 1\n")
    assert found == whole
    assert [(error.kind, error.name) for error in found] == [("local variable used before assignment", "extra")]


def test_a_new_import_the_cut_bodies_do_not_read_keeps_the_outline():
    found, whole, outlined = judged(FILE, "import os\n", "import os\nimport sys\n")
    assert found == whole == [] and outlined


def test_global_and_nonlocal_statements_read_the_whole_file():
    text = FILE + "\n\ndef set_pending():\n    global pending\n    pending = 1\n"
    found, whole, outlined = judged(text, "    return value * LIMIT\n", "    return value * LIMT\n")
    assert found == whole and found[0].name == "LIMT" and not outlined
    # the word in a comment or a string is no statement
    text = FILE + "\n\n# global state lives elsewhere\nNOTE = 'nonlocal'\n"
    assert judged(text, "    return value * LIMIT\n", "    return value * LIMT\n")[2]


def test_pyflakes_doctests_read_the_whole_file(monkeypatch):
    monkeypatch.setattr(lint.Checker, "__init__", _with_doctest(lint.Checker.__init__))
    found, whole, outlined = judged(FILE, "    return value * LIMIT\n", "    return value * LIMT\n")
    assert found == whole and not outlined


def _with_doctest(init):
    def with_doctest(self, tree, filename="(none)", builtins=None, withDoctest=False):
        init(self, tree, filename, builtins, True)
    return with_doctest


@pytest.mark.parametrize("name", ["snippets/merge.py", "snippets/lines.py", "checks/lint.py"])
def test_every_function_of_a_real_file_changed_renamed_or_removed_gives_what_the_whole_file_gives(name):
    text = (Path(lint.__file__).parent.parent / name).read_text()
    tree = SyntaxTree(text, "python")
    functions = _functions(tree.root)
    assert len(functions) >= 8
    lints = (FileLint(text, tree), FileLint(text))  # the file's own errors found once
    outlined = 0
    for node in functions:
        old = text[node.start_byte:node.end_byte]  # the file is ASCII: bytes are characters
        name = node.child_by_field_name("name").text.decode()
        header, _, body = old.partition(":\n")
        indent = body[:len(body) - len(body.lstrip())]
        edits = [header + ":\n" + indent + "print(undefined_here)\n" + body,  # a new undefined name
                 header + ":\n" + indent + "return " + name + "\n",  # a new body
                 "",  # removed
                 old.replace(f"def {name}(", f"def {name}_renamed(", 1)]
        for new in edits:
            found, whole, used = judged(text, old, new, lints)
            assert found == whole, (name, new[:60])
            outlined += used
    assert outlined >= len(functions)  # the short way is taken where it can be


def _functions(root) -> list:
    """The top-level functions and the methods of top-level classes."""
    found = []
    for node in root.children:
        node = node.child_by_field_name("definition") if node.type == "decorated_definition" else node
        if node.type == "function_definition":
            found.append(node)
        elif node.type == "class_definition":
            found += _functions(node.child_by_field_name("body"))
    return found


def test_a_merge_into_a_long_file_bringing_an_undefined_name_goes_to_the_model_read_in_outline(monkeypatch):
    body = "".join(f"    value_{k} = argument * {k}\n" for k in range(8))
    text = "\n".join(f"def function_{n}(argument):\n{body}    return value_7\n" for n in range(100))
    snippet = "# ... existing code ...\n\ndef function_50(argument):\n    # ...\n    return value_{}\n\n" \
              "# ... existing code ...\n"
    reads = []
    whole = lint.lint_errors
    monkeypatch.setattr(lint, "lint_errors", lambda text: reads.append(text) or whole(text))
    assert isinstance(merge_snippet(text, snippet.format(6), "python"), Merged)
    assert reads == []  # the merge was not read whole
    outcome = merge_snippet(text, snippet.format(9), "python")
    assert isinstance(outcome, ToModel) and "undefined name 'value_9' at line 561" in outcome.reason
    assert reads == [text]  # only the file, for its own errors: the error might have been one
