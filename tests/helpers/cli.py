"""Running the CLI as a user does."""
from __future__ import annotations

import os
import subprocess
import sys


def run_cli(*args, cwd=None, stdin: str | None = None):
    return subprocess.run([sys.executable, "-m", "rewriter.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300, env={**os.environ, "PYTHONUNBUFFERED": "1"}, input=stdin)


def assert_clean_failure(result, message):
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr
