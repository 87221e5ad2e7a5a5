"""The review (issue 39) end to end: the language server as a subprocess with the scripted engine,
the test editor as its client. With review on, no change is kept in a document unless the user
accepted it; a hunk is never applied at a stale place; refine rewrites the proposal.
Also `rewriter.applySnippet` (issue 40) with review on and off."""
from __future__ import annotations

import time

import pytest
import pytest_asyncio
from lsprotocol import types

from tests.helpers.lsp import DOCSTRINGS, NVIM, SAMPLE, SCRIPT, URI, VSCODE, Editor, Watched, expected

pytestmark = pytest.mark.asyncio

FSTRING = [['"circle of radius " + str(r)', 'f"circle of radius {r:.2f}"']]
MERGED = [["return 2 * math.pi * r", "return math.tau * r"]]
# The scripted model's merges of AMBIGUOUS: right, and (told to "keep area") one that leaves out a line it shows
DESCRIBED = ['    # rewrite: use an f-string with two decimals\n    return "circle of radius " + str(r)', "    return str(r)"]
MODEL_MERGED = [["return math.pi * r * r", "return math.pi * r ** 2"], DESCRIBED]
REVIEW_SCRIPT = {**SCRIPT, "rules": [*SCRIPT["rules"], {"instruction": "keep area", "replace": [DESCRIBED]},
                                     {"instruction": "Merge this update", "replace": MODEL_MERGED}]}


async def start(tmp_path, profile=VSCODE, review=True, **kwargs) -> Watched:
    editor = await Editor.start(profile, REVIEW_SCRIPT, tmp_path, {"review": review, "streamEdits": "always"},
                                **kwargs)
    return Watched(editor)


@pytest_asyncio.fixture
async def review(tmp_path):
    watched = await start(tmp_path)
    yield watched
    await watched.editor.stop()


async def propose(watched: Watched, instruction: str = "Add docstrings") -> dict:
    editor = watched.editor
    editor.open(URI, SAMPLE)
    result = await editor.execute("rewriter.rewriteFile", {"uri": URI, "instruction": instruction})
    assert result["status"] == "proposed", result
    await watched.settle()
    return result


async def test_a_proposal_changes_nothing_until_accepted_hunk_by_hunk(review):
    result = await propose(review)
    editor = review.editor
    assert result["hunks"] == 3 and editor.text(URI) == SAMPLE and editor.edits == []
    final = review.last()
    assert final["final"] and final["id"] == result["proposal"] and final["version"] == 1
    assert any(not p["final"] for p in review.proposals)  # hunks shown while the rewrite streamed
    assert final["stats"]["accepted_prediction_tokens"] > 0
    first, second, third = final["hunks"]
    # Each docstring is a line inserted after its `def` line: an empty range there.
    assert first["range"] == {"start": {"line": 4, "character": 0}, "end": {"line": 4, "character": 0}}
    assert first["oldText"] == "" and first["newText"] == '    """The area of a circle of radius r."""\n'

    answer = await editor.execute("rewriter.acceptHunk", {"proposal": final["id"], "hunk": first["id"]})
    assert answer == {"status": "ok", "message": answer["message"], "remaining": 2}
    assert editor.text(URI) == expected(SAMPLE, DOCSTRINGS[:1])
    assert len(editor.edits) == 1 and editor.edits[0].edit.document_changes[0].text_document.version == 1
    answer = await editor.execute("rewriter.rejectHunk", {"proposal": final["id"], "hunk": second["id"]})
    assert answer["status"] == "ok" and answer["remaining"] == 1 and len(editor.edits) == 1
    await review.settle()
    moved = review.last()["hunks"]
    assert [h["id"] for h in moved] == [third["id"]]  # ids stay; the hunk moved down a line
    assert moved[0]["range"]["start"]["line"] == third["range"]["start"]["line"] + 1

    answer = await editor.execute("rewriter.acceptAll", {"proposal": final["id"]})
    assert answer["status"] == "ok" and answer["remaining"] == 0
    assert editor.text(URI) == expected(SAMPLE, [DOCSTRINGS[0], DOCSTRINGS[2]])
    await review.settle()
    assert review.ended[-1]["reason"] == "accepted" and review.ended[-1]["id"] == final["id"]
    answer = await editor.execute("rewriter.acceptHunk", {"proposal": final["id"], "hunk": third["id"]})
    assert answer["status"] == "unknown"


async def test_rejecting_everything_leaves_the_document_as_it_was(review):
    result = await propose(review)
    answer = await review.editor.execute("rewriter.rejectAll", {"proposal": result["proposal"]})
    assert answer == {"status": "ok", "message": answer["message"], "remaining": 0}
    await review.settle()
    assert review.editor.text(URI) == SAMPLE and review.editor.edits == []
    assert review.ended[-1]["reason"] == "rejected"


