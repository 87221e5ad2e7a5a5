"""`rewriter apply --test CMD`: an edit stays only if the user's tests pass with it; otherwise the
file's bytes are put back and the model is asked again with its answer and the tests' output."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rewriter.apply.batch import apply_command
from rewriter.apply.plans import BatchError, Options, RunOutcome
from rewriter.apply.testgate import CommandRun, pytest_failures, run_tests
from rewriter.edits.options import EditOptions
from rewriter.edits.session import EditSession, Feedback
from rewriter.edits.target import Target, numbered_lines
from tests.helpers.cli import assert_clean_failure
from tests.helpers.fake_openai import FakeOpenAI
from tests.helpers.gated import ORIGINAL, TEST, AnsweringEngine, make_project, retried

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path, monkeypatch):
    return make_project(tmp_path, monkeypatch)


def apply(engine, json_output=False, capsys=None, **settings):
    options = Options(**{"instruction": "Add type hints", "write": True, "test": TEST, **settings})
    code = apply_command(["m.py"], options, lambda: engine, json_output=json_output, say=lambda message: None)
    return code, (json.loads(capsys.readouterr().out) if json_output else None)


def test_a_failing_edit_is_retried_with_the_answer_and_the_output_and_the_passing_one_kept(project, capsys):
    def answer(request):
        if not retried(request):
            return request.code.replace("a + b", "a - b")  # breaks add
        return request.code.replace("def add(a, b):", "def add(a: int, b: int) -> int:")
    engine = AnsweringEngine(answer)
    code, report = apply(engine, json_output=True, capsys=capsys)
    assert code == 0
    assert (project / "m.py").read_bytes() == ORIGINAL.replace(b"def add(a, b):", b"def add(a: int, b: int) -> int:")
    second = engine.requests[1].instruction
    assert "return a - b" in second and "\r" not in second  # the first answer, as the model wrote it (LF)
    assert "add(2, 3) returned -1" in second and "exited with status 1" in second  # the output's tail
    (file,) = report["files"]
    assert file["status"] == "written" and file["test"] == {"tries": 2, "outcome": "passed", "output_tail": ""}
    assert report["summary"]["test"] == TEST


def test_an_edit_still_failing_after_its_tries_is_put_back_byte_for_byte(project, capsys):
    engine = AnsweringEngine(lambda request: request.code.replace("x * 2", "x * 3"))
    code, report = apply(engine, json_output=True, capsys=capsys, tries=3)
    assert code == 1
    assert (project / "m.py").read_bytes() == ORIGINAL
    assert len(engine.requests) == 3 and all(retried(r) for r in engine.requests[1:])
    (file,) = report["files"]
    assert file["status"] == "failed" and "put back as it was" in file["reason"]
    assert file["test"]["tries"] == 3 and file["test"]["outcome"] == "failed"
    assert "double(4) returned 12" in file["test"]["output_tail"]
    assert file["diff"] == ""
    assert not [p for p in project.iterdir() if p.name.endswith(".tmp")]


def test_a_later_try_that_repeats_the_failed_edit_takes_a_branch_that_did_not_fail(project, capsys):
    from rewriter.results import RewriteResult, Stats

    class Repeating(AnsweringEngine):
        """Answers every request with the same broken edit; its branches hold the fix."""

        def branches(self, request, count):
            fixed = request.code.replace("def add(a, b):", "def add(a: int, b: int) -> int:")
            for text in [request.code.replace("a + b", "a - b"), fixed][:count]:
                yield RewriteResult(text=text, answer="", stats=Stats(output_tokens=4, finish_reason="stop"))

    engine = Repeating(lambda request: request.code.replace("a + b", "a - b"))
    code, report = apply(engine, json_output=True, capsys=capsys, edit=EditOptions(branches=2))
    assert code == 0
    assert (project / "m.py").read_bytes() == ORIGINAL.replace(b"def add(a, b):", b"def add(a: int, b: int) -> int:")
    (file,) = report["files"]
    assert file["status"] == "written" and file["test"]["tries"] == 2
    assert "as an edit the tests failed; branch 2 changed it" in file["spans"][0]["reason"]
    assert file["spans"][0]["candidates"] == 2


def test_after_the_try_told_the_failure_the_third_is_a_branch_of_the_first_answer(project, capsys):
    from rewriter.results import RewriteResult, Stats

    class Branching(AnsweringEngine):
        """Each answer breaks add another way; the first answer's second branch holds the fix."""

        def __init__(self):
            super().__init__(lambda request: request.code.replace("a + b", "a - b" if not retried(request)
                                                                   else "a * b"))
            self.branched = []

        def branches(self, request, count):
            self.branched.append(request)
            fixed = request.code.replace("def add(a, b):", "def add(a: int, b: int) -> int:")
            for text in [request.code.replace("a + b", "a - b"), fixed][:count]:
                yield RewriteResult(text=text, answer="", stats=Stats(output_tokens=4, finish_reason="stop"))

    engine = Branching()
    code, report = apply(engine, json_output=True, capsys=capsys, edit=EditOptions(branches=2))
    assert code == 0
    assert (project / "m.py").read_bytes() == ORIGINAL.replace(b"def add(a, b):", b"def add(a: int, b: int) -> int:")
    assert len(engine.requests) == 2 and not retried(engine.branched[-1])  # the blind request's branches
    (file,) = report["files"]
    assert file["status"] == "written" and file["test"]["tries"] == 3
    assert "branch 2 of the first answer" in file["spans"][0]["reason"]


