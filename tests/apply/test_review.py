"""`rewriter apply --interactive`: every hunk is asked about, and only what is accepted is written.

In process, a scripted engine answers and the answers come from a buffer; through the command
line, a fake OpenAI-compatible endpoint answers and the answers come from standard input.
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rewriter.apply.batch import apply_command
from rewriter.apply.plans import BatchError, Options
from rewriter.apply.review import Review
from tests.helpers.cli import assert_clean_failure, run_cli
from tests.helpers.fake_openai import FakeOpenAI
from tests.helpers.scripted import ScriptedEngine

FILE = """import math


def area(width, height):
    return width * height


def perimeter(width, height):
    return 2 * (width + height)


def diagonal(width, height):
    return math.sqrt(width ** 2 + height ** 2)


def circle(radius):
    return math.pi * radius * radius


def square(side):
    return side * side
"""
# Three changes far enough apart (more than twice three context lines) to be three hunks.
CHANGES = [("return width * height", "return float(width * height)"),
           ("return math.sqrt(width ** 2 + height ** 2)", "return math.hypot(width, height)"),
           ("return side * side", "return side ** 2")]
INSTRUCTION = "Tidy the arithmetic"
ROOT = Path(__file__).resolve().parents[2]


def edited(*which: int) -> str:
    """FILE with the changes numbered `which` (0-based) made."""
    text = FILE
    for index in which:
        text = text.replace(*CHANGES[index])
    return text


def engine() -> ScriptedEngine:
    return ScriptedEngine([{"instruction": INSTRUCTION, "replace": [list(change) for change in CHANGES]}])


def review(tmp_path, answers: str, paths=None, **options):
    """Run `apply --interactive` on `paths` (default: a.py holding FILE) with these answers: the exit
    code, what was shown on stdout and what was said on stderr."""
    if paths is None:
        (tmp_path / "a.py").write_text(FILE)
        paths = [str(tmp_path / "a.py")]
    out, said = io.StringIO(), []
    used = engine()
    code = apply_command(paths, Options(instruction=INSTRUCTION, review=Review(io.StringIO(answers), out, said.append),
                                        **options),
                         lambda: used, stdout=out, stderr=io.StringIO(), say=said.append)
    return code, out.getvalue(), "\n".join(said)


def test_each_hunk_is_shown_and_only_the_accepted_ones_are_written(tmp_path):
    code, shown, said = review(tmp_path, "y\nn\ny\n")
    assert code == 0
    assert (tmp_path / "a.py").read_bytes() == edited(0, 2).encode()
    a_py = str(tmp_path / "a.py")
    assert shown.count(f"--- a/{a_py}\n+++ b/{a_py}\n") == 1  # the file's header once, then its hunks
    for number in (1, 2, 3):
        assert f"({number}/3) Apply this hunk to {a_py} [y,n,a,d,q,?]? " in shown
    first = shown.split(f"+++ b/{a_py}\n")[1].split("(1/3)")[0]
    assert first == ("@@ -2,7 +2,7 @@\n \n \n def area(width, height):\n-    return width * height\n"
                     "+    return float(width * height)\n \n \n def perimeter(width, height):\n")  # 3 lines of context
    assert f"wrote {a_py}" in said


def test_each_function_rewritten_on_its_own_is_reviewed_as_one_file(tmp_path):
    code, shown, _ = review(tmp_path, "n\ny\ny\n", each="function")
    assert code == 0 and (tmp_path / "a.py").read_text() == edited(1, 2)
    assert shown.count("Apply this hunk") == 3


@pytest.mark.parametrize("answers, kept", [
    ("a\n", (0, 1, 2)),  # this hunk and every later one
    ("n\na\n", (1, 2)),
    ("y\nd\n", (0,)),  # none of the rest of the file
    ("yes\nno\nYES\n", (0, 2)),
])
def test_a_and_d_decide_the_rest_of_the_file(tmp_path, answers, kept):
    code, shown, _ = review(tmp_path, answers)
    assert code == 0
    assert (tmp_path / "a.py").read_text() == edited(*kept)
    assert shown.count("Apply this hunk") == len(answers.splitlines())  # nothing asked after a or d


def test_rejecting_every_hunk_leaves_the_file_as_it_was(tmp_path):
    (tmp_path / "a.py").write_text(FILE)
    before = os.stat(tmp_path / "a.py")
    code, _, said = review(tmp_path, "n\nn\nn\n")
    assert code == 0 and (tmp_path / "a.py").read_text() == FILE
    assert os.stat(tmp_path / "a.py").st_ino == before.st_ino  # not even rewritten with the same text
    assert "wrote" not in said


def test_a_wrong_answer_shows_the_help_and_asks_again(tmp_path):
    code, shown, _ = review(tmp_path, "maybe\n?\ny\nn\nn\n")
    assert code == 0 and (tmp_path / "a.py").read_text() == edited(0)
    assert shown.count("(1/3) Apply this hunk") == 3
    assert shown.count("q - quit: do not apply this hunk or any later one") == 2


def two_files(tmp_path):
    for name in ("a.py", "b.py"):
        (tmp_path / "src" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "src" / name).write_text(FILE)
    return [str(tmp_path / "src")]


def test_every_file_of_a_batch_is_reviewed_in_turn(tmp_path):
    code, shown, said = review(tmp_path, "y\nn\nn\nn\nn\ny\n", paths=two_files(tmp_path))
    assert code == 0
    assert (tmp_path / "src" / "a.py").read_text() == edited(0)
    assert (tmp_path / "src" / "b.py").read_text() == edited(2)
    a_py, b_py = (str(tmp_path / "src" / name) for name in ("a.py", "b.py"))
    assert shown.index(f"(3/3) Apply this hunk to {a_py}") < shown.index(f"(1/3) Apply this hunk to {b_py}")


def test_quit_writes_what_was_accepted_and_rewrites_no_more_files(tmp_path):
    paths = two_files(tmp_path)
    used = engine()
    out, said = io.StringIO(), []
    options = Options(instruction=INSTRUCTION, review=Review(io.StringIO("y\nq\ny\n"), out, said.append))
    code = apply_command(paths, options, lambda: used, stdout=out, stderr=io.StringIO(), say=said.append)
    assert code == 0
    assert (tmp_path / "src" / "a.py").read_text() == edited(0)  # accepted before q: written
    assert (tmp_path / "src" / "b.py").read_text() == FILE
    assert "b.py [y" not in out.getvalue() and out.getvalue().count("Apply this hunk") == 2


def test_quit_sends_no_more_files_to_the_model(tmp_path):
    paths = two_files(tmp_path)
    requests = []

    class Counting:
        def stream(self, request):
            requests.append(request)
            return engine().stream(request)

        def close(self):
            pass

    out, err = io.StringIO(), io.StringIO()
    options = Options(instruction=INSTRUCTION, review=Review(io.StringIO("q\n"), out, lambda message: None))
    assert apply_command(paths, options, Counting, stdout=out, stderr=err, say=lambda message: None) == 0
    assert len(requests) == 1
    assert "skipped: not rewritten: review quit (q)" in err.getvalue()


def test_answers_that_end_early_reject_the_rest_and_exit_1(tmp_path):
    code, _, said = review(tmp_path, "y\n")
    assert code == 1
    assert (tmp_path / "a.py").read_text() == edited(0)
    a_py = str(tmp_path / "a.py")
    assert f"standard input ended before hunk 2/3 of {a_py} was answered" in said


def test_no_answers_change_nothing_and_say_why(tmp_path):
    code, _, said = review(tmp_path, "", paths=two_files(tmp_path))
    assert code == 1
    assert [p.read_text() for p in (tmp_path / "src").iterdir()] == [FILE, FILE]
    assert "standard input gave no answers, so no hunk was accepted and no file changed" in said


def test_a_file_changed_during_the_review_is_not_overwritten(tmp_path):
    path = tmp_path / "a.py"
    path.write_text(FILE)

    class EditingMeanwhile(io.StringIO):
        def readline(self, *args):
            path.write_text(FILE + "# edited meanwhile\n")
            return super().readline(*args)

    said = []
    options = Options(instruction=INSTRUCTION, review=Review(EditingMeanwhile("a\n"), io.StringIO(), said.append))
    code = apply_command([str(path)], options, engine, stdout=io.StringIO(), stderr=io.StringIO(), say=said.append)
    assert code == 1
    assert path.read_text() == FILE + "# edited meanwhile\n"
    assert "changed on disk during the rewrite; not overwritten" in "\n".join(said)


def test_a_standard_input_that_cannot_answer_is_refused_before_the_model_loads(tmp_path):
    (tmp_path / "a.py").write_text(FILE)

    def no_engine():
        raise AssertionError("the engine was built")

    (tmp_path / "empty").write_text("")
    for source in (os.devnull, tmp_path / "empty"):
        with open(source) as nothing:
            options = Options(instruction=INSTRUCTION, review=Review(nothing, io.StringIO(), lambda message: None))
            with pytest.raises(BatchError, match="not a terminal and gives none"):
                apply_command([str(tmp_path / "a.py")], options, no_engine)
    with pytest.raises(BatchError, match="standard input, and it is closed"):
        apply_command([str(tmp_path / "a.py")], Options(instruction=INSTRUCTION, review=Review(
            None, io.StringIO(), lambda message: None)), no_engine)
    with pytest.raises(BatchError, match="--check writes nothing"):
        apply_command([str(tmp_path / "a.py")], Options(instruction=INSTRUCTION, check=True, review=Review(
            io.StringIO("y\n"), io.StringIO(), lambda message: None)), no_engine)


def test_a_file_without_a_final_newline_keeps_it_unless_that_hunk_is_taken(tmp_path):
    original = FILE.rstrip("\n")
    (tmp_path / "a.py").write_text(original)
    code, shown, _ = review(tmp_path, "y\nn\nn\n", paths=[str(tmp_path / "a.py")])
    assert code == 0 and (tmp_path / "a.py").read_text() == original.replace(*CHANGES[0])
    assert "\\ No newline at end of file\n" in shown


def test_accepted_hunks_rebuild_the_text_line_for_line():
    # The hunks asked about, applied together, are the whole rewrite: nothing lost between them.
    reviewed = Review(io.StringIO("a\n"), io.StringIO(), lambda message: None).decide("a.py", FILE, edited(0, 1, 2))
    assert (reviewed.text, reviewed.accepted, reviewed.hunks) == (edited(0, 1, 2), 3, 3)


# ---- through the command line, answers on standard input -----------------------------------

@pytest.fixture(autouse=True)
def this_checkout(monkeypatch):
    """The command runs in a temporary directory: its `rewriter` must be this one."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


