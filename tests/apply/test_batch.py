"""Batch rewrites end to end on copies of samples/, with engines whose answers we choose.

A scripted engine has the engine interface (`stream` yields Progress, then a RewriteResult),
so these tests check what the batch layer does with answers: which spans it sends, what
context goes along, what it writes and what it refuses.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rewriter.answer import NoCodeBlock
from rewriter.apply import batch
from rewriter.apply.batch import apply_command, plan
from rewriter.apply.collect import collect
from rewriter.apply.plans import BatchError, Options
from rewriter.apply.report import TerminalReport
from rewriter.decoding.decode import Stats
from rewriter.decoding.rewrite import ContextTooLarge, Progress, RewriteResult
from tests.helpers.gated import ORIGINAL, AnsweringEngine

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"


class ScriptedEngine:
    """Answers each request with `edit(text)`; records every request."""

    def __init__(self, edit=lambda text: text, fail=None, limit: int | None = None):
        self.edit = edit
        self.fail = fail  # text -> exception to raise instead of answering
        self.limit = limit  # characters of code plus context the "model" takes
        self.requests: list[tuple[str, str | None]] = []
        self.closed = False

    def stream(self, request):
        text, context = request.code, request.context
        if self.limit is not None and len(text) + len(context or "") > self.limit:
            raise ContextTooLarge("the code is too large for the model's context")
        self.requests.append((text, context))
        if self.fail and (error := self.fail(text)):
            raise error
        tokens = max(1, len(text) // 4)
        stats = Stats(output_tokens=tokens, accepted_prediction_tokens=tokens - 1,
                      rejected_prediction_tokens=1, total_s=0.01, finish_reason="stop")
        yield Progress("```\n", stats)
        yield RewriteResult(text=self.edit(text), answer="", stats=stats)

    def close(self):
        self.closed = True


def add_last_line(text: str) -> str:
    """An edit that changes any sample: a comment line at the end."""
    return text + ("# end\n" if "def " in text else "// end\n")


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A copy of samples/ as the current directory."""
    shutil.copytree(SAMPLES, tmp_path / "samples")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(paths, engine, capsys=None, **options):
    settings = dict(instruction="do it")
    settings.update(options)
    json_output = settings.pop("json_output", False)
    workers = settings.pop("workers", 1)
    code = apply_command(list(paths), Options(**settings), lambda: engine, json_output=json_output,
                         workers=workers, say=lambda message: print(f"rewriter: {message}", file=sys.stderr))
    return code


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_review_by_default_writes_nothing_and_prints_a_diff(tree, capsys):
    before = snapshot(tree)
    engine = ScriptedEngine(lambda text: text.replace("quantity", "count"))
    assert run(["samples"], engine) == 0
    out, err = capsys.readouterr()
    assert snapshot(tree) == before
    assert "--- a/samples/inventory.py\n+++ b/samples/inventory.py\n" in out
    assert "-    quantity: int = 0\n+    count: int = 0\n" in out
    assert "would change" in err and "prediction tokens" in err
    # Every source file once, whole, without context; instructions.json is data, not walked.
    code_files = [p for p in SAMPLES.iterdir() if p.suffix not in (".json", ".md", ".yaml", ".toml")]
    assert len(engine.requests) == len(code_files) >= 9
    assert all(context is None for _, context in engine.requests)
    assert engine.closed


def test_write_applies_atomically_and_keeps_mode(tree, capsys):
    path = tree / "samples" / "stats.go"
    path.chmod(0o640)
    engine = ScriptedEngine(lambda text: text.replace("xs", "values"))
    assert run([str(path)], engine, write=True) == 0
    assert "func Mean(values []float64)" in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert "wrote samples/stats.go" in capsys.readouterr().err
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_check_exit_codes(tree):
    assert run(["samples/stats.go"], ScriptedEngine(), check=True) == 0
    assert run(["samples/stats.go"], ScriptedEngine(lambda t: t + "// more\n"), check=True) == 1
    assert (tree / "samples/stats.go").read_bytes() == (SAMPLES / "stats.go").read_bytes()


def test_each_method_rewrites_only_methods_with_the_rest_as_context(tree):
    path = tree / "samples" / "report.py"
    original = path.read_text()
    engine = ScriptedEngine(lambda text: text.replace("print(", "sys.stdout.write("))
    assert run([str(path)], engine, each="method", write=True) == 0
    new = path.read_text()
    assert [text.split("(")[0].strip() for text, _ in engine.requests] == [
        "def __init__", "def compute", "def show"]
    for _, context in engine.requests:
        assert context == original  # the whole file goes along (small enough here)
    # The methods changed; the print calls outside them did not.
    assert 'sys.stdout.write("computed totals for"' in new
    assert 'print("loaded", len(rows)' in new and 'print("usage: report.py' in new
    changed = [i for i, (a, b) in enumerate(zip(original.splitlines(), new.splitlines())) if a != b]
    assert changed == [41, 45]  # lines 42 and 46, inside compute and show


def test_each_function_sends_nested_functions_once(tree):
    engine = ScriptedEngine()
    assert run(["samples/report.py"], engine, each="function") == 0
    sent = [text for text, _ in engine.requests]
    assert len(sent) == 7
    assert sum("def wrapper" in text for text in sent) == 1


def test_each_with_lines_takes_the_nodes_in_the_range(tree):
    engine = ScriptedEngine()
    assert run(["samples/OrderService.java"], engine, each="method", lines=(20, 30)) == 0
    assert [text.strip().split("(")[0] for text, _ in engine.requests] == [
        "public Order create", "public double total"]


def test_lines_and_expand(tree):
    engine = ScriptedEngine(lambda text: text.replace("quantity", "amount"))
    path = tree / "samples" / "inventory.py"
    lines = path.read_text().splitlines(keepends=True)
    assert run([str(path)], engine, lines=(28, 29), write=True) == 0
    assert engine.requests[0][0] == textwrap.dedent("".join(lines[27:29]))  # the model sees it dedented
    new = path.read_text().splitlines(keepends=True)
    assert new[:27] == lines[:27] and new[29:] == lines[29:] and new[27] == lines[27].replace("quantity", "amount")

    engine = ScriptedEngine()
    assert run([str(path)], engine, lines=(20, 20), expand=True) == 0
    assert engine.requests[0][0] == textwrap.dedent("".join(new[19:21]))  # the whole if statement


def test_syntax_guard_refuses_a_broken_node_and_keeps_the_others(tree, capsys):
    path = tree / "samples" / "inventory.py"
    original = path.read_text()

    def edit(text):
        if "def restock" in text:
            return text.replace("def restock(self, sku, count):", "def restock(self, sku, count:")
        return text.replace("self.items", "self.stock")

    assert run([str(path)], ScriptedEngine(edit), each="method", write=True) == 1
    new = path.read_text()
    assert "self.stock" in new and "def restock(self, sku, count):" in new
    assert "self.items[sku].quantity += count" in new  # restock untouched
    err = capsys.readouterr().err
    assert "does not parse" in err and "syntax error at line" in err

    path.write_text(original)
    assert run([str(path)], ScriptedEngine(edit), each="method", write=True, allow_syntax_errors=True) == 0
    assert "def restock(self, sku, count:" in path.read_text()


def test_syntax_guard_on_a_whole_file_and_files_already_broken(tree):
    path = tree / "samples" / "cart.ts"
    original = path.read_bytes()
    broken = ScriptedEngine(lambda text: text.replace("total(): number {", "total(): number {{"))
    assert run([str(path)], broken, write=True) == 1
    assert path.read_bytes() == original
    # A file that did not parse before is not held to it.
    path.write_text(original.decode() + "\nconst = ;\n")
    assert run([str(path)], broken, write=True) == 0
    assert "total(): number {{" in path.read_text()


def test_answer_without_code_block_fails_that_file_only(tree, capsys):
    def fail(text):
        return NoCodeBlock("the model's answer has no fenced code block") if "package stats" in text else None

    engine = ScriptedEngine(add_last_line, fail=fail)
    code = run(["samples/stats.go", "samples/ring_buffer.c"], engine, json_output=True)
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    by_path = {f["path"]: f for f in report["files"]}
    assert by_path["samples/stats.go"]["status"] == "failed"
    assert "no fenced code block" in by_path["samples/stats.go"]["reason"]
    assert by_path["samples/ring_buffer.c"]["status"] == "changed"
    assert by_path["samples/ring_buffer.c"]["diff"].startswith("--- a/samples/ring_buffer.c")
    assert report["summary"]["exit_code"] == 1


def test_a_file_that_changed_on_disk_is_not_overwritten(tree, capsys):
    path = tree / "samples" / "stats.go"

    def edit(text):
        path.write_text(text + "// edited by someone else meanwhile\n")
        return text.replace("Mean", "Average")

    assert run([str(path)], ScriptedEngine(edit), write=True, instruction="Rename Mean to Average") == 1
    assert path.read_text().endswith("// edited by someone else meanwhile\n")
    assert "changed on disk" in capsys.readouterr().err


def test_a_failure_in_the_middle_of_a_write_loses_nothing(tree, monkeypatch, capsys):
    paths = [tree / "samples" / name for name in ("inventory.py", "report.py", "stats.go")]
    originals = [p.read_bytes() for p in paths]
    real_replace = os.replace
    calls = []

    def failing_replace(source, target):
        calls.append(target)
        if str(target).endswith("report.py"):
            raise OSError(28, "No space left on device")
        return real_replace(source, target)

    monkeypatch.setattr(os, "replace", failing_replace)
    code = run([str(p) for p in paths], ScriptedEngine(add_last_line), write=True)
    assert code == 1
    assert paths[0].read_bytes() == originals[0] + b"# end\n"
    assert paths[1].read_bytes() == originals[1]  # the failed write left the original whole
    assert paths[2].read_bytes() == originals[2] + b"// end\n"
    assert not [p for p in (tree / "samples").iterdir() if p.name.endswith(".tmp")]
    assert "No space left on device" in capsys.readouterr().err


def test_ctrl_c_leaves_each_file_untouched_or_fully_written(tree, capsys):
    paths = [tree / "samples" / name for name in ("inventory.py", "report.py", "stats.go")]
    originals = [p.read_bytes() for p in paths]

    def edit(text):
        if "Nightly sales report" in text:
            raise KeyboardInterrupt
        return add_last_line(text)

    code = run([str(p) for p in paths], ScriptedEngine(edit), write=True)
    assert code == 130
    assert paths[0].read_bytes() == originals[0] + b"# end\n"
    assert paths[1].read_bytes() == originals[1] and paths[2].read_bytes() == originals[2]
    err = capsys.readouterr().err
    assert "interrupted; 1 file written (samples/inventory.py)" in err
    assert err.count("interrupted: untouched") == 2 and "interrupted: interrupted" not in err


def test_skip_reasons(tree, capsys, monkeypatch):
    work = tree / "samples"
    (work / "blob.py").write_bytes(b"x = 1\0\0\0")
    (work / "latin1.py").write_bytes("s = 'caf\xe9'\n".encode("latin-1"))
    (work / "empty.py").write_text("")
    (work / "blank.py").write_text("\n\n")
    outside = tree / "outside.py"
    outside.write_text("x = 1\n")
    (work / "link_out.py").symlink_to(outside)
    (work / "link_in.py").symlink_to(work / "inventory.py")
    (work / "secret.py").write_text("x = 1\n")
    real_read = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: (_ for _ in ()).throw(PermissionError(13, "Permission denied"))
                        if self.name == "secret.py" else real_read(self))
    (work / "build").mkdir()
    (work / "build" / "generated.py").write_text("x = 1\n")
    (work / ".gitignore").write_text("build/\nignored_*.py\n")
    (work / "ignored_one.py").write_text("x = 1\n")
    (work / "node_modules").mkdir()
    (work / "node_modules" / "lib.js").write_text("var x = 1;\n")

    engine = ScriptedEngine()
    assert run(["samples"], engine, json_output=True) == 0
    report = {f["path"]: f for f in json.loads(capsys.readouterr().out)["files"]}
    reasons = {path.removeprefix("samples/"): f["reason"] for path, f in report.items() if f["status"] == "skipped"}
    assert reasons["blob.py"].startswith("looks like a binary file")
    assert reasons["latin1.py"].startswith("not UTF-8 text")
    assert reasons["empty.py"] == reasons["blank.py"] == "empty file"
    assert reasons["link_out.py"].startswith("symlink to") and "outside samples" in reasons["link_out.py"]
    assert reasons["secret.py"] == "cannot read: Permission denied"
    assert not any("generated" in p or "ignored_one" in p or "node_modules" in p for p in report)
    # A link inside the tree is the file it points to: rewritten once.
    assert ("samples/link_in.py" in report) != ("samples/inventory.py" in report)


def test_missing_paths_and_bad_usage_are_errors(tree):
    for paths, options, message in [
        (["samples/nope.py"], {}, "no such file or directory"),
        (["samples/*.nothing"], {}, "no files match"),
        (["samples/stats.go"], {"instruction": "  "}, "instruction is empty"),
        (["samples/stats.go", "samples/cart.ts"], {"lines": (1, 2)}, "one file"),
        (["samples/stats.go"], {"lines": (90, 95)}, "past the end"),
        (["samples/stats.go"], {"expand": True}, "give --lines"),
        (["samples/instructions.json"], {"each": "function"}, "nothing to rewrite"),
    ]:
        with pytest.raises(BatchError, match=message):
            run(paths, ScriptedEngine(), **options)


def test_globs_expand_and_honour_gitignore(tree):
    (tree / "samples" / ".gitignore").write_text("stats.go\n")
    jobs = collect(["samples/*.go", "samples/*.py"])
    assert sorted(j.display for j in jobs) == ["samples/inventory.py", "samples/report.py"]


def test_too_large_requests_shrink_the_context_then_split(tree):
    path = tree / "samples" / "report.py"
    text = path.read_text()
    engine = ScriptedEngine(lambda t: t.replace("print(", "sys.stdout.write("), limit=len(text) // 2)
    assert run([str(path)], engine, write=True) == 0
    assert len(engine.requests) >= 2
    assert all(len(code) + len(context or "") <= len(text) // 2 for code, context in engine.requests)
    assert path.read_text() == text.replace("print(", "sys.stdout.write(")

    # A span that fits nowhere, and cannot be cut, is refused with a scope that would fit.
    (tree / "one.py").write_text("x = '" + "a" * 300 + "'\n")
    with_limit = ScriptedEngine(limit=100)
    assert run(["one.py"], with_limit, write=True) == 1


def test_plan_of_an_unknown_language_whole_file_only(tree):
    (tree / "notes.txt").write_text("remember the milk\n")
    job = plan(collect(["notes.txt"])[0], Options("x"))
    assert job.status == "pending" and job.units[0].target.kind == "file"
    job = plan(collect(["notes.txt"])[0], Options("x", each="function"))
    assert job.status == "skipped" and "no syntax tree" in job.reason


# ---- remote engines ------------------------------------------------------------------------

def test_remote_engine_rewrites_several_files_concurrently(tree, capsys):
    """RemoteRewriter against an OpenAI-style endpoint (served in-process by httpx)."""
    import threading

    import httpx

    from rewriter.remote import RemoteRewriter

    active, peak, lock = [0], [0], threading.Lock()
    barrier = threading.Barrier(2, timeout=5)

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert request.headers["authorization"] == "Bearer sekrit"
        assert body["model"] == "remote-coder" and body["prediction"]["type"] == "content"
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            barrier.wait()  # two requests are in flight at once, or this times out
        except threading.BrokenBarrierError:
            pass
        with lock:
            active[0] -= 1
        answer = body["prediction"]["content"].replace("errors.New", "fmt.Errorf").replace("ring_", "rb_")
        chunks = [{"choices": [{"delta": {"content": answer}, "finish_reason": None}]},
                  {"choices": [{"delta": {}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 10, "completion_tokens": 20,
                             "completion_tokens_details": {"accepted_prediction_tokens": 18,
                                                           "rejected_prediction_tokens": 2}}}]
        stream = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return httpx.Response(200, text=stream, headers={"content-type": "text/event-stream"})

    def make_engine():
        http = httpx.Client(transport=httpx.MockTransport(handler),
                            headers={"Authorization": "Bearer sekrit"})
        return RemoteRewriter("http://remote.test/v1", model="remote-coder", protocol="openai", http=http)

    code = apply_command(["samples/stats.go", "samples/ring_buffer.c"], Options("use fmt; rename ring_ to rb_", write=True),
                         make_engine, workers=2, quiet=True)
    assert code == 0
    assert peak[0] == 2
    assert "fmt.Errorf" in (tree / "samples/stats.go").read_text()
    assert "int rb_push" in (tree / "samples/ring_buffer.c").read_text()


# ---- the command line, as a user runs it ----------------------------------------------------

def test_cli_subprocess_review_check_and_json(tree, tiny_checkpoint):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    base = [sys.executable, "-m", "rewriter.cli", "apply"]
    missing = subprocess.run(base + ["samples/nope.go", "-i", "x"], capture_output=True, text=True, env=env)
    assert missing.returncode == 2 and "no such file or directory" in missing.stderr
    assert "Traceback" not in missing.stderr

    before = snapshot(tree)
    done = subprocess.run(base + ["samples/stats.go", "samples/fetch_users.js", "-i", "add comments",
                                  "--each", "function", "--model", str(tiny_checkpoint),
                                  "--max-new-tokens", "6", "--json"],
                          capture_output=True, text=True, env=env, timeout=300)
    # A random tiny model writes no code block: each span is a failure, reported, nothing lost.
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert [f["status"] for f in report["files"]] == ["failed", "failed"]
    assert [len(f["spans"]) for f in report["files"]] == [2, 2]
    assert all(s["stats"]["output_tokens"] == 6 for f in report["files"] for s in f["spans"])
    assert snapshot(tree) == before
    assert "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory, qwen_tokenizer):
    """A tiny random Qwen2 with the real tokenizer, saved as a checkpoint the CLI can load."""
    from tests.helpers.models import QWEN_VOCAB, tiny_model

    path = tmp_path_factory.mktemp("tiny-qwen")
    model = tiny_model(seed=3, vocab_size=QWEN_VOCAB, hidden=32, layers=1,
                       eos_token_id=qwen_tokenizer.eos_token_id)
    model.save_pretrained(path)
    qwen_tokenizer.save_pretrained(path)
    return path


# ---- the embedded model ---------------------------------------------------------------------

@pytest.mark.real_model
def test_embedded_model_rewrites_one_function_and_nothing_else(tmp_path, embedded_rewriter):
    path = tmp_path / "shapes.py"
    original = (
        "import math\n\n\n"
        "def area(r):\n    return math.pi * r * r\n\n\n"
        "def perimeter(r):\n    return 2 * math.pi * r\n"
    )
    path.write_text(original)
    code = apply_command([str(path)], Options("Rename the parameter r to radius.", each="function",
                                              lines=(4, 5), write=True),
                         lambda: embedded_rewriter, quiet=True)
    assert code == 0
    new = path.read_text()
    assert "def area(radius):" in new and "math.pi * radius * radius" in new
    assert new.endswith("def perimeter(r):\n    return 2 * math.pi * r\n")  # outside the scope
    assert new.startswith("import math\n\n\n")


def test_progress_bar_shows_files_spans_and_tokens_per_second(tree):
    import io

    stream = io.StringIO()
    report = TerminalReport(stream)
    jobs = [plan(job, Options("x", each="function")) for job in collect(["samples/stats.go"])]
    assert batch.run(jobs, ScriptedEngine(), Options("x", each="function"), report)
    shown = stream.getvalue()
    assert "[########################] 1/1 files, 2/2 spans" in shown
    assert "tok/s" in shown and "samples/stats.go: function Max" in shown
    assert shown.endswith("\r\033[K")  # the bar is cleared before the summary


def test_line_endings_bom_and_final_newline_survive_a_write(tree):
    path = tree / "samples" / "crlf.py"
    path.write_bytes(b"\xef\xbb\xbfdef f(a):\r\n    return a\r\n\r\ndef g(b):\r\n    return b")
    engine = ScriptedEngine(lambda text: text.replace("return", "yield"))
    assert run([str(path)], engine, each="function", write=True) == 0
    assert path.read_bytes() == b"\xef\xbb\xbfdef f(a):\r\n    yield a\r\n\r\ndef g(b):\r\n    yield b"


def test_a_crlf_file_is_sent_as_lf_and_the_answer_written_back_in_its_line_endings(tmp_path):
    # A model reads and writes LF: an LF answer must not leave LF lines in a CRLF file.
    path = tmp_path / "m.py"
    path.write_bytes(ORIGINAL)
    engine = AnsweringEngine(lambda request: request.code.replace("x * 2", "x * 3"))
    assert run([str(path)], engine, each="function", lines=(5, 6), write=True) == 0
    (request,) = engine.requests
    assert "\r" not in request.code and "\r" not in request.context and "def add" in request.context
    assert path.read_bytes() == ORIGINAL.replace(b"x * 2", b"x * 3")


def test_query_scope_rewrites_only_the_captured_calls(tree):
    path = tree / "samples" / "report.py"
    original = path.read_text()
    engine = ScriptedEngine(lambda text: text.replace("print(", "sys.stdout.write("))
    query = '((call function: (identifier) @f) @scope (#eq? @f "print"))'
    assert run([str(path)], engine, each=query, write=True) == 0
    assert len(engine.requests) == 4
    assert path.read_text() == original.replace("print(", "sys.stdout.write(")


@pytest.mark.real_model
def test_embedded_model_cli_rewrites_one_go_function_of_a_sample(tree, embedded_checkpoint):
    path = tree / "samples" / "stats.go"
    original = path.read_text()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "rewriter.cli", "apply", "samples/stats.go",
                           "-i", "Rename the local variable sum to total.", "--each", "function",
                           "--lines", "6-6", "--write", "--model", "embedded"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    new = path.read_text()
    assert new.startswith('package stats\n\nimport "errors"\n\n// Mean returns')
    assert new.count("package stats") == 1
    assert "total" in new and "sum" not in new
    tail = original[original.index("// Max returns"):]
    assert new.endswith(tail)  # Max, outside the scope, is byte for byte the same
    assert "wrote samples/stats.go" in done.stderr and "prediction tokens" in done.stderr


def test_an_answer_that_repeats_the_surrounding_file_keeps_only_the_span(tree):
    path = tree / "samples" / "stats.go"
    text = path.read_text()
    start = text.index("// Mean")
    end = text.index("\n}\n", start) + 3  # the end of Mean
    # The model answers with the file's head, the edited function, and the rest of the file.
    engine = ScriptedEngine(lambda span: text[:start] + span.replace("sum", "total") + text[end:])
    assert run([str(path)], engine, each="function", lines=(6, 6), write=True) == 0
    assert path.read_text() == text[:start] + text[start:end].replace("sum", "total") + text[end:]
