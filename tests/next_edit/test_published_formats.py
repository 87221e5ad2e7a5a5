"""The published next-edit formats (Sweep's file blocks, Zeta's editable region and cursor markers)
rendered on examples written here, against the prompts their authors' code renders, and their
answers read back."""
from __future__ import annotations

from rewriter.next_edit.base import NextEditInput, RecentEdit
from rewriter.next_edit.formats import FORMATS, format_for_model, format_named
from rewriter.next_edit.formats.sweep import SweepFormat
from rewriter.next_edit.formats.zeta import ZetaFormat

DOCUMENT = "".join(f"line {n}\n" for n in range(12)).replace("line 6\n", "def total(values):\n")
# The user renamed `xs` to `values` on line 6; the cursor stands after `values`.
RENAME = RecentEdit(path="src/sums.py", line=6, before="def total(xs):\n", after="def total(values):\n")
REQUEST = NextEditInput(path="src/sums.py", language="python", text=DOCUMENT, window=(4, 9), cursor=(6, 16),
                        edits=(RENAME,))


def test_sweep_renders_the_edits_then_the_original_current_and_updated_blocks():
    prompt = SweepFormat().render(REQUEST)
    assert prompt.raw == (
        "<|file_sep|>src/sums.py.diff\n"
        "original:\ndef total(xs):\nupdated:\ndef total(values):\n"
        "<|file_sep|>original/src/sums.py\n"
        "line 4\nline 5\ndef total(xs):\nline 7\nline 8\n"  # the window before the latest edit
        "<|file_sep|>current/src/sums.py\n"
        "line 4\nline 5\ndef total(values):\nline 7\nline 8\n"
        "<|file_sep|>updated/src/sums.py\n")
    assert prompt.prediction == REQUEST.window_text and prompt.messages is None
    assert prompt.stop == ("<|file_sep|>", "</s>")


def test_sweep_keeps_the_latest_three_edits_oldest_first_and_an_edit_outside_the_window_leaves_it_whole():
    edits = tuple(RecentEdit("src/sums.py", 0, f"old {n}\n", f"line {n}\n") for n in range(4))
    outside = NextEditInput("src/sums.py", "python", DOCUMENT, (4, 9), (6, 0), edits)
    raw = SweepFormat().render(outside).raw
    assert "old 0" not in raw and raw.index("old 1") < raw.index("old 2") < raw.index("old 3")
    assert "<|file_sep|>original/src/sums.py\nline 4\nline 5\ndef total(values):\n" in raw
    insertion = NextEditInput("a.py", "", "x\ny\n", (0, 2), (1, 0), (RecentEdit("a.py", 1, "", "y\n"),))
    assert "<|file_sep|>a.py.diff\noriginal:\nupdated:\ny\n<|file_sep|>original/a.py\nx\n<|file_sep|>current/a.py\n" \
        in SweepFormat().render(insertion).raw


def test_sweep_reads_the_window_back_up_to_a_separator():
    sweep = SweepFormat()
    rewritten = "line 4\nline 5\ndef total(values):\n    return sum(values)\nline 8\n"
    assert sweep.window_of(rewritten + "<|file_sep|>other.py\n", REQUEST) == rewritten
    assert sweep.window_of(rewritten.removesuffix("\n") + "</s>", REQUEST) == rewritten
    assert sweep.window_of(sweep.render(REQUEST).prediction, REQUEST) == REQUEST.window_text  # round trip
    assert sweep.window_of("<|file_sep|>", REQUEST) is None


def test_zeta_renders_the_instruction_the_edits_and_the_excerpt_with_its_markers():
    prompt = ZetaFormat().render(REQUEST)
    assert prompt.raw == (
        "### Instruction:\n"
        "You are a code completion assistant and your task is to analyze user edits and then rewrite an "
        "excerpt that the user provides, suggesting the appropriate edits within the excerpt, taking "
        "into account the cursor location.\n\n"
        "### User Edits:\n\n"
        "User edited src/sums.py:\n```diff\n@@ -7,1 +7,1 @@\n-def total(xs):\n+def total(values):\n```"
        "\n\n### User Excerpt:\n\n"
        "```src/sums.py\n"
        "<|start_of_file|>\n"  # five lines of context before the window reach the file's start
        "line 0\nline 1\nline 2\nline 3\n"
        "<|editable_region_start|>\n"
        "line 4\nline 5\ndef total(values<|user_cursor_is_here|>):\nline 7\nline 8\n"
        "<|editable_region_end|>\n"
        "line 9\nline 10\nline 11\n"
        "```\n\n### Response:\n")
    assert prompt.stop == ("<|editable_region_end|>",)
    # Unchanged, the answer repeats the excerpt to the region's end, the cursor marker left out.
    assert prompt.prediction == ("```src/sums.py\n<|start_of_file|>\nline 0\nline 1\nline 2\nline 3\n"
                                 "<|editable_region_start|>\nline 4\nline 5\ndef total(values):\nline 7\nline 8\n"
                                 "<|editable_region_end|>")


def test_zeta_leaves_out_the_start_of_file_marker_away_from_the_start_and_joins_several_edits():
    later = NextEditInput("src/sums.py", "python", DOCUMENT, (7, 9), (7, 0),
                          (RENAME, RecentEdit("src/sums.py", 8, "", "line 8\n")))
    raw = ZetaFormat().render(later).raw
    assert "<|start_of_file|>" not in raw
    assert "```src/sums.py\nline 2\nline 3\nline 4\nline 5\ndef total(values):\n<|editable_region_start|>\n" \
        "<|user_cursor_is_here|>line 7\nline 8\n<|editable_region_end|>\nline 9\n" in raw
    assert "+def total(values):\n```\n\nUser edited src/sums.py:\n```diff\n@@ -8,0 +9,1 @@\n+line 8\n```" in raw


def test_zeta_reads_the_region_back_as_zed_does():
    zeta = ZetaFormat()
    prediction = zeta.render(REQUEST).prediction
    assert zeta.window_of(prediction, REQUEST) == REQUEST.window_text  # round trip
    # The end marker cut as the stop string, a cursor marker written back: the same region.
    cut = prediction.removesuffix("<|editable_region_end|>").replace("values)", "values)<|user_cursor_is_here|>")
    assert zeta.window_of(cut, REQUEST) == REQUEST.window_text
    rewritten = "<|editable_region_start|>\nline 4\ndef total(values):\n    return sum(values)\n<|editable_region_end|>"
    assert zeta.window_of(rewritten, REQUEST) == "line 4\ndef total(values):\n    return sum(values)\n"
    assert zeta.window_of("<|editable_region_start|>\n<|editable_region_end|>", REQUEST) == "\n"
    assert zeta.window_of("line 4\nline 5\n", REQUEST) is None  # no region opened: not the format


def test_formats_are_picked_by_name_or_by_the_models_name():
    assert format_named("sweep") is FORMATS["sweep"] and format_named("zeta") is FORMATS["zeta"]
    assert format_for_model("sweepai/sweep-next-edit-1.5B").name == "sweep"
    assert format_for_model("/models/zed-industries/zeta").name == "zeta"
    assert format_for_model("qwen2.5-coder-1.5b-instruct") is None
    try:
        format_named("fim")
    except ValueError as error:
        assert "sweep" in str(error) and "zeta" in str(error)
    else:
        raise AssertionError("an unknown format was accepted")
