"""The deterministic snippet merge: markers, placement, refusals, ambiguity, Ellipsis stubs, and
no lost or duplicated code on the snippet cases made from EditEval's reference edits."""
from __future__ import annotations

from pathlib import Path

import pytest

from rewriter.bench.snippet_cases import (
    REFERENCE_FILES,
    load_reference_edits,
    measure,
    measure_outcome,
    normalized,
    snippet_case,
)
from rewriter.bench.snippet_styles import style_cases
from rewriter.edits.snippets.merge import LINES, Merged, Refused, ToModel, merge_snippet

FILE = '''import os


def load(path):
    text = open(path).read()
    lines = text.splitlines()
    return lines


class Shape:
    """A shape."""

    def area(self):
        return 0

    def name(self):
        return "shape"


def save(path, lines):
    open(path, "w").write("\\n".join(lines))
'''


def merged(snippet: str, text: str = FILE, language: str = "python") -> str:
    outcome = merge_snippet(text, snippet, language)
    assert isinstance(outcome, Merged), outcome
    return outcome.text


@pytest.mark.parametrize("marker", ["# ... existing code ...", "# ...", "# rest of the code unchanged",
                                    "/* ... */", "// ... existing code ...", "...", "# … unchanged"])
def test_each_marker_style_keeps_what_is_there(marker):
    snippet = (f"{marker}\n\ndef load(path):\n    {marker}\n    lines = text.splitlines()\n"
               f"    return [line.strip() for line in lines]\n\n{marker}\n")
    assert merged(snippet) == FILE.replace("    return lines\n", "    return [line.strip() for line in lines]\n")


def test_a_whole_function_replaces_the_old_one():
    snippet = "# ...\ndef save(path, lines):\n    os.write(path, '\\n'.join(lines))\n"
    assert merged(snippet).endswith("def save(path, lines):\n    os.write(path, '\\n'.join(lines))\n")
    assert merged(snippet).count("def ") == 4


def test_a_merge_bringing_an_undefined_name_goes_to_the_model_saying_why():
    # `Path` is not imported: the merge compiles, but save would fail when run.
    snippet = "# ...\ndef save(path, lines):\n    Path(path).write_text('\\n'.join(lines))\n"
    outcome = merge_snippet(FILE, snippet, "python")
    assert isinstance(outcome, ToModel)
    assert "by definitions, the merge would fail when run: undefined name 'Path' at line 21" in outcome.reason
    with_import = "from pathlib import Path\n" + snippet  # the same merge, the import brought along
    assert "from pathlib import Path\n" in merged(with_import)


def test_an_undefined_name_the_file_already_had_does_not_refuse_a_merge():
    broken = FILE.replace("return 0", "return missing_name")
    assert "return missing_name" in merged('class Shape:\n    # ...\n    def name(self):\n        return "S"\n', broken)


def test_a_method_in_its_class_and_a_method_given_alone():
    in_class = 'class Shape:\n    # ... existing code ...\n    def name(self):\n        return "Shape"\n'
    alone = 'def name(self):\n    return "Shape"\n'
    want = FILE.replace('return "shape"', 'return "Shape"')
    assert merged(in_class) == want
    assert merged(alone) == want


def test_a_new_definition_goes_after_its_neighbour():
    snippet = "# ... existing code ...\n\ndef load(path):\n    # ...\n\n\ndef count(path):\n    return len(load(path))\n" \
              "\n\n# ... existing code ...\n"
    text = merged(snippet)
    assert text.index("def load") < text.index("def count") < text.index("class Shape")
    assert normalized(text.replace("\n\ndef count(path):\n    return len(load(path))\n", "")) == normalized(FILE)


def test_new_imports_at_the_top():
    assert merged("import os\nimport sys\n# ... existing code ...\n") == FILE.replace("import os\n", "import os\nimport sys\n")


@pytest.mark.parametrize("snippet, words", [
    ("# ... existing code ...\n\n// ...\n", "only markers"),
    ("def load(path):\n    return b'\0'\n", "binary"),
    (b"def load(path):\n    return '\xff'\n", "not UTF-8"),
])
def test_bad_snippets_are_refused_and_the_file_untouched(snippet, words):
    outcome = merge_snippet(FILE, snippet, "python")
    assert isinstance(outcome, Refused)
    assert words in outcome.reason


