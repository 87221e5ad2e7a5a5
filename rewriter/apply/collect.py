"""Finding the files `rewriter apply` rewrites: files, directories (recursive, honouring .gitignore) and globs."""
from __future__ import annotations

import glob
import os
from pathlib import Path

from ..prompt import language_for
from .plans import BatchError, FilePlan

EXCLUDED_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv",
                 ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
# Directory walks take source code only; data and prose files are rewritten when named.
NOT_CODE = {"", "json", "yaml", "toml", "markdown"}


class Ignores:
    """.gitignore rules from every directory between a path and its repository root."""

    def __init__(self):
        self._specs: dict[Path, object] = {}

    def _spec(self, directory: Path):
        if directory not in self._specs:
            import pathspec

            lines: list[str] = []
            for name in (".gitignore", ".git/info/exclude"):
                try:
                    lines += (directory / name).read_text(encoding="utf-8", errors="replace").splitlines()
                except OSError:
                    pass
            self._specs[directory] = pathspec.GitIgnoreSpec.from_lines(lines) if lines else None
        return self._specs[directory]

    def ignored(self, path: Path, is_dir: bool) -> bool:
        path = path.absolute()
        if is_dir and path.name in EXCLUDED_DIRS:
            return True
        bases = []
        for base in path.parents:
            bases.append(base)
            if (base / ".git").exists():
                break
        for base in bases:
            spec = self._spec(base)
            if spec is None:
                continue
            relative = path.relative_to(base).as_posix() + ("/" if is_dir else "")
            if spec.match_file(relative):
                return True
        return False


def collect(paths: list[str]) -> list[FilePlan]:
    """Files to rewrite from files, directories (recursive, honouring .gitignore) and globs."""
    ignores = Ignores()
    jobs: list[FilePlan] = []
    seen: set[Path] = set()
    cwd = Path.cwd()

    def add(path: Path, root: Path) -> None:
        job = FilePlan(path=path, display=_display(path, cwd))
        if path.is_symlink():
            target = path.resolve()
            if not target.exists():
                jobs.append(job.skip(f"broken symlink to {target}"))
                return
            if not target.is_relative_to(root.resolve()):
                jobs.append(job.skip(f"symlink to {target}, outside {root}"))
                return
            job.path = target  # write through the link, keeping the link itself
        key = job.path.resolve()
        if key in seen:
            return
        seen.add(key)
        if not job.path.is_file():
            jobs.append(job.skip("not a regular file"))
            return
        jobs.append(job)

    for argument in paths:
        path = Path(argument)
        if path.exists() or path.is_symlink():
            matches, from_glob = [path], False
        elif glob.has_magic(argument):
            matches, from_glob = [Path(m) for m in sorted(glob.glob(argument, recursive=True))], True
            if not matches:
                raise BatchError(f"{argument}: no files match")
        else:
            raise BatchError(f"{argument}: no such file or directory")
        for match in matches:
            if match.is_dir() and not match.is_symlink():
                for found in _walk(match, ignores):
                    add(found, match)
            elif not from_glob or not ignores.ignored(match, False):
                add(match, cwd)
    return jobs


def _display(path: Path, cwd: Path) -> str:
    """The path as the user would type it: relative to the current directory when inside it."""
    try:
        return str(path.absolute().relative_to(cwd))
    except ValueError:
        return str(path)


def _walk(root: Path, ignores: Ignores):
    """Source files under root, sorted, leaving out ignored paths and files of no known language."""
    for directory, dirnames, filenames in os.walk(root):
        here = Path(directory)
        dirnames[:] = sorted(d for d in dirnames if not ignores.ignored(here / d, True))
        for name in sorted(filenames):
            path = here / name
            if language_for(path) not in NOT_CODE and not ignores.ignored(path, False):
                yield path
