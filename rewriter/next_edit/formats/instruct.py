"""The next-edit prompt of the instruct models we ship (Qwen2.5-Coder instruct): chat messages.

The user message puts what stays the same while the user types first, so that a prefill ahead
has computed it when a suggestion is asked for: the file's path and the code above and below the
window. The recent edits (unified diffs, oldest first) and the window, the cursor marked, follow;
then the request. The answer is the window rewritten, in one fenced block: the prediction is the
window unchanged in that block, so an answer that changes a line or two is verified many tokens a
pass and realigns after the edit.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...answer import NoCodeBlock, extract_code
from ...prompt import fence_for
from ..base import NextEditInput, NextEditPrompt, RecentEdit

CURSOR = "<|cursor|>"  # plain text to the tokenizer: no special token of the Qwen models
SYSTEM_PROMPT = (
    "You are a code editor that predicts the next edit of a programmer. You see their recent edits "
    "and an excerpt of the file around their cursor. Reply with the excerpt rewritten with the edit "
    "they are most likely to make next, in a single fenced code block and nothing else; keep every "
    "other line exactly as it is. If no edit clearly follows from their recent edits, reply with the "
    "excerpt unchanged."
)
REQUEST = "Rewrite the excerpt with my next edit."


def unified_diff(edit: RecentEdit) -> str:
    """One recent edit as a unified diff hunk under its file's header."""
    old, new = edit.before.splitlines(), edit.after.splitlines()
    lines = [f"--- a/{edit.path}", f"+++ b/{edit.path}",
             f"@@ -{edit.line + 1},{len(old)} +{edit.line + 1},{len(new)} @@"]
    lines += [f"-{line}" for line in old] + [f"+{line}" for line in new]
    return "\n".join(lines) + "\n"


def _ending(text: str) -> str:
    return text if text.endswith("\n") or not text else text + "\n"


@dataclass
class InstructFormat:
    """Chat messages for an instruct model; `context_above`/`context_below`: lines of the file
    shown around the window; `mark_cursor`: the window shows where the cursor is."""

    name: str = "instruct"
    context_above: int = 20
    context_below: int = 10
    mark_cursor: bool = True

    def render(self, request: NextEditInput) -> NextEditPrompt:
        lines = request.text.splitlines(keepends=True)
        start, end = request.window
        above = "".join(lines[max(0, start - self.context_above):start])
        below = "".join(lines[end:end + self.context_below])
        window = request.window_text
        shown = self._marked(window, request) if self.mark_cursor else window
        edits = "".join(unified_diff(edit) for edit in request.edits)
        fence = fence_for(above + below + window + edits)
        language = request.language
        stable = f"File: {request.path}\n\n"
        if above:
            stable += f"The code above the excerpt:\n{fence}{language}\n{_ending(above)}{fence}\n\n"
        if below:
            stable += f"The code below the excerpt:\n{fence}{language}\n{_ending(below)}{fence}\n\n"
        history = f"My recent edits, oldest first:\n{fence}diff\n{edits}{fence}\n\n" if edits else ""
        where = f" (my cursor is at {CURSOR})" if self.mark_cursor else ""
        message = (f"{stable}{history}The excerpt{where}:\n{fence}{language}\n{_ending(shown)}{fence}\n\n"
                   f"{REQUEST}")
        messages = ({"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": message})
        return NextEditPrompt(prediction=f"{fence}{language}\n{_ending(window)}{fence}", messages=messages,
                              stable_chars=len(stable))

    def window_of(self, answer: str, request: NextEditInput) -> str | None:
        try:
            code = extract_code(answer)
        except NoCodeBlock:
            return None
        code = code.replace(CURSOR, "")
        if not request.window_text.endswith("\n") and code.endswith("\n"):
            code = code[:-1]  # the window ends the document without a newline: the block gave it one
        return code

    def _marked(self, window: str, request: NextEditInput) -> str:
        line, column = request.cursor
        rows = window.splitlines(keepends=True)
        at = line - request.window[0]
        if at == len(rows):  # the empty line after the document's final newline
            return window + CURSOR
        row = rows[at]
        body = row.rstrip("\r\n")
        column = min(column, len(body))
        rows[at] = body[:column] + CURSOR + row[column:]
        return "".join(rows)