@pytest.mark.parametrize("snippet, words", [
    ("function load(path) {\n  return fs.readFileSync(path);\n}\n", "does not parse as python on its own"),
    ("x = compute()\ny = x + 1\n", "matches the file"),
])
def test_snippets_neither_merge_can_place_go_to_the_model_saying_why(snippet, words):
    outcome = merge_snippet(FILE, snippet, "python")
    assert isinstance(outcome, ToModel) and words in outcome.reason and "by lines" in outcome.reason


def test_two_definitions_of_one_name_are_ambiguous():
    text = FILE + "\n\ndef load(path, encoding):\n    return open(path, encoding=encoding).read()\n"
    outcome = merge_snippet(text, "# ...\ndef load(path):\n    return []\n# ...\n", "python")
    assert isinstance(outcome, ToModel) and "2 times" in outcome.reason


HANDLERS = '''def bind(handle):
    mode = 1

    @handle("ctrl-l")
    def _(event):
        event.clear()

    @handle("f2")
    def _(event):
        event.toggle()
'''


def test_a_name_defined_twice_is_told_apart_by_its_decorators():
    snippet = 'def bind(handle):\n    # ...\n    @handle("f2")\n    def _(event):\n        event.toggle(2)\n'
    assert merged(snippet, HANDLERS) == HANDLERS.replace("event.toggle()", "event.toggle(2)")
    # without its decorators, or with those of both, which one is meant stays unclear
    bare = "def bind(handle):\n    # ...\n    def _(event):\n        event.toggle(2)\n"
    assert isinstance(merge_snippet(HANDLERS, bare, "python"), ToModel)
    same = HANDLERS.replace('"ctrl-l"', '"f2"')
    assert "2 times" in merge_snippet(same, snippet, "python").reason


FUNCTIONS = '''import math


@cached
def area(radius):
    squared = radius * radius
    return math.pi * squared


def report(radius):
    print(area(radius))
    return radius
'''


def test_functions_moved_into_a_new_class_leave_the_top_level():
    snippet = (
        "# ...\n\nclass Circle:\n    def __init__(self, radius):\n        self.radius = radius\n\n"
        "    def area(self):\n        squared = self.radius * self.radius\n        return math.pi * squared\n\n"
        "    def report(self):\n        print(self.area())\n        return self.radius\n")
    result = merged(snippet, FUNCTIONS)
    assert result.startswith("import math\n\n\nclass Circle:\n")  # where the first one stood
    assert "\ndef area" not in result and "@cached" not in result and "\ndef report" not in result
    assert normalized(result) == normalized("import math\n\n" + snippet.removeprefix("# ...\n\n"))
    alone = merged(snippet.removeprefix("# ...\n\n").replace("math.pi", "3.14"), "def area(radius):\n"
                   "    squared = radius * radius\n    return 3.14 * squared\n")
    assert alone.startswith("class Circle:")  # no marker, and nothing else of the file: the class is the file


def test_a_method_that_only_shares_a_functions_name_leaves_the_function_where_it_is():
    snippet = "# ...\n\nclass Circle:\n    def area(self):\n        return area(self.radius)\n"
    result = merged(snippet, FUNCTIONS)
    assert result.startswith(FUNCTIONS) and result.rstrip().endswith("return area(self.radius)")


LOCAL_CLASSES = '''def check(expect):
    setup()
    message = "no states"
    with expect(message):
        class Flow:
            states = None
            moves = []

    message = "no moves"
    with expect(message):
        class Flow:
            states = []
            moves = None
'''


