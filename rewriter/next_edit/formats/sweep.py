"""Sweep's next-edit format (sweepai/sweep-next-edit-1.5B), as its model card publishes it and
Zed renders it for an OpenAI-compatible server (zed-industries/zed,
crates/edit_prediction/src/sweep_prompt.rs, build_prompt): file blocks opened by `<|file_sep|>`
and a path, in this order: each recent edit as `{path}.diff` holding `original:` and `updated:`
lines, the window as it was before the latest edit (`original/{path}`), the window now
(`current/{path}`), and `updated/{path}`, which the model completes with the window rewritten.
The answer ends at the next `<|file_sep|>` or `</s>`. There is no cursor marker.
"""
from __future__ import annotations

from ..base import NextEditInput, NextEditPrompt, RecentEdit

FILE_SEP = "<|file_sep|>"
END_OF_TEXT = "</s>"
STOPS = (FILE_SEP, END_OF_TEXT)
RECENT_EDITS = 3  # Zed sends the latest three


def file_block(path: str, content: str) -> str:
    """One block: the separator and path on a line, then the content, ending in a newline."""
    return f"{FILE_SEP}{path}\n{content}" + ("" if content.endswith("\n") else "\n")


def edit_block(edit: RecentEdit) -> str:
    return file_block(f"{edit.path}.diff", f"original:\n{edit.before}updated:\n{edit.after}")


def original_window(request: NextEditInput) -> str:
    """The window as it was before the latest edit of this file, where that edit lies inside it;
    else the window as it is (Zed's original_window_for_current_window)."""
    lines = request.text.splitlines(keepends=True)
    start, end = request.window
    latest = next((edit for edit in reversed(request.edits) if edit.path == request.path), None)
    if latest is None:
        return request.window_text
    written = len(latest.after.splitlines())
    if not start <= latest.line <= latest.line + written <= end:
        return request.window_text
    return "".join(lines[start:latest.line]) + latest.before + "".join(lines[latest.line + written:end])


class SweepFormat:
    """Sweep's original/current/updated file blocks."""

    name = "sweep"

    def render(self, request: NextEditInput) -> NextEditPrompt:
        blocks = [edit_block(edit) for edit in request.edits[-RECENT_EDITS:]]
        blocks.append(file_block(f"original/{request.path}", original_window(request)))
        blocks.append(file_block(f"current/{request.path}", request.window_text))
        blocks.append(f"{FILE_SEP}updated/{request.path}\n")
        return NextEditPrompt(prediction=request.window_text, raw="".join(blocks), stop=STOPS)

    def window_of(self, answer: str, request: NextEditInput) -> str | None:
        """The answer up to a separator; None when it is empty (Zed suggests nothing then)."""
        for stop in STOPS:
            answer = answer.split(stop, 1)[0]
        if not answer:
            return None
        return answer if answer.endswith("\n") else answer + "\n"
