"""The next-edit cases cut from reference edits, on small edits written here."""
from __future__ import annotations

import json

from rewriter.bench.next_edit_cases import NEAR_LINES, cases_of, hunks_of, judge, make_cases
from rewriter.next_edit.base import RecentEdit

BEFORE = "def total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n"
AFTER = "def total(values):\n    s = 0\n    for x in values:\n        s += x\n    return s\n"
RENAME = {"id": "demo/1", "language": "python", "before": BEFORE, "after": AFTER}


def test_a_two_hunk_edit_gives_one_case_with_the_next_hunk_and_one_no_op_case():
    assert [(h.start, h.end) for h in hunks_of(BEFORE, AFTER)] == [(0, 1), (2, 3)]
    case, quiet = cases_of(RENAME)
    assert case.id == "demo/1#0" and quiet.id == "demo/1#no-op"
    request = case.request
    assert request.text == "def total(values):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n"
    assert request.edits == (RecentEdit("demo_1.py", 0, "def total(xs):\n", "def total(values):\n"),)
    assert request.cursor == (0, len("def total(values):"))  # at the end of what the user wrote
    assert request.window == (0, 5) and request.language == "python"
    assert case.expected == AFTER
    # The no-op case: the edit finished, its last hunk the recent edit, nothing expected.
    assert quiet.request.text == AFTER and quiet.expected is None and quiet.no_op
    assert quiet.request.edits == (RecentEdit("demo_1.py", 2, "    for x in xs:\n", "    for x in values:\n"),)
    assert quiet.request.cursor == (2, len("    for x in values:"))


def test_hunks_far_apart_give_no_case_and_later_hunks_count_the_lines_earlier_ones_added():
    filler = "".join(f"pass  # {n}\n" for n in range(NEAR_LINES + 1))
    far = {"id": "far", "before": "a\n" + filler + "b\n", "after": "A\n" + filler + "B\n"}
    assert [case.id for case in cases_of(far)] == ["far#no-op"]
    grown = {"id": "grown", "before": "a\nb\nc\nd\ne\n", "after": "a\nnew 1\nnew 2\nb\nC\nd\nE\n"}
    cases = cases_of(grown)
    assert [case.id for case in cases] == ["grown#0", "grown#1", "grown#no-op"]
    second = cases[1].request
    assert second.text == "a\nnew 1\nnew 2\nb\nC\nd\ne\n"  # the insertion and the next change made
    assert second.edits[0].line == 4 and second.edits[0].after == "C\n"  # past the two inserted lines
    assert cases[1].expected == grown["after"]
    assert [case.id for case in cases_of({"id": "one", "before": "a\n", "after": "b\n"})] == []


def test_a_suggestion_is_judged_on_the_document_it_gives_whitespace_normalised():
    case, quiet = cases_of(RENAME)

    def lines_replaced(case, start, end, text):  # the document with lines [start, end) replaced
        lines = case.request.text.splitlines(keepends=True)
        return "".join(lines[:start]) + text + "".join(lines[end:])

    assert judge(case, lines_replaced(case, 2, 3, "    for x in values:   \n")) == "right"  # trailing spaces do not count
    assert judge(case, lines_replaced(case, 2, 3, "    for x in range(3):\n")) == "wrong"
    assert judge(case, None) == "none"
    assert judge(case, lines_replaced(case, 2, 3, "    for x in xs:\n")) == "none"  # a suggestion that changes nothing
    assert judge(quiet, None) == "quiet" and judge(quiet, lines_replaced(quiet, 0, 1, "def total(values):\n")) == "quiet"
    assert judge(quiet, lines_replaced(quiet, 4, 5, "    return s + 1\n")) == "wrong"


def test_cases_come_from_the_reference_files_in_order(tmp_path):
    path = tmp_path / "edits.jsonl"
    far = {"id": "single", "before": "a\n", "after": "b\n"}
    path.write_text("".join(json.dumps(row) + "\n" for row in (RENAME, far, {**RENAME, "id": "demo/2"})))
    assert [case.id for case in make_cases([path])] == ["demo/1#0", "demo/1#no-op", "demo/2#0", "demo/2#no-op"]
