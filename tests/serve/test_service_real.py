"""The service on the embedded model: greedy answers equal in-process decoding; hunks apply."""
from __future__ import annotations

import json

import httpx
import openai
import pytest

from rewriter.edits.hunks import Hunk, apply_hunks
from rewriter.passes import PROMPT_CHUNK, WIDEST_DECODING_PASS
from rewriter.prompt import build_prompt
from tests.helpers.service import Server

pytestmark = pytest.mark.real_model

CODE = """def total(items):
    result = 0
    for item in items:
        result += item.price * item.count
    return result
"""
FILE = "import math\n\n\n" + CODE + "\n\ndef mean(values):\n    return sum(values) / len(values)\n"
RANGE = (3, 8)  # CODE's lines in FILE
INSTRUCTION = "Add type hints to the function signature."


@pytest.fixture(scope="module")
def real_server(embedded_checkpoint, embedded, tmp_path_factory):
    # The in-process model's path, which the answers are compared with: the helper's default int8
    # has no fast kernel on an AVX2-only CPU (a 1,000-token prompt took over 300 s on a Zen 1).
    server = Server(str(embedded_checkpoint), env={"REWRITER_DTYPE": embedded.dtype},
                    log=tmp_path_factory.mktemp("real") / "server.log", threads=2)
    try:
        yield server.wait_ready()
    finally:
        server.stop()


def test_chat_with_prediction_equals_in_process_greedy(real_server, embedded_rewriter):
    prompt = build_prompt(CODE, INSTRUCTION, "python")
    prompt_ids = embedded_rewriter.encode_messages(prompt.messages)
    # The in-process greedy decoder, with the same drafters (exact: drafts never change the output).
    drafter = embedded_rewriter.drafter(embedded_rewriter.encode_prediction(prompt))
    steps = list(embedded_rewriter.decoder.generate(prompt_ids, drafter, 120))
    expected = "".join(step.text for step in steps)
    assert "-> " in expected  # the model did edit
    client = openai.OpenAI(base_url=real_server.base_url, api_key="unused", max_retries=0, timeout=300)
    answer = client.chat.completions.create(
        model=real_server.health()["model"], messages=prompt.messages, max_tokens=120, temperature=0,
        prediction={"type": "content", "content": prompt.prediction})
    assert answer.choices[0].message.content == expected
    usage = answer.usage
    assert usage.prompt_tokens == len(prompt_ids)
    assert usage.completion_tokens == steps[-1].stats.output_tokens
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    details = usage.completion_tokens_details
    # How many drafted tokens were accepted follows the window sizes each process measures on its
    # machine (a loaded CI machine verifies fewer at a time); that the prediction drafted does not.
    assert 0 < details.accepted_prediction_tokens < usage.completion_tokens
    # As OpenAI counts them: the prediction's tokens missing from the completion, which depends on
    # the output tokens only (rejected draft positions follow each process's window sizes).
    from rewriter.serve.backend import rejected_prediction_tokens

    predicted = embedded_rewriter.tokenizer.encode(prompt.prediction, add_special_tokens=False)
    completion = [token for step in steps for token in step.tokens]
    assert details.rejected_prediction_tokens == rejected_prediction_tokens(predicted, completion)
    assert 0 < details.rejected_prediction_tokens < len(predicted) // 2  # the edit replaced a few tokens


def test_rewrites_stream_hunks_that_rebuild_the_result(real_server, embedded_rewriter):
    assert "".join(FILE.splitlines(keepends=True)[RANGE[0]:RANGE[1]]) == CODE
    expected = embedded_rewriter.rewrite(CODE, INSTRUCTION, "python", context=FILE).text
    assert expected != CODE
    body = {"text": FILE, "instruction": INSTRUCTION, "language": "python",
            "range": {"start": RANGE[0], "end": RANGE[1]}}
    events: list[tuple[str, dict]] = []
    with httpx.stream("POST", f"{real_server.base_url}/rewrites", json=body, timeout=300) as response:
        assert response.status_code == 200
        name = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[6:])))
    kinds = [name for name, _ in events]
    assert kinds[-1] == "result" and "delta" in kinds and "stats" in kinds
    hunks = [Hunk(d["start"], d["end"], tuple(d["lines"])) for name, d in events if name == "hunk"]
    result = events[-1][1]
    # Hunks are in the request text's (the whole file's) lines and rebuild the final text.
    assert hunks and all(RANGE[0] <= h.start and h.end <= RANGE[1] for h in hunks)
    assert apply_hunks(FILE, hunks) == result["text"]
    assert result["selection"] == expected
    assert result["text"] == FILE.replace(CODE, expected)
    assert "".join(d["text"] for name, d in events if name == "delta") == result["answer"]



def test_a_long_file_asked_again_prefills_only_what_it_does_not_share(real_server, embedded):
    # Where prompt rows are computed alone (the int8 paths where float32 keeps their bits), all
    # the prompt shares with the kept one comes from the cache; elsewhere whole chunks of
    # PROMPT_CHUNK tokens, leaving more than the widest decoding pass to compute.
    context = FILE + "".join(f"\n\ndef helper_{i}(value):\n    return value * {i} + math.sqrt({i})\n" for i in range(30))
    client = openai.OpenAI(base_url=real_server.base_url, api_key="unused", max_retries=0, timeout=300)
    cached = []
    for instruction in (INSTRUCTION, "Add a docstring."):
        usage = client.chat.completions.create(model=real_server.health()["model"], max_tokens=1,
                                               messages=build_prompt(CODE, instruction, "python", context).messages).usage
        cached.append(usage.prompt_tokens_details.cached_tokens)
    assert usage.prompt_tokens > PROMPT_CHUNK + WIDEST_DECODING_PASS
    first, second = (embedded.tokenizer.apply_chat_template(build_prompt(CODE, instruction, "python", context).messages,
                                                            add_generation_prompt=True, return_dict=True)["input_ids"]
                     for instruction in (INSTRUCTION, "Add a docstring."))
    shared = next(n for n, (a, b) in enumerate(zip(first, second)) if a != b)
    whole_chunks = min(shared, len(second) - WIDEST_DECODING_PASS - 1) // PROMPT_CHUNK * PROMPT_CHUNK
    assert len(second) == usage.prompt_tokens and cached[1] in (shared, whole_chunks) and cached[1] > 0


def test_an_answer_cut_at_max_tokens_is_refused_and_the_text_left_as_it_was(real_server):
    """The issue's reproduction: a two-function file, max_tokens 30, no language."""
    body = {"text": FILE, "instruction": INSTRUCTION, "max_tokens": 30}
    response = httpx.post(f"{real_server.base_url}/rewrites", json=body, timeout=300)
    assert response.status_code == 200
    result = json.loads(response.text.strip().split("\n\n")[-1].split("data: ", 1)[1])
    assert result["stats"]["finish_reason"] == "length"
    assert result["integrity"] == "refused" and result["changed"] is False and result["text"] == FILE
    assert result["refused"]["reason"] == "the answer stopped at the token limit"