def test_the_fourth_try_is_an_answer_sampled_to_the_first_request(project, capsys):
    from rewriter.results import RewriteResult, Stats

    class Sampling(AnsweringEngine):
        """Greedy answers and the one branch break add; an answer sampled to the first request fixes it."""

        def __init__(self):
            super().__init__(self.reply)

        @staticmethod
        def reply(request):
            if request.sampling is not None:
                assert not retried(request)  # sampled to the first request, not the told one
                return request.code.replace("def add(a, b):", "def add(a: int, b: int) -> int:")
            return request.code.replace("a + b", "a * b" if retried(request) else "a - b")

        def branches(self, request, count):
            yield RewriteResult(text=request.code.replace("a + b", "b - a"), answer="",
                                stats=Stats(output_tokens=4, finish_reason="stop"))

    engine = Sampling()
    code, report = apply(engine, json_output=True, capsys=capsys, edit=EditOptions(branches=2), tries=4)
    assert code == 0
    assert (project / "m.py").read_bytes() == ORIGINAL.replace(b"def add(a, b):", b"def add(a: int, b: int) -> int:")
    (file,) = report["files"]
    assert file["status"] == "written" and file["test"]["tries"] == 4
    assert "an answer sampled to the first request (1 decoded)" in file["spans"][0]["reason"]
    assert [request.sampling is not None for request in engine.requests] == [False, False, True]


def test_the_summary_says_tries_and_outcome_and_shows_the_output_tail(project, capsys):
    engine = AnsweringEngine(lambda request: request.code.replace("x * 2", "x * 3"))
    options = Options(instruction="Add type hints", write=True, test=TEST, tries=1)
    assert apply_command(["m.py"], options, lambda: engine, say=lambda message: print(message, file=sys.stderr)) == 1
    err = capsys.readouterr().err
    assert "tests" in err.splitlines()[0] and "failed after 1 try" in err
    assert "    AssertionError: double(4) returned 12" in err


def test_each_span_the_failed_edit_did_not_change_is_not_asked_again(project, capsys):
    def answer(request):
        if "def double" in request.code:
            return request.code.replace("x * 2", "x + x" if retried(request) else "x ** 2")
        return request.code  # add stays as it is
    engine = AnsweringEngine(answer)
    code, _ = apply(engine, json_output=True, capsys=capsys, each="function")
    assert code == 0
    assert [("def add" in r.code, retried(r)) for r in engine.requests] == [(True, False), (False, False),
                                                                            (False, True)]
    assert b"return x + x" in (project / "m.py").read_bytes()


BUGGY = ORIGINAL.replace(b"return a + b", b"return a - b")


def test_tests_failing_before_any_edit_are_what_the_edit_fixes(project):
    (project / "m.py").write_bytes(BUGGY)
    said: list[str] = []
    engine = AnsweringEngine(lambda request: request.code.replace("a - b", "a + b"))
    options = Options(instruction="Fix the bug in add.", write=True, test=TEST)
    assert apply_command(["m.py"], options, lambda: engine, say=said.append) == 0
    assert (project / "m.py").read_bytes() == ORIGINAL
    # Said before the model was asked: what fails, and the rule the edit is kept by.
    [before] = [line for line in said if "fail before any edit" in line]
    assert "kept only if they pass" in before and "add(2, 3) returned -1" in before
    assert len(engine.requests) == 1


