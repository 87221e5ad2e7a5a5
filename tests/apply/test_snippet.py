"""`rewriter apply FILE --snippet PATH`: the deterministic merge without a model, an ambiguous snippet
merged by a (scripted) engine through the one edit pipeline, and bad snippets refused with the
file untouched."""
from __future__ import annotations

import io
import json
import os

import pytest

from rewriter import engine_factory
from rewriter.apply.plans import Options
from rewriter.apply.snippet import snippet_command
from rewriter.cli import main
from tests.helpers.cli import assert_clean_failure, run_cli
from tests.helpers.scripted import ScriptedEngine

FILE = '''import os


def load(path):
    with open(path) as handle:
        return handle.read()


def save(path, text):
    with open(path, "w") as handle:
        handle.write(text)
'''
CLEAR = '''# ... existing code ...

def save(path, text):
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
'''
MERGED = FILE.replace('open(path, "w")', 'open(path, "w", encoding="utf-8")')
# A new function with load's body: load renamed, or a copy of it? The merge cannot tell. Its
# docstring says "Remove": words in a snippet must not let the integrity check accept losses.
AMBIGUOUS = '''# ... existing code ...

def load_text(path):
    """Remove nothing: the file's text."""
    with open(path) as handle:
        return handle.read()
'''
RENAMED = ["def load(path):\n", 'def load_text(path):\n    """Remove nothing: the file\'s text."""\n']


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "files.py"
    path.write_text(FILE)
    return path


def write_snippet(tmp_path, content: str | bytes):
    path = tmp_path / "snippet.txt"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return str(path)


def test_a_clear_snippet_shows_its_diff_and_writes_nothing(tmp_path, source):
    result = run_cli("apply", str(source), "--snippet", write_snippet(tmp_path, CLEAR))
    assert result.returncode == 0, result.stderr
    assert '+    with open(path, "w", encoding="utf-8") as handle:' in result.stdout
    assert "merged without a model" in result.stderr and source.read_text() == FILE


def test_write_replaces_the_file_in_one_rename_and_check_exits_1(tmp_path, source):
    snippet = write_snippet(tmp_path, CLEAR)
    checked = run_cli("apply", str(source), "--snippet", snippet, "--check")
    assert checked.returncode == 1 and source.read_text() == FILE
    os.chmod(source, 0o640)
    inode = source.stat().st_ino
    written = run_cli("apply", str(source), "--snippet", snippet, "--write")
    assert written.returncode == 0, written.stderr
    assert source.read_text() == MERGED
    assert source.stat().st_ino != inode and source.stat().st_mode & 0o777 == 0o640  # renamed into place
    # The whole file as it now stands changes nothing (the same snippet again would go to the model:
    # with markers, a no-op may mean a line left out is to go).
    assert run_cli("apply", str(source), "--snippet", write_snippet(tmp_path, MERGED), "--check").returncode == 0


def test_the_snippet_can_come_from_standard_input(source):
    result = run_cli("apply", str(source), "--snippet", "-", "--write", stdin=CLEAR)
    assert result.returncode == 0, result.stderr
    assert source.read_text() == MERGED


