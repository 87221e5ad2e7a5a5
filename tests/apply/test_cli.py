"""The command line as a user meets it: clear messages and exit codes, never a traceback."""
import json

import pytest

from tests.helpers.cli import assert_clean_failure, run_cli


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


def test_version():
    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout.startswith("rewriter ") and result.stdout.strip() != "rewriter"


@pytest.mark.parametrize("args, words", [
    (["apply", "--json"], "the following arguments are required"),
    (["apply", "a.py", "-i", "x", "--json", "--temperature", "warm"], "--temperature"),
    (["apply", "a.py", "-i", "x", "--json", "--lines", "9-1"], "9-1"),
    (["apply", "missing.py", "-i", "x", "--json"], "no such file"),
])
def test_json_reports_usage_errors_as_json(tmp_path, args, words):
    (tmp_path / "a.py").write_text("x = 1\n")
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert list(report) == ["error"] and words in report["error"]


def test_usage_errors_without_json_keep_argparse_s_form():
    result = run_cli("apply")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("usage: rewriter apply") and "rewriter apply: error: " in result.stderr


def test_quiet_hides_model_loading(tmp_path, tiny_checkpoint):
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    loud = run_cli("apply", str(path), "-i", "rename x", "--model", str(tiny_checkpoint), "--max-new-tokens", "4")
    assert "model ready" in loud.stderr and "Loading" in loud.stderr  # what -q must hide, transformers' bar too
    quiet = run_cli("apply", str(path), "-i", "rename x", "--model", str(tiny_checkpoint), "--max-new-tokens", "4",
                    "-q")
    assert "Traceback" not in quiet.stderr
    for noise in ("model ready", "Loading", "%|"):
        assert noise not in quiet.stderr, quiet.stderr


def test_the_summary_counts_one_file_in_the_singular(tmp_path, tiny_checkpoint):
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    result = run_cli("apply", str(path), "-i", "rename x", "--model", str(tiny_checkpoint), "--max-new-tokens", "4")
    summary = result.stderr.splitlines()
    assert any(line.startswith("1 file (") and ", 1 span, " in line for line in summary), result.stderr
