"""Property: an edit of a real file, cut as a snippet in any style the bench cuts
(rewriter/bench/snippet_styles.py), merges without a model to the edit itself, or is refused, or
goes to the model; and whatever it merges to never loses or duplicates a definition.

The files are the repository's samples, a fixed corpus: drawn from the project's own sources, the
examples moved with every change to them (and found the definitions-merge case on
rewriter/serve/access.py kept at the end, mended since). The edits are drawn on
them with Python's ast (independent of the merge's tree-sitter reading): a statement replaced,
inserted or deleted, a function renamed, deleted, added or given a new body; one to three of them
in different places. Definitions are counted by ast too, with their enclosing classes' and
functions' names: a merge loses one where it holds fewer than both the file and the edit do, and
duplicates one where it holds more than both.

What a merge may give besides the edit itself: the edit with some of its deletions undone, where
the snippet cannot show them (readings), and other blank lines (code_of). Anything else is wrong.
"""
from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher
from itertools import combinations
from pathlib import Path

from hypothesis import assume, given
from hypothesis import strategies as st

from rewriter.bench.snippet_styles import STYLES, style_snippet
from rewriter.edits.snippets.merge import Merged, Refused, ToModel, merge_snippet

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(str(path.relative_to(ROOT)) for folder in ("samples",)
               for path in (ROOT / folder).rglob("*.py") if 20 <= path.read_text().count("\n") <= 300)
FUNCTION = (ast.FunctionDef, ast.AsyncFunctionDef)
COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match,
            *FUNCTION, ast.ClassDef)
names = st.sampled_from(["total", "count", "result", "value", "item", "_cache"])
values = st.sampled_from(["0", "None", "[]", "len(items)", "'done'", "value + 1"])


def definitions(text: str) -> Counter:
    """Each function's and class's name with its enclosing ones' (`Inventory.add`), counted."""
    found: Counter = Counter()

    def visit(node: ast.AST, path: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (*FUNCTION, ast.ClassDef)):
                found[".".join((*path, child.name))] += 1
                visit(child, (*path, child.name))
            else:
                visit(child, path)

    visit(ast.parse(text), ())
    return found


def code_of(text: str) -> str:
    """The text's lines but blank ones, without trailing whitespace: blank lines are layout (a
    merge may leave out the one between two methods), the rest is code."""
    return "".join(line.rstrip() + "\n" for line in text.splitlines() if line.strip())


