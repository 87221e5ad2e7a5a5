"""One edit session: a target in a file (target.py) through an engine and back, as every front end drives it.

Down once: the target (the file, the span in it), the instruction and the engine. Up once: each
increment of the model's answer with the diff hunks it settled (in the span's line numbering,
while the answer streams), then one `Finished` with the pipeline's Decision (applied, stripped
or refused, see pipeline.py) and the hunks that take the span to the decided text. The language
server applies the hunks as they come, the service sends them, `rewriter apply` waits for the
decision; all of them judge an answer the same way because they all go through here. An answer
the integrity check, the syntax guard or the lint check refused gets one more try, the reason in the instruction,
here, so that every front end gives the model the same second chance; refused again, the first
answer's branches are tried. A check made outside
(`rewriter apply --test`: the user's tests) asks again the same way: a session started with
`Feedback` sends the earlier answer and why it failed along with the instruction; from the third
try on, tries take turns: a branch of the first answer that no try failed, an answer sampled to
the first request that no try failed, one told of the last failure (`try_kind`). Asked for
another candidate than the answers shown already (a review's "try another"), a session answers
the first of the engine's branches, or else of its sampled answers, that passes every check and
is none of them. With the self-test (`--self-test`), the model's own tests of the change choose
among today's choice, the first answer's branches and a few sampled answers (self_test.py).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Collection, Generator
from dataclasses import dataclass, field, replace

from ..answer import NoCodeBlock
from ..engine import DEFAULT_BRANCHES, EditRequest, Engine, SamplingParams, Turn
from ..prompt import fence_for
from ..results import RewriteResult, Stats
from .checks.integrity import FileIntegrity, Status
from .hunks import Hunk, HunkStream
from .options import EditOptions
from .pipeline import Decision, Refusal, TargetEdit
from .self_test import SAMPLES, SelfTestReport, best, score, test_request, tests_from
from .target import Target

TOLD, BRANCH, SAMPLE = "told", "branch", "sample"

# Sampled candidates draw as the default model's authors publish for it (Qwen2.5-Coder's
# generation defaults); seeded by the try, so a run repeats.
CANDIDATE_SAMPLING = SamplingParams(temperature=0.7, top_p=0.8, top_k=20)


def try_kind(attempt: int) -> str:
    """What try `attempt` of an outside check (`apply --test`; 1 is the first answer) is: the
    second is told of the last failure; from the third on they take turns: the first answer's next
    branch, a sampled answer to the first request, a request told of the last failure. Each passes
    cases the others do not (EditEval, 4 tries, the 1.5B: docs/benchmarks.md)."""
    if attempt < 3:
        return TOLD
    return (BRANCH, SAMPLE, TOLD)[(attempt - 3) % 3]


Chosen = tuple[Decision, RewriteResult]  # a candidate answer taken, and its decision

# Refusals a model may mend when told the reason (a name it forgot to import, a missing colon, a
# function it left out because it answered only what it changed); a cut answer is not asked again.
RETRIED_REFUSALS = (Refusal.SYNTAX, Refusal.LINT, Refusal.INTEGRITY)


@dataclass
class Delta:
    """An increment of the model's raw answer, and the hunks of the span it settled."""

    text: str
    stats: Stats
    hunks: list[Hunk] = field(default_factory=list)


@dataclass
class Finished:
    """What became of the answer. Applying `hunks` after every streamed one gives `decision.text`,
    unless `restart` is set: the streamed hunks showed an answer that may not be applied as it
    was, so they are void (put back what of them was applied); `hunks` then start from the
    original span."""

    decision: Decision
    result: RewriteResult
    hunks: list[Hunk]
    restart: bool = False
    retried: str = ""  # why the first answer was refused, when this is the second one's (or a branch's)
    # other answers decoded (branches; on a sample try, and for another candidate once the branches
    # are spent, sampled answers too) after the answer came back unchanged, as an edit that failed
    # (Feedback) or refused twice, or for another candidate
    candidates: int = 0
    branch: int = 0  # which branch of the first answer was taken (1 for the first), 0 where none was
    another: bool = False  # the answer is another candidate: a branch or a sample of the first request, or the original
    sampled: bool = False  # that candidate is an answer sampled to the first request, not a branch
    after_refusals: bool = False  # the answer is a branch of the first, which was refused, as was the one asked again
    self_test: SelfTestReport | None = None  # --self-test: the model's tests and how the candidates did on them


