"""The apply model (`rewriter-apply`): Morph's apply format over chat completions, merged by the
deterministic snippet merge, by the model (scripted here) where the update is ambiguous, and
refused with a clear error where neither may merge it; malformed requests get a 400."""
from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from rewriter.decoding.rewrite import Rewriter
from rewriter.serve.app import create_app
from rewriter.serve.apply_model import APPLY_MODEL, split_apply_message
from rewriter.serve.schema import ApiError, Limits
from tests.helpers.scripted_model import ScriptedRewriter

CHAT = "/v1/chat/completions"
CODE = '''import os


def load(path):
    return open(path).read()


def main():
    print(load("a.txt"))
'''
UPDATE = "# ... existing code ...\n\ndef main():\n    print(load(os.path.join('data', 'a.txt')))\n"
MERGED = CODE.replace('print(load("a.txt"))', "print(load(os.path.join('data', 'a.txt')))")
TWICE = CODE + "\n\ndef load(path, encoding):\n    return open(path, encoding=encoding).read()\n"


def message(code: str = CODE, update: str = UPDATE, instruction: str | None = "I will join the data folder") -> str:
    head = f"<instruction>{instruction}</instruction>\n" if instruction is not None else ""
    return f"{head}<code>{code}</code>\n<update>{update}</update>"


def body(content, **extra) -> dict:
    return {"model": APPLY_MODEL, "messages": [{"role": "user", "content": content}], **extra}


@pytest.fixture(scope="module")
def tiny_rewriter(tiny_loaded):
    return Rewriter(tiny_loaded)


def client_for(loaded, rewriter) -> TestClient:
    return TestClient(create_app(loaded, Limits(max_output_tokens=4000), rewriter=rewriter),
                      base_url="http://127.0.0.1:8000")


def streamed(response) -> tuple[str, list[dict]]:
    assert response.status_code == 200, response.text
    chunks = [json.loads(block.removeprefix("data: ")) for block in response.text.strip().split("\n\n")
              if block != "data: [DONE]"]
    assert response.text.strip().endswith("data: [DONE]")
    return "".join(choice["delta"].get("content") or "" for chunk in chunks for choice in chunk["choices"]), chunks


def error_of(response, status: int, code: str, param: str | None = None) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and (param is None or error["param"] == param), error
    return error["message"]


# ---- the message format ------------------------------------------------------------------------

def test_the_message_splits_into_instruction_code_and_update_with_the_code_as_sent():
    assert split_apply_message(message()) == ("I will join the data folder", CODE, UPDATE)
    assert split_apply_message(message(instruction=None)) == ("", CODE, UPDATE)  # Morph's older format
    # the code ends at the </code> an <update> follows: code that holds the tag itself is kept whole
    html = "<p><code>x</code></p>\n"
    assert split_apply_message(f"  <code>{html}</code>\n\n<update><p>y</p></update>\n") == ("", html, "<p>y</p>")


@pytest.mark.parametrize("content, words", [
    ("please merge this", "must start with <code>"),
    (f"<update>{UPDATE}</update><code>{CODE}</code>", "must start with <code>"),
    (f"<code>{CODE}</code>", "no </code> followed by <update>"),
    (f"<code>{CODE}</code><update>{UPDATE}", "must end with </update>"),
    (f"<code>{CODE}</code><update>{UPDATE}</update> thanks", "must end with </update>"),
    (f"<instruction>x<code>{CODE}</code><update>{UPDATE}</update>", "must start with <code>"),
    (f"<code>{CODE}</code><update>  \n</update>", "The <update> is empty"),
])
def test_a_malformed_message_is_refused_with_what_is_wrong(content, words):
    with pytest.raises(ApiError) as refused:
        split_apply_message(content)
    assert refused.value.status == 400 and words in refused.value.message


# ---- the service -------------------------------------------------------------------------------

def test_an_unambiguous_update_is_merged_without_the_model(tiny_loaded, tiny_rewriter):
    scripted = ScriptedRewriter(tiny_rewriter)
    with client_for(tiny_loaded, scripted) as client:
        assert [card["id"] for card in client.get("/v1/models").json()["data"]] == [tiny_loaded.name, APPLY_MODEL]
        answer = client.post(CHAT, json=body(message()))
        assert answer.status_code == 200, answer.text
        choice = answer.json()["choices"][0]
        assert choice["message"] == {"role": "assistant", "content": MERGED, "refusal": None}
        assert choice["finish_reason"] == "stop" and answer.json()["model"] == APPLY_MODEL
        assert answer.json()["usage"]["completion_tokens"] > 0
        text, chunks = streamed(client.post(CHAT, json=body(message(instruction=None), stream=True,
                                                            stream_options={"include_usage": True})))
        assert text == MERGED and chunks[-1]["usage"]["prompt_tokens"] > 0
        # content as text parts, as the OpenAI clients may send it
        parts = [{"type": "text", "text": message()[:40]}, {"type": "text", "text": message()[40:]}]
        assert client.post(CHAT, json=body(parts)).json()["choices"][0]["message"]["content"] == MERGED
    assert scripted.requests == []  # no model ran


def test_an_ambiguous_update_is_merged_by_the_model_with_the_code_as_its_prediction(tiny_loaded, tiny_rewriter):
    update = "# ...\ndef load(path):\n    return open(path).read().strip()\n# ...\n"  # which `load`?
    merged = TWICE.replace("return open(path).read()", "return open(path).read().strip()")
    scripted = ScriptedRewriter(tiny_rewriter, lambda code: merged)
    with client_for(tiny_loaded, scripted) as client:
        answer = client.post(CHAT, json=body(message(TWICE, update)))
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == merged
        text, _ = streamed(client.post(CHAT, json=body(message(TWICE, update), stream=True)))
        assert text == merged
    assert [request["code"] for request in scripted.requests] == [TWICE, TWICE]


