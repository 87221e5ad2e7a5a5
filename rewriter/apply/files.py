"""Reading source files strictly and writing them atomically."""
from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

UTF8_BOM = b"\xef\xbb\xbf"


class FileError(ValueError):
    """A file that cannot be rewritten; the message says why."""


@dataclass(frozen=True)
class SourceFile:
    path: Path
    text: str
    raw: bytes  # the bytes as read, to detect a change on disk before writing
    bom: bool


def read_source(path: str | os.PathLike) -> SourceFile:
    path = Path(path)
    if not path.exists():
        raise FileError(f"{path}: no such file")
    if path.is_dir():
        raise FileError(f"{path}: is a directory")
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise FileError(f"{path}: cannot read: {error.strerror}") from error
    if b"\0" in raw:
        raise FileError(f"{path}: looks like a binary file (it contains NUL bytes)")
    bom = raw.startswith(UTF8_BOM)
    try:
        text = raw[len(UTF8_BOM):].decode("utf-8") if bom else raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FileError(f"{path}: not UTF-8 text (byte {error.start} is invalid)") from error
    return SourceFile(path=path, text=text, raw=raw, bom=bom)


def atomic_write(source: SourceFile, text: str) -> None:
    """Replace the file with `text` in one rename, keeping its mode and BOM.

    Refuses a read-only file and one that changed on disk since it was read. A failure at any
    point leaves the original file as it was.
    """
    path = source.path
    try:
        current = path.read_bytes()
    except OSError as error:
        raise FileError(f"{path}: cannot re-read before writing: {error.strerror}") from error
    if current != source.raw:
        raise FileError(f"{path}: changed on disk during the rewrite; not overwritten")
    replace_bytes(path, (UTF8_BOM if source.bom else b"") + text.encode("utf-8"))


TEMP_MARK = ".rewriter-"  # in every temporary file's name: `.NAME.rewriter-XXXXXXXX.tmp` beside NAME


def replace_bytes(path: Path, data: bytes) -> None:
    """Make `data` the file's bytes in one rename, keeping its mode; on any failure the file
    stays as it was. A symbolic link keeps pointing at its file, whose bytes are replaced.

    Killed outright (SIGKILL, power loss) before the rename, the file keeps its old bytes and a
    `.NAME.rewriter-XXXXXXXX.tmp` may remain beside it: never read, safe to delete."""
    target = Path(os.path.realpath(path))
    mode = stat.S_IMODE(target.stat().st_mode)
    # The rename would replace a file whose permissions forbid writing it (root may write anything).
    if not mode & 0o222 or not os.access(target, os.W_OK):
        raise FileError(f"{path}: read-only; not overwritten")
    handle, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}{TEMP_MARK}", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as temp:
            temp.write(data)
            temp.flush()
            os.fsync(temp.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, target)
    except BaseException:
        if os.path.exists(temp_name):
            os.unlink(temp_name)
        raise
