"""A model's snippet merge must keep what the snippet shows and what its markers stand for
(edits/checks/snippet_kept.py), and the pipeline refuses one that does not, saying which lines."""
from __future__ import annotations

from rewriter.edits.checks.integrity import Status
from rewriter.edits.checks.snippet_kept import merge_omissions, unshown_stretch
from rewriter.edits.pipeline import TargetEdit
from rewriter.edits.target import Target

FILE = '''import os


def find(items, wanted):
    """The first item equal to wanted."""
    for item in items:
        if item == wanted:
            return item
    return None


def main():
    print(find([1, 2], 2))
'''
# A hunk with two lines of context on each side: `find` compares with `is`.
SNIPPET = '''# ... existing code ...
    for item in items:
        if item is wanted:
            return item
    return None
# ... existing code ...
'''
RIGHT = FILE.replace("item == wanted", "item is wanted")
FIND = (FILE.index("def find"), FILE.index("\n\ndef main") + 1)  # the region the merge goes in


def omissions(merged_file: str, snippet: str = SNIPPET, region: tuple[int, int] = FIND) -> list[str]:
    start, end = region
    tail = len(FILE) - end
    return merge_omissions(FILE, start, end, snippet, merged_file[start:len(merged_file) - tail])


def test_the_right_merge_misses_nothing():
    assert omissions(RIGHT) == []


def test_a_line_the_snippet_shows_as_context_may_not_go():
    assert omissions(RIGHT.replace("    return None\n", "")) == ["return None"]


def test_a_line_a_marker_stands_for_may_not_go_or_change():
    # The docstring lies before the snippet's first line, under its leading marker.
    assert omissions(RIGHT.replace('    """The first item equal to wanted."""\n', "")) == [
        '"""The first item equal to wanted."""']
    assert omissions(RIGHT.replace("equal to wanted", "that is wanted")) == [
        '"""The first item equal to wanted."""']


def test_lines_between_two_anchors_without_a_marker_are_removed_by_the_snippet():
    removes = "# ... existing code ...\n    for item in items:\n            return item\n    return None\n"
    merged = FILE.replace("        if item == wanted:\n", "").replace("            return item", "        return item")
    assert omissions(merged, removes) == []


def test_blank_context_after_a_hunk_places_a_removal_before_the_marker():
    # A hunk that drops `return None`: its context after is the blank lines, then the marker.
    removes = "# ... existing code ...\n        if item == wanted:\n            return item\n\n\n# ... existing code ...\n"
    region = (FIND[0], len(FILE))
    assert omissions(FILE.replace("    return None\n", ""), removes, region) == []
    assert omissions(FILE.replace("    return None\n", "").replace("    print(", "    return print("), removes,
                     region) == ["print(find([1, 2], 2))"]


def test_new_lines_replace_what_stood_between_their_anchors():
    snippet = "def find(items, wanted):\n    return next((item for item in items if item == wanted), None)\n"
    merged = FILE[:FIND[0]] + snippet + FILE[FIND[1] - 1:]
    assert omissions(merged, snippet) == []


def test_a_place_the_snippet_does_not_pin_requires_only_the_snippet_s_lines():
    # Both functions hold the context line: which copy the marker keeps is not clear, so the check
    # requires only what the snippet shows rather than guess.
    twice = FILE + "\n\ndef last(items):\n    for item in items:\n        pass\n    return None\n"
    snippet = "# ...\n    for item in items:\n        print(item)\n# ...\n"
    start, end = twice.index("def find"), len(twice)
    merged = twice[start:].replace("        pass\n", "        print(item)\n").replace("    return None\n", "", 1)
    assert merge_omissions(twice, start, end, snippet, merged) == []
    assert merge_omissions(twice, start, end, snippet, merged.replace("print(item)", "pass")) == ["print(item)"]


def test_the_pipeline_refuses_a_merge_that_leaves_out_a_kept_line_and_names_it():
    target = Target.of_span(FILE, *FIND)
    edit = TargetEdit(target, "Merge this update", "python", judged_instruction="", snippet=SNIPPET)
    code = RIGHT[FIND[0]:FIND[1] - len(FILE)]
    applied = edit.finish(code)
    assert applied.status == Status.APPLIED
    refused = edit.finish(code.replace("    return None\n", ""))
    assert refused.refused and refused.reason == "the merge leaves out code the snippet keeps: 'return None'"
    # the same answer to a plain instruction (no snippet) is another check's to judge
    plain = TargetEdit(target, "Simplify", "python").finish(code.replace("    return None\n", ""))
    assert not plain.refused


