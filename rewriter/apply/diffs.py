"""Unified diffs of a rewrite, and their colours on a terminal."""
from __future__ import annotations

import difflib
import os
from typing import TextIO


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


class ReaderOutput:
    """Standard output whose reader may go away (`| head`): once a write finds the pipe closed,
    what is left is dropped and the run goes on, writing the files it was asked to write."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.closed_by_reader = False

    def isatty(self) -> bool:
        return self.stream.isatty()

    def write(self, text: str) -> None:
        if not self.closed_by_reader:
            try:
                self.stream.write(text)
            except BrokenPipeError:
                self._drop()

    def flush(self) -> None:
        if not self.closed_by_reader:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self) -> None:
        self.closed_by_reader = True
        try:
            descriptor = self.stream.fileno()
        except (AttributeError, OSError, ValueError):
            return  # not a file: nothing flushes it at exit
        # What is still buffered is flushed at exit: into /dev/null, not into a second error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, descriptor)
        os.close(devnull)