def test_an_edit_that_does_not_fix_the_failing_tests_is_put_back_after_its_tries(project, capsys):
    (project / "m.py").write_bytes(BUGGY)
    engine = AnsweringEngine(lambda request: request.code.replace("def add(a, b):", "def add(a: int, b: int):"))
    options = Options(instruction="Fix the bug in add.", write=True, test=TEST)
    assert apply_command(["m.py"], options, lambda: engine, json_output=True, say=lambda m: None) == 1
    assert (project / "m.py").read_bytes() == BUGGY
    (file,) = json.loads(capsys.readouterr().out)["files"]
    assert len(engine.requests) == 4 and file["test"]["tries"] == 4  # the default
    assert file["status"] == "failed" and "put back as it was" in file["reason"]


def test_pytest_failures_before_any_edit_are_named(project):
    (project / "test_m.py").write_text("import m\n\n\ndef test_add():\n    assert m.add(2, 3) == 5\n\n\n"
                                       "def test_double():\n    assert m.double(4) == 8\n")
    (project / "m.py").write_bytes(BUGGY)
    said: list[str] = []
    engine = AnsweringEngine(lambda request: request.code.replace("a - b", "a + b"))
    options = Options(instruction="Fix the bug in add.", write=True, test=f"{sys.executable} -m pytest -q -p no:cacheprovider")
    assert apply_command(["m.py"], options, lambda: engine, say=said.append) == 0
    [before] = [line for line in said if "fail before any edit" in line]
    assert before.endswith("failing: test_m.py::test_add")


PYTESTS = ("import m\n\n\ndef test_add():\n    assert m.add(2, 3) == 5\n\n\n"
           "def test_double():\n    assert m.double(4) == 8\n\n\n"
           "def test_unrelated():\n    assert 'network' == 'up'\n")
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider test_m.py"


@pytest.mark.parametrize("answer, kept", [
    (lambda code: code.replace("a - b", "a + b"), True),  # fixes test_add; test_unrelated fails as before
    (lambda code: code.replace("a - b", "a + b").replace("x * 2", "x * 3"), False),  # and breaks test_double
    (lambda code: code.replace("def add(a, b):", "def add(a: int, b: int):"), False),  # fixes nothing
])
def test_under_pytest_an_edit_that_fixes_failures_and_brings_none_is_kept(project, capsys, answer, kept):
    (project / "test_m.py").write_text(PYTESTS)
    (project / "m.py").write_bytes(BUGGY)
    said: list[str] = []
    engine = AnsweringEngine(lambda request: answer(request.code))
    options = Options(instruction="Fix the bug in add.", write=True, test=PYTEST, tries=1)
    code = apply_command(["m.py"], options, lambda: engine, json_output=True, say=said.append)
    (file,) = json.loads(capsys.readouterr().out)["files"]
    [before] = [line for line in said if "fail before any edit" in line]
    assert "or if it fixes some of these and no other test fails" in before
    if kept:
        assert code == 0 and file["status"] == "written" and (project / "m.py").read_bytes() == ORIGINAL
        assert file["test"]["kept_by"].startswith("pytest: test_m.py::test_add failed before and pass now")
        assert "still failing: test_m.py::test_unrelated" in file["test"]["kept_by"]
    else:
        assert code == 1 and file["status"] == "failed" and (project / "m.py").read_bytes() == BUGGY
        assert "kept_by" not in file["test"]


def test_pytest_failures_are_read_only_where_its_summary_names_them_all():
    summary = "FAILED t.py::test_a - assert 0\nERROR t.py::test_b - boom\n1 failed, 3 passed, 1 error in 0.21s\n"
    assert pytest_failures("pytest -q", CommandRun(RunOutcome.FAILED, summary, 1, 0.2)) == {"t.py::test_a", "t.py::test_b"}
    cut = summary.split("\n", 1)[1]  # the tail lost a name
    assert pytest_failures("pytest -q", CommandRun(RunOutcome.FAILED, cut, 1, 0.2)) is None
    assert pytest_failures("python check.py", CommandRun(RunOutcome.FAILED, summary, 1, 0.2)) is None
    assert pytest_failures("pytest -q", CommandRun(RunOutcome.TIMED_OUT, summary, None, 30.0)) is None