def test_the_snippet_is_placed_around_its_region_though_the_file_repeats_its_lines_further_on():
    # `find_again` repeats find's body far below: around the region the context is unique still.
    filler = "".join(f"    step_{n} = {n}\n" for n in range(10))
    far = FILE + f"\n\ndef setup():\n{filler}\n\ndef find_again(items, wanted):\n" + FILE[FILE.index("    for item"):FIND[1]]
    start, end = FIND
    merged = RIGHT[start:end].replace('    """The first item equal to wanted."""\n', "")
    assert merge_omissions(far, start, end, SNIPPET, merged) == ['"""The first item equal to wanted."""']


def test_a_merge_that_changes_nothing_though_the_snippet_shows_new_lines_is_refused():
    target = Target.of_span(FILE, *FIND)
    unchanged = TargetEdit(target, "Merge this update", "python", snippet=SNIPPET).finish(FILE[FIND[0]:FIND[1]])
    assert unchanged.refused and unchanged.reason.endswith("'if item is wanted:'")
    # a snippet the file holds already: nothing to change, nothing missing
    same = SNIPPET.replace("item is wanted", "item == wanted")
    assert not TargetEdit(target, "Merge this update", "python", snippet=same).finish(FILE[FIND[0]:FIND[1]]).refused


# Two alike loops: the hunk's context (the loop line, the check after it) fits both, so where it
# goes is pinned only by the blank line before the loop, which the second one has.
LOOPS = '''def test_cache(cache):
    for value in range(3):
        cache.set(value, value)

    cache.check()

    for value in range(3):
        assert cache.delete(value)

    cache.check()
'''
LOOP_HUNK = '''# ... existing code ...

    for value in range(3):
        deleted = cache.delete(value)
        assert deleted

    cache.check()
# ... existing code ...
'''


def test_a_merge_must_show_each_stretch_between_markers_as_one_run_of_lines():
    right = LOOPS.replace("        assert cache.delete(value)\n", "        deleted = cache.delete(value)\n"
                                                                   "        assert deleted\n")
    assert unshown_stretch(LOOPS, right, LOOP_HUNK) == []
    # the new lines written into the first loop: every line the snippet shows is there, but
    # `cache.set(value, value)`, which the snippet never pointed at, is lost
    wrong = LOOPS.replace("        cache.set(value, value)\n", "        deleted = cache.delete(value)\n"
                                                               "        assert deleted\n")
    assert unshown_stretch(LOOPS, wrong, LOOP_HUNK)[:2] == ["", "for value in range(3):"]
    edit = TargetEdit(Target.whole(LOOPS), "Merge this update", "python", snippet=LOOP_HUNK)
    assert not edit.finish(right).refused
    refused = edit.finish(wrong)
    assert refused.refused and refused.reason.startswith(
        "the merge does not show the snippet's lines as it does: 'for value in range(3):'")


def test_stretches_must_come_in_the_snippet_s_order_and_a_snippet_without_markers_has_no_stretches():
    first, second = "    cache.check()\n\n    for value in range(3):\n", "        assert cache.delete(value)\n"
    assert unshown_stretch(LOOPS, LOOPS, f"# ...\n{first}# ...\n{second}# ...\n") == []
    assert unshown_stretch(LOOPS, LOOPS, f"# ...\n{second}# ...\n{first}# ...\n") == [line.strip() for line in
                                                                                      first.splitlines()]
    assert unshown_stretch(LOOPS, LOOPS.replace("\n\n", "\n"), first + second) == []


def test_a_blank_line_at_a_stretch_s_edge_may_stand_for_the_file_s_start_or_end():
    assert unshown_stretch(LOOPS, LOOPS, "\ndef test_cache(cache):\n# ...\n    cache.check()\n\n") == []


def test_a_blank_line_next_to_a_marker_counts_only_where_it_tells_places_apart():
    # A chat model's blank line after a marker, where the file has none: layout, not a place.
    snippet = "def test_cache(cache):\n    # ...\n\n        assert cache.delete(value)\n# ...\n"
    assert unshown_stretch(LOOPS, LOOPS, snippet) == []
    # In LOOP_HUNK the blank before the loop line is what tells the second loop from the first.
    wrong = LOOPS.replace("        cache.set(value, value)\n", "        deleted = cache.delete(value)\n"
                                                               "        assert deleted\n")
    assert unshown_stretch(LOOPS, wrong, LOOP_HUNK) != []
    assert unshown_stretch(LOOPS, wrong, LOOP_HUNK.replace("# ... existing code ...\n\n", "# ...\n")) == []
