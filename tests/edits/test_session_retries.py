"""An answer the integrity check refuses (it lost a definition) is asked for once more with the
reason, as a syntax or lint refusal is: a model that answered only what it changed mends it."""
from __future__ import annotations

from rewriter.edits.checks.integrity import FileIntegrity, Status
from rewriter.edits.session import EditSession, Finished
from rewriter.edits.target import Target
from tests.helpers.gated import AnsweringEngine

FILE = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
ONLY_ADD = "def add(a, b):\n    return a + b\n"  # the changed function alone: mul lost
FIXED = FILE.replace("a - b", "a + b")


def finish(answers) -> tuple[Finished, list]:
    engine = AnsweringEngine(lambda request: answers[len(engine.requests) - 1])
    session = EditSession(engine, Target.whole(FILE), "Fix the bug in add.", "python",
                          integrity=FileIntegrity(FILE, "python"))
    (finished,) = [event for event in session.run() if isinstance(event, Finished)]
    return finished, engine.requests


def test_a_lost_definition_is_asked_again_with_the_reason_and_a_whole_answer_kept():
    finished, requests = finish([ONLY_ADD, FIXED])
    assert "it would lose function mul" in requests[1].instruction and "Fix that." in requests[1].instruction
    assert finished.decision.status == Status.APPLIED and finished.decision.text == FIXED
    assert finished.restart and "it would lose function mul" in finished.retried


def test_a_second_answer_that_loses_it_again_is_refused_and_nothing_is_asked_a_third_time():
    finished, requests = finish([ONLY_ADD, ONLY_ADD, FIXED])
    assert len(requests) == 2 and finished.decision.refused and finished.decision.text == FILE
