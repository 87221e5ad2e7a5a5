"""An answer that comes back unchanged: the session tries the engine's branches and keeps the
first that changes the code and passes every check; without branches asked for, nothing changes."""
from __future__ import annotations

import pytest

from rewriter.apply.batch import apply_command
from rewriter.apply.plans import Options
from rewriter.edits.checks.integrity import FileIntegrity, Status
from rewriter.edits.options import EditOptions
from rewriter.edits.session import EditSession, Finished
from rewriter.edits.target import Target
from rewriter.engine import SamplingParams
from rewriter.results import RewriteResult, Stats
from tests.helpers.gated import AnsweringEngine

FILE = "def area(w, h):\n    return w * h\n\n\ndef main():\n    print(area(2, 3))\n"
HINTED = FILE.replace("def area(w, h):", "def area(w: float, h: float) -> float:")
LOST = "def main():\n    print(area(2, 3))\n"  # loses area: refused by the integrity check
BROKEN = FILE.replace("def main():", "def main(:")  # does not parse


class BranchingEngine(AnsweringEngine):
    """Answers every request with the code unchanged; its branches answer `branch_texts` in turn."""

    def __init__(self, branch_texts):
        super().__init__(lambda request: request.code)
        self.branch_texts = branch_texts
        self.asked: list[int] = []
        self.branched: list = []  # the requests branched

    def branches(self, request, count):
        self.asked.append(count)
        self.branched.append(request)
        for text in self.branch_texts[:count]:
            yield RewriteResult(text=text, answer="", stats=Stats(output_tokens=4, finish_reason="stop"))


def finish(engine, branches: int, sampling: SamplingParams | None = None) -> Finished:
    session = EditSession(engine, Target.whole(FILE), "Add type hints", "python", branches=branches,
                          sampling=sampling, integrity=FileIntegrity(FILE, "python"))
    (finished,) = [event for event in session.run() if isinstance(event, Finished)]
    return finished


def test_the_first_branch_that_changes_the_code_and_passes_every_check_is_kept():
    engine = BranchingEngine([FILE, LOST, BROKEN, HINTED, FILE.replace("w * h", "h * w")])
    finished = finish(engine, branches=4)
    assert finished.decision.status == Status.APPLIED and finished.decision.text == HINTED
    assert finished.candidates == 4 and finished.restart  # what streamed was the unchanged answer
    assert engine.asked == [4]


@pytest.mark.parametrize("texts, count", [([LOST, BROKEN, FILE], 3), ([HINTED], 0)])
def test_no_branch_passing_leaves_the_answer_unchanged(texts, count):
    engine = BranchingEngine(texts)
    finished = finish(engine, branches=count)
    assert finished.decision.text == FILE and finished.candidates == (3 if count else 0)
    assert engine.asked == ([3] if count else [])


def test_a_sampled_request_is_not_branched():
    engine = BranchingEngine([HINTED])
    assert finish(engine, branches=2, sampling=SamplingParams(temperature=0.7)).decision.text == FILE
    assert engine.asked == []


def test_apply_with_branches_reports_the_branch_that_changed_the_file(tmp_path):
    path = tmp_path / "shapes.py"
    path.write_text(FILE)
    engine = BranchingEngine([LOST, HINTED])
    code = apply_command([str(path)], Options("Add type hints", write=True, edit=EditOptions(branches=2)), lambda: engine,
                         quiet=True, say=lambda message: None)
    assert code == 0 and path.read_text() == HINTED


def test_the_cli_refuses_negative_branches_and_branches_for_a_remote_engine(tmp_path, capsys):
    from rewriter import cli

    path = tmp_path / "shapes.py"
    path.write_text(FILE)
    assert cli.main(["apply", str(path), "-i", "Add type hints", "--branches", "-1"]) == 2
    assert "--branches takes a number" in capsys.readouterr().err
    assert cli.main(["apply", str(path), "-i", "Add type hints", "--endpoint", "http://127.0.0.1:9/v1",
                     "--branches", "2"]) == 2
    assert "--branches and --self-test apply to the local model" in capsys.readouterr().err
    assert path.read_text() == FILE


# Another candidate (a review's "try another"): the branches, then samples, none of the texts shown already.
SWAPPED = FILE.replace("w * h", "h * w")


def another(engine, other_than, branches: int = 4, sampling: SamplingParams | None = None) -> Finished:
    session = EditSession(engine, Target.whole(FILE), "Add type hints", "python", branches=branches,
                          sampling=sampling, integrity=FileIntegrity(FILE, "python"))
    events = list(session.run(other_than=other_than))
    assert len(events) == 1 and isinstance(events[0], Finished)  # no deltas: branches come whole
    return events[0]


def test_another_candidate_skips_the_texts_shown_and_the_refused_branches():
    engine = BranchingEngine([HINTED, LOST, FILE, BROKEN, SWAPPED])
    finished = another(engine, [HINTED], branches=5)
    assert finished.decision.status == Status.APPLIED and finished.decision.text == SWAPPED
    assert finished.candidates == 5 and finished.restart and finished.hunks
    assert engine.requests == [] and engine.asked == [5]  # the greedy answer is not asked as it is


