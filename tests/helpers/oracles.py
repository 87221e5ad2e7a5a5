"""Test-only shorthands over the edit core's classes: one call where the package builds an object
and asks it several things."""
from __future__ import annotations

from rewriter.edits.checks.integrity import FileIntegrity, Verdict
from rewriter.edits.scopes import SyntaxTree


def check_edit(file_text: str, start: int, end: int, answer: str, instruction: str,
               grammar: str | None = None) -> Verdict:
    """One rewrite of the file's characters [start, end) into `answer`, judged."""
    return FileIntegrity(file_text, grammar).check(start, end, answer, instruction)


def syntax_error_line(text: str, language: str | None) -> int | None:
    """The line of the first parse error, or None when the text parses (or has no grammar)."""
    if not language:
        return None
    tree = SyntaxTree(text, language)
    return tree.first_error_line() if tree.has_errors() else None
