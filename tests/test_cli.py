"""The command line as a user meets it: clear messages and exit codes, never a traceback."""
import os
import subprocess
import sys

import pytest


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "rewriter.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def assert_clean_failure(result, message):
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("content, message", [
    (b"\x7fELF\x00\x00binary", "binary"),
    ("x = 'é'\n".encode("latin-1"), "not UTF-8"),
])
def test_unreadable_files_are_refused(tmp_path, content, message):
    path = tmp_path / "a.py"
    path.write_bytes(content)
    assert_clean_failure(run_cli("apply", str(path), "-i", "add type hints"), message)
    assert path.read_bytes() == content


def test_missing_file_and_empty_instruction_are_refused(tmp_path):
    assert_clean_failure(run_cli("apply", str(tmp_path / "nope.py"), "-i", "add type hints"), "no such file")
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    assert_clean_failure(run_cli("apply", str(path), "-i", "  "), "instruction is empty")


def test_a_file_larger_than_the_context_is_never_left_half_written(tmp_path, tiny_checkpoint):
    path = tmp_path / "big.py"
    text = "".join(f"value_{i} = {i}\n" for i in range(200))
    path.write_text(text)
    result = run_cli("apply", str(path), "-i", "rename value to item", "--write", "--model", str(tiny_checkpoint))
    assert "Traceback" not in result.stderr
    assert path.read_text() == text  # the tiny random model writes no usable code block


def test_bench_rejects_a_malformed_cases_file(tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"id": "1", "before": "x"}\n')
    assert_clean_failure(run_cli("bench", str(cases)), "not a benchmark case")