def test_a_clear_merge_never_builds_an_engine(tmp_path, source, monkeypatch, capsys):
    def no_engine(*args, **kwargs):
        raise AssertionError("the engine factory was called")

    monkeypatch.setattr(engine_factory, "load_rewriter", no_engine)
    monkeypatch.setattr(engine_factory, "build_engine", no_engine)
    code = main(["apply", str(source), "--snippet", write_snippet(tmp_path, CLEAR), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["files"][0]["merge"] == "deterministic" and report["files"][0]["merge_reason"] == "merged by lines"
    assert report["files"][0]["status"] == "changed" and "encoding" in report["files"][0]["diff"]


class Recording:
    """An engine that passes requests to another and keeps them."""

    def __init__(self, engine):
        self.engine, self.requests, self.closed = engine, [], False

    def stream(self, request):
        self.requests.append(request)
        return self.engine.stream(request)

    def close(self):
        self.closed = True


def merge_with_engine(source, snippet: str, hint: str, json_output: bool = True):
    engine = Recording(ScriptedEngine([{"instruction": "Merge this update", "replace": [RENAMED]}]))
    out = io.StringIO()
    code = snippet_command([str(source)], snippet.encode(), Options(instruction=hint, write=True), lambda: engine,
                           json_output=json_output, stdout=out, stderr=io.StringIO(), say=lambda message: None)
    return code, json.loads(out.getvalue()), engine


def test_an_ambiguous_snippet_goes_to_the_model_with_the_whole_file(source):
    code, report, engine = merge_with_engine(source, AMBIGUOUS, "rename load to load_text")
    assert code == 0
    [request] = engine.requests
    assert request.code == FILE and request.context is None  # the whole file: target and prediction
    assert "Merge this update" in request.instruction and "def load_text(path):" in request.instruction
    assert "rename load to load_text" in request.instruction
    [file] = report["files"]
    assert file["merge"] == "model" and "load renamed, or a copy" in file["merge_reason"]
    assert file["status"] == "written" and engine.closed
    assert source.read_text() == FILE.replace(*RENAMED)


def test_the_model_merges_into_the_definition_that_holds_the_snippet_s_lines(source):
    # the file's own lines with markers: what it changes, only a reading of the instruction tells
    snippet = '# ... existing code ...\ndef save(path, text):\n    with open(path, "w") as handle:\n' \
              '        # ... existing code ...\n'
    save, write = FILE[FILE.index("def save"):], "        handle.write(text)\n"
    engine = Recording(ScriptedEngine([{"instruction": "Merge this update",
                                        "replace": [[write, write * 2]]}]))
    code = snippet_command([str(source)], snippet.encode(), Options(instruction="", write=True), lambda: engine, json_output=True,
                           stdout=io.StringIO(), stderr=io.StringIO(), say=lambda message: None)
    [request] = engine.requests
    assert request.code == save and "def load(path):" in (request.context or "")  # load is context only
    assert code == 0 and source.read_text() == FILE.replace(write, write * 2)


def test_the_model_s_merge_must_keep_what_the_snippet_s_markers_stand_for(source):
    # The snippet shows save's header; the first answer changes it, is refused saying so, and the
    # second try, told why, keeps it.
    snippet = '# ... existing code ...\ndef save(path, text):\n    with open(path, "w") as handle:\n' \
              '        # ... existing code ...\n'
    write = "        handle.write(text)\n"
    engine = Recording(ScriptedEngine([
        {"instruction": "the merge leaves out code the snippet keeps: 'def save(path, text):'",
         "replace": [[write, write * 2]]},
        {"instruction": "Merge this update",
         "replace": [["def save(path, text):", "def save(path, text, mode):"], [write, write * 2]]}]))
    out = io.StringIO()
    code = snippet_command([str(source)], snippet.encode(), Options(instruction="", write=True), lambda: engine,
                           json_output=True, stdout=out, stderr=io.StringIO(), say=lambda message: None)
    assert code == 0 and len(engine.requests) == 2
    assert json.loads(out.getvalue())["files"][0]["spans"][0]["retried"].startswith(
        "the merge leaves out code the snippet keeps")
    assert source.read_text() == FILE.replace(write, write * 2)


def test_the_model_s_merge_may_not_lose_code_the_snippet_does_not_delete(source):
    # Without a hint that asks for the rename, losing `load` is refused, though the snippet says "Remove".
    code, report, _ = merge_with_engine(source, AMBIGUOUS, "")
    [file] = report["files"]
    assert code == 1 and file["merge"] == "model" and file["status"] == "failed"
    assert "function load" in file["spans"][0]["reason"] and file["spans"][0]["status"] == "refused"
    assert source.read_text() == FILE


@pytest.mark.parametrize("snippet, words", [
    ("function save(path, text) {\n  return write(path, text);\n}}\n", "does not parse as python"),
    ("def unrelated():\n    return 42\n", "matches the file"),
])
def test_snippets_no_merge_places_go_to_the_model_saying_why(source, snippet, words):
    code, report, engine = merge_with_engine(source, snippet, "")
    [file] = report["files"]
    assert file["merge"] == "model" and words in file["merge_reason"]
    assert snippet.strip() in engine.requests[0].instruction
    # The scripted merge renames load away: refused, and asked once more, told so.
    assert len(engine.requests) == 2 and "would lose function load" in engine.requests[1].instruction


@pytest.mark.parametrize("snippet, words", [
    ("# ... existing code ...\n\n# ...\n", "only markers"),
    ("", "the snippet is empty"),
    (b"def save(path, text):\n    pass\x00\n", "binary"),
    ("def save(path, text):\n    return 'caf\xe9'\n".encode("latin-1"), "not UTF-8"),
])
def test_bad_snippets_are_refused_and_the_file_is_untouched(tmp_path, source, snippet, words):
    result = run_cli("apply", str(source), "--snippet", write_snippet(tmp_path, snippet), "--write")
    assert result.returncode == 1
    assert_clean_failure(result, words)
    assert "snippet not merged" in result.stderr and source.read_text() == FILE


@pytest.mark.parametrize("extra, words", [
    ([], "give a snippet to merge with --snippet"),
    (["--snippet", "SNIPPET", "--lines", "1-3"], "leave out --lines"),
    (["OTHER", "--snippet", "SNIPPET"], "one file"),
    (["--snippet", "MISSING"], "cannot read"),
])
def test_snippet_usage_errors(tmp_path, source, extra, words):
    (tmp_path / "other.py").write_text("x = 1\n")
    paths = {"SNIPPET": write_snippet(tmp_path, CLEAR), "OTHER": str(tmp_path / "other.py"),
             "MISSING": str(tmp_path / "missing.txt")}
    result = run_cli("apply", str(source), *[paths.get(arg, arg) for arg in extra])
    assert result.returncode == 2
    assert_clean_failure(result, words)
    assert source.read_text() == FILE


def test_a_refusal_reports_its_reason_in_json(tmp_path, source):
    result = run_cli("apply", str(source), "--snippet", write_snippet(tmp_path, "# ...\n"), "--json")
    [file] = json.loads(result.stdout)["files"]
    assert result.returncode == 1 and file["merge"] == "refused" and "only markers" in file["merge_reason"]