def test_a_definition_between_the_same_matched_lines_on_both_sides_replaces_the_old_one_in_place():
    renamed = LOCAL_CLASSES.replace("class Flow:", "class FirstFlow:", 1).replace("class Flow:", "class NextFlow:")
    snippet = renamed.replace("    setup()\n", "    # ...\n")  # merged line by line, inside the function
    outcome = merge_snippet(LOCAL_CLASSES, snippet, "python", "Rename the local classes apart")
    assert isinstance(outcome, Merged) and outcome.text == renamed
    # a marker beside it: renamed in place, or added next to the old one? The definitions cannot
    # say; the context lines on both sides of each class line place it, in place
    marked = snippet.replace('    message = "no moves"', '    # ...\n    message = "no moves"')
    by_lines = merge_snippet(LOCAL_CLASSES, marked, "python", "Rename the local classes apart")
    assert isinstance(by_lines, Merged) and by_lines.path == LINES and by_lines.text == renamed


def test_a_name_the_snippet_defines_as_often_as_the_file_pairs_in_order():
    text = "class X:\n    def a():\n        pass\n\n\nclass X:\n    def a():\n        return 1\n"
    snippet = ("class X:\n    def a(self):\n        pass\n# ...\nclass X:\n    def a(self):\n"
               "        return 1\n")
    assert merged(snippet, text) == text.replace("def a():", "def a(self):")
    one = "# ...\nclass X:\n    def a(self):\n        return 1\n# ...\n"  # once of twice: which one?
    outcome = merge_snippet(text, one, "python")  # the last line, held once, tells
    assert isinstance(outcome, Merged) and outcome.path == LINES
    assert outcome.text == text.replace("def a():\n        return 1", "def a(self):\n        return 1")
    two = "# ...\nclass X:\n    def a(self):\n# ...\n"  # and where nothing tells, the model merges
    assert isinstance(merge_snippet(text, two, "python"), ToModel)


def test_a_definition_left_out_without_a_marker_is_ambiguous_not_lost():
    outcome = merge_snippet(FILE, "def load(path):\n    return []\n\n\ndef save(path, lines):\n    pass\n", "python")
    assert isinstance(outcome, ToModel) and "class Shape" in outcome.reason


PROTOCOL = '''from typing import Protocol


class Shape(Protocol):
    def area(self) -> float:
        ...

    def name(self) -> str:
        ...


def describe(shape):
    text = shape.name()
    return f"{text}: {shape.area()}"
'''


def test_an_ellipsis_the_file_has_too_is_code_not_a_marker():
    snippet = "class Shape(Protocol):\n    def area(self) -> int:\n        ...\n\n    # ...\n"
    assert merged(snippet, PROTOCOL) == PROTOCOL.replace("def area(self) -> float:", "def area(self) -> int:")
    stub = "# ...\n\ndef perimeter(shape) -> float:\n    ...\n"
    assert merged(stub, PROTOCOL).endswith("def perimeter(shape) -> float:\n    ...\n")  # a new stub keeps its body


def test_an_ellipsis_where_the_file_has_code_is_a_marker():
    snippet = "def describe(shape):\n    ...\n    text = shape.name()\n    return f'{text} ({shape.area()})'\n"
    assert merged(snippet, PROTOCOL) == PROTOCOL.replace('return f"{text}: {shape.area()}"',
                                                         "return f'{text} ({shape.area()})'")


JS = '''import fs from "fs";

function load(path) {
  const text = fs.readFileSync(path, "utf8");
  return text.split("\\n");
}

class Shape {
  area() {
    return 0;
  }

  name() {
    return "shape";
  }
}
'''


def test_javascript_definitions_and_comment_markers():
    snippet = "// ... existing code ...\nclass Shape {\n  // ...\n  name() {\n    return \"Shape\";\n  }\n}\n"
    assert merged(snippet, JS, "javascript") == JS.replace('return "shape"', 'return "Shape"')
    whole = "function load(path) {\n  return [];\n}\n// ... rest of the code unchanged\n"
    assert "return [];" in merged(whole, JS, "javascript") and "readFileSync" not in merged(whole, JS, "javascript")


EDITEVAL = Path("/work/shared/bench/editeval_tests.jsonl")


@pytest.mark.skipif(not EDITEVAL.exists(), reason="the EditEval cases are not on this machine")
def test_merges_never_lose_or_duplicate_code_on_the_editeval_cases():
    rows = [measure(snippet_case(row)) for row in load_reference_edits([EDITEVAL])]
    assert len(rows) == 116
    damaged = [(row["id"], row["lost"], row["duplicated"]) for row in rows if row["lost"] or row["duplicated"]]
    assert damaged == []
    assert sum(row["exact"] for row in rows) >= 0.8 * len(rows)