@dataclass(frozen=True)
class Feedback:
    """An earlier answer for the same target and the check it failed outside the session (the
    user's tests): the next try is asked with both, as a refused answer's second try is."""

    answer: str  # the span's text that answer gave
    reason: str  # why it failed, as the model is told
    earlier: tuple[str, ...] = ()  # the span's texts of the answers that failed the same check before it

    def failed(self) -> tuple[str, ...]:
        """Every text of the span the check failed so far."""
        return (*self.earlier, self.answer)


class EditSession:
    """One target rewritten by `engine` as `instruction` says; `judged_instruction`, when given,
    is what the integrity check reads instead (a snippet merge's: the user's hint alone), and
    `snippet`, a merge's, what the answer must keep."""

    def __init__(self, engine: Engine, target: Target, instruction: str,
                 language: str = "", *, grammar: str | None = None, integrity: FileIntegrity | None = None,
                 max_new_tokens: int | None = None, sampling: SamplingParams | None = None,
                 context: str | None = None, judged_instruction: str | None = None,
                 conversation: tuple[Turn, ...] = (), branches: int = 0, snippet: str | None = None,
                 self_test: bool = False):
        self.engine = engine
        self.self_test = self_test  # the model's tests choose among the candidates (self_test.py)
        # An unchanged answer: how many branches where the model hesitated to try (engines that
        # decode locally and greedily offer them), the first that changes the code and passes
        # every check taking its place.
        self.branches = branches
        self.conversation = conversation  # a refine: the turns before this one (engine.EditRequest)
        self.given_context = context  # a client's own context, sent as it is instead of the file around the span
        self.edit = TargetEdit(target, instruction, grammar, integrity, judged_instruction, snippet)
        self.language = language
        self.max_new_tokens = max_new_tokens
        self.sampling = sampling

    @property
    def original(self) -> str:
        return self.edit.original

    def request(self, context_window: int | None = None, feedback: Feedback | None = None) -> EditRequest:
        """What the engine is sent: the dedented span and the file around it, cut to the window;
        with `feedback`, the instruction carries the earlier answer and why it failed."""
        context = self.given_context if self.given_context is not None else self.edit.context(context_window)
        instruction = self.edit.instruction
        if feedback is not None:
            instruction = retry_instruction(instruction, feedback.reason, self.edit.as_sent(feedback.answer),
                                            self.language)
        return EditRequest(self.edit.code, instruction, self.language, context, self.max_new_tokens, self.sampling,
                           self.conversation)

    def turn(self) -> Turn:
        """This session's request as a turn of a conversation that goes on (a refine of its answer)."""
        return Turn(self.edit.code, self.edit.instruction)

    def run(self, context_window: int | None = None, *, force: bool = False, allow_syntax_errors: bool = False,
            stopped: Callable[[], bool] = lambda: False, feedback: Feedback | None = None,
            other_than: Collection[str] | None = None) -> Generator[Delta | Finished, None, None]:
        """Deltas while the engine answers, then one Finished. An answer refused by the integrity
        check, the syntax guard or the lint check is asked for once more, the reason added to the instruction; the
        second answer's deltas settle no hunks, and its Finished restarts from the original. Refused
        again, the first answer's first branch that passes every check is taken, where there is one.
        Engine errors (RewriteError, NoCodeBlock, ServiceError, ...) pass through. Closing this
        iterator, or `stopped()` turning true, stops the engine at once; nothing is finished then.
        `feedback`: this is a later try after an answer failed a check made outside. On a branch
        try (`try_kind`), where the engine offers candidates, it is the first answer's next branch
        that passes every check and is no failed edit, as a "try another" is; on a sample try, the
        first such sampled answer to the first request; where none is, and on the other tries, the
        model is asked with the last failure.
        `other_than`: the span's texts shown already: the answer is another candidate, without deltas."""
        if other_than is not None:
            yield from self._another(self.request(context_window), other_than, allow_syntax_errors, stopped)
            return
        searched = 0  # candidates a branch or sample try decoded before it asked with the failure instead
        kind = try_kind(len(feedback.failed()) + 1) if feedback is not None else TOLD
        if feedback is not None and kind != TOLD:
            search = self._branch if kind == BRANCH else self._sample
            chosen, searched = search(self.request(context_window), allow_syntax_errors, stopped,
                                      self.branches or DEFAULT_BRANCHES, feedback.failed())
            if chosen is not None:
                yield self._finished_another(*chosen, searched, branch=searched if kind == BRANCH else 0,
                                             sampled=kind == SAMPLE)
                return
            if stopped():
                return
        request = self.request(context_window, feedback)
        hunks = HunkStream(self.edit.original)
        result = yield from self._answer(request, hunks, stopped)
        if result is None:
            return
        decision = self.edit.finish(result.text, result.stats.finish_reason, force=force,
                                    allow_syntax_errors=allow_syntax_errors)
        retried = ""
        branch, tried, after_refusals = 0, 0, False
        failed = feedback.failed() if feedback is not None else ()
        if decision.refused and decision.refusal in RETRIED_REFUSALS:
            retried = decision.reason
            again = replace(request, instruction=retry_instruction(request.instruction, retried))
            result = yield from self._answer(again, None, stopped)
            if result is None:
                return
            decision = self.edit.finish(result.text, result.stats.finish_reason, force=force,
                                        allow_syntax_errors=allow_syntax_errors)
            if decision.refused and decision.refusal in RETRIED_REFUSALS:
                # refused twice: where the model hesitated in its first answer, another choice may pass
                chosen, tried = self._branch(request, allow_syntax_errors, stopped, self.branches, failed)
                if chosen is not None:
                    (decision, result), branch, after_refusals = chosen, tried, True
        # An unchanged answer, or one that repeats an edit the outside check failed (told of the
        # failure, a small model often answers with its earlier edit again): branch for another.
        if decision.status == Status.APPLIED and not retried and (decision.text == self.edit.original
                                                                   or decision.text in failed):
            chosen, tried = self._branch(request, allow_syntax_errors, stopped, self.branches, failed)
            if chosen is not None:
                (decision, result), branch = chosen, tried
        self_test = None
        if feedback is None and (tested := self._self_tested(request, decision, allow_syntax_errors, stopped)):
            self_test, taken = tested[1], tested[0]
            if taken is not None:  # what streamed is not the answer taken
                (decision, result), branch, after_refusals = taken, 0, False
        if decision.status == Status.APPLIED and not retried and not branch and not (self_test and self_test.taken):
            yield Finished(decision, result, hunks.feed(decision.text, final=True), candidates=searched + tried,
                           self_test=self_test)
            return
        # Stripped, refused, a second answer or another candidate: what streamed is not what may be
        # applied; start again from the original.
        rest = [] if decision.refused else HunkStream(self.edit.original).feed(decision.text, final=True)
        yield Finished(decision, result, rest, restart=True, retried=retried, candidates=searched + tried,
                       branch=branch, after_refusals=after_refusals, self_test=self_test)

    def _self_tested(self, request: EditRequest, decision: Decision, allow_syntax_errors: bool,
                     stopped: Callable[[], bool]) -> tuple[Chosen | None, SelfTestReport] | None:
        """--self-test (self_test.py): the model's tests run on today's choice (`decision`; the original
        where it is unchanged) and on the other candidates. The candidate taken instead, or None, and
        the report; None where the self-test is off or cannot run (an engine that offers no
        candidates, a file that is not Python, a run stopped)."""
        if not self.self_test or not self.offers_candidates() or self.edit.grammar != "python" or stopped():
            return None
        began = time.perf_counter()
        try:
            written = self._decoded(test_request(request), stopped)
        except NoCodeBlock:
            written = None
        report = SelfTestReport(tests_from(written.text) if written is not None else None,
                                written.text if written is not None else "",
                                writing_seconds=time.perf_counter() - began)
        chosen = None
        if report.tests is not None:
            today = report.today_text = None if decision.refused else decision.text
            if today is not None:
                report.today = score(self.edit.target.replaced_by(today), report.tests)
            found = self._candidates(request, allow_syntax_errors, stopped, {self.edit.original, today or ""})
            report.candidates = [(origin, taken.text, score(self.edit.target.replaced_by(taken.text), report.tests))
                                 for origin, taken, _ in found]
            report.chosen = best([scored for _, _, scored in report.candidates], report.today)
            if report.chosen is not None:
                chosen = found[report.chosen][1:]
        report.seconds = time.perf_counter() - began
        return chosen, report

    def _candidates(self, request: EditRequest, allow_syntax_errors: bool, stopped: Callable[[], bool],
                    shown: set[str]) -> list[tuple[str, Decision, RewriteResult]]:
        """The self-test's other candidates, each passing every check and none of `shown` or of one
        another: the first request's branches, then SAMPLES answers sampled to it; each with where
        it came from."""
        found: list[tuple[str, Decision, RewriteResult]] = []
        results: list[tuple[str, RewriteResult]] = []
        try:
            decode_branches = getattr(self.engine, "branches", None)  # offers_candidates said it has them
            branches = decode_branches(request, self.branches) if decode_branches and self.branches else ()
            for number, branch in enumerate(branches, 1):
                if stopped():
                    break
                results.append((f"branch {number}", branch))
        except NoCodeBlock:
            pass  # the answer decoded again (to find where it hesitated) has no code block: no branches
        for number in range(SAMPLES):
            if stopped():
                break
            try:
                sampled = self._decoded(replace(request, sampling=replace(CANDIDATE_SAMPLING, seed=number)), stopped)
            except NoCodeBlock:
                continue
            if sampled is not None:
                results.append((f"sample {number + 1}", sampled))
        for origin, result in results:
            candidate = self._qualified(result, allow_syntax_errors, shown | {taken.text for _, taken, _ in found})
            if candidate is not None:
                found.append((origin, candidate, result))
        return found

    def offers_candidates(self) -> bool:
        """Whether the engine decodes other candidates (branches) for this session: a local
        engine decoding greedily does; an endpoint, or sampling, does not."""
        return hasattr(self.engine, "branches") and (self.sampling is None or self.sampling.greedy)

    def _another(self, request: EditRequest, other_than: Collection[str], allow_syntax_errors: bool,
                 stopped: Callable[[], bool]) -> Generator[Finished, None, None]:
        """A candidate other than `other_than`: the first branch that qualifies, else the first
        sampled answer that does, else the original unchanged; either way with how many answers
        were decoded. The greedy answer is not taken as it is (it was shown, or it changed nothing)."""
        count = self.branches or DEFAULT_BRANCHES
        chosen, tried = self._branch(request, allow_syntax_errors, stopped, count, other_than)
        branch = tried if chosen is not None else 0
        sampled = False
        if chosen is None and not stopped():
            chosen, drawn = self._sample(request, allow_syntax_errors, stopped, count, other_than)
            tried += drawn
            sampled = chosen is not None
        if chosen is None:
            if stopped():
                return
            original = self.edit.original
            chosen = Decision(Status.APPLIED, original), RewriteResult(original, "", Stats(finish_reason="stop"))
        yield self._finished_another(*chosen, tried, branch=branch, sampled=sampled)

    def _finished_another(self, decision: Decision, result: RewriteResult, candidates: int, *, branch: int = 0,
                          sampled: bool = False) -> Finished:
        hunks = HunkStream(self.edit.original).feed(decision.text, final=True)
        return Finished(decision, result, hunks, restart=True, candidates=candidates, branch=branch, another=True,
                        sampled=sampled)

    def _branch(self, request: EditRequest, allow_syntax_errors: bool, stopped: Callable[[], bool], count: int,
                other_than: Collection[str] = ()) -> tuple[tuple[Decision, RewriteResult] | None, int]:
        """The first of `count` branches whose answer changes the code, passes every check (--force
        overrides none of them here) and is none of `other_than`, or None; and how many branches
        were decoded."""
        branches = getattr(self.engine, "branches", None) if self.offers_candidates() else None
        if not count or branches is None:
            return None, 0
        tried = 0
        try:
            for branch in branches(request, count):
                tried += 1
                if stopped():
                    break
                candidate = self._qualified(branch, allow_syntax_errors, other_than)
                if candidate is not None:
                    return (candidate, branch), tried
        except NoCodeBlock:
            pass  # the answer decoded again (to find where it hesitated) has no code block: no branches
        return None, tried

    def _sample(self, request: EditRequest, allow_syntax_errors: bool, stopped: Callable[[], bool], count: int,
                other_than: Collection[str] = ()) -> tuple[tuple[Decision, RewriteResult] | None, int]:
        """As _branch, with up to `count` answers sampled (CANDIDATE_SAMPLING, seeded by their
        number and how many texts `other_than` holds, so each later try draws new ones) in place
        of branches; none where the session samples already or the engine is not local."""
        if not count or not self.offers_candidates():
            return None, 0
        tried = 0
        for number in range(count):
            if stopped():
                break
            seed = 1000 * len(other_than) + number
            asked = replace(request, sampling=replace(CANDIDATE_SAMPLING, seed=seed))
            tried += 1
            try:
                result = self._decoded(asked, stopped)
            except NoCodeBlock:
                continue
            if result is None:
                break
            candidate = self._qualified(result, allow_syntax_errors, other_than)
            if candidate is not None:
                return (candidate, result), tried
        return None, tried

    def _qualified(self, result: RewriteResult, allow_syntax_errors: bool,
                   other_than: Collection[str]) -> Decision | None:
        """The decision on a candidate answer where it changes the code, passes every check
        (--force overrides none of them here) and is none of `other_than`; else None."""
        candidate = self.edit.finish(result.text, result.stats.finish_reason, force=False,
                                     allow_syntax_errors=allow_syntax_errors)
        if candidate.status != Status.APPLIED or candidate.text == self.edit.original or candidate.text in other_than:
            return None
        return candidate

    def _decoded(self, request: EditRequest, stopped: Callable[[], bool]) -> RewriteResult | None:
        """The engine's whole answer to `request`, its deltas unseen; None when stopped."""
        answer = self._answer(request, None, stopped)
        while True:
            try:
                next(answer)
            except StopIteration as done:
                return done.value

    def _answer(self, request: EditRequest, hunks: HunkStream | None,
                stopped: Callable[[], bool]) -> Generator[Delta, None, RewriteResult | None]:
        """Deltas of one answer to `request` (settling `hunks`, when given); the engine's result,
        or None when `stopped()` turned true."""
        answer = ""
        events = self.engine.stream(request)
        try:
            for event in events:
                if stopped():
                    return None
                if isinstance(event, RewriteResult):
                    return event
                settled: list[Hunk] = []
                if hunks is not None:
                    answer += event.text
                    written = self.edit.partial_text(answer)
                    settled = hunks.feed(written) if written is not None else []
                yield Delta(event.text, event.stats, settled)
        finally:
            events.close()  # stops decoding at once when we leave early
        raise RuntimeError("the engine's stream ended without a result")


def session_for(engine: Engine, target: Target, instruction: str, language: str, options: EditOptions,
                **more) -> EditSession:
    """The session `options` ask for: `rewriter apply` and `rewriter bench --tests` open theirs here,
    so that both decide an answer alike; `more`: the session's other settings (integrity, snippet, ...)."""
    return EditSession(engine, target, instruction, language, branches=options.branches,
                       self_test=options.self_test, max_new_tokens=options.max_new_tokens, **more)


def retry_instruction(instruction: str, reason: str, previous: str | None = None, language: str = "") -> str:
    """The instruction for a second answer, after the first (`previous`, when it is sent along:
    the model answered another request) was refused for `reason`."""
    if previous is None:
        return f"{instruction}\n\nYour previous answer failed a check: {reason}. Fix that."
    fence = fence_for(previous + reason)
    body = previous if previous.endswith("\n") or not previous else previous + "\n"
    return (f"{instruction}\n\nYour previous answer:\n{fence}{language}\n{body}{fence}\n"
            f"It failed a check: {reason}\nFix that.")
