"""The next-edit core without a model: the edit history, the window, the instruct format, and
what of an answer is suggested (trimmed to its change, or nothing)."""
from __future__ import annotations

import pytest

from rewriter.next_edit.base import NextEditInput, RecentEdit
from rewriter.next_edit.formats import choose_format, format_named
from rewriter.next_edit.formats.instruct import CURSOR, InstructFormat
from rewriter.next_edit.history import EditHistory
from rewriter.next_edit.suggest import Suggestion, changed_part, judge, undoes
from rewriter.next_edit.window import choose_window


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def typed(history: EditHistory, clock: Clock, texts: list[str], pause: float = 0.2) -> None:
    for text in texts:
        clock.now += pause
        history.changed(text)


BASE = "def area(r):\n    return 3.14 * r * r\n\n\ndef perimeter(r):\n    return 2 * 3.14 * r\n"


# ---- history ---------------------------------------------------------------------------------

def test_a_burst_of_typing_in_one_place_is_one_event():
    clock = Clock()
    history = EditHistory("circle.py", BASE, clock=clock)
    typed(history, clock, [BASE.replace("3.14 * r * r", "3.14 * r * r" + c) for c in ("", " ", " +", " + 1")][1:])
    assert history.events() == (RecentEdit("circle.py", 1, "    return 3.14 * r * r\n",
                                           "    return 3.14 * r * r + 1\n"),)


def test_a_pause_or_another_place_starts_a_new_event():
    clock = Clock()
    history = EditHistory("circle.py", BASE, clock=clock)
    first = BASE.replace("area(r)", "area(radius)")
    typed(history, clock, [first])
    second = first.replace("perimeter(r)", "perimeter(radius)")  # four lines further: another place
    typed(history, clock, [second])
    third = second.replace("2 * 3.14 * r", "2 * 3.14 * radius")
    typed(history, clock, [third], pause=1.5)  # the next line, but after a pause
    events = history.events()
    assert [(e.line, e.before, e.after) for e in events] == [
        (0, "def area(r):\n", "def area(radius):\n"),
        (4, "def perimeter(r):\n", "def perimeter(radius):\n"),
        (5, "    return 2 * 3.14 * r\n", "    return 2 * 3.14 * radius\n")]


def test_typing_on_the_next_line_within_a_second_extends_the_burst():
    clock = Clock()
    history = EditHistory("circle.py", BASE, clock=clock)
    one = BASE.replace("def perimeter(r):\n", "def perimeter(r):\n    # the perimeter\n")
    two = one.replace("    # the perimeter\n", "    # the perimeter\n    r = abs(r)\n")
    typed(history, clock, [one, two])
    assert history.events() == (RecentEdit("circle.py", 5, "", "    # the perimeter\n    r = abs(r)\n"),)


def test_an_edit_undone_leaves_no_event_and_the_budget_keeps_the_newest():
    clock = Clock()
    history = EditHistory("circle.py", BASE, budget_chars=60, clock=clock)
    typed(history, clock, [BASE.replace("area", "surface"), BASE])  # typed, then undone
    assert history.events() == ()
    one = BASE.replace("area(r)", "area(x)")
    two = one.replace("perimeter(r)", "perimeter(x)")
    typed(history, clock, [one, two], pause=2)
    assert [e.after for e in history.events()] == ["def perimeter(x):\n"]  # both do not fit in 60


def test_full_and_incremental_sync_give_the_same_events():
    # The history sees the text each change leaves, however the editor sent it.
    clock = Clock()
    history = EditHistory("circle.py", BASE, clock=clock)
    typed(history, clock, [BASE + "\n\ndef describe(r):\n", BASE + "\n\ndef describe(r):\n    return str(r)\n"])
    assert history.events() == (RecentEdit("circle.py", 6, "", "\n\ndef describe(r):\n    return str(r)\n"),)


# ---- window ----------------------------------------------------------------------------------

def test_the_window_keeps_its_size_near_the_ends_and_is_clipped_to_short_documents():
    text = "".join(f"line {n}\n" for n in range(100))
    assert choose_window(text, 50) == (42, 62)
    assert choose_window(text, 2) == (0, 20)
    assert choose_window(text, 99) == (81, 101)  # the empty line after the final newline included
    assert choose_window("a\nb\n", 1) == (0, 3)
    with pytest.raises(ValueError, match="outside"):
        choose_window("a\n", 5)


# ---- the instruct format ---------------------------------------------------------------------

DOC = "".join(f"x{n} = {n}\n" for n in range(40))


def request(cursor=(20, 3), window=(12, 32), edits=(), text=DOC) -> NextEditInput:
    return NextEditInput("pkg/values.py", "python", text, window, cursor, tuple(edits))


def test_the_instruct_prompt_puts_the_stable_part_first_and_predicts_the_window():
    edit = RecentEdit("pkg/values.py", 19, "x19 = 19\n", "x19 = 190\n")
    prompt = InstructFormat(context_above=8, context_below=4).render(request(edits=[edit]))
    message = prompt.messages[1]["content"]
    stable = message[:prompt.stable_chars]
    assert stable.startswith("File: pkg/values.py\n") and "x3 = 3" not in stable and "x4 = 4\nx5" in stable
    assert "x11 = 11\n```" in stable and "```python\nx32 = 32\n" in stable and "x35 = 35\n```" in stable
    assert "x36" not in stable and "My recent edits" not in stable
    assert "@@ -20,1 +20,1 @@\n-x19 = 19\n+x19 = 190\n" in message[prompt.stable_chars:]
    assert f"x20{CURSOR} = 20\n" in message
    assert prompt.prediction == "```python\n" + request().window_text + "```"