def test_a_reference_edit_that_brings_an_undefined_name_is_unsolvable_and_its_refusal_counted():
    # As in one of the reference edits: `from os import chdir as cd` became a comparison, not an assignment.
    before = "import os\nfrom os import chdir as cd\n\n\ndef go(path):\n    cd(path)\n"
    after = before.replace("from os import chdir as cd\n", "cd == os.chdir\n")
    case = snippet_case({"id": "cd", "before": before, "after": after})
    assert "brings an undefined name" in case.unsolvable
    row = measure(case)
    assert row["outcome"] == "to_model" and "undefined name 'cd'" in row["reason"]


SCRIPT = '''setup()
write("first")
check(read() != "first")
cleanup()

setup()
write("second")
check(read() == "second")
cleanup()
'''


def test_a_repeated_line_anchors_where_the_lines_next_to_it_place_it():
    snippet = '# ...\nwrite("second")\nresult = read()\ncheck(result == "second")\ncleanup()\n'
    assert merged(snippet, SCRIPT) == SCRIPT.replace('check(read() == "second")',
                                                     'result = read()\ncheck(result == "second")')


def test_a_repeated_line_after_new_lines_is_the_nearest_copy_and_behind_a_marker_ambiguous():
    # `cleanup()` follows "first" past new lines with no marker between: the nearest copy, as the
    # farther one would have the snippet drop the lines between without a marker
    snippet = '# ...\nwrite("first")\nresult = read()\ncheck(result != "first")\ncleanup()\n# ...\n'
    assert merged(snippet, SCRIPT) == SCRIPT.replace('check(read() != "first")',
                                                     'result = read()\ncheck(result != "first")')
    behind = '# ...\nwrite("first")\nresult = read()\n# ...\ncleanup()\n# ...\n'  # either copy could be meant
    outcome = merge_snippet(SCRIPT, behind, "python")
    assert isinstance(outcome, ToModel) and "more than once" in outcome.reason


def test_a_case_whose_after_does_not_parse_is_counted_unsolvable():
    row = {"id": "broken", "before": "def f():\n    return 1\n", "after": "def f():\n    return (1\n"}
    assert "does not parse" in snippet_case(row).unsolvable


def test_a_case_whose_after_python_does_not_compile_is_counted_unsolvable():
    row = {"id": "loose", "before": "def f(x):\n    return x\n", "after": "def f(x):\n    continue\n"}
    assert "does not compile" in snippet_case(row).unsolvable  # tree-sitter parses it; the compiler does not
    py2 = {"id": "py2", "before": "print 'a'\n", "after": "print 'b'\n"}
    assert not snippet_case(py2).unsolvable.startswith("Python")  # the file never compiled: the guard lets it be


def test_a_definition_left_out_between_its_neighbours_goes_where_the_instruction_asks_for_removals():
    snippet = "def load(path):\n    # ...\n    return lines\n\n\ndef save(path, lines):\n    # ...\n"
    removed = merge_snippet(FILE, snippet, "python", "Remove the Shape class")
    assert isinstance(removed, Merged) and "class Shape" not in removed.text
    assert normalized(removed.text) == normalized(FILE[:FILE.index("class Shape")] + FILE[FILE.index("def save"):])
    assert isinstance(merge_snippet(FILE, snippet, "python", "Tidy up"), ToModel)  # a marker forgotten?
    # code in its place: the definitions cannot tell which one it stands for, the lines between
    # the same context on both sides put it where the removed class was
    replaced = snippet.replace("\n\n\ndef save", "\n\n\nSIZE = 3\n\n\ndef save")
    outcome = merge_snippet(FILE, replaced, "python", "Remove the Shape class")
    assert isinstance(outcome, Merged) and outcome.path == LINES
    assert normalized(outcome.text) == normalized(FILE[:FILE.index("class Shape")] + "SIZE = 3\n\n\n"
                                                  + FILE[FILE.index("def save"):])