def readings(before: str, after: str) -> set[str]:
    """The edit, and the edit with some of its deletions left undone (code_of each): what a merge
    may give. A snippet shows no deletion its markers hide (or a run of blank lines, in a style
    that shows those as they are), and a merge that keeps such code reads the snippet rightly."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    opcodes = SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    deletions = [i for i, (tag, *_) in enumerate(opcodes) if tag == "delete"]
    found = set()
    for count in range(len(deletions) + 1):
        for undone in combinations(deletions, count):
            lines = [line for i, (tag, i1, i2, j1, j2) in enumerate(opcodes)
                     for line in (old[i1:i2] if i in undone else new[j1:j2])]
            found.add(code_of("".join(lines)))
    return found


@dataclass(frozen=True)
class Edit:
    start: int  # the file's lines [start, end) become `lines`
    end: int
    lines: tuple[str, ...]
    instruction: str = ""


def indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def start_line(node: ast.stmt) -> int:
    """The 0-based first line of a statement, its decorators included."""
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)]) - 1


@st.composite
def edit_of(draw, lines: list[str], body: list[ast.stmt], function: ast.FunctionDef | ast.AsyncFunctionDef):
    """One edit inside or of `function`, whose statements are `body`."""
    simple = [node for node in body if not isinstance(node, COMPOUND) and node.lineno == node.end_lineno]
    first_line = lines[function.body[0].lineno - 1]
    kind = draw(st.sampled_from(["replace", "insert", "delete", "rename", "delete function", "add function",
                                 "new body"]))
    statement = f"{draw(names)} = {draw(values)}"
    if kind in ("replace", "insert", "delete") and simple:
        node = draw(st.sampled_from(simple))
        at = node.lineno - 1
        new = (indent(lines[at]) + statement,)
        if kind == "replace":
            return Edit(at, at + 1, new)
        if kind == "insert":
            return Edit(at, at, new)
        if len(body) > 1:
            return Edit(at, at + 1, (), "Delete the line")
    if kind == "rename":
        at = function.lineno - 1
        return Edit(at, at + 1, (lines[at].replace(f"def {function.name}(", f"def {function.name}_renamed(", 1),),
                    f"Rename {function.name}")
    if kind == "delete function":
        return Edit(start_line(function), function.end_lineno, (), f"Delete {function.name}")
    if kind == "add function":
        at, pad = function.end_lineno, indent(lines[function.lineno - 1])
        return Edit(at, at, ("", f"{pad}def added_{function.name}(value):", f"{pad}    return {draw(values)}"))
    return Edit(function.body[0].lineno - 1, function.end_lineno, (indent(first_line) + f"return {draw(values)}",),
                "Simplify it")


@st.composite
def edited_files(draw):
    """A file of the repository and an edit of it: (before, after, instruction)."""
    path = draw(st.sampled_from(FILES))
    before = (ROOT / path).read_text()
    lines = before.splitlines()
    tree = ast.parse(before)
    functions = [node for node in ast.walk(tree) if isinstance(node, FUNCTION)]
    if not functions:
        return before, before, ""
    chosen = draw(st.lists(st.sampled_from(functions), min_size=1, max_size=3, unique_by=id))
    edits = [draw(edit_of(lines, chosen_function.body, chosen_function)) for chosen_function in chosen]
    edits = sorted(edits, key=lambda edit: (edit.start, edit.end), reverse=True)
    taken = len(lines) + 1
    for edit in edits:
        if edit.end > taken or (edit.end == taken and edit.start == edit.end):  # overlaps a later edit: left out
            continue
        lines[edit.start:edit.end] = list(edit.lines)
        taken = edit.start
    after = "".join(line + "\n" for line in lines)
    try:
        ast.parse(after)
    except SyntaxError:  # an edit that does not fit the file's lines (a body on its `def` line)
        assume(False)
    return before, after, " and ".join(edit.instruction for edit in edits if edit.instruction)


@given(edited_files(), st.sampled_from(STYLES))
def test_a_snippet_in_any_style_merges_to_the_edit_or_is_left_to_the_model(edit, style):
    before, after, instruction = edit
    snippet = style_snippet(before, after, style)
    outcome = merge_snippet(before, snippet, "python", instruction)
    assert isinstance(outcome, Merged | ToModel | Refused)
    if not isinstance(outcome, Merged):
        return
    old, new, got = definitions(before), definitions(after), definitions(outcome.text)
    lost = {name for name in old | new if got[name] < min(old[name], new[name])}
    duplicated = {name for name in got if got[name] > max(old[name], new[name])}
    assert (lost, duplicated) == (set(), set())
    assert code_of(outcome.text) in readings(before, after)


# Found by the property (on rewriter/serve/streaming.py), kept: a method of a class the hunks hide
# behind a marker, indented as if nested in the function before it, went into that function.
HIDDEN_CLASS = '''import asyncio


async def next_event(job):
    event = await job.next()
    if event is None:
        raise StopAsyncIteration
    return event


class EventResponse:
    def __init__(self, events):
        self.events = events

    async def __call__(self, scope, receive, send) -> None:
        try:
            async for chunk in self.events:
                await send(chunk)
        finally:
            await self.events.aclose()
'''


def test_a_method_whose_class_a_marker_hides_is_not_nested_in_the_function_before_it():
    after = HIDDEN_CLASS.replace("    event = await job.next()\n", "    value = 0\n    event = await job.next()\n")
    after = after[:after.index("        try:")] + "        return 0\n"
    snippet = style_snippet(HIDDEN_CLASS, after, "hunks_2_rest")
    assert "    async def __call__" in snippet and "class EventResponse" not in snippet
    outcome = merge_snippet(HIDDEN_CLASS, snippet, "python", "Simplify it")
    assert isinstance(outcome, ToModel) and "inside function next_event" in outcome.reason


# Found by the property (on drafters/base.py), kept: a selection that starts at its first line's
# code, a method's header, with a function at column 0 further on: the whole snippet was shifted
# as far as that first line, the function taken into the class.
SELECTED = '''from typing import Protocol


class Drafter(Protocol):
    """What drafts tokens."""

    name: str
    limit: int

    def propose(self, tokens, limit):
        """Draft up to `limit` tokens."""

    def feedback(self, accepted):
        """How many were accepted."""


def laplace(successes, failures):
    """Rule of succession."""
    return (successes + 1.0) / (successes + failures + 2.0)
'''


def test_a_selected_first_line_takes_its_indentation_back_beside_a_line_at_column_0():
    after = SELECTED.replace('        """Draft up to `limit` tokens."""', "        total = 0").replace(
        '    """Rule of succession."""', "    total = 0")
    snippet = style_snippet(SELECTED, after, "hunks_2_selected")
    assert "\ndef propose" in snippet and "\ndef laplace" in snippet
    outcome = merge_snippet(SELECTED, snippet, "python")
    assert isinstance(outcome, Merged) and outcome.text == after


# Found by the property (on rewriter/serve/access.py), kept: a hunk that starts mid-function after a
# marker at column 0 (the code it hides is outside the function before it) parsed as that
# function's own lines, a comment having no indentation to the parser: the definitions merge kept
# that function's old body behind the marker, and the function's tail and the new one in it.
COLUMN_0_MARKER = '''def first(x):
    if x:
        return 1
    return 2


def second(path):
    return None


def third(h):
    return h


def fourth(t):
    return t
'''


def test_lines_after_a_marker_at_column_0_are_not_taken_into_the_function_before_it():
    after = COLUMN_0_MARKER.replace("    if x:\n        return 1\n    return 2\n", "    return 0\n").replace(
        "    return None\n", "    return None\n\ndef added_second(value):\n    return 0\n").replace(
        "def third(h):\n    return h\n", "")
    snippet = style_snippet(COLUMN_0_MARKER, after, "hunks_2")
    assert "\n# ... existing code ...\n    return None\n" in snippet
    outcome = merge_snippet(COLUMN_0_MARKER, snippet, "python", "Delete third and Simplify it")
    assert isinstance(outcome, ToModel) and "stands outside function first" in outcome.reason


# Found by the property (on rewriter/bench/cases.py), kept: a function of one line renamed, behind a
# marker: the one line was too short a body to look like the old one's, and the merge kept the old
# function beside the new.
ONE_LINE = '''def report(rows):
    return len(rows)


def write(path, rows):
    path.write_text(str(rows))
'''


def test_a_function_of_one_line_renamed_is_not_kept_beside_its_new_name():
    after = ONE_LINE.replace("def write(", "def write_renamed(")
    snippet = style_snippet(ONE_LINE, after, "definitions")
    assert snippet.startswith("# ... existing code ...\n") and "def write(" not in snippet
    outcome = merge_snippet(ONE_LINE, snippet, "python", "Rename write")
    assert isinstance(outcome, ToModel) and "looks like write renamed" in outcome.reason


# Found by the property (on rewriter/bench/cases.py), kept: hunks without markers, a deletion asked
# for, and between the hunks a blank line where the file holds a short function: the merges
# removed that function too, as if the instruction asked for it.
BARE = '''def first(x):
    return x


def second(x):
    """Second."""
    return x + 1


def third(x):
    return x + 2


def fourth(x):
    """Fourth."""
    return x + 3
'''


def test_a_short_function_between_hunks_without_markers_is_not_removed_with_the_one_asked_for():
    after = BARE.replace("def first(x):\n    return x\n\n\n", "").replace('    """Second."""\n', "").replace(
        '    """Fourth."""\n', "")
    snippet = style_snippet(BARE, after, "hunks_2_bare")
    assert "third" not in snippet and "first" not in snippet
    outcome = merge_snippet(BARE, snippet, "python", "Delete first and Delete the line")
    assert isinstance(outcome, ToModel) and "leaves out function third" in outcome.reason


# Found by the property (on rewriter/edits/self_test.py), kept: a method given alone, then a marker,
# then a line of a later class whose header the marker hides (that class's last methods removed
# after it): the definitions merge placed the method, then added the line after the file's end,
# inside the file's last class, which held it already.
TAIL = '''class Score:
    passed: int

    def count(self) -> int:
        return self.passed


class Report:
    name: str = ""
    seconds: float = 0.0

    def taken(self) -> bool:
        return True

    def describe(self) -> str:
        """In words."""
        return "a report of " + self.name
'''


def test_indented_lines_after_the_last_marker_are_not_added_after_the_files_end():
    after = TAIL.replace("        return self.passed\n", "        return 0\n").replace(
        TAIL[TAIL.index("\n    def taken"):], "\n")
    snippet = style_snippet(TAIL, after, "hunks_2")
    assert snippet.endswith("\n# ... existing code ...\n    seconds: float = 0.0\n\n") and "class" not in snippet
    outcome = merge_snippet(TAIL, snippet, "python", "Delete describe and Delete taken")
    assert isinstance(outcome, ToModel) and "indented as inside a block" in outcome.reason


# Found by the property (on samples/ and rewriter/serve/), kept: hunks without markers, the edit
# leaving a name undefined (so the lines merge fails its lint check), the hunk cut three lines
# before the function's end: the definitions merge read it as the whole function and dropped them.
CUT = '''def first(x):
    return x


def low(items):
    result = []
    for item in items:
        size = len(item)
        if size < 3:
            result.append(item)
    return result


def last(y):
    return y
'''


def test_a_function_cut_off_a_few_lines_before_its_end_does_not_lose_them():
    after = CUT.replace("    result = []\n", "    total = 0\n")
    snippet = style_snippet(CUT, after, "hunks_2_bare")
    assert snippet.rstrip().endswith("size = len(item)")
    outcome = merge_snippet(CUT, snippet, "python", "")
    assert isinstance(outcome, ToModel) and "goes on for 3 lines" in outcome.reason


# Found by the property (on rewriter/serve/), kept: a function renamed, its body shown only as `...`
# (hunks_2_dots): the definitions merge read it as a new function, its `...` as its code, and added
# it after the file's end beside the old one (a duplicate, and a function without its body).
RENAMED = '''def first(x):
    return x


def stop_once(holds):
    """Stop once the output holds what ends it."""

    def check(output):
        if not holds(output):
            return None
        return len(output)

    return check


def last(y):
    return y
'''


def test_a_function_renamed_with_its_body_behind_dots_is_not_added_beside_the_old_one():
    after = RENAMED.replace("def stop_once(", "def stop_once_renamed(")
    snippet = style_snippet(RENAMED, after, "hunks_2_dots")
    assert snippet.startswith("...\n") and snippet.rstrip().endswith("...") and "check" not in snippet
    outcome = merge_snippet(RENAMED, snippet, "python", "Rename stop_once")
    assert isinstance(outcome, ToModel) and "hides its body" in outcome.reason


# Found by the property (on rewriter/serve/), kept: two hunks without markers, a change in each,
# joined by a blank line that stands for two lines of the first function's end; the file's own
# blank lines after those made the lines merge's blank line look like one of them, and the two lines went.
JOINED = '''def parse(body):
    model = body["model"]
    prompt = body["prompt"]
    fields = dict(body)
    check(body)
    return model, prompt, fields


def text(prompt):
    """A string."""
    if prompt is None:
        raise ValueError("missing")
    return prompt
'''


def test_a_blank_line_joining_two_hunks_does_not_drop_the_code_between_them():
    after = JOINED.replace('    model = body["model"]\n', "    total = 0\n").replace(
        '    """A string."""\n', "    total = 0\n")
    snippet = style_snippet(JOINED, after, "hunks_2_bare")
    assert "fields = dict(body)\n\n\ndef text(prompt):\n" in snippet and "check" not in snippet
    outcome = merge_snippet(JOINED, snippet, "python", "")
    assert isinstance(outcome, ToModel) and "removes the file's code from line 5 with a blank line" in outcome.reason


# Found by the property (on lsp/), kept: a hunk ends on a method's decorator, a marker hides that
# method, the next hunk starts at another's decorator: parsed with the marker as a comment, the
# two decorators were one method's, and the definitions merge gave the later method both.
DECORATED = '''def register(server):
    @server.command("reject")
    async def reject(ls, *args):
        return await ls.reject(args)

    @server.command("all")
    async def accept_all(ls, *args):
        a = 1
        b = 2
        return a + b

    @server.command("apply")
    async def apply(ls, *args):
        """Merge."""
        return await ls.apply(args)


def final(x):
    return x
'''


def test_a_decorator_before_a_marker_is_not_given_to_the_method_after_it():
    after = DECORATED.replace("        return await ls.reject(args)\n", "        total = 0\n").replace(
        '        """Merge."""\n        return await ls.apply(args)\n', "        return 0\n")
    snippet = style_snippet(DECORATED, after, "hunks_2")
    assert '    @server.command("all")\n    # ... existing code ...\n    @server.command("apply")\n' in snippet
    outcome = merge_snippet(DECORATED, snippet, "python", "Simplify it")
    assert isinstance(outcome, ToModel) and "line 6 of the snippet lies between two markers" in outcome.reason