def test_the_window_is_read_back_without_the_cursor_marker_and_an_answer_without_a_block_is_none():
    form, asked = InstructFormat(), request()
    assert form.window_of(f"```python\nx{CURSOR}1 = 1\n```", asked) == "x1 = 1\n"
    assert form.window_of("I would change nothing.", asked) is None
    end = request(cursor=(1, 0), window=(0, 2), text="a = 1\nb = 2")  # no final newline
    assert form.window_of("```python\na = 1\nb = 3\n```", end) == "a = 1\nb = 3"


def test_formats_by_name_and_by_model():
    assert choose_format("auto", "qwen2.5-coder-1.5b-instruct").name == "instruct"
    assert choose_format("auto", None).name == "instruct"  # the embedded model, named by none
    assert choose_format("instruct", "some-base-model").name == "instruct"
    with pytest.raises(ValueError, match="expected one of instruct"):
        format_named("nope")


# ---- what is suggested -----------------------------------------------------------------------

def test_the_suggestion_is_trimmed_to_the_changed_characters():
    asked = request()
    new = asked.window_text.replace("x21 = 21\n", "x21 = 2100\nx21b = 1\n")
    assert changed_part(asked, new) == Suggestion((21, 8), (21, 8), "00\nx21b = 1", new)
    deleted = asked.window_text.replace("x22 = 22\n", "")
    assert changed_part(asked, deleted).start == (22, 0) and changed_part(asked, deleted).end == (23, 0)


def test_an_unchanged_broken_undoing_or_lost_definition_answer_is_not_suggested():
    code = "def area(r):\n    return r * r\n\n\ndef twice(r):\n    return 2 * r\n"
    asked = NextEditInput("m.py", "python", code, (0, 7), (1, 4))
    assert judge(asked, code) == "unchanged"
    assert judge(asked, code.replace("return r * r", "return r * r +")).startswith("syntax:")
    assert judge(asked, code.replace("def twice(r):\n    return 2 * r\n", "")).startswith("integrity:")
    assert judge(asked, code.replace("2 * r", "2 * radius")).startswith("lint:")
    assert judge(asked, code.replace("r * r", "r ** 2")) == ""
    assert judge(request(), "x21 = 2100\nx22 = 22\n") == "it would delete 18 lines of the window"  # a part of it
    undo = RecentEdit("m.py", 1, "    return r ** 2\n", "    return r * r\n")
    assert judge(NextEditInput("m.py", "python", code, (0, 7), (1, 4), (undo,)),
                 code.replace("r * r", "r ** 2")) == "it undoes the last edit"


def test_only_an_answer_that_puts_the_text_back_as_it_was_undoes_the_last_edit():
    """Each kind of last edit, against answers that revert it and answers that build on it: a pure
    insertion (nothing replaced) and a line typed below one it kept were once read as undone by
    any answer at all, so that no suggestion followed them."""
    kept = "class C:\n    def __init__(self, r):\n        self.r = r\n\n    def area(self):\n        return self.r\n"
    typed = kept.replace("self.r = r\n", "self.r = r\n        self.d\n")
    below = RecentEdit("m.py", 2, "        self.r = r\n", "        self.r = r\n        self.d\n")
    completed = typed.replace("self.d\n", "self.d = 2 * r\n")
    assert not undoes(below, typed, completed)
    assert undoes(below, typed, kept)

    inserted = RecentEdit("m.py", 3, "", "        self.d = 2 * r\n")
    with_line = kept.replace("self.r = r\n", "self.r = r\n        self.d = 2 * r\n")
    assert not undoes(inserted, with_line, with_line.replace("return self.r", "return self.d"))
    assert undoes(inserted, with_line, kept)

    # Deleting one of two blank lines: the blank line left is not the deleted one put back.
    two_blanks = kept.replace("\n\n", "\n\n\n")
    deleted = RecentEdit("m.py", 3, "\n", "")
    assert not undoes(deleted, kept, kept.replace("return self.r", "return 2 * self.r"))
    assert undoes(deleted, kept, two_blanks)

    replaced = RecentEdit("m.py", 5, "        return self.r\n", "        return self.r * 2\n")
    doubled = kept.replace("return self.r\n", "return self.r * 2\n")
    assert not undoes(replaced, doubled, doubled.replace("def area", "def twice"))
    assert undoes(replaced, doubled, kept)
    # Undone, and something changed further on: still undone.
    assert undoes(below, typed + "\n\ndef more():\n    pass\n", kept + "\n\ndef more():\n    return 1\n")


def test_the_language_servers_options_turn_suggestions_off_and_name_the_format():
    from lsp.options import parse_options

    options, warnings = parse_options({"nextEdits": False, "nextEditFormat": "instruct"})
    assert (options.next_edits, options.next_edit_format, warnings) == (False, "instruct", [])
    options, warnings = parse_options({"nextEditFormat": "nope", "nextEdits": "yes"})
    assert (options.next_edits, options.next_edit_format) == (True, "auto") and len(warnings) == 2
