"""The review's proposal (lsp/proposal.py) alone: hunks, how the user's typing moves them or ends
the review, accepted hunks landing, and the server's time per decision on a 2,000-line file."""
from __future__ import annotations

import time

from lsp.proposal import Asked, Proposal, ReviewHunk
from rewriter.edits.target import Target

TEXT = "".join(f"line {i}\n" for i in range(10))


def proposal(text: str = TEXT, region: range = range(0, 10)) -> Proposal:
    made = Proposal("1", "file:///a.py", "edit", text, 1, region)
    new = text.splitlines(keepends=True)[region.start:region.stop]
    new[2] = "LINE 2\n"  # a replacement
    new[5:5] = ["inserted\n"]  # an insertion before line 5
    made.propose_region(new)
    return made


def test_hunks_are_the_region_diff_and_keep_their_ids():
    made = proposal()
    assert [(h.id, h.start, h.end, h.old, h.new) for h in made.hunks] == [
        ("1", 2, 3, ("line 2\n",), ("LINE 2\n",)), ("2", 5, 5, (), ("inserted\n",))]
    made.propose([(2, 3, ("LINE 2\n",)), (7, 8, ("seven\n",))])
    assert [h.id for h in made.hunks] == ["1", "3"]  # the same hunk keeps its id
    assert made.proposed_text() == TEXT.replace("line 2\n", "LINE 2\n").replace("line 7\n", "seven\n")


def test_typing_outside_the_hunks_moves_them_inside_ends_the_review():
    made = proposal()
    assert made.document_changed("new\n" + TEXT, 2) is None  # a line above everything
    assert [(h.start, h.end) for h in made.hunks] == [(3, 4), (6, 6)] and made.region == range(1, 11)
    after = made.text.replace("line 4\n", "line four\n")  # between the hunks: only the later one moves
    assert made.document_changed(after, 3) is None and [(h.start, h.end) for h in made.hunks] == [(3, 4), (6, 6)]
    assert made.placed() and made.version == 3
    assert made.document_changed(after.replace("line 2\n", "line two\n"), 4) is not None  # inside a hunk


def test_try_another_asks_again_only_the_models_answer_unaccepted_and_unedited():
    made = proposal(region=range(2, 8))
    assert "not the model's answer" in made.why_not_asked_again()
    lines = made.text.splitlines(keepends=True)
    made.asked = Asked(Target.of_lines(made.text, range(2, 8)), "edit", None, (), "".join(lines[2:8]), ("shown",))
    assert made.why_not_asked_again() is None
    assert made.document_changed("new\n" + made.text, 2) is None  # above it: the region moves, its text stays
    assert made.why_not_asked_again() is None
    edited = made.text.replace("line 3\n", "line three\n")  # in the region, outside the hunks
    assert made.document_changed(edited, 3) is None and "edited since" in made.why_not_asked_again()
    made.document_changed(made.text.replace("line three\n", "line 3\n"), 4)
    made.accept([made.hunks[0].id])
    assert "accepted already" in made.why_not_asked_again()


def test_an_insertion_hunk_collides_only_with_a_change_around_its_point():
    hunk = ReviewHunk("1", 5, 5, (), ("x\n",))
    assert not hunk.collides(4, 5) and not hunk.collides(5, 6) and not hunk.collides(3, 3)
    assert hunk.collides(4, 6) and hunk.collides(5, 5)
    replacing = ReviewHunk("2", 2, 4, ("a\n", "b\n"), ("c\n",))
    assert not replacing.collides(4, 4) and not replacing.collides(2, 2) and replacing.collides(3, 3)
    assert replacing.collides(1, 3) and not replacing.collides(0, 2)


def test_an_accepted_hunk_lands_and_moves_the_rest():
    made = proposal()
    after = made.accept(["1"])
    assert made.document_changed(after, 2) is None  # the client's didChange of our edit
    assert [h.id for h in made.hunks] == ["2"] and made.accepted == 1 and made.text == after
    after = made.accept(["2"])
    made.answered(True)  # the client said it applied the edit; its didChange also brings the user's line
    assert made.document_changed("top\n" + after, 3) is None
    assert made.hunks == [] and made.text == "top\n" + after


def test_a_refused_accept_changes_nothing():
    made = proposal()
    made.accept(["2"])
    assert made.document_changed("top\n" + TEXT, 2) is None  # the user typed before our edit arrived
    made.answered(False)
    assert made.pending is None and [(h.start, h.end) for h in made.hunks] == [(3, 4), (6, 6)]


def test_a_decision_on_a_2000_line_file_takes_the_server_under_50_ms():
    text = "".join(f"value_{i} = {i}\n" for i in range(2000))
    lines = text.splitlines(keepends=True)
    made = Proposal("1", "file:///big.py", "edit", text, 1, range(0, 2000))
    made.propose([(i, i + 1, (f"value_{i} = -{i}\n",)) for i in range(100, 2000, 100)])
    timings = []
    for hunk_id in [h.id for h in made.hunks][:6]:
        started = time.perf_counter()
        assert made.placed()  # what an accept checks, makes and judges when its didChange comes
        after = made.accept([hunk_id])
        assert made.document_changed(after, None) is None
        made.reject([made.hunks[0].id])
        made.proposed_text()
        timings.append(time.perf_counter() - started)
    print(f"server time per accept (+ a reject) on 2,000 lines: {[round(1000 * t, 2) for t in timings]} ms")
    assert min(timings) < 0.05 and len(lines) == 2000
