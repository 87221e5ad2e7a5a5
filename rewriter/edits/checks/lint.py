"""The lint check: a Python edit that compiles must not bring a name that cannot be found when it runs.

pyflakes, in-process, reads the whole file with the new span and the file as it was; only its
error-class messages count (an undefined name, a local used before it is assigned, an undefined
name in `__all__`), never its style warnings (unused imports, redefinitions). Errors are compared
by kind and name, not by line (lines move): an error the file already had is not new, and only a
new one refuses the edit. Where pyflakes cannot judge, nothing is refused: an edited file that does
not compile (the syntax guard's to judge), and names in a file with `from x import *` (pyflakes
reports those as perhaps star-imported, which this check does not count).

A file that did not compile before ("Fix indent") has no errors pyflakes could find: there, an
undefined name (in code or in `__all__`) is new where the file bound that name and the edited file
binds it nowhere, as tree-sitter reads both (bindings.py): an import, a def or an assignment the
edit lost. Any other may be the file's own error (a name it never bound, or bound in another
scope), and is not refused.

Where the edit's caller has the edited file parsed by tree-sitter and compiled (a snippet's merge,
snippets/merge.py), pyflakes reads outlines of both texts (lint_outline.py): the functions the edit left
as they were, their bodies cut, which find no error the file did not have. The outline finds every
new error the whole file would, at the same line; where that may not hold, the whole file is read.
"""
from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from functools import cached_property

from pyflakes import messages
from pyflakes.checker import Checker

from ..scopes import SyntaxTree
from .bindings import bound_names
from .lint_outline import ModuleNames, cut_as_expected, outline

# pyflakes' messages for code that compiles but fails when it runs, and how a refusal names each.
ERROR_KINDS: dict[type, str] = {
    messages.UndefinedName: "undefined name",
    messages.UndefinedLocal: "local variable used before assignment",
    messages.UndefinedExport: "undefined name in __all__",
}
# Those judged where the file did not compile: by the name alone. A local used before assignment
# is bound in its function by definition, so the file's binding it says nothing.
UNBOUND_KINDS = {ERROR_KINDS[messages.UndefinedName], ERROR_KINDS[messages.UndefinedExport]}


@dataclass(frozen=True)
class LintError:
    kind: str  # one of ERROR_KINDS' descriptions
    name: str
    line: int  # 1-based, in the whole file

    def describe(self) -> str:
        return f"{self.kind} {self.name!r} at line {self.line}"


def lint_errors(text: str) -> list[LintError] | None:
    """pyflakes' error-class findings in the Python file `text`; None where it does not compile."""
    checker = _checked(text)
    return None if checker is None else _errors(checker)


def finding_count(text: str) -> int | None:
    """How many findings of every kind pyflakes has in `text`, style warnings too (an unused
    import or variable, a redefinition); None where it does not compile."""
    checker = _checked(text)
    return None if checker is None else len(checker.messages)


def _checked(text: str) -> Checker | None:
    """pyflakes' reading of `text`; None where it does not compile."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning (an invalid escape) is no error
        try:
            tree = ast.parse(text, "<rewrite>")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    return Checker(tree, "<rewrite>")


def _errors(checker: Checker) -> list[LintError]:
    found = []
    for message in checker.messages:
        kind = ERROR_KINDS.get(type(message))
        if kind is not None:
            found.append(LintError(kind, str(message.message_args[0]), message.lineno))
    return sorted(found, key=lambda error: error.line)


class FileLint:
    """The lint check for edits of one Python file (the file's own errors are found once, on first use)."""

    def __init__(self, text: str, tree: SyntaxTree | None = None):
        self.text = text
        self.tree = tree  # the file parsed by tree-sitter, for the outlines

    @cached_property
    def known(self) -> set[tuple[str, str]] | None:
        """The (kind, name) of every error the file already had; None where it does not compile."""
        before = lint_errors(self.text)
        return None if before is None else {(error.kind, error.name) for error in before}

    def new_errors(self, start: int, end: int, new: str, parsed: SyntaxTree | None = None) -> list[LintError]:
        """Errors of the file with text[start:end] replaced by `new` that the file did not have,
        the first occurrence of each (where the file did not compile: for names the edit unbound);
        empty where pyflakes cannot judge. `parsed`: that file parsed by tree-sitter, given only
        where Python compiles it (then outlines may be read)."""
        after = self._outlined(start, end, new, parsed) if parsed is not None else None
        edited = self.text[:start] + new + self.text[end:]
        if after is None:
            after = lint_errors(edited)
        if not after:  # no error at all (most edits): the file's own need not be found
            return []
        known = self.known if self.known is not None else self._own_guessed(after, edited, parsed)
        new_errors: dict[tuple[str, str], LintError] = {}
        for error in after:
            key = (error.kind, error.name)
            if key not in known:
                new_errors.setdefault(key, error)
        return list(new_errors.values())

    @cached_property
    def bound(self) -> set[str]:
        """The names the file binds anywhere, as tree-sitter reads it (for a file that does not compile)."""
        return bound_names(self.tree if self.tree is not None else SyntaxTree(self.text, "python"))

    def _own_guessed(self, after: list[LintError], edited: str, parsed: SyntaxTree | None) -> set[tuple[str, str]]:
        """Which of the edited file's errors `after` to take for the file's own where it did not
        compile (pyflakes never read it): all but an undefined name that the file bound and the
        edited file binds nowhere, a binding the edit lost. A name still bound somewhere may have
        been undefined where it is used before the edit too; we cannot tell."""
        lost = {(e.kind, e.name) for e in after if e.kind in UNBOUND_KINDS and e.name in self.bound}
        if lost:
            tree = parsed if parsed is not None and parsed.text == edited else SyntaxTree(edited, "python")
            still = bound_names(tree)
            lost = {(kind, name) for kind, name in lost if name not in still}
        return {(e.kind, e.name) for e in after} - lost

    def _outlined(self, start: int, end: int, new: str, parsed: SyntaxTree) -> list[LintError] | None:
        """The edited file's errors in its outline that the file's outline did not have (so not
        the file's own errors); None where outlines cannot stand for the files."""
        cut = outline(self.tree, parsed, start, end, new) if self.tree is not None else None
        after = _checked(cut.after) if cut is not None else None
        if cut is None or after is None or not cut_as_expected(after.root, cut.after_lines):
            return None
        names_after = ModuleNames.of(after)
        if names_after is None:
            return None
        errors = _errors(after)
        if cut.same_names and not errors:
            return []  # the module's names stay: the cut bodies find what they found before
        before = cut.before()
        checked = _checked(before[0]) if before is not None else None
        if before is None or checked is None or not cut_as_expected(checked.root, before[1]):
            return None
        names_before = ModuleNames.of(checked)
        if names_before is None or not names_before.read_alike(names_after, cut.cut):
            return None
        had = {(error.kind, error.name) for error in _errors(checked)}
        return [error for error in errors if (error.kind, error.name) not in had]

    def problem(self, start: int, end: int, new: str, edit: str = "the rewrite",
                parsed: SyntaxTree | None = None) -> str:
        """Why the check refuses `new` as text[start:end] (`edit` names it in the reason); "" when
        it does not. Every edit is judged here: a model's answer (pipeline.py) and a snippet's
        deterministic merge (snippets/merge.py, which gives `parsed`, as new_errors takes it)."""
        if new == self.text[start:end]:
            return ""
        errors = self.new_errors(start, end, new, parsed)
        return describe(errors, edit) if errors else ""


def describe(errors: list[LintError], edit: str = "the rewrite") -> str:
    """A refusal's reason for `errors` (at least one)."""
    shown = "; ".join(error.describe() for error in errors[:3])
    more = f" and {len(errors) - 3} more" if len(errors) > 3 else ""
    return f"{edit} would fail when run: {shown}{more}"