def fake_endpoint():
    """Answers every request with its prediction (the code in a fenced block) with the three changes made."""
    def answer(body: dict) -> str:
        prediction = body["prediction"]["content"]
        for change in CHANGES:
            prediction = prediction.replace(*change)
        return prediction
    return FakeOpenAI("fake", answer, [])


def test_the_cli_reads_the_answers_from_standard_input(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(FILE.encode())
    with fake_endpoint() as endpoint:
        result = run_cli("apply", "a.py", "-i", INSTRUCTION, "--interactive", "--endpoint", endpoint.url, "-q",
                         cwd=tmp_path, stdin="n\ny\nn\n")
    assert result.returncode == 0, result.stderr
    assert path.read_bytes() == edited(1).encode()
    assert "(2/3) Apply this hunk to a.py [y,n,a,d,q,?]? y\n" in result.stdout  # the answer echoed
    assert "wrote a.py" in result.stderr


def test_the_cli_without_a_terminal_or_answers_changes_nothing(tmp_path):
    path = tmp_path / "a.py"
    path.write_text(FILE)
    result = subprocess.run([sys.executable, "-m", "rewriter.cli", "apply", "a.py", "-i", INSTRUCTION,
                             "--interactive", "--endpoint", "http://127.0.0.1:9/v1"], cwd=tmp_path,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, env=os.environ)
    assert_clean_failure(result, "not a terminal and gives none")
    assert path.read_text() == FILE
    with fake_endpoint() as endpoint:
        piped = run_cli("apply", "a.py", "-i", INSTRUCTION, "--interactive", "--endpoint", endpoint.url, "-q",
                        cwd=tmp_path, stdin="")
    assert piped.returncode == 1 and "gave no answers" in piped.stderr and path.read_text() == FILE


@pytest.mark.parametrize("extra, words", [
    (["--check"], "not allowed with argument"),
    (["--write"], "not allowed with argument"),
    (["--snippet", "-"], "give --snippet a file"),
])
def test_the_cli_refuses_what_cannot_go_with_interactive(tmp_path, extra, words):
    (tmp_path / "a.py").write_text(FILE)
    result = run_cli("apply", "a.py", "-i", INSTRUCTION, "--interactive", *extra, cwd=tmp_path, stdin="y\n")
    assert_clean_failure(result, words)
    assert (tmp_path / "a.py").read_text() == FILE


def test_the_cli_refuses_interactive_with_json_as_json(tmp_path):
    (tmp_path / "a.py").write_text(FILE)
    result = run_cli("apply", "a.py", "-i", INSTRUCTION, "--interactive", "--json", cwd=tmp_path, stdin="y\n")
    assert result.returncode == 2 and "--json prints one report" in json.loads(result.stdout)["error"]


def test_a_snippet_merge_is_reviewed_too(tmp_path):
    path = tmp_path / "a.py"
    path.write_text(FILE)
    snippet = tmp_path / "update.txt"
    snippet.write_text("# ... existing code ...\n\ndef square(side):\n    return side ** 2\n")
    declined = run_cli("apply", "a.py", "--snippet", str(snippet), "--interactive", cwd=tmp_path, stdin="n\n")
    assert declined.returncode == 0, declined.stderr
    assert path.read_text() == FILE and "(1/1) Apply this hunk to a.py" in declined.stdout
    accepted = run_cli("apply", "a.py", "--snippet", str(snippet), "--interactive", cwd=tmp_path, stdin="y\n")
    assert accepted.returncode == 0, accepted.stderr
    assert path.read_bytes() == edited(2).encode()