def typed(line: int, text: str, end_line: int | None = None) -> types.TextEdit:
    """The user replaces lines [line, end_line) (an insertion without end_line) by `text`."""
    end = line if end_line is None else end_line
    return types.TextEdit(range=types.Range(types.Position(line, 0), types.Position(end, 0)), new_text=text)


async def test_typing_moves_the_hunks_and_typing_in_one_ends_the_review(review):
    result = await propose(review)
    editor = review.editor
    hunks = review.last()["hunks"]
    editor.change(URI, [typed(0, "# a comment\n# and another\n")])  # above every hunk
    await review.settle()
    assert [h["range"]["start"]["line"] for h in review.last()["hunks"]] == \
        [h["range"]["start"]["line"] + 2 for h in hunks]
    answer = await editor.execute("rewriter.acceptHunk", {"proposal": result["proposal"], "hunk": hunks[1]["id"]})
    assert answer["status"] == "ok"
    assert editor.text(URI) == "# a comment\n# and another\n" + expected(SAMPLE, DOCSTRINGS[1:2])

    line = review.last()["hunks"][-1]["range"]["start"]["line"]  # the docstring goes in below `def describe`
    editor.change(URI, [typed(line - 1, "def describe(radius):\n    # the radius\n", line + 1)])
    await review.settle()
    assert review.ended[-1]["reason"] == "stale" and "edited" in review.ended[-1]["message"]
    before = editor.text(URI)
    answer = await editor.execute("rewriter.acceptAll", {"proposal": result["proposal"]})
    assert answer["status"] == "unknown" and editor.text(URI) == before and len(editor.edits) == 1


async def test_an_accept_for_a_version_the_editor_has_left_applies_nothing(review):
    result = await propose(review)
    editor = review.editor
    apply = editor._apply_edit

    async def user_types_first(params):  # the user's keystroke reaches the editor before our edit
        editor.change(URI, [typed(0, "import os\n")])
        return await apply(params)

    editor._apply_edit = user_types_first
    hunk = review.last()["hunks"][0]
    answer = await editor.execute("rewriter.acceptHunk", {"proposal": result["proposal"], "hunk": hunk["id"]})
    assert answer["status"] == "stale" and "nothing was applied" in answer["message"]
    assert editor.text(URI) == "import os\n" + SAMPLE  # only the user's line
    editor._apply_edit = apply
    await review.settle()
    moved = review.last()["hunks"][0]
    assert moved["id"] == hunk["id"] and moved["range"]["start"]["line"] == hunk["range"]["start"]["line"] + 1
    answer = await editor.execute("rewriter.acceptHunk", {"proposal": result["proposal"], "hunk": hunk["id"]})
    assert answer["status"] == "ok" and editor.text(URI) == "import os\n" + expected(SAMPLE, DOCSTRINGS[:1])


async def test_neovim_reports_the_accepted_edit_after_replying(tmp_path):
    watched = await start(tmp_path, NVIM, reply_before_change=True)
    try:
        result = await propose(watched)
        answer = await watched.editor.execute("rewriter.acceptAll", {"proposal": result["proposal"]})
        assert answer["status"] == "ok" and watched.editor.text(URI) == expected(SAMPLE, DOCSTRINGS)
    finally:
        await watched.editor.stop()


async def test_refine_rewrites_the_proposal_with_it_as_the_prediction(review):
    result = await propose(review)
    editor = review.editor
    first = review.last()["hunks"][0]
    await editor.execute("rewriter.rejectHunk", {"proposal": result["proposal"], "hunk": first["id"]})
    refined = await editor.execute("rewriter.refine", {"proposal": result["proposal"],
                                                      "instruction": "use an f-string", "wait": True})
    assert refined["status"] == "proposed" and refined["proposal"] == result["proposal"], refined
    await review.settle()
    final = review.last()
    assert final["final"] and final["instruction"] == "use an f-string" and editor.text(URI) == SAMPLE
    # The proposal's text (two docstrings) was the prediction: the scripted engine accepts the answer
    # up to its first difference from it, the last line (with the document as the prediction, the
    # first docstring would have been that difference).
    stats = final["stats"]
    assert stats["accepted_prediction_tokens"] > 5 * stats["rejected_prediction_tokens"] > 0
    assert len(final["hunks"]) == 3  # two docstrings and the f-string, against the document
    await editor.execute("rewriter.acceptAll", {"proposal": result["proposal"]})
    assert editor.text(URI) == expected(expected(SAMPLE, DOCSTRINGS[1:]), FSTRING)


async def test_closing_or_a_new_rewrite_ends_the_review(review):
    first = await propose(review)
    second = await review.editor.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add type hints"})
    await review.settle()
    assert review.ended[-1] == {"id": first["proposal"], "uri": URI, "reason": "superseded",
                                "message": review.ended[-1]["message"]}
    review.editor.client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=URI)))
    await review.settle()
    assert review.ended[-1]["reason"] == "closed" and review.ended[-1]["id"] == second["proposal"]


