"""Try another (rewriter.tryAnother): a final proposal's request asked again for a candidate it has
not shown, from the engine's branches (the scripted engine's `branches`), then its sampled answers
(the rule's `sampled`); the proposal keeps its id
and takes the candidate's hunks. Refused once a change of it was accepted; an engine without
branches, or no candidate left that passes the checks, leaves the proposal as it was."""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from tests.helpers.lsp import DOCSTRINGS, SAMPLE, SCRIPT, URI, VSCODE, Editor, Watched, expected

pytestmark = pytest.mark.asyncio

INSTRUCTION = "Document the functions"
BROKEN = [["def area(r):\n", "def area(r:\n"]]  # refused by the syntax guard
ONE_LINE = [["def area(r):\n", 'def area(r):\n    """Area."""\n']]
TWO = [["def perimeter(r):\n", 'def perimeter(r):\n    """Perimeter."""\n'], *ONE_LINE]
FSTRING = [['"circle of radius " + str(r)', 'f"circle of radius {r:.2f}"']]
PERCENT = [['"circle of radius " + str(r)', '"circle of radius %.2f" % r']]
FORMAT = [['"circle of radius " + str(r)', '"circle of radius {:.2f}".format(r)']]
RULES = [{"instruction": INSTRUCTION, "replace": DOCSTRINGS, "branches": [DOCSTRINGS, BROKEN, ONE_LINE, TWO]},
         {"instruction": "use an f-string", "replace": FSTRING, "branches": [PERCENT], "sampled": FORMAT}]


@asynccontextmanager
async def proposing(tmp_path, branches: bool = True) -> AsyncIterator[tuple[Watched, str]]:
    """An editor whose engine has (or lacks) branches, showing a proposal of SAMPLE's rewrite."""
    script = {**SCRIPT, "branches": branches, "rules": RULES}
    watched = Watched(await Editor.start(VSCODE, script, tmp_path, {"review": True, "streamEdits": "always"}))
    try:
        watched.editor.open(URI, SAMPLE)
        result = await watched.editor.execute("rewriter.rewriteFile", {"uri": URI, "instruction": INSTRUCTION})
        assert result["status"] == "proposed" and result["hunks"] == 3, result
        await watched.settle()
        yield watched, result["proposal"]
    finally:
        await watched.editor.stop()


def proposed(watched: Watched) -> str:
    """The document with the last proposal's hunks applied."""
    text = watched.editor.text(URI)
    lines = text.splitlines(keepends=True)
    for hunk in reversed(watched.last()["hunks"]):
        start, end = hunk["range"]["start"]["line"], hunk["range"]["end"]["line"]
        lines[start:end] = [hunk["newText"]]
    return "".join(lines)


async def test_each_try_takes_the_next_candidate_that_passes_until_none_is_left(tmp_path):
    async with proposing(tmp_path) as (watched, proposal):
        editor = watched.editor
        actions = await editor.code_actions(URI, (3, 0), (5, 0))
        offered = [a for a in actions if a.title == "Try another candidate"]
        assert offered and offered[0].command.command == "rewriter.tryAnother"
        assert list(offered[0].command.arguments) == [{"proposal": proposal}]

        # The first branch is the text shown already, the second does not parse: the third it is.
        answer = await editor.execute("rewriter.tryAnother", {"proposal": proposal, "wait": True})
        assert answer["status"] == "proposed" and answer["proposal"] == proposal and answer["hunks"] == 1, answer
        assert "branch 3" in answer["message"]
        await watched.settle()
        assert watched.last()["final"] and proposed(watched) == expected(SAMPLE, ONE_LINE)
        answer = await editor.execute("rewriter.tryAnother", {"proposal": proposal, "wait": True})
        assert answer["status"] == "proposed" and answer["hunks"] == 2, answer
        await watched.settle()
        assert proposed(watched) == expected(SAMPLE, TWO)

        answer = await editor.execute("rewriter.tryAnother", {"proposal": proposal, "wait": True})
        assert answer["status"] == "unchanged", answer
        # four branches, then four answers sampled to the request (the script answers them as it did the first)
        assert answer["message"].startswith("no other candidate passed the checks (8 decoded)")
        await watched.settle()
        assert watched.ended == [] and proposed(watched) == expected(SAMPLE, TWO)
        assert (await editor.execute("rewriter.acceptAll", {"proposal": proposal}))["status"] == "ok"
        assert editor.text(URI) == expected(SAMPLE, TWO) and editor.edits


async def test_a_refined_proposal_asks_the_refines_request_again(tmp_path):
    async with proposing(tmp_path) as (watched, proposal):
        editor = watched.editor
        refined = await editor.execute("rewriter.refine", {"proposal": proposal, "instruction": "use an f-string",
                                                          "wait": True})
        assert refined["status"] == "proposed", refined
        answer = await editor.execute("rewriter.tryAnother", {"proposal": proposal, "wait": True})
        assert answer["status"] == "proposed" and answer["proposal"] == proposal, answer
        await watched.settle()
        assert watched.last()["instruction"] == "use an f-string"
        assert proposed(watched) == expected(expected(SAMPLE, DOCSTRINGS), PERCENT)
        # its one branch shown, the next candidate is an answer sampled to the same request
        answer = await editor.execute("rewriter.tryAnother", {"proposal": proposal, "wait": True})
        assert answer["status"] == "proposed" and "sampled (2 decoded)" in answer["message"], answer
        await watched.settle()
        assert proposed(watched) == expected(expected(SAMPLE, DOCSTRINGS), FORMAT)


async def test_try_another_is_refused_once_a_change_was_accepted(tmp_path):
    async with proposing(tmp_path) as (watched, proposal):
        editor = watched.editor
        hunk = watched.last()["hunks"][0]
        assert (await editor.execute("rewriter.acceptHunk", {"proposal": proposal, "hunk": hunk["id"]}))["status"] == "ok"
        answer = await editor.execute("rewriter.tryAnother", {"proposal": proposal, "wait": True})
        assert answer == {"status": "stale", "message": answer["message"], "remaining": 2}
        assert "accepted already" in answer["message"]
        actions = await editor.code_actions(URI, (3, 0), (5, 0))
        assert not any(a.title == "Try another candidate" for a in actions or [])
        answer = await editor.execute("rewriter.tryAnother", {"proposal": "nope"})
        assert answer["status"] == "unknown"


async def test_an_engine_without_branches_says_so_and_leaves_the_proposal(tmp_path):
    async with proposing(tmp_path, branches=False) as (watched, proposal):
        editor = watched.editor
        before = watched.last()["hunks"]
        answer = await editor.execute("rewriter.tryAnother", {"proposal": proposal, "wait": True})
        assert answer["status"] == "refused" and "offers no other candidates" in answer["message"], answer
        await watched.settle()
        assert watched.ended == [] and watched.last()["hunks"] == before
        assert (await editor.execute("rewriter.acceptAll", {"proposal": proposal}))["status"] == "ok"
        assert editor.text(URI) == expected(SAMPLE, DOCSTRINGS)
