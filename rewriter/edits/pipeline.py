"""From a target in a file (target.py) to what may be applied: the one path of `rewriter apply`, the language
server and `/v1/rewrites`.

On the way in, the span is dedented (a method is rewritten as if it stood at the top level) and
the file around it may go along as context. On the way out, the answer is indented back, keeps
the span's trailing blank lines, and is judged in this order:

- cut: an answer that stopped at the token limit is refused (unless it changed nothing);
- integrity (checks/integrity.py): an echo of the surroundings is stripped; lost definitions,
  duplicated code and an answer that is only a copy are refused; a model's merge of a snippet
  that leaves out what the snippet keeps is refused too (checks/snippet_kept.py);
- syntax (checks/syntax.py): an answer that does not parse where the file did is refused; a Python file
  that compiled must still compile (Python's compiler, not tree-sitter, has the last word);
- lint (checks/lint.py): in a Python file, an answer that brings a new undefined name (or a local used
  before assignment) is refused: it compiles but cannot run.

Every front end gets one `Decision` (applied, stripped or refused, the reason, the refused text)
and so refuses what any other refuses. Only the CLI's flags override: `--force` applies what the
integrity or the lint check refused, `--allow-syntax-errors` skips the syntax guard; nothing applies a
cut answer.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ..answer import NoCodeBlock, extract_code
from ..prompt import SourceText, common_indent, newline_of
from .checks.integrity import FileIntegrity, Status, Verdict
from .checks.snippet_kept import merge_omissions, omission_reason, unshown_reason, unshown_stretch
from .definitions import guess_language
from .node_kinds import grammar_for
from .target import Target


class Refusal(StrEnum):
    """Which step refused an answer (a Decision's `refusal`)."""

    CUT = "cut"  # it stopped at the token limit
    INTEGRITY = "integrity"
    SYNTAX = "syntax"
    LINT = "lint"


CUT_REASON = "the answer stopped at the token limit"


@dataclass(frozen=True)
class Decision:
    """What becomes of one answer for one span."""

    status: Status
    text: str  # the span's text to apply; the original span when refused
    reason: str = ""  # refused: why; stripped: what was removed; forced: what was overridden
    refused_text: str | None = None  # refused: the span's text had the answer been applied
    refusal: Refusal | None = None  # refused: which step refused it
    forced: bool = False  # applied although the integrity or the lint check refused it (--force)

    @property
    def refused(self) -> bool:
        return self.status == Status.REFUSED

    @property
    def may_force(self) -> bool:
        """Whether a user may apply the refused text anyway: never a cut answer."""
        return self.refused and self.refusal != Refusal.CUT


class TargetEdit:
    """One target's way through the model.

    `code` is what the model is sent; `finish(answer_text, finish_reason)` decides what of the
    answer may be applied. `integrity` may be shared by the targets of one file (parsed once);
    `judged_instruction` replaces the instruction where the integrity check reads it; `snippet`,
    where the model merges one, is what the merge must keep (checks/snippet_kept.py).
    """

    def __init__(self, target: Target, instruction: str, grammar: str | None = None,
                 integrity: FileIntegrity | None = None, judged_instruction: str | None = None,
                 snippet: str | None = None):
        self.target = target
        self.file_text = target.text
        self.start, self.end = target.start, target.end
        self.original = target.code
        self.instruction = instruction
        # What the integrity check reads for the removals and renames it permits: the instruction,
        # unless it carries other text (a snippet to merge, whose code may say "remove" anywhere).
        self.judged_instruction = instruction if judged_instruction is None else judged_instruction
        self.snippet = snippet
        self.grammar = integrity.grammar if integrity is not None else grammar
        self._integrity = integrity
        # The model reads and writes LF; what it writes goes back in the file's line endings.
        self.source = SourceText.from_text(self.original, newline_of(self.file_text))
        self.indent = common_indent(self.original)
        self.code = self.as_sent(self.original)

    @property
    def integrity(self) -> FileIntegrity:
        if self._integrity is None:  # parsed on first use: off the event loop for the language server
            self._integrity = FileIntegrity(self.file_text, self.grammar)
        return self._integrity

    def as_sent(self, span_text: str) -> str:
        """A text of the span (the original, an earlier answer) as the model is sent it: dedented, LF."""
        return dedent(self.source.lf(span_text), self.indent)

    def context(self, window: int | None = None) -> str | None:
        """The file around the span, as `context_for` cuts it, LF; None for a whole file."""
        context = context_for(self.file_text, self.start, self.end, window)
        return None if context is None else self.source.lf(context)

    def shape(self, code: str) -> str:
        """The model's code (whole or the part written so far) at the span's indentation."""
        return reindent(code, self.indent)

    def partial_text(self, answer: str) -> str | None:
        """The span's new text as far as the raw answer has written it (indented back, in the
        span's line endings); None until the opening fence line is complete."""
        try:
            code = extract_code(answer)
        except NoCodeBlock:
            return None
        return self.shape(self.source.native(code))

    def final_text(self, answer_text: str) -> str:
        """The answer's whole code as the span's new text: indented back, with the span's own
        trailing blank lines (the engine trims them; they separate it from what follows), in the
        span's line endings."""
        return keep_trailing_blank_lines(self.original, self.shape(self.source.native(answer_text)))

    def finish(self, answer_text: str, finish_reason: str = "", *, force: bool = False,
               allow_syntax_errors: bool = False) -> Decision:
        """Judge the engine's answer (its code, RewriteResult.text) for this span."""
        new = self.final_text(answer_text)
        if new == self.original and not self.snippet_problem(new):  # a merge's unchanged answer may still miss lines
            return Decision(Status.APPLIED, new)
        if finish_reason == "length":
            return Decision(Status.REFUSED, self.original, CUT_REASON, refused_text=new, refusal=Refusal.CUT)
        verdict = self.integrity.check(self.start, self.end, new, self.judged_instruction)
        if not verdict.refused and (unheld := self.snippet_problem(verdict.text)):
            verdict = Verdict(Status.REFUSED, verdict.text, unheld)
        if verdict.refused and not force:
            return Decision(Status.REFUSED, self.original, verdict.reason, refused_text=verdict.text,
                            refusal=Refusal.INTEGRITY)
        new = verdict.text
        if not allow_syntax_errors and new != self.original:
            problem = self.integrity.syntax.problem(self.start, self.end, new)
            if problem is not None:
                return Decision(Status.REFUSED, self.original, f"the rewrite does not parse ({problem.describe()})",
                                refused_text=new, refusal=Refusal.SYNTAX)
        lint = self.lint_problem(new)
        if lint and not force:
            return Decision(Status.REFUSED, self.original, lint, refused_text=new, refusal=Refusal.LINT)
        status = Status.STRIPPED if verdict.status == Status.STRIPPED else Status.APPLIED
        forced = "; ".join(reason for reason in (verdict.reason if verdict.refused else "", lint) if reason)
        return Decision(status, new, forced or verdict.reason, forced=bool(forced))

    def snippet_problem(self, new: str) -> str:
        """A snippet merge's: why `new`, as the span's text, does not hold the snippet (lines it
        keeps left out, or its lines not shown as it shows them); "" when it does, or for no snippet."""
        if self.snippet is None:
            return ""
        if missing := merge_omissions(self.file_text, self.start, self.end, self.snippet, new):
            return omission_reason(missing)
        merged_file = self.file_text[:self.start] + new + self.file_text[self.end:]
        stretch = unshown_stretch(self.file_text, merged_file, self.snippet)
        return unshown_reason(stretch) if stretch else ""

    def lint_problem(self, new: str) -> str:
        """Why the lint check refuses `new` as the span's text; "" when it does not."""
        lint = self.integrity.lint
        return "" if lint is None else lint.problem(self.start, self.end, new)


def grammar_of(language: str, text: str) -> str | None:
    """The grammar that checks an edit of `text`: the named language's; without a name, the one
    guessed from the text, so that definitions are checked wherever a grammar knows them."""
    return grammar_for(language) if language else grammar_for(guess_language(text))


def context_for(text: str, start: int, end: int, window: int | None = None) -> str | None:
    """The file around text[start:end] (the span included: small models follow that best), cut
    to `window` characters on each side of the span; None for a whole file or a window of 0."""
    if window == 0 or (start == 0 and end == len(text)):
        return None
    before, after = text[:start], text[end:]
    if window is not None and len(before) > window:
        cut = before.find("\n", len(before) - window) + 1 or len(before) - window
        before = f"... ({before.count(chr(10), 0, cut)} lines above not shown) ...\n" + before[cut:]
    if window is not None and len(after) > window:
        cut = after.rfind("\n", 0, window) + 1 or window
        after = after[:cut] + f"... ({after.count(chr(10), cut)} lines below not shown) ...\n"
    return before + text[start:end] + after


def dedent(text: str, indent: str) -> str:
    """Remove `indent` from every line: a method is rewritten as if it stood at the top level."""
    if not indent:
        return text
    return "".join(line[len(indent):] if line.startswith(indent) else line.lstrip(" \t")
                   for line in text.splitlines(keepends=True))


def reindent(code: str, indent: str) -> str:
    """Give the model's code the span's indentation, unless its first line already has it (the
    model kept or copied the indentation). Decided by the first code line, so code that grows
    while streaming is indented the same way throughout."""
    first = next((line for line in code.splitlines() if line.strip()), "")
    if not indent or not first or first.startswith(indent):
        return code
    return "".join(indent + line if line.strip() else line for line in code.splitlines(keepends=True))


def keep_trailing_blank_lines(original: str, code: str) -> str:
    """The code ending in the original's run of line breaks (the engine keeps one at most)."""
    if not code.strip():
        return code
    return code.rstrip("\r\n") + original[len(original.rstrip("\r\n")):]
