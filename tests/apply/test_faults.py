"""`rewriter apply --write` meeting faults: a read-only file, a file changed on disk during the
rewrite, a full disk, a closed stdout. Each gets a clear message, and no file loses a byte.

The command line runs for real against a fake OpenAI-compatible endpoint; the full disk is
simulated in this process, where the write can be made to fail as a full disk fails it.
"""
from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rewriter.apply import files
from rewriter.apply.batch import apply_command
from rewriter.apply.plans import Options
from tests.helpers.cli import assert_clean_failure, run_cli
from tests.helpers.fake_openai import FakeOpenAI
from tests.helpers.scripted import ScriptedEngine

ROOT = Path(__file__).resolve().parents[2]
OLD = "def area(width, height):\n    return width * height\n"
NEW = "def area(width, height):\n    return float(width * height)\n"


def answer(body: dict) -> str:
    return body["prediction"]["content"].replace("width * height", "float(width * height)")


@pytest.fixture
def project(tmp_path, monkeypatch):
    """a.py and b.py holding OLD, in the current directory, with this checkout's `rewriter`."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(OLD)
    return tmp_path


def apply_cli(project: Path, endpoint: FakeOpenAI, *extra: str) -> subprocess.CompletedProcess:
    return run_cli("apply", "a.py", "b.py", "-i", "Return a float", "--write", "--endpoint", endpoint.url, "-q",
                   "-j", "1", *extra, cwd=project)


def leftovers(project: Path) -> list[str]:
    return sorted(path.name for path in project.iterdir() if path.name not in ("a.py", "b.py"))


def test_a_read_only_file_is_refused_and_the_others_written(project):
    (project / "a.py").chmod(0o444)  # the rename would replace it even so, and as root writing would succeed
    with FakeOpenAI("fake", answer, []) as endpoint:
        result = apply_cli(project, endpoint)
    assert_clean_failure(result, "a.py: read-only; not overwritten")
    assert (project / "a.py").read_text() == OLD and (project / "b.py").read_text() == NEW
    assert (project / "a.py").stat().st_mode & 0o777 == 0o444 and leftovers(project) == []


def test_a_file_changed_on_disk_during_the_rewrite_is_not_overwritten(project):
    def edit_meanwhile(body: dict) -> str:
        if "a.py" not in [path.name for path in project.iterdir() if path.read_text() != OLD]:
            (project / "a.py").write_text(OLD + "# typed by the user meanwhile\n")
        return answer(body)

    with FakeOpenAI("fake", edit_meanwhile, []) as endpoint:
        result = apply_cli(project, endpoint)
    assert_clean_failure(result, "a.py: changed on disk during the rewrite; not overwritten")
    assert (project / "a.py").read_text() == OLD + "# typed by the user meanwhile\n"
    assert (project / "b.py").read_text() == NEW and leftovers(project) == []


def test_a_symbolic_link_keeps_pointing_at_its_file_whose_bytes_are_replaced(project):
    (project / "real.py").write_text(OLD)
    (project / "a.py").unlink()
    (project / "a.py").symlink_to("real.py")
    with FakeOpenAI("fake", answer, []) as endpoint:
        result = apply_cli(project, endpoint)
    assert result.returncode == 0, result.stderr
    assert (project / "a.py").is_symlink() and (project / "real.py").read_text() == NEW


@pytest.mark.parametrize("failing", ["write", "fsync"])
def test_a_full_disk_fails_the_write_and_loses_nothing(tmp_path, monkeypatch, failing):
    """ENOSPC where a full disk raises it: at the write of the temporary file, or at its fsync
    (where delayed allocation reports it)."""
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(OLD)

    def full(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    if failing == "fsync":
        monkeypatch.setattr(files.os, "fsync", full)
    else:
        real_fdopen = os.fdopen

        def fdopen(*args, **kwargs):
            handle = real_fdopen(*args, **kwargs)
            handle.write = full
            return handle
        monkeypatch.setattr(files.os, "fdopen", fdopen)
    said: list[str] = []
    engine = ScriptedEngine([{"instruction": "x", "replace": [["width * height", "float(width * height)"]]}])
    code = apply_command([str(tmp_path / "a.py"), str(tmp_path / "b.py")], Options(instruction="x", write=True),
                         lambda: engine, say=said.append)
    assert code == 1
    assert [(tmp_path / name).read_text() for name in ("a.py", "b.py")] == [OLD, OLD]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.py", "b.py"]  # no temporary file left
    assert sum("cannot write: No space left on device" in line for line in said) == 2, said


def test_a_closed_stdout_writes_every_file_and_says_nothing_more(project):
    """The diff goes to a reader that has gone (`... | head -c 0`): the files are written all the
    same, no traceback, and the exit code says stdout failed."""
    with FakeOpenAI("fake", answer, []) as endpoint:
        command = [sys.executable, "-m", "rewriter.cli", "apply", "a.py", "b.py", "-i", "Return a float", "--write",
                   "--endpoint", endpoint.url, "-j", "1"]
        process = subprocess.Popen(command, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout is not None
        process.stdout.close()  # nobody reads the diff
        _, stderr = process.communicate(timeout=120)
    assert "Traceback" not in stderr.decode(), stderr.decode()
    assert (project / "a.py").read_text() == NEW and (project / "b.py").read_text() == NEW
    assert process.returncode != 0 and leftovers(project) == []