async def test_review_off_applies_directly_as_before(tmp_path):
    watched = await start(tmp_path, review=False)
    try:
        watched.editor.open(URI, SAMPLE)
        result = await watched.editor.execute("rewriter.rewriteFile", {"uri": URI, "instruction": "Add docstrings"})
        assert result["status"] == "done" and watched.editor.text(URI) == expected(SAMPLE, DOCSTRINGS)
        assert watched.proposals == [] and "proposal" not in result
    finally:
        await watched.editor.stop()


SNIPPET = "# ... existing code ...\n\ndef perimeter(r):\n    return math.tau * r\n\n\n# ... existing code ...\n"
AMBIGUOUS = "def area(r):\n    return math.pi * r ** 2\n\n\ndef describe(r):\n    return str(r)\n"


@pytest.mark.parametrize("review_on", [False, True])
async def test_apply_snippet_merges_without_a_model(tmp_path, review_on):
    watched = await start(tmp_path, review=review_on)
    editor = watched.editor
    try:
        editor.open(URI, SAMPLE)
        result = await editor.execute("rewriter.applySnippet", {"uri": URI, "snippet": SNIPPET})
        want = expected(SAMPLE, MERGED)
        if not review_on:
            assert result["status"] == "done" and editor.text(URI) == want
            return
        assert result["status"] == "proposed" and result["hunks"] == 1 and editor.text(URI) == SAMPLE
        await editor.execute("rewriter.acceptAll", {"proposal": result["proposal"]})
        assert editor.text(URI) == want
    finally:
        await editor.stop()


async def test_apply_snippet_refusals_leave_the_document_and_ambiguity_goes_to_the_model(review):
    editor = review.editor
    editor.open(URI, SAMPLE)
    result = await editor.execute("rewriter.applySnippet", {"uri": URI, "snippet": "# ... existing code ...\n"})
    assert result["status"] == "refused" and "only markers" in result["message"]
    assert editor.text(URI) == SAMPLE and editor.edits == []
    await review.settle()
    assert any("not merged" in m for m in review.messages)

    # the model's merge that leaves out a line the snippet shows is refused, saying which
    result = await editor.execute("rewriter.applySnippet", {"uri": URI, "snippet": AMBIGUOUS, "wait": True,
                                                            "instruction": "keep area"})
    assert result["status"] == "refused", result
    assert "leaves out code the snippet keeps: 'return math.pi * r ** 2'" in result["message"]
    assert editor.text(URI) == SAMPLE

    result = await editor.execute("rewriter.applySnippet", {"uri": URI, "snippet": AMBIGUOUS, "wait": True})
    assert result["status"] == "proposed", result  # the scripted model merged it
    await editor.execute("rewriter.acceptAll", {"proposal": result["proposal"]})
    assert editor.text(URI) == expected(SAMPLE, MODEL_MERGED)


BIG = "".join(f"def f{i}(r):\n    return {i} * r\n\n\n" for i in range(500))  # 2,000 lines
BIG_SNIPPET = "".join(f"# ... existing code ...\n\ndef f{i}(r):\n    return -{i} * r\n\n\n" for i in range(50, 450, 50)) \
    + "# ... existing code ...\n"


async def test_accept_and_reject_on_a_2000_line_file_answer_promptly(review):
    editor = review.editor
    editor.open(URI, BIG)
    result = await editor.execute("rewriter.applySnippet", {"uri": URI, "snippet": BIG_SNIPPET})
    assert result["status"] == "proposed" and result["hunks"] == 8, result
    await review.settle()
    timings = []
    for index in range(8):
        hunk = review.last()["hunks"][0]
        command = "rewriter.acceptHunk" if index % 2 else "rewriter.rejectHunk"
        started = time.perf_counter()
        answer = await editor.execute(command, {"proposal": result["proposal"], "hunk": hunk["id"]})
        timings.append(time.perf_counter() - started)
        assert answer["status"] == "ok" and answer["remaining"] == 7 - index
        await review.settle()
    accepted = [i for i in range(50, 450, 50)][1::2]
    assert editor.text(URI) == "".join(f"def f{i}(r):\n    return {'-' if i in accepted else ''}{i} * r\n\n\n"
                                       for i in range(500))
    # The round trip through the client (JSON-RPC, the edit and its didChange), on a shared CPU:
    # reported, and held to a bound that only a hang would break; the server's own part is in
    # tests/lsp/test_lsp_review_units.py.
    print(f"accept/reject round trips on 2,000 lines (ms): {[round(1000 * t, 1) for t in timings]}")
    assert sorted(timings)[len(timings) // 2] < 1.0
