"""Zeta's next-edit format (zed-industries/zeta), as Zed publishes it (zed-industries/zed,
crates/zeta_prompt, the zeta1 module: format_zeta1_prompt, its events and its excerpt): an
instruction, the user's edits as unified diffs, the excerpt in a fence named by its path with the
editable region between `<|editable_region_start|>` and `<|editable_region_end|>` and
`<|user_cursor_is_here|>` at the cursor (`<|start_of_file|>` when the excerpt starts the file), then
`### Response:`. The model answers with the excerpt again, the editable region rewritten; Zed stops
it at the region's end marker and reads what lies between the markers (clean_zeta1_model_output).
"""
from __future__ import annotations

from ..base import NextEditInput, NextEditPrompt, RecentEdit

CURSOR = "<|user_cursor_is_here|>"
START_OF_FILE = "<|start_of_file|>"
REGION_START = "<|editable_region_start|>"
REGION_END = "<|editable_region_end|>"
INSTRUCTION = (
    "### Instruction:\n"
    "You are a code completion assistant and your task is to analyze user edits and then rewrite an "
    "excerpt that the user provides, suggesting the appropriate edits within the excerpt, taking "
    "into account the cursor location.\n\n"
    "### User Edits:\n\n")
EXCERPT_HEADER = "\n\n### User Excerpt:\n\n"
RESPONSE_HEADER = "\n\n### Response:\n"
CONTEXT_LINES = 5  # of the file on each side of the editable region (Zed budgets ~150 tokens)


def hunk_range(line: int, count: int) -> str:
    """A unified diff's range: 1-based; an empty one names the line before it."""
    return f"{line + 1 if count else line},{count}"


def event(edit: RecentEdit) -> str:
    """One edit as Zed describes it: `User edited {path}:` and its diff in a fence."""
    before, after = edit.before.splitlines(), edit.after.splitlines()
    lines = [f"@@ -{hunk_range(edit.line, len(before))} +{hunk_range(edit.line, len(after))} @@"]
    lines += [f"-{line}" for line in before] + [f"+{line}" for line in after]
    return f"User edited {edit.path}:\n```diff\n" + "\n".join(lines) + "\n```"


def excerpt_parts(request: NextEditInput) -> tuple[str, str, str]:
    """The excerpt's opening up to the region's start marker, the region with the cursor marker
    (without the window's last newline, which Zed leaves outside the region), and the rest."""
    lines = request.text.splitlines(keepends=True)
    start, end = request.window
    first = max(0, start - CONTEXT_LINES)
    opening = f"```{request.path}\n" + (f"{START_OF_FILE}\n" if first == 0 else "")
    opening += "".join(lines[first:start]) + f"{REGION_START}\n"
    line, column = request.cursor
    cursor_line = lines[line] if line < len(lines) else ""  # a last line with nothing on it yet
    before = "".join(lines[start:line]) + cursor_line[:column]
    after = cursor_line[column:] + "".join(lines[line + 1:end])
    region = (before + CURSOR + after).removesuffix("\n")
    following = "".join(lines[end:end + CONTEXT_LINES]).removesuffix("\n")
    closing = f"\n{REGION_END}" + (f"\n{following}" if following else "") + "\n```"
    return opening, region, closing


class ZetaFormat:
    """Zeta's editable region and cursor markers."""

    name = "zeta"

    def render(self, request: NextEditInput) -> NextEditPrompt:
        events = "\n\n".join(event(edit) for edit in request.edits)
        opening, region, closing = excerpt_parts(request)
        raw = INSTRUCTION + events + EXCERPT_HEADER + opening + region + closing + RESPONSE_HEADER
        # Unchanged, the answer repeats the excerpt up to the region's end, without the cursor.
        prediction = opening + region.replace(CURSOR, "") + f"\n{REGION_END}"
        return NextEditPrompt(prediction=prediction, raw=raw, stop=(REGION_END,))

    def window_of(self, answer: str, request: NextEditInput) -> str | None:
        """What lies between the region's markers (the end one may have been cut as the stop),
        without a cursor marker; None when the answer opens no region."""
        answer = answer.replace(CURSOR, "")
        opened = answer.find(REGION_START)
        if opened < 0:
            return None
        region = answer[opened + len(REGION_START):].removeprefix("\n")
        region = region.split(REGION_END, 1)[0].removesuffix("\n")
        if REGION_START in region:
            return None  # a second region: not the format
        # The window's last newline stands outside the region, in the answer as in the prompt.
        return region + "\n" if request.window_text.endswith("\n") else region
