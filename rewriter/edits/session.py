"""One edit session: a target in a file (target.py) through an engine and back, as every front end drives it.

Down once: the target (the file, the span in it), the instruction and the engine. Up once: each
increment of the model's answer with the diff hunks it settled (in the span's line numbering,
while the answer streams), then one `Finished` with the pipeline's Decision (applied, stripped
or refused, see pipeline.py) and the hunks that take the span to the decided text. The language
server applies the hunks as they come, the service sends them, `rewriter apply` waits for the
decision; all of them judge an answer the same way because they all go through here.
"""
from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from ..engine import EditRequest, Engine, SamplingParams
from ..results import RewriteResult, Stats
from .hunks import Hunk, HunkStream
from .integrity import APPLIED, FileIntegrity
from .pipeline import Decision, TargetEdit
from .target import Target


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


class EditSession:
    """One target rewritten by `engine` as `instruction` says; `judged_instruction`, when given,
    is what the integrity check reads instead (a snippet merge's: the user's hint alone)."""

    def __init__(self, engine: Engine, target: Target, instruction: str,
                 language: str = "", *, grammar: str | None = None, integrity: FileIntegrity | None = None,
                 max_new_tokens: int | None = None, sampling: SamplingParams | None = None,
                 context: str | None = None, judged_instruction: str | None = None):
        self.engine = engine
        self.given_context = context  # a client's own context, sent as it is instead of the file around the span
        self.edit = TargetEdit(target, instruction, grammar, integrity, judged_instruction)
        self.language = language
        self.max_new_tokens = max_new_tokens
        self.sampling = sampling

    @property
    def original(self) -> str:
        return self.edit.original

    def request(self, context_window: int | None = None) -> EditRequest:
        """What the engine is sent: the dedented span and the file around it, cut to the window."""
        context = self.given_context if self.given_context is not None else self.edit.context(context_window)
        return EditRequest(self.edit.code, self.edit.instruction, self.language, context,
                           self.max_new_tokens, self.sampling)

    def run(self, context_window: int | None = None, *, force: bool = False, allow_syntax_errors: bool = False,
            stopped: Callable[[], bool] = lambda: False) -> Generator[Delta | Finished, None, None]:
        """Deltas while the engine answers, then one Finished. Engine errors (RewriteError,
        NoCodeBlock, ServiceError, ...) pass through. Closing this iterator, or `stopped()`
        turning true, stops the engine at once; nothing is finished then."""
        hunks = HunkStream(self.edit.original)
        answer = ""
        result: RewriteResult | None = None
        events = self.engine.stream(self.request(context_window))
        try:
            for event in events:
                if stopped():
                    return
                if isinstance(event, RewriteResult):
                    result = event
                    break
                answer += event.text
                written = self.edit.partial_text(answer)
                settled = hunks.feed(written) if written is not None else []
                yield Delta(event.text, event.stats, settled)
        finally:
            events.close()  # stops decoding at once when we leave early
        if result is None:
            raise RuntimeError("the engine's stream ended without a result")
        decision = self.edit.finish(result.text, result.stats.finish_reason, force=force,
                                    allow_syntax_errors=allow_syntax_errors)
        if decision.status == APPLIED:
            yield Finished(decision, result, hunks.feed(decision.text, final=True))
            return
        # Stripped or refused: what streamed is not what may be applied; start again from the original.
        rest = [] if decision.refused else HunkStream(self.edit.original).feed(decision.text, final=True)
        yield Finished(decision, result, rest, restart=True)
