"""Whether an edited file still parses: Python's own compiler for Python, tree-sitter elsewhere.

Grammars built for editors forgive what compilers refuse (tree-sitter-python accepts a `def`
with no body), so where the language's compiler is at hand it has the last word: a Python file
that compiled must compile after the edit (compiled only, never run). A file that did not
compile before (Python 2, syntax newer than this interpreter) keeps tree-sitter's rule, as do
other languages: an edit is refused only where the file parsed before and no longer does.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

from ..scopes import SyntaxTree


@dataclass(frozen=True)
class SyntaxProblem:
    line: int  # 1-based, in the whole file
    message: str = ""  # the compiler's words; tree-sitter gives none

    def describe(self) -> str:
        return f"syntax error at line {self.line}" + (f": {self.message}" if self.message else "")


class _NoVerdict(Exception):
    """The compiler could not judge the text (nesting too deep for it): tree-sitter judges."""


def python_compile_error(text: str) -> SyntaxProblem | None:
    """Python's compiler's objection to `text`, or None when it compiles. Raises _NoVerdict
    where the compiler itself gave out."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning (an invalid escape) is no error
        try:
            compile(text, "<rewrite>", "exec", dont_inherit=True)
        except SyntaxError as error:  # IndentationError and TabError too
            return SyntaxProblem(error.lineno or 1, error.msg)
        except ValueError as error:  # a NUL character
            return SyntaxProblem(1, str(error))
        except (RecursionError, MemoryError) as error:
            raise _NoVerdict from error
    return None


def compiles(text: str) -> bool | None:
    """Whether Python compiles `text`; None where the compiler could not say."""
    try:
        return python_compile_error(text) is None
    except _NoVerdict:
        return None


def compile_regression(before: str, after: str) -> SyntaxProblem | None:
    """Why Python's compiler refuses `after` where it compiled `before`; None otherwise."""
    if not compiles(before):
        return None
    try:
        return python_compile_error(after)
    except _NoVerdict:
        return None


class FileSyntax:
    """The syntax guard for edits of one file (whether it compiled is found once, on first use)."""

    def __init__(self, text: str, tree: SyntaxTree | None):
        self.text = text
        self.tree = tree
        self._compiled: bool | None = None

    @property
    def judged_by_compiler(self) -> bool:
        if self.tree is None or self.tree.language != "python":
            return False
        if self._compiled is None:
            self._compiled = bool(compiles(self.text))
        return self._compiled

    def problem(self, start: int, end: int, new: str) -> SyntaxProblem | None:
        """What keeps the file with text[start:end] replaced by `new` from parsing; None if nothing."""
        if self.tree is None:
            return None
        candidate = self.text[:start] + new + self.text[end:]
        if self.judged_by_compiler:
            try:
                return python_compile_error(candidate)
            except _NoVerdict:
                pass
        if self.tree.has_errors():
            return None
        tree = SyntaxTree(candidate, self.tree.language)
        line = tree.first_error_line() if tree.has_errors() else None
        return SyntaxProblem(line) if line is not None else None