REPEATED = '''def run():
    setup()
    step("a")
    check()
    cleanup()
    setup()
    step("b")
    check()
    cleanup()
    setup()
    step("c")
    check()
    cleanup()
'''


def test_new_lines_after_an_anchor_replace_the_file_lines_up_to_the_nearest_copy_of_the_next():
    snippet = 'def run():\n    # ...\n    step("b")\n    result = check()\n    assert result\n    cleanup()\n    # ...\n'
    assert merged(snippet, REPEATED) == REPEATED.replace(
        'step("b")\n    check()\n', 'step("b")\n    result = check()\n    assert result\n')
    # and the same going back from an anchor after them
    # (a name REPEATED already calls: a new undefined one would be the lint check's to refuse)
    back = 'def run():\n    # ...\n    setup()\n    check("ready")\n    step("b")\n    # ...\n'
    assert merged(back, REPEATED) == REPEATED.replace('cleanup()\n    setup()\n    step("b")',
                                                      'cleanup()\n    setup()\n    check("ready")\n    step("b")')


def test_a_file_line_the_snippet_holds_elsewhere_is_not_taken_as_replaced():
    moved = 'def run():\n    # ...\n    step("b")\n    value = 1\n    cleanup()\n    check()\n    # ...\n'
    assert isinstance(merge_snippet(REPEATED, moved, "python"), ToModel)
    marker = 'def run():\n    # ...\n    step("b")\n    value = 1\n    # ...\n    cleanup()\n    # ...\n'
    assert isinstance(merge_snippet(REPEATED, marker, "python"), ToModel)


def test_a_comment_starting_with_an_ellipsis_that_the_file_holds_is_code_not_a_marker():
    text = "def run():\n    start()\n    # ...then it stops\n    stop()\n"
    snippet = "def run():\n    start()\n    # ...then it stops\n    stop(now=True)\n"
    assert merged(snippet, text) == snippet
    # one the file does not hold is a marker still: the lines it stands for stay
    marker = "def run():\n    # ...the start\n    # ...then it stops\n    stop(now=True)\n"
    assert merged(marker, text) == text.replace("stop()", "stop(now=True)")


def test_nothing_between_two_matched_definitions_keeps_the_blank_lines_there():
    text = "class A:\n    def f(self):\n        return 1\n\n\nclass B:\n    def g(self):\n        return 2\n"
    snippet = ("class A:\n    def f(self):\n        return 3\n    # ...\nclass B:\n    def g(self):\n"
               "        return 4\n")
    assert merged(snippet, text) == text.replace("return 1", "return 3").replace("return 2", "return 4")


PARAGRAPHS = '''setup()

# the checks
assert 5 > 4
assert 3 <= 1

report("done")
'''


def test_new_lines_then_a_blank_line_before_a_marker_replace_the_file_lines_up_to_its_blank_line():
    after_anchor = "# ...\n# the checks\nassert 5 > 3\nassert 3 <= 2\n\n# ...\n"
    assert merged(after_anchor, PARAGRAPHS) == PARAGRAPHS.replace("assert 5 > 4\nassert 3 <= 1",
                                                                  "assert 5 > 3\nassert 3 <= 2")
    # new lines unlike the file's there may as well come before them
    unlike = merge_snippet(PARAGRAPHS, "# ...\n# the checks\nassert True\nassert False\n\n# ...\n", "python")
    assert isinstance(unlike, ToModel) and "replace it or come before it" in unlike.reason
    # and going back from an anchor right after the new lines
    text = 'setup()\n\nuse("md5")\nrun()\n'
    assert merged('# ...\n\nuse("sha")\nrun()\n', text) == text.replace("md5", "sha")
    # more file lines there than new ones, or no blank line: the new lines are inserted
    one = "# ...\n# the checks\nassert True\n\n# ...\n"
    assert merged(one, PARAGRAPHS) == PARAGRAPHS.replace("# the checks\n", "# the checks\nassert True\n\n")
    inserted = "# ...\n# the checks\nassert True\n# ...\n"
    assert merged(inserted, PARAGRAPHS) == PARAGRAPHS.replace("# the checks\n", "# the checks\nassert True\n")


