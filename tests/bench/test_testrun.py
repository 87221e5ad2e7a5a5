"""The test runner behind `rewriter bench --tests`: right verdicts, time limits, no escape into the tree."""
import json
from pathlib import Path

import pytest

from rewriter.edits.testrun import run_tests

BEFORE = "def mean(values):\n    return sum(values) / len(values)\n"
AFTER = "def mean(values):\n    if not values:\n        return 0.0\n    return sum(values) / len(values)\n"
TESTS = "assert mean([1, 2, 3]) == 2\nassert mean([]) == 0.0\n"
SHARED_CASES = Path(__file__).resolve().parents[3] / "shared" / "bench" / "editeval_tests.jsonl"


def test_the_reference_edit_passes_and_the_original_fails():
    passed = run_tests(AFTER, TESTS)
    failed = run_tests(BEFORE, TESTS)
    assert passed.passed and passed.returncode == 0 and not passed.timed_out
    assert not failed.passed and failed.returncode != 0 and not failed.timed_out
    assert "ZeroDivisionError" in failed.output


def test_a_hanging_test_is_killed_at_the_time_limit():
    result = run_tests("def spin():\n    while True:\n        pass\n", "spin()\n", timeout_s=1.0)
    assert result.timed_out and not result.passed and result.returncode is None
    assert result.seconds < 10


def test_output_is_captured_not_printed(capfd):
    result = run_tests("print('from the program')\n", "import sys\nprint('oops', file=sys.stderr)\n")
    assert "from the program" in result.output and "oops" in result.output
    seen = capfd.readouterr()
    assert "from the program" not in seen.out + seen.err


def test_files_written_by_the_tests_stay_out_of_the_working_tree(tmp_path, monkeypatch):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "keep.py").write_text("x = 1\n")
    monkeypatch.chdir(tree)
    tests = (
        "import json, os, tempfile\n"
        "open('keep.py', 'w').write('clobbered')\n"
        "open('new.txt', 'w').write('x')\n"
        "open(os.path.join(os.environ['HOME'], 'home.txt'), 'w').write('x')\n"
        "handle, name = tempfile.mkstemp()\n"
        "print(json.dumps({'cwd': os.getcwd(), 'temp': name}))\n"
    )
    result = run_tests("", tests)
    assert result.passed, result.output
    assert sorted(p.name for p in tree.iterdir()) == ["keep.py"]
    assert (tree / "keep.py").read_text() == "x = 1\n"
    where = json.loads(result.output.strip().splitlines()[-1])
    assert Path(where["cwd"]) != tree and not Path(where["cwd"]).exists()  # removed afterwards
    assert Path(where["temp"]).parent == Path(where["cwd"])


@pytest.mark.parametrize("attempt", [
    "import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)\n",
    "import _socket\n_socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)\n",
    "import socket\nsocket.getaddrinfo('localhost', 80)\n",
    "import subprocess\nsubprocess.run(['true'])\n",
])
def test_network_and_new_processes_are_refused(attempt):
    result = run_tests("", attempt)
    assert not result.passed
    assert "PermissionError" in result.output and "disabled while running tests" in result.output


def test_local_socket_pairs_still_work():  # asyncio's event loop needs one
    result = run_tests("import asyncio\n", "asyncio.run(asyncio.sleep(0))\n")
    assert result.passed, result.output


def test_the_environment_is_not_inherited(monkeypatch):
    monkeypatch.setenv("REWRITER_SECRET_FOR_TEST", "x")
    result = run_tests("import os\n", "assert 'REWRITER_SECRET_FOR_TEST' not in os.environ\n")
    assert result.passed, result.output


@pytest.mark.skipif(not SHARED_CASES.exists(), reason="the shared edit benchmark is not checked out here")
def test_every_shared_case_passes_with_its_reference_and_fails_with_its_original():
    cases = [json.loads(line) for line in SHARED_CASES.read_text(encoding="utf-8").splitlines() if line.strip()]
    wrong = [case["id"] for case in cases
             if not run_tests(case["after"], case["tests"]).passed or run_tests(case["before"], case["tests"]).passed]
    assert wrong == []
