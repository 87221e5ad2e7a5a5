"""One next-edit suggestion: the window rewritten by the model, its prediction the window itself,
the answer trimmed to what it changes, and only an answer every check passes suggested.

A wrong suggestion is worse than none, so silence wins wherever there is doubt: an answer that
does not follow the format, stopped at its token limit, changes nothing, undoes the user's last
edit, or fails the integrity, syntax or lint checks the rewrites pass (rewriter/edits/checks/)
is not suggested; `Outcome.reason` says which. The suggestion's text is the model's plain greedy
answer, as the format reads it back, never repaired.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..edits.checks.integrity import FileIntegrity, Status
from ..edits.pipeline import grammar_of
from ..results import Completion, Stats
from .base import NextEditFormat, NextEditInput, NextEditPrompt, RecentEdit
from .history import changed_stretch

# What the integrity check reads as the instruction: none was given, so it permits no removal or rename.
NEXT_EDIT_INSTRUCTION = "the next edit"
# A next edit deletes a few lines at most: an answer that leaves out more of the window is a part of
# it (a small model answering with the lines it changed only), not the window rewritten.
MOST_LINES_DELETED = 4
# Lines after the last edit that an answer undoing it must leave as they were.
UNDO_CONTEXT_LINES = 3


class CompletingEngine(Protocol):
    """An engine that decodes a rendered prompt greedily, its prediction the draft (Rewriter.complete)."""

    def complete_prompt(self, prompt: NextEditPrompt, max_new_tokens: int | None = None,
                 stopped: Callable[[], bool] = lambda: False) -> Completion: ...


@dataclass(frozen=True)
class Suggestion:
    """Replace the document's characters from `start` to `end` (each (line, column in characters),
    0-based) with `text`."""

    start: tuple[int, int]
    end: tuple[int, int]
    text: str
    window: str  # the model's whole window, of which this is the changed stretch


@dataclass(frozen=True)
class Outcome:
    suggestion: Suggestion | None
    reason: str  # why there is none ("" when there is one)
    stats: Stats
    answer: str = ""  # the model's raw answer


def suggest(engine: CompletingEngine, form: NextEditFormat, request: NextEditInput,
            stopped: Callable[[], bool] = lambda: False) -> Outcome:
    """The suggestion for `request`, or none with the reason."""
    prompt = form.render(request)
    completion = engine.complete_prompt(prompt, stopped=stopped)
    stats = completion.stats
    if completion.stopped:
        return Outcome(None, "stopped", stats, completion.text)
    if stats.finish_reason == "length":
        return Outcome(None, "the answer stopped at the token limit", stats, completion.text)
    window = form.window_of(completion.text, request)
    if window is None:
        return Outcome(None, "the answer does not follow the format", stats, completion.text)
    reason = judge(request, window)
    if reason:
        return Outcome(None, reason, stats, completion.text)
    return Outcome(changed_part(request, window), "", stats, completion.text)


def judge(request: NextEditInput, window: str) -> str:
    """Why `window`, as the new text of the request's window, is not suggested; "" when it may be."""
    old = request.window_text
    if window == old:
        return "unchanged"
    deleted = old.count("\n") - window.count("\n")
    if deleted > MOST_LINES_DELETED:
        return f"it would delete {deleted} lines of the window"
    lines = request.text.splitlines(keepends=True)
    start = sum(len(line) for line in lines[:request.window[0]])
    end = start + len(old)
    after = request.text[:start] + window + request.text[end:]
    if request.edits and undoes(request.edits[-1], request.text, after):
        return "it undoes the last edit"
    integrity = FileIntegrity(request.text, grammar_of(request.language, request.text))
    verdict = integrity.check(start, end, window, NEXT_EDIT_INSTRUCTION)
    if verdict.status != Status.APPLIED:  # stripped too: what is left is no longer the model's answer
        return f"integrity: {verdict.reason}"
    problem = integrity.syntax.problem(start, end, window)
    if problem is not None:
        return f"syntax: {problem.describe()}"
    lint = integrity.lint.problem(start, end, window) if integrity.lint is not None else ""
    return f"lint: {lint}" if lint else ""


def undoes(edit: RecentEdit, before: str, after: str) -> bool:
    """Whether going from `before` to `after` puts back the lines `edit` replaced: where it wrote,
    the replaced lines are back, followed by what followed the edit (a few lines of it, so that an
    answer that also changes something further on counts). The replaced lines alone would not do:
    after a pure insertion there are none, and a line typed below one it kept starts with it."""
    if edit.before == edit.after:
        return False
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    wrote, replaced = edit.after.splitlines(keepends=True), edit.before.splitlines(keepends=True)
    line, end = edit.line, edit.line + len(wrote)
    following = old[end:end + UNDO_CONTEXT_LINES]
    return old[line:end] == wrote and new[line:line + len(replaced) + len(following)] == replaced + following


def changed_part(request: NextEditInput, window: str) -> Suggestion:
    """The stretch of the window the answer changes, as a replacement in the document: whole lines
    first, then the characters both ends share left out."""
    old_lines, new_lines = request.window_text.splitlines(keepends=True), window.splitlines(keepends=True)
    first, old_end, new_end = changed_stretch(old_lines, new_lines)
    old, new = "".join(old_lines[first:old_end]), "".join(new_lines[first:new_end])
    prefix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(old), len(new)) - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    line = request.window[0] + first
    return Suggestion(_position(old, prefix, line), _position(old, len(old) - suffix, line),
                      new[prefix:len(new) - suffix], window)


def _position(text: str, offset: int, first_line: int) -> tuple[int, int]:
    """(line, column) of `offset` in `text`, which starts at column 0 of `first_line`."""
    before = text[:offset]
    return first_line + before.count("\n"), len(before) - (before.rfind("\n") + 1)
