"""`rewriter apply --snippet` checked as every rewrite is: a merge that brings an undefined name
goes to the model, whose answer the lint check refuses in turn (--force applies it), and under --test a merge is written only if the
user's tests pass with it: put back byte for byte otherwise, the model's merge asked again with
the tests' output, the deterministic one not (it would come out the same)."""
from __future__ import annotations

import io
import json

import pytest

from rewriter.apply.plans import Options
from rewriter.apply.snippet import snippet_command
from rewriter.cli import main
from tests.helpers.gated import ORIGINAL, TEST, AnsweringEngine, make_project, retried

FILE = "import os\n\n\ndef save(path, text):\n    with open(path, \"w\") as handle:\n        handle.write(text)\n"
# `Path` is not imported: the merge compiles, but save would fail when run.
UNDEFINED = "# ... existing code ...\n\ndef save(path, text):\n    Path(path).write_text(text)\n"
FORCED = FILE.replace('    with open(path, "w") as handle:\n        handle.write(text)\n', "    Path(path).write_text(text)\n")


def no_engine():
    raise AssertionError("the deterministic merge needs no model")


def merge(path, snippet: str, engine=no_engine, **settings) -> tuple[int, dict]:
    out = io.StringIO()
    make_engine = no_engine if engine is no_engine else lambda: engine
    code = snippet_command([str(path)], snippet.encode(), Options(instruction="", **settings), make_engine,
                           json_output=True, stdout=out, stderr=io.StringIO(), say=lambda message: None)
    return code, json.loads(out.getvalue())


def keeps_the_undefined_name(request):
    """A model that merges as the deterministic merge did."""
    return FORCED


def test_a_merge_bringing_an_undefined_name_goes_to_the_model_whose_answer_is_refused_with_its_diff(tmp_path):
    source = tmp_path / "files.py"
    source.write_text(FILE)
    engine = AnsweringEngine(keeps_the_undefined_name)
    code, report = merge(source, UNDEFINED, engine, write=True)
    [file] = report["files"]
    assert code == 1 and source.read_text() == FILE
    assert len(engine.requests) == 2 and "undefined name 'Path'" in engine.requests[1].instruction  # asked again
    assert file["merge"] == "model" and file["status"] == "failed"
    assert "the merge would fail when run: undefined name 'Path' at line 5" in file["merge_reason"]
    [span] = file["spans"]
    assert span["status"] == "refused" and "undefined name 'Path'" in span["reason"]
    assert "+    Path(path).write_text(text)" in span["refused_diff"]


def test_force_applies_the_model_s_merge_the_lint_check_refused(tmp_path):
    source = tmp_path / "files.py"
    source.write_text(FILE)
    code, report = merge(source, UNDEFINED, AnsweringEngine(keeps_the_undefined_name), write=True, force=True)
    assert code == 0 and source.read_text() == FORCED and report["files"][0]["merge"] == "model"


def test_a_clean_merge_passes_the_lint_check(tmp_path):
    source = tmp_path / "files.py"
    source.write_text(FILE)
    code, report = merge(source, "from pathlib import Path\n" + UNDEFINED, write=True)
    assert code == 0 and report["files"][0]["merge"] == "deterministic"
    assert report["files"][0]["merge_reason"] == "merged by definitions"
    assert source.read_text() == "from pathlib import Path\n" + FORCED


# ---- --test ------------------------------------------------------------------------------------

@pytest.fixture
def project(tmp_path, monkeypatch):
    return make_project(tmp_path, monkeypatch)


BREAKS_DOUBLE = "# ... existing code ...\n\ndef double(x):\n    return x * 3\n"
HINTS_ADD = "def add(a: int, b: int) -> int:\n    return a + b\n\n# ... existing code ...\n"
AMBIGUOUS = "# ...\nLIMIT = 3\n# ...\n"  # between two markers, with nothing to place it by: the model merges
HINTED = ORIGINAL.replace(b"def add(a, b):", b"def add(a: int, b: int) -> int:")


def test_a_deterministic_merge_the_tests_pass_with_is_written(project):
    code, report = merge("m.py", HINTS_ADD, test=TEST, write=True)
    [file] = report["files"]
    assert code == 0 and (project / "m.py").read_bytes() == HINTED  # the BOM and CRLF kept
    assert file["merge"] == "deterministic" and file["status"] == "written"
    assert file["test"] == {"tries": 1, "outcome": "passed", "output_tail": ""}


def test_a_deterministic_merge_that_fails_the_tests_is_put_back_byte_for_byte_and_not_tried_again(project):
    code, report = merge("m.py", BREAKS_DOUBLE, test=TEST, write=True, tries=3)
    [file] = report["files"]
    assert code == 1 and (project / "m.py").read_bytes() == ORIGINAL
    assert file["status"] == "failed" and "put back as it was" in file["reason"]
    assert "not tried again: it would come out the same" in file["reason"]
    assert file["test"]["tries"] == 1 and "double(4) returned 12" in file["test"]["output_tail"]
    assert not [p for p in project.iterdir() if p.name.endswith(".tmp")]


def test_a_model_merge_that_fails_the_tests_is_asked_again_with_their_output(project):
    def answer(request):
        if not retried(request):
            return request.code.replace("x * 2", "x * 3") + "\r\nLIMIT = 3\r\n"  # in the code's line endings
        return request.code.replace("def add(a, b):", "def add(a: int, b: int) -> int:") + "\r\nLIMIT = 3\r\n"
    engine = AnsweringEngine(answer)
    code, report = merge("m.py", AMBIGUOUS, engine, test=TEST, write=True)
    [file] = report["files"]
    assert code == 0 and file["merge"] == "model"
    assert (project / "m.py").read_bytes() == HINTED + b"\r\nLIMIT = 3\r\n"
    first, second = engine.requests
    assert "Merge this update" in second.instruction and "LIMIT = 3" in second.instruction
    assert "return x * 3" in second.instruction and "double(4) returned 12" in second.instruction
    assert file["test"] == {"tries": 2, "outcome": "passed", "output_tail": ""}


def test_a_merge_the_tests_failing_before_it_still_fail_with_is_put_back(project):
    (project / "check.py").write_text("raise SystemExit(3)\n")
    code, report = merge("m.py", HINTS_ADD, test=TEST, write=True)
    [file] = report["files"]
    assert code == 1 and file["status"] == "failed" and (project / "m.py").read_bytes() == ORIGINAL


def test_the_command_line_takes_test_with_snippet(project, capsys):
    (project / "s.py").write_text(HINTS_ADD)
    assert main(["apply", "m.py", "--snippet", "s.py", "--test", TEST, "-q"]) == 0
    assert (project / "m.py").read_bytes() == HINTED