def test_another_candidate_without_branches_asked_for_decodes_the_default_number():
    from rewriter.engine import DEFAULT_BRANCHES

    engine = BranchingEngine([HINTED] * (DEFAULT_BRANCHES + 2))
    assert another(engine, [], branches=0).decision.text == HINTED and engine.asked == [DEFAULT_BRANCHES]


def test_no_other_candidate_leaves_the_original_and_says_how_many_were_decoded():
    engine = BranchingEngine([HINTED, LOST, BROKEN, FILE])  # its samples answer the code unchanged
    finished = another(engine, [HINTED])
    assert finished.decision.status == Status.APPLIED and finished.decision.text == FILE
    assert finished.candidates == 8 and finished.hunks == []  # four branches, four samples
    assert all(request.sampling is not None and not request.sampling.greedy for request in engine.requests)


def test_branches_spent_another_candidate_is_the_first_sample_that_qualifies():
    engine = BranchingEngine([HINTED, LOST])
    samples = iter([HINTED, SWAPPED])  # shown already, then a new edit
    engine.answer = lambda request: next(samples)
    finished = another(engine, [HINTED])
    assert finished.decision.text == SWAPPED and finished.another and finished.candidates == 4
    assert len(engine.requests) == 2 and len({request.sampling.seed for request in engine.requests}) == 2


def test_an_engine_without_branches_or_sampling_offers_no_other_candidates():
    plain = AnsweringEngine(lambda request: HINTED)
    session = EditSession(plain, Target.whole(FILE), "Add type hints", "python", branches=4)
    assert not session.offers_candidates()
    finished = another(plain, [])
    assert finished.decision.text == FILE and finished.candidates == 0 and plain.requests == []
    engine = BranchingEngine([HINTED])
    assert another(engine, [], sampling=SamplingParams(temperature=0.7)).decision.text == FILE
    assert engine.asked == []


# A later try under `apply --test`: told its edit failed the tests, a small model often answers
# with that edit again; the session branches for another, none of the edits that failed.
def later_try(engine, failed: list[str]) -> Finished:
    from rewriter.edits.session import Feedback

    session = EditSession(engine, Target.whole(FILE), "Add type hints", "python", branches=4,
                          integrity=FileIntegrity(FILE, "python"))
    feedback = Feedback(failed[-1], "the tests failed", tuple(failed[:-1]))
    return [event for event in session.run(feedback=feedback) if isinstance(event, Finished)][-1]


def test_an_answer_that_repeats_a_failed_edit_is_branched_for_one_that_did_not_fail():
    engine = BranchingEngine([HINTED, SWAPPED])
    engine.answer = lambda request: HINTED  # the edit of the try before, again
    finished = later_try(engine, [HINTED])
    assert finished.decision.text == SWAPPED and finished.candidates == 2
    engine = BranchingEngine([HINTED])
    engine.answer = lambda request: HINTED
    assert later_try(engine, [HINTED]).decision.text == HINTED  # no branch qualifies: as answered
    assert engine.asked == [4]


def test_later_tries_take_turns_a_branch_a_sample_and_a_request_told_the_failure():
    engine = BranchingEngine([HINTED, BROKEN, SWAPPED])
    engine.answer = lambda request: pytest.fail("a branch try asks the model nothing else")
    finished = later_try(engine, [SWAPPED.replace("w, h", "w,  h"), HINTED])  # try 3
    assert finished.decision.text == SWAPPED and finished.another and finished.candidates == 3
    assert "failed" not in engine.branched[0].instruction  # branches of the first request, not the told one
    failed = [FILE.replace("w * h", "(w * h)"), SWAPPED, FILE.replace("w * h", "h * w")]
    engine = BranchingEngine([SWAPPED])
    engine.answer = lambda request: HINTED if request.sampling is not None else pytest.fail("try 4 samples")
    finished = later_try(engine, failed)  # try 4: an answer sampled to the first request
    assert finished.decision.text == HINTED and finished.another and finished.candidates == 1
    (asked,) = engine.requests
    assert asked.sampling is not None and not asked.sampling.greedy and asked.sampling.seed is not None
    assert "failed" not in asked.instruction and engine.asked == []
    engine = BranchingEngine([SWAPPED])
    engine.answer = lambda request: HINTED
    finished = later_try(engine, [*failed, SWAPPED.replace("w, h", "w,  h")])  # try 5: told of try 4's failure
    assert finished.decision.text == HINTED and not finished.another
    assert engine.asked == [] and len(engine.requests) == 1 and engine.requests[0].sampling is None
    assert "the tests failed" in engine.requests[0].instruction and "w,  h" in engine.requests[0].instruction
    engine = BranchingEngine([HINTED, SWAPPED])
    engine.answer = lambda request: FILE.replace("w * h", "h * w")
    finished = later_try(engine, [HINTED, SWAPPED])  # try 3, no branch left that no try failed: told
    assert finished.decision.text == FILE.replace("w * h", "h * w") and not finished.another
    # the two branches searched before it asked count, beside the two after the answer repeated try 4's edit
    assert finished.candidates == 4
    assert "the tests failed" in engine.requests[0].instruction
    plain = AnsweringEngine(lambda request: SWAPPED)  # no branches (an endpoint): told the failure again
    assert later_try(plain, [HINTED, FILE.replace("w * h", "(w * h)")]).decision.text == SWAPPED
    assert "the tests failed" in plain.requests[0].instruction


