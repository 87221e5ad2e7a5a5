"""Scratch files and folders that the model cache's writers fill beside what they write, renamed
into place when complete. Each is named for the machine and the process that made it, so that what
a process killed midway left (a conversion's folder holds gigabytes) is found and removed by the
next writer, never one that a living process is still writing.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
from pathlib import Path

_NAME = re.compile(r"\.scratch-(?P<host>[^-]*)-(?P<pid>\d+)-")


def scratch_prefix() -> str:
    """The start of this process's scratch names."""
    return f".scratch-{_host()}-{os.getpid()}-"


def sweep(folder: Path) -> list[Path]:
    """Remove the scratch entries in `folder` whose process, on this machine, has ended; the paths removed."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    removed = []
    for entry in entries:
        match = _NAME.match(entry.name)
        if match is None or match["host"] != _host() or _alive(int(match["pid"])):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry)
    return removed


def _host() -> str:
    return socket.gethostname().replace("-", "_") or "host"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: another user's process, alive
        return True
    return True
