"""Driving any engine (rewriter/engine.py) as a front end does, for tests that want only its result."""
from __future__ import annotations

import contextlib

from rewriter.engine import EditRequest, Engine, SamplingParams
from rewriter.lookahead import Lookahead
from rewriter.results import RewriteResult


def rewrite_with(engine: Engine, code: str, instruction: str, language: str = "", context: str | None = None,
                 max_new_tokens: int | None = None, sampling: SamplingParams | None = None) -> RewriteResult:
    """The result that ends the engine's stream of one request (its increments are skipped)."""
    for event in engine.stream(EditRequest(code, instruction, language, context, max_new_tokens, sampling)):
        if isinstance(event, RewriteResult):
            return event
    raise AssertionError("the stream ended without a result")


class UntimedLookahead(Lookahead):
    """The window policy on its prior pass costs alone: no pass timing recorded."""

    def record(self, pass_tokens: int, seconds: float, context: int = 0) -> None:
        pass


@contextlib.contextmanager
def untimed_lookahead(decoder):
    """The decoder's window policy on its prior pass costs alone while inside: timings taken on a
    busy machine (CI) can narrow the windows a test counts passes of."""
    measured = decoder.lookahead
    decoder.lookahead = UntimedLookahead(decoder.device.type, prior=measured.prior)
    try:
        yield
    finally:
        decoder.lookahead = measured
