"""The vocabulary of next-edit suggestions, shared by the history, the prompt formats, the
suggestion itself and its front ends (the language server, /v1/completions, the bench)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class RecentEdit:
    """One edit the user made (a burst of typing in one place counts as one): the whole lines it
    replaced and the whole lines it wrote in their place, each ending in a newline."""

    path: str  # the document's path as the user sees it (relative to the workspace where there is one)
    line: int  # 0-based line where the edit starts, in the document after it
    before: str  # "" for a pure insertion
    after: str  # "" for a pure deletion


@dataclass(frozen=True)
class NextEditInput:
    """What a suggestion is computed from."""

    path: str
    language: str  # as rewriter.prompt.language_for names it; "" when unknown
    text: str  # the whole document now, with "\n" line ends
    window: tuple[int, int]  # lines [start, end) the model may rewrite: the prediction
    cursor: tuple[int, int]  # (line, column in characters); its line lies inside the window
    edits: tuple[RecentEdit, ...] = ()  # oldest first

    @property
    def window_text(self) -> str:
        start, end = self.window
        return "".join(self.text.splitlines(keepends=True)[start:end])


@dataclass(frozen=True)
class NextEditPrompt:
    """A rendered request: chat messages for an instruct model (through its chat template), or a
    raw prompt for a next-edit model; `prediction` is the answer the model gives when it changes
    nothing, the draft it verifies."""

    prediction: str
    messages: tuple[dict, ...] | None = None
    raw: str | None = None
    stop: tuple[str, ...] = ()
    # The prompt up to here (characters of `raw`, or of the last message's content) stays the same
    # while the user types in the window: what a prefill ahead computes. None: nothing is.
    stable_chars: int | None = None


class NextEditFormat(Protocol):
    """One prompt format: how a request is put to a model and how its answer is read back."""

    name: str

    def render(self, request: NextEditInput) -> NextEditPrompt: ...

    def window_of(self, answer: str, request: NextEditInput) -> str | None:
        """The rewritten window read back from the model's answer; None when the answer does not
        follow the format (then nothing is suggested)."""
        ...