def test_a_snippet_starting_inside_the_file_under_an_instruction_to_remove_a_line_before_it_is_ambiguous():
    snippet = "def load(path):\n    return open(path).read().splitlines()\n\n\nclass Shape:\n    # ...\n"
    for instruction in ("Read the lines in one go", "Remove the text variable"):
        kept = merge_snippet(FILE, snippet, "python", instruction)
        assert isinstance(kept, Merged) and kept.text.startswith("import os\n") and "def save" in kept.text
    outcome = merge_snippet(FILE, snippet, "python", "Remove the unused import os")
    assert isinstance(outcome, ToModel) and "asks to remove a line before it" in outcome.reason


def test_a_deletion_between_blank_lines_is_shown_with_the_code_around_it():
    row = {"id": "deletion", "before": "A = 1\n\nglobal b\n\n\ndef f():\n    return A\n",
           "after": "A = 1\n\n\n\ndef f():\n    return A\n"}
    case = snippet_case(row)
    assert "A = 1" in case.snippet and "def f():" in case.snippet
    assert normalized(merged(case.snippet, row["before"])) == normalized(row["after"])


def test_a_case_placed_by_a_definitions_name_alone_is_solvable():
    row = {"id": "renamed-lines", "before": "def f(a):\n    return a\n", "after": "def f(a, b):\n    return a + b\n"}
    case = snippet_case(row)
    assert case.unsolvable == "" and merged(case.snippet, row["before"]) == row["after"]
    lonely = {"id": "lonely", "before": "x = 1\n", "after": "y = 2\n"}
    assert "places it" in snippet_case(lonely).unsolvable


def test_a_new_function_may_end_like_the_one_before_it():
    # EditEval/41's shape: the snippet gives a function unchanged and a new one after it that
    # ends in the same line; the checks judge the function with its neighbour, not a lone line.
    text = "def common(a, b):\n    found = set(a) & set(b)\n    return sorted(found)\n"
    snippet = text + "\n\ndef either(a, b):\n    found = set(a) ^ set(b)\n    return sorted(found)\n"
    assert merged(snippet, text) == snippet


def test_a_method_may_replace_another_in_its_class():
    # EditEval/58's shape: the whole class, a line of one method gone and another method replaced
    # by a special one, judged within the class ("Make it a generator." names no method).
    text = ("class Loader:\n    def __init__(self, data):\n        self.data = data\n        self.index = 0\n\n"
            "    def next_batch(self):\n        self.index += 1\n        return self.data[self.index - 1]\n")
    snippet = ("class Loader:\n    def __init__(self, data):\n        self.data = data\n\n"
               "    def __iter__(self):\n        yield from self.data\n")
    outcome = merge_snippet(text, snippet, "python", "Make it a generator.")
    assert isinstance(outcome, Merged) and outcome.text == snippet, outcome


REPORT = '''def report(items):
    print("start")
    count = len(items)
    print("count", count)
    print("done")


def other():
    return 1
'''


def test_without_markers_a_blank_line_where_code_was_may_stand_for_it():
    # Between two hunks, a blank line is all a snippet without markers has to stand for the code
    # it leaves out: removed or kept, nothing tells.
    outcome = merge_snippet(REPORT, 'def report(items):\n    print("start")\n\n    print("done")\n', "python")
    assert isinstance(outcome, ToModel) and "blank line" in outcome.reason
    # no blank line there: the lines are removed
    assert merged('def report(items):\n    print("start")\n    print("done")\n', REPORT).count("count") == 0
    # a snippet with markers marks what it leaves out: the blank line is a blank line
    kept = merged('# ...\ndef report(items):\n    print("start")\n\n    print("done")\n', REPORT)
    assert "count" not in kept and "def other" in kept


RUN = '''import sys


def run(items):
    total = 0
    for item in items:
        total += item
    return total
'''