@pytest.mark.parametrize("settings, words", [
    ({"check": True, "write": False}, "cannot be combined with --check"),
    ({"tries": 0}, "--tries must be at least 1"),
    ({"test": "  "}, "--test needs a command"),
])
def test_unusable_test_settings_are_refused(project, settings, words):
    with pytest.raises(BatchError, match=words):
        apply(AnsweringEngine(lambda request: request.code), **settings)


def test_a_command_past_its_time_limit_is_stopped_with_its_children(tmp_path):
    pid_file = tmp_path / "child.pid"
    started = time.perf_counter()
    run = run_tests(f"sleep 30 & echo $! > {pid_file}; echo waiting; wait", timeout_s=0.5)
    assert run.outcome == RunOutcome.TIMED_OUT and "waiting" in run.tail and time.perf_counter() - started < 10
    assert "time limit" in run.describe("sleep")
    _assert_gone(int(pid_file.read_text()))


def test_the_output_tail_is_the_last_lines():
    run = run_tests(f"{sys.executable} -c \"[print(f'line {{i}}') for i in range(500)]\"", timeout_s=30)
    lines = run.tail.splitlines()
    assert run.outcome == RunOutcome.PASSED and len(lines) == 50 and lines[-1] == "line 499" and lines[0] == "line 450"


def test_feedback_sends_the_earlier_answer_dedented_with_the_reason():
    text = "class A:\n    def f(self):\n        return 1\n"
    target = Target.of_lines(text, numbered_lines(2, 3))
    session = EditSession(AnsweringEngine(lambda r: r.code), target, "Speed it up", "python")
    request = session.request(feedback=Feedback("    def f(self):\n        return 2\n", "`pytest` exited with 1"))
    assert request.instruction.startswith("Speed it up\n\nYour previous answer:\n```python\ndef f(self):\n"
                                          "    return 2\n```\nIt failed a check: `pytest` exited with 1")
    assert request.code == "def f(self):\n    return 1\n"  # the original is still what is edited


def _assert_gone(pid: int) -> None:
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} still runs")


# ---- interrupted in the middle of the tests, as a user does it ---------------------------------

SLOW_CHECK = ("import os, sys, time\n"
              "if 'a - b' in open('m.py').read():\n"
              "    open('testing.pid', 'w').write(str(os.getpid()))\n"
              "    time.sleep(60)\n")


@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_while_the_tests_run_puts_the_original_back(tmp_path, signal_number):
    (tmp_path / "m.py").write_bytes(ORIGINAL)
    (tmp_path / "check.py").write_text(SLOW_CHECK)

    def breaks_add(body: dict) -> str:
        return body["prediction"]["content"].replace("a + b", "a - b") + "\n"
    with FakeOpenAI("fake", breaks_add, []) as server:
        cli = subprocess.Popen(
            [sys.executable, "-m", "rewriter.cli", "apply", "m.py", "-i", "Add type hints", "--test", TEST,
             "--endpoint", server.url, "-q"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"})
        try:
            for _ in range(600):
                if (tmp_path / "testing.pid").exists() and (tmp_path / "testing.pid").read_text():
                    break
                assert cli.poll() is None, cli.communicate()
                time.sleep(0.05)
            assert b"a - b" in (tmp_path / "m.py").read_bytes()  # the edit is on disk while its tests run
            cli.send_signal(signal_number)
            out, err = cli.communicate(timeout=30)
        finally:
            if cli.poll() is None:
                cli.kill()
    assert cli.returncode == 130, err
    assert (tmp_path / "m.py").read_bytes() == ORIGINAL
    assert "Traceback" not in err and "interrupted" in err
    _assert_gone(int((tmp_path / "testing.pid").read_text()))


@pytest.mark.parametrize("extra, words", [
    (["--check"], "cannot be combined with --check"),
    (["--interactive"], "cannot be combined with --interactive"),
])
def test_the_command_line_refuses_test_with_check_or_interactive(project, extra, words):
    result = subprocess.run([sys.executable, "-m", "rewriter.cli", "apply", "m.py", "-i", "x", "--test", "true", *extra],
                            cwd=project, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert_clean_failure(result, words)
    assert result.returncode == 2 and (project / "m.py").read_bytes() == ORIGINAL
