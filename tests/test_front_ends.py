"""Every front end refuses what any one of them refuses, each through its own interface: the
CLI (`rewriter apply`), the HTTP service (`POST /v1/rewrites`) and the language server.

The model is scripted (its answer chosen, written token by token and cut at the token limit
as a model's is), so each case is one kind of bad answer: cut at the token limit, not parsing
where the file did, parsing for tree-sitter but not compiling, losing a definition, an echo of
the file instead of a rewrite, and a header whose body is gone once the echo after it is stripped.
"""
from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from rewriter import cli
from rewriter.decoding.rewrite import Rewriter
from rewriter.engine import EditRequest, Turn
from rewriter.remote import RemoteRewriter
from rewriter.serve.app import create_app
from rewriter.serve.schema import Limits
from tests.helpers.lsp import VSCODE, Editor, lines_range
from tests.helpers.scripted_model import ScriptedRewriter

FILE = '''def area(width, height):
    """The area of a rectangle."""
    return width * height


def main():
    for size in range(1, 4):
        print(size, area(size, size + 1))
'''
AREA = FILE[: FILE.index("\n\n\ndef main") + 1]
MAIN = FILE[FILE.index("def main"):]
MAIN_LINES = (5, 8)  # 0-based, end exclusive: `def main` to the end
EMPTIED = "def main():\n" + AREA.split("\n", 1)[1]

# name -> (what the model answers for the code it is sent, the lines to rewrite (None: the whole
# file), the token limit, what the refusal says)
CASES = {
    "cut": (lambda code: code, None, 30, "the answer stopped at the token limit"),
    "unparsable": (lambda code: code.replace("def main():", "def main(:"), None, None, "does not parse"),
    "lost definition": (lambda code: code.replace(AREA + "\n\n", ""), None, None, "it would lose function area"),
    "echo": (lambda code: AREA, MAIN_LINES, None, "the answer is a copy of lines 1-3 of the file"),
    # tree-sitter parses it; Python's compiler does not
    "not compiling": (lambda code: code.replace("def main():", "def main(size, size):"), None, None,
                      "syntax error at line 6: duplicate argument 'size'"),
    # The header, then a copy of the lines before it: stripped as an echo, it leaves no body
    # (the embedded model's answer for a docstring on idna's `_encode_range`).
    "emptied body": (lambda code: EMPTIED, MAIN_LINES, None, "it would lose the body of function main"),
}
INSTRUCTION = "Add type hints"


@pytest.fixture(scope="module")
def tiny_rewriter(tiny_loaded):
    return Rewriter(tiny_loaded)


@pytest.mark.parametrize("case", CASES)
def test_the_cli_refuses(case, tiny_rewriter, tmp_path, monkeypatch, capsys):
    answer, lines, max_tokens, reason = CASES[case]
    path = tmp_path / "shapes.py"
    path.write_text(FILE)
    monkeypatch.setattr(cli, "_load_local", lambda args, settings: ScriptedRewriter(tiny_rewriter, answer))
    argv = ["apply", str(path), "-i", INSTRUCTION, "--write", "--json", "-q"]
    argv += ["--lines", f"{lines[0] + 1}-{lines[1]}"] if lines else []
    argv += ["--max-new-tokens", str(max_tokens)] if max_tokens else []
    assert cli.main(argv) == 1
    span = json.loads(capsys.readouterr().out)["files"][0]["spans"][0]
    assert span["status"] == ("failed" if case == "cut" else "refused")
    assert reason in span["reason"] and "not applied" in span["reason"]
    assert path.read_text() == FILE


def rewrite_events(client: TestClient, body: dict) -> list[tuple[str, dict]]:
    response = client.post("/v1/rewrites", json=body)
    assert response.status_code == 200, response.text
    events = []
    for block in response.text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((fields.get("event", ""), json.loads(fields["data"])))
    return events


@pytest.mark.parametrize("case", CASES)
def test_the_service_refuses_without_being_told_the_language(case, tiny_loaded, tiny_rewriter):
    answer, lines, max_tokens, reason = CASES[case]
    scripted = ScriptedRewriter(tiny_rewriter, answer)
    body = {"text": FILE, "instruction": INSTRUCTION}  # no language: the checks infer python
    body |= {"range": {"start": lines[0], "end": lines[1]}} if lines else {}
    body |= {"max_tokens": max_tokens} if max_tokens else {}
    with TestClient(create_app(tiny_loaded, Limits(), rewriter=scripted), base_url="http://127.0.0.1:8000") as client:
        events = rewrite_events(client, body)
    name, result = events[-1]
    assert name == "result"
    assert result["integrity"] == "refused" and reason in result["refused"]["reason"]
    assert result["text"] == FILE and result["changed"] is False
    assert scripted.requests[0]["language"] == ""  # the prompt is as it was: no language named
    if case == "cut":
        assert result["stats"]["finish_reason"] == "length" and result["stats"]["output_tokens"] == 30
        cut = result["refused"]["text"]  # the file up to the limit: the loop's body is not there
        assert FILE.startswith(cut.rstrip("\n")) and "print(" not in cut