def test_the_model_merges_only_the_definition_that_holds_the_update_s_lines(tiny_loaded, tiny_rewriter):
    update = "# ...\n    return open(path).read()\n    return open(path).read()\n# ...\n"  # a copy, or moved?
    load = "def load(path):\n    return open(path).read()\n"
    copied = "read()\n    return open(path).read()\n"  # the model takes it for a copy
    scripted = ScriptedRewriter(tiny_rewriter, lambda code: code.replace("read()\n", copied))
    with client_for(tiny_loaded, scripted) as client:
        answer = client.post(CHAT, json=body(message(CODE, update)))
        assert answer.status_code == 200, answer.text
        # the region is rewritten; the code around it comes back as sent
        assert answer.json()["choices"][0]["message"]["content"] == CODE.replace("read()\n", copied)
    assert [request["code"] for request in scripted.requests] == [load]


def test_a_refused_merge_is_an_error_and_nothing_else(tiny_loaded, tiny_rewriter):
    loses_main = ScriptedRewriter(tiny_rewriter, lambda code: code[:code.index("\n\ndef main")] + "\n")
    update = "# ...\ndef load(path):\n    return ''\n# ...\n"
    with client_for(tiny_loaded, loses_main) as client:
        only_markers = client.post(CHAT, json=body(message(update="# ... existing code ...\n")))
        assert "only markers" in error_of(only_markers, 422, "merge_refused")
        assert loses_main.requests == []  # refused by the deterministic merge: no model asked
        by_the_check = client.post(CHAT, json=body(message(TWICE, update)))  # ambiguous: the model's answer
        assert "would lose function load, function main" in error_of(by_the_check, 422, "merge_refused")
        assert len(loses_main.requests) == 2  # asked once more, told what it lost; lost again
        # a snippet that matches nothing goes to the model too, whose answer the checks judge
        matches_nothing = client.post(CHAT, json=body(message(update="x = compute()\ny = x + 1\n")))
        assert "would lose function main" in error_of(matches_nothing, 422, "merge_refused")
        assert len(loses_main.requests) == 4


def test_a_model_merge_that_changes_what_a_marker_keeps_is_refused(tiny_loaded, tiny_rewriter):
    # the file's own lines (what they change, only a reading tells) go to the model; main's body
    # is the marker's to keep
    update = "# ...\ndef load(path):\n    return open(path).read()\n\n\ndef main():\n# ...\n"
    scripted = ScriptedRewriter(tiny_rewriter, lambda code: code.replace(
        "read()\n", "read()\n    return open(path).read()\n").replace('"a.txt"', '"b.txt"'))
    with client_for(tiny_loaded, scripted) as client:
        reason = error_of(client.post(CHAT, json=body(message(CODE, update))), 422, "merge_refused")
    assert "the merge leaves out code the snippet keeps: 'print(load(\"a.txt\"))'" in reason
    assert len(scripted.requests) == 2  # asked once more with the reason, as any refused rewrite


def test_a_merge_bringing_an_undefined_name_is_refused_by_the_lint_check_either_way(tiny_loaded, tiny_rewriter):
    # `json` is not imported: the merge compiles, but main would fail when run.
    broken = "# ... existing code ...\n\ndef main():\n    print(json.dumps(load('a.txt')))\n"
    def merged_as_said(code: str) -> str:  # each snippet merged as it says
        if "encoding" in code:  # TWICE: the first `load` reads json
            return code.replace("path):\n    return open(path).read()", "path):\n    return json.loads(open(path).read())")
        return code.replace('print(load("a.txt"))', "print(json.dumps(load('a.txt')))")
    scripted = ScriptedRewriter(tiny_rewriter, merged_as_said)
    with client_for(tiny_loaded, scripted) as client:
        merged = client.post(CHAT, json=body(message(update=broken)))  # the model's turn, refused again
        assert "undefined name 'json'" in error_of(merged, 422, "merge_refused")
        assert len(scripted.requests) == 2  # asked again with the reason, as any rewrite is
        ambiguous = "# ...\ndef load(path):\n    return json.loads(open(path).read())\n# ...\n"  # which `load`?
        by_the_model = client.post(CHAT, json=body(message(TWICE, ambiguous)))
        assert "undefined name 'json'" in error_of(by_the_model, 422, "merge_refused")
        assert len(scripted.requests) == 4
        clean = client.post(CHAT, json=body(message(update="import json\n" + broken)))
        assert clean.status_code == 200, clean.text
        assert "import json\n" in clean.json()["choices"][0]["message"]["content"]


@pytest.mark.parametrize("change, param", [
    ({"messages": [{"role": "system", "content": "Merge."}, {"role": "user", "content": message()}]}, "messages"),
    ({"messages": [{"role": "assistant", "content": message()}]}, "messages"),
    ({"prediction": {"type": "content", "content": CODE}}, "prediction"),
    ({"stop": ["\n\n"]}, "stop"),
    ({"messages": [{"role": "user", "content": "merge it"}]}, "messages[0].content"),
])
def test_a_request_not_in_the_apply_format_gets_a_400(change, param, tiny_loaded, tiny_rewriter):
    with client_for(tiny_loaded, ScriptedRewriter(tiny_rewriter)) as client:
        response = client.post(CHAT, json={**body(message()), **change})
        assert response.status_code == 400, response.text
        assert response.json()["error"]["param"] == param
