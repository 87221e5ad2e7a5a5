"""The target type's conversions: spans <-> lines, the user's 1-based line ranges."""
from __future__ import annotations

import pytest

from rewriter.edits.node_kinds import ScopeError
from rewriter.edits.target import Target, line_count, line_of, numbered_lines, parse_line_range, touches

TEXT = "one\ntwo\nthree\n"


def test_lines_and_spans_round_trip():
    for first in range(3):
        for stop in range(first + 1, 4):
            target = Target.of_lines(TEXT, range(first, stop))
            assert Target.of_span(TEXT, target.start, target.end) == target
            assert target.code == "".join(TEXT.splitlines(keepends=True)[first:stop])


def test_a_span_takes_the_lines_it_touches():
    assert Target.of_span(TEXT, 5, 6).lines == range(1, 2)  # inside "two"
    assert Target.of_span(TEXT, 4, 8).lines == range(1, 2)  # "two\n": its newline ends the line
    assert Target.of_span(TEXT, 2, 9).lines == range(0, 3)
    assert Target.of_span(TEXT, 4, 4).lines == range(1, 2)  # empty: its own line


def test_a_final_newline_ends_the_last_line_and_starts_none():
    assert line_count(TEXT) == 3 and line_count("") == 0 and line_count("a\n\n") == 2
    assert Target.whole(TEXT).lines == range(0, 3)
    assert Target.of_lines(TEXT, range(2, 10)).lines == range(2, 3)  # clipped to the last line
    with pytest.raises(ScopeError, match="past the end"):
        Target.of_lines(TEXT, range(3, 4))
    assert line_of(TEXT, len(TEXT)) == 3  # the offset after the final newline


def test_a_span_ending_at_the_end_of_a_file_without_newline():
    text = "a\nb"
    last = Target.of_lines(text, range(1, 2))
    assert (last.start, last.end, last.code) == (2, 3, "b")
    assert Target.whole(text).lines == range(0, 2) and Target.whole(text).shown_lines == (1, 2)
    assert Target.of_span(text, 2, 3) == last


def test_an_empty_file_has_one_empty_line_to_target():
    empty = Target.of_lines("", range(0, 1))
    assert (empty.start, empty.end, empty.lines) == (0, 0, range(0, 1))
    assert Target.whole("").lines == range(0, 1)


def test_user_line_ranges_are_1_based_and_inclusive():
    assert parse_line_range("34-40") == (34, 40)
    assert numbered_lines(34, 40) == range(33, 40)
    assert Target.of_lines(TEXT, numbered_lines(2, 2)).code == "two\n"
    assert Target.of_lines(TEXT, numbered_lines(2, 3)).shown_lines == (2, 3)
    for first, last in ((0, 3), (3, 2), (-1, 1)):
        with pytest.raises(ScopeError):
            numbered_lines(first, last)
    for bad in ("0", "3-1", "a-b", "", "1-2-3"):
        with pytest.raises(ScopeError):
            parse_line_range(bad)
    with pytest.raises(ScopeError):
        Target.of_lines(TEXT, range(2, 2))


def test_labels_and_touching_changes():
    target = Target.of_span(TEXT, 4, 14, "function", "f")
    assert target.label() == "function f (lines 2-3)"
    assert Target.of_lines(TEXT, range(0, 1)).label() == "lines (lines 1-1)"
    assert touches(range(2, 4), 4, 4) and touches(range(2, 4), 0, 2)  # insertions at its edges
    assert not touches(range(2, 4), 5, 6)
