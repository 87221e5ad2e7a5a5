"""Unified diffs of a rewrite, and their colours on a terminal."""
from __future__ import annotations

import difflib


def colorize(diff: str) -> str:
    colors = {"+": "\033[32m", "-": "\033[31m", "@": "\033[36m"}
    lines = []
    for line in diff.splitlines(keepends=True):
        color = colors.get(line[:1]) if not line.startswith(("+++", "---")) else "\033[1m"
        lines.append(f"{color}{line.rstrip(chr(10))}\033[0m\n" if color else line)
    return "".join(lines)


def unified_diff(before: str, after: str, name: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"a/{name}", tofile=f"b/{name}",
    )
    # A last line without newline must still end the diff line, as diff(1) marks it.
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