def test_a_branch_taken_after_the_told_answer_repeats_a_failed_edit_is_numbered_among_that_answer_s_branches():
    # try 3 searches the first answer's two branches (both failed before), is told the failure,
    # answers try 2's edit again and takes the told answer's second branch: branch 2 of 4 decoded
    class TwoRequests(BranchingEngine):
        def branches(self, request, count):
            self.branch_texts = [HINTED, SWAPPED] if "the tests failed" in request.instruction else failed
            yield from super().branches(request, count)

    failed = [SWAPPED.replace("w, h", "w,  h"), HINTED]
    engine = TwoRequests([])
    engine.answer = lambda request: HINTED
    finished = later_try(engine, failed)
    assert finished.decision.text == SWAPPED and not finished.another
    assert finished.candidates == 4 and finished.branch == 2


def test_a_sample_try_takes_the_first_sample_that_changes_the_code_passes_every_check_and_did_not_fail():
    failed = [FILE.replace("w * h", "(w * h)"), SWAPPED, FILE.replace("w * h", "h * w")]
    samples = iter([FILE, LOST, SWAPPED, HINTED])  # unchanged, refused, failed before, a new edit
    engine = BranchingEngine([])
    engine.answer = lambda request: next(samples) if request.sampling is not None else pytest.fail("sampled")
    finished = later_try(engine, failed)
    assert finished.decision.text == HINTED and finished.another and finished.candidates == 4
    seeds = [request.sampling.seed for request in engine.requests]
    assert len(set(seeds)) == 4  # each sample drawn anew
    engine = BranchingEngine([])
    engine.answer = lambda request: SWAPPED  # every sample an edit that failed: told of the failure
    finished = later_try(engine, failed)
    assert not finished.another and len(engine.requests) == 5
    assert engine.requests[-1].sampling is None and "the tests failed" in engine.requests[-1].instruction


def test_an_answer_that_differs_from_the_failed_edits_is_not_branched():
    engine = BranchingEngine([SWAPPED])
    engine.answer = lambda request: HINTED
    finished = later_try(engine, [SWAPPED])
    assert finished.decision.text == HINTED and finished.candidates == 0 and engine.asked == []


# An answer refused, and refused again when asked with the reason: the first answer's branches.
def test_an_answer_refused_twice_is_branched_and_the_first_branch_passing_every_check_is_kept():
    engine = BranchingEngine([LOST, BROKEN, HINTED, SWAPPED])
    engine.answer = lambda request: LOST
    finished = finish(engine, branches=4)
    assert finished.decision.status == Status.APPLIED and finished.decision.text == HINTED
    assert finished.after_refusals and finished.candidates == 3 and finished.restart
    assert "it would lose function area" in finished.retried and len(engine.requests) == 2
    assert "Fix that." not in engine.branched[0].instruction  # branches of the first request
    engine = BranchingEngine([LOST, BROKEN])
    engine.answer = lambda request: LOST
    finished = finish(engine, branches=4)  # no branch passes: refused, as before
    assert finished.decision.refused and not finished.after_refusals and finished.candidates == 2
    engine = BranchingEngine([HINTED])
    engine.answer = lambda request: LOST
    assert finish(engine, branches=0).decision.refused and engine.asked == []  # --branches 0: none


def test_an_answer_the_retry_mends_is_not_branched():
    engine = BranchingEngine([SWAPPED])
    engine.answer = lambda request: LOST if len(engine.requests) == 1 else HINTED
    finished = finish(engine, branches=4)
    assert finished.decision.text == HINTED and not finished.after_refusals and engine.asked == []


def test_apply_says_which_branch_it_took_after_two_refusals(tmp_path):
    import io
    import json

    path = tmp_path / "shapes.py"
    path.write_text(FILE)
    engine = BranchingEngine([LOST, HINTED])
    engine.answer = lambda request: LOST
    out = io.StringIO()
    code = apply_command([str(path)], Options("Add type hints", write=True, edit=EditOptions(branches=2)), lambda: engine,
                         json_output=True, quiet=True, say=lambda message: None, stdout=out)
    assert code == 0 and path.read_text() == HINTED
    (span,) = json.loads(out.getvalue())["files"][0]["spans"]
    assert "it would lose function area), and so was the one asked again; branch 2" in span["reason"], span


def test_branches_that_cannot_be_had_leave_the_refusal_as_it_was():
    from rewriter.answer import NoCodeBlock

    class NoBlock(BranchingEngine):
        def branches(self, request, count):
            raise NoCodeBlock("the answer decoded again has no code block")
            yield  # a generator, as an engine's branches are

    engine = NoBlock([])
    engine.answer = lambda request: LOST
    finished = finish(engine, branches=4)
    assert finished.decision.refused and "it would lose function area" in finished.decision.reason