def test_the_service_applies_a_good_answer_and_strips_an_echo(tiny_loaded, tiny_rewriter):
    hinted = MAIN.replace("def main():", "def main() -> None:")
    for answer, integrity in ((lambda code: hinted, "applied"), (lambda code: AREA + "\n\n" + hinted, "stripped")):
        app = create_app(tiny_loaded, Limits(), rewriter=ScriptedRewriter(tiny_rewriter, answer))
        with TestClient(app, base_url="http://127.0.0.1:8000") as client:
            events = rewrite_events(client, {"text": FILE, "instruction": INSTRUCTION,
                                             "range": {"start": MAIN_LINES[0], "end": MAIN_LINES[1]}})
        result = events[-1][1]
        assert result["integrity"] == integrity and result["changed"] is True
        assert result["text"] == FILE.replace(MAIN, hinted) and result["selection"] == hinted


def test_a_refine_reaches_the_services_model_as_the_conversations_next_turn(tiny_loaded, tiny_rewriter):
    hinted = MAIN.replace("def main():", "def main() -> None:")
    scripted = ScriptedRewriter(tiny_rewriter, lambda code: hinted)
    earlier = (Turn(MAIN, "Add a docstring"),)
    with TestClient(create_app(tiny_loaded, Limits(), rewriter=scripted), base_url="http://127.0.0.1:8000") as client:
        engine = RemoteRewriter("http://127.0.0.1:8000/v1", protocol="rewriter", http=client)
        result = list(engine.stream(EditRequest(MAIN, INSTRUCTION, "python", conversation=earlier)))[-1]
        wrong = client.post("/v1/rewrites", json={"text": MAIN, "instruction": INSTRUCTION,
                                                  "conversation": [{"text": MAIN}]})
    assert scripted.requests[0]["conversation"] == earlier and result.text == hinted
    assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "conversation[0]"


# The language server: a scripted engine (tests/helpers/scripted.py) gives the answers; "tokens" are characters.
URI = "file:///project/shapes.py"
LSP_CASES = {  # name -> (instruction, the script's replacements, whether to send the lines of `main` only)
    "unparsable": ("Polish", [["def main():", "def main(:"]], False),
    "lost definition": ("Tidy up", [[AREA + "\n\n", ""]], False),
    "echo": ("Improve", [[MAIN, AREA]], True),
    "not compiling": ("Revise", [["def main():", "def main(size, size):"]], False),
    "emptied body": ("Document", [[MAIN, EMPTIED]], True),
}
LSP_SCRIPT = {"delay_s": 0.002, "chunk_chars": 6, "rules": [
    {"instruction": instruction, "replace": replace} for instruction, replace, _ in LSP_CASES.values()]}


async def lsp_rewrite(editor, instruction: str, main_only: bool) -> dict:
    editor.open(URI, FILE)
    if main_only:
        arguments = {"uri": URI, "range": lines_range(*MAIN_LINES), "instruction": instruction, "wait": True}
        return await editor.execute("rewriter.rewrite", arguments)
    return await editor.execute("rewriter.rewriteFile", {"uri": URI, "instruction": instruction, "wait": True})


@pytest.mark.asyncio
@pytest.mark.parametrize("case", LSP_CASES)
async def test_the_language_server_refuses(case, tmp_path):
    instruction, _, main_only = LSP_CASES[case]
    editor = await Editor.start(VSCODE, LSP_SCRIPT, tmp_path)  # streams edits as they settle
    try:
        result = await lsp_rewrite(editor, instruction, main_only)
        assert result["status"] == "refused", result
        assert CASES[case][3] in result["message"] and result["message"].startswith("not applied: ")
        assert editor.text(URI) == FILE  # what was streamed in was put back
    finally:
        await editor.stop()


@pytest.mark.asyncio
async def test_the_language_server_refuses_an_answer_cut_by_max_new_tokens(tmp_path):
    editor = await Editor.start(VSCODE, {"delay_s": 0.002, "chunk_chars": 6}, tmp_path, options={"maxNewTokens": 30})
    try:
        result = await lsp_rewrite(editor, INSTRUCTION, main_only=False)
        assert result["status"] == "refused" and "the answer stopped at the token limit" in result["message"]
        assert editor.text(URI) == FILE
        assert "refused_text" not in result  # nothing offers to apply half an answer
    finally:
        await editor.stop()
