"""The model's answer to one rewrite: reading it (the code it holds, where its closing fence ends,
where it starts to echo the file), and the answer as it streams, one loop for every engine.

An engine feeds the stream the text its model writes and hands on what comes back: the part of
the answer that is settled (can no longer change). Lines that may begin a copy of the file
after the span (an echo, see echo_scan) wait until the next line tells; an echo ends the
answer and is dropped. Finishing gives the rest and the result: the code the answer holds, in
the original's line endings, with how decoding stopped and how much echo was cut. The local
engine (decoding/rewrite.py) and the remote one (remote.py) both run their answers
through it, so the same answer gives the same increments and result from either.
Torch-free on purpose.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from .engine import EditRequest
from .prompt import SourceText, build_prompt
from .results import Progress, RewriteResult, Stats


@dataclass(frozen=True)
class EchoScan:
    cut: int | None  # where the answer's copy of the following lines begins, if it does
    settled: int  # the answer up to here cannot turn into such a copy any more


def echo_scan(answer: str, targets: tuple[tuple[str, ...], ...]) -> EchoScan:
    """Whether the answer's code, past its first line, goes on with one of `targets`.

    Only complete lines inside the code block count. `settled` holds back the lines that
    begin a target (and the incomplete last line) so that a stream never shows a copy that
    is then dropped.
    """
    opening = re.search(r"^(`{3,})[^\n`]*\n", answer, flags=re.MULTILINE)
    if not targets or not opening:
        return EchoScan(None, len(answer))
    fence = opening.group(1)
    closing = re.search(rf"^{fence}[ \t]*$", answer[opening.end():], flags=re.MULTILINE)
    end = opening.end() + closing.start() if closing else len(answer)
    lines = []  # (start, stripped) of the complete, non-blank code lines
    position = opening.end()
    while True:
        newline = answer.find("\n", position, end)
        if newline == -1:
            break
        if answer[position:newline].strip():
            lines.append((position, answer[position:newline].strip()))
        position = newline + 1
    settled = len(answer)
    partial = answer[position:end].strip()
    if not closing and (not partial or any(line.startswith(partial) for target in targets for line in target)):
        settled = position  # the line being written may begin a copy
    for i in range(1, len(lines)):  # the first line is the span's own
        stripped = [text for _, text in lines[i:]]
        for target in targets:
            if stripped[: len(target)] == list(target):
                return EchoScan(lines[i][0], lines[i][0])
            if not closing and len(stripped) < len(target) and list(target[: len(stripped)]) == stripped:
                settled = min(settled, lines[i][0])
    return EchoScan(None, settled)


class NoCodeBlock(ValueError):
    """The model's answer holds no fenced code block."""


def extract_code(answer: str) -> str:
    """The code inside the first fenced block of the answer (unterminated blocks run to the end)."""
    opening = re.search(r"^(`{3,})[^\n`]*\n", answer, flags=re.MULTILINE)
    if not opening:
        raise NoCodeBlock("the model's answer has no fenced code block")
    fence = opening.group(1)
    rest = answer[opening.end():]
    closing = re.search(rf"^{fence}[ \t]*$", rest, flags=re.MULTILINE)
    return rest[: closing.start()] if closing else rest


def closing_fence_end(answer: str) -> int | None:
    """Index just past the closing fence line once it is complete (its newline written), else None."""
    opening = re.search(r"^(`{3,})[^\n`]*\n", answer, flags=re.MULTILINE)
    if not opening:
        return None
    fence = opening.group(1)
    closing = re.search(rf"^{fence}[ \t]*\n", answer[opening.end():], flags=re.MULTILINE)
    return opening.end() + closing.end() if closing else None


class AnswerStream:
    """One request's answer: its prompt, the text so far, how much of it is settled and handed on.

    `prefilled`: the model's turn opens with the prompt's prefill (prompt.answer_opening), which
    is then the answer's start; an endpoint that takes only messages writes the opening itself.
    """

    def __init__(self, request: EditRequest, prefilled: bool):
        self.source = SourceText.from_text(request.code)
        self.prompt = build_prompt(self.source.code, request.instruction, request.language, request.context,
                                   request.conversation)
        self.text = self.prompt.prefill if prefilled else ""
        self.handed_on = 0  # the text up to here has been returned as settled
        self.cut: int | None = None  # where the answer's echo begins, once seen
        self.dropped = 0  # characters of echo the model wrote beyond the text fed (see echo_stopped)

    @property
    def echoed(self) -> bool:
        """The answer has gone on copying the file: what follows is dropped, so stop decoding."""
        return self.cut is not None

    def feed(self, text: str) -> str:
        """Take the model's next text; return the part of the answer it settled ("" when none)."""
        self.text += text
        if self.cut is not None:
            return ""
        scan = echo_scan(self.text, self.prompt.echo_targets)
        self.cut = scan.cut
        return self._hand_on(scan.settled)

    def echo_stopped(self, cut: int, dropped: int) -> None:
        """A stop check saw the echo begin at `cut` and kept fewer tokens than it had, dropping
        `dropped` characters of it: the text fed may end before the echo can be told from it
        (decoding/rewrite.py's AnswerEnd)."""
        self.cut, self.dropped = cut, dropped

    def finish(self, stats: Stats) -> Iterator[Progress | RewriteResult]:
        """The answer's unsettled rest (if any), then the result; NoCodeBlock when it holds no code.

        `stats` is the request's own, completed here with what the echo cut.
        """
        if self.cut is not None:
            stats.echo_dropped_chars = max(self.dropped, len(self.text) - self.cut)
            stats.finish_reason = "stop"  # the answer is whole: the echo only went on past it
            self.text = self.text[:self.cut]
        rest = self._hand_on(len(self.text))
        if rest:
            yield Progress(rest, stats)
        yield RewriteResult(text=self.source.restore(extract_code(self.text)), answer=self.text, stats=stats)

    def _hand_on(self, settled: int) -> str:
        if settled <= self.handed_on:
            return ""
        piece = self.text[self.handed_on:settled]
        self.handed_on = settled
        return piece