@pytest.mark.parametrize("snippet", [
    '# ... existing code ...\n    print(total)\n\n\ndef count(items):\n    return len(items)\n',
    '...\n\n    print(total)\n',  # a bare `...` is a marker here, not code at the top
])
def test_lines_from_inside_a_block_placed_only_by_a_marker_are_unclear(snippet):
    # appended after the file's last function, they would join its body
    outcome = merge_snippet(RUN, snippet, "python")
    assert isinstance(outcome, ToModel) and "indented as inside a block" in outcome.reason


def test_the_file_s_lines_shown_again_next_to_a_marker_are_not_copied():
    snippet = '...\n\n    for item in items:\n        if item > 0:\n            total += item\n    return total\n'
    # placed by its first and last lines, the line it indents into the new block is changed, not copied
    assert merged(snippet, RUN) == RUN.replace("        total += item\n",
                                               "        if item > 0:\n            total += item\n")
    # inside a definition the merge keeps behind a marker, as in a file whose indentation is broken
    broken = "import os\n\n\ndef sizes(paths):\n      found = []\n  for path in paths:\n" \
             "      found.append(os.path.getsize(path))\nreturn found\n"
    snippet = "# ... existing code ...\n    found = []\n    for path in paths:\n        # ... existing code ...\n" \
              "    return found\n"
    outcome = merge_snippet(broken, snippet, "python", "Fix the indentation.")
    assert not isinstance(outcome, Merged) or outcome.text.count("found = []") == 1


SETUP = """import sys


def setup():
    value = compute()
    register(value)

    # done with the module names
    del sys
    del value


setup()
"""


def test_a_line_selected_from_its_code_on_and_shown_at_column_0_is_not_read_as_the_file_s_indentation():
    # the comment stands at column 0 as a selection begun at its code would show it, `setup()` as
    # it is: by lines, the call must not be indented into the function after the comment; by
    # definitions, the comment must not be written again at column 0 below the one the marker keeps
    snippet = "# ... existing code ...\n\n# done with the module names\n\nsetup()\n# ... existing code ...\n"
    outcome = merge_snippet(SETUP, snippet, "python", "Remove the unneeded del statements.")
    assert isinstance(outcome, ToModel), getattr(outcome, "text", "")
    assert "indented unlike the file's" in outcome.reason and "shown again" in outcome.reason


PARSE = '''def parse(name, functions=[]):
    functions.append(name)
    functions.append("end")

    return functions
'''


def test_new_lines_before_a_marker_replace_the_paragraph_there_only_where_they_are_alike():
    inserted = "def parse(name, functions=None):\n    if functions is None:\n        functions = []\n\n    # ...\n"
    outcome = merge_snippet(PARSE, inserted, "python")
    assert isinstance(outcome, ToModel) and "replace it or come before it" in outcome.reason
    changed = "def parse(name, functions=[]):\n    functions.append(name.strip())\n    functions.append(name.upper())\n" \
              "\n    # ...\n"
    assert merged(changed, PARSE) == changed.replace("    # ...\n", "    return functions\n")


BASE = '''class Base:
    def get(self, key):
        return self.data[key]


class Child(Base):
    def size(self):
        return 0
'''


def test_a_method_given_alone_that_calls_its_namesake_through_its_class_is_another_class_s():
    outcome = merge_snippet(BASE, "# ...\n    def get(self, key):\n        return Base.get(self, key)\n    # ...\n",
                            "python")
    assert isinstance(outcome, ToModel) and "calls Base.get" in outcome.reason
    # a new body of the one method of that name replaces it
    assert "self.data.get(key)" in merged("# ...\n    def get(self, key):\n        return self.data.get(key)\n"
                                          "    # ...\n", BASE)


BENCH = Path("/work/shared/bench")


@pytest.mark.skipif(not (BENCH / "editeval_tests.jsonl").exists(), reason="the reference edits are not on this machine")
def test_no_snippet_style_loses_or_duplicates_code_on_the_reference_edits():
    rows = load_reference_edits([BENCH / name for name in REFERENCE_FILES if (BENCH / name).is_file()])
    measured = [measure_outcome(case)[0] for case in style_cases(rows)]
    damaged = [(row["id"], row["style"], row["lost"][:1], row["duplicated"][:1])
               for row in measured if row["lost"] or row["duplicated"]]
    assert damaged == []
