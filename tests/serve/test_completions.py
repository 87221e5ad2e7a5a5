"""/v1/completions end to end: a raw prompt (no chat template) on a tiny random Qwen2 with the
real tokenizer, served by a subprocess; the text is plain greedy decoding's, with or without a
prediction, and Zed's OpenAI-compatible edit-prediction provider gets the answer it parses."""
from __future__ import annotations

import json

import httpx
import openai
import pytest
import torch

from tests.helpers.models import greedy_reference
from tests.helpers.service import Server

# A prompt in Zeta's published format (zed-industries/zed, crates/zeta_prompt: zeta1), as Zed's
# OpenAI-compatible provider renders it for a Zeta model.
ZETA_PROMPT = (
    "### Instruction:\nYou are a code completion assistant and your task is to analyze user edits and then "
    "rewrite an excerpt that the user provides, suggesting the appropriate edits within the excerpt, taking "
    "into account the cursor location.\n\n### User Edits:\n\nUser edited src/sums.py:\n```diff\n@@ -1,2 +1,2 @@\n"
    "-def total(xs):\n+def total(values):\n     s = 0\n```\n\n### User Excerpt:\n\n```src/sums.py\n"
    "<|start_of_file|>\n<|editable_region_start|>\ndef total(values):<|user_cursor_is_here|>\n    s = 0\n"
    "    for x in xs:\n        s += x\n    return s\n<|editable_region_end|>\n```\n\n### Response:\n")
ZETA_END = "<|editable_region_end|>"


@pytest.fixture(scope="module")
def server(tiny_dir, tmp_path_factory):
    server = Server(str(tiny_dir), "--max-output-tokens", "4000",
                    log=tmp_path_factory.mktemp("log") / "server.log")
    try:
        yield server.wait_ready()
    finally:
        server.stop()


def model_name(server: Server) -> str:
    return server.health()["model"]


def greedy(loaded, prompt: str, max_tokens: int, stop: list[str] = ()) -> tuple[str, int, int, str]:
    """Plain greedy decoding of the raw prompt in this process, cut at the first stop string:
    (text, prompt tokens, completion tokens, finish reason)."""
    ids = loaded.tokenizer.encode(prompt, add_special_tokens=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the server runs: the same kernels, the same rounding
    try:
        tokens = greedy_reference(loaded.model, ids, max_tokens)
    finally:
        torch.set_num_threads(threads)
    for kept in range(1, len(tokens) + 1):  # the fewest tokens whose text holds a stop string
        text = loaded.tokenizer.decode(tokens[:kept], skip_special_tokens=True)
        cuts = [text.find(s) for s in stop if s in text]
        if cuts:
            return text[:min(cuts)], len(ids), kept, "stop"
    text = loaded.tokenizer.decode(tokens, skip_special_tokens=True)
    ended = len(tokens) < max_tokens or tokens[-1] == loaded.tokenizer.eos_token_id
    return text, len(ids), len(tokens), "stop" if ended else "length"


def post(server: Server, body) -> httpx.Response:
    return httpx.post(f"{server.base_url}/completions", content=json.dumps(body), timeout=60,
                      headers={"Content-Type": "application/json"})


def test_zeds_openai_compatible_edit_prediction_request_gets_the_greedy_text(server, tiny_loaded):
    # The body Zed's OpenAI-compatible provider posts to its `api_url` (zed-industries/zed,
    # crates/edit_prediction/src/open_ai_compatible.rs, send_custom_server_request): the
    # RawCompletionRequest of cloud_llm_client, serialized with `temperature` and `environment`
    # left out when unset; for a Zeta model the stops are the editable region's end marker
    # followed by up to three newlines (edit_prediction/src/zeta.rs).
    stops = [ZETA_END, f"{ZETA_END}\n", f"{ZETA_END}\n\n", f"{ZETA_END}\n\n\n"]
    body = {"model": model_name(server), "prompt": ZETA_PROMPT, "max_tokens": 48, "stop": stops}
    response = post(server, body)
    assert response.status_code == 200, response.text
    answer = response.json()
    # What Zed parses (RawCompletionResponse): every field is required there.
    assert {"id", "object", "created", "model", "choices", "usage"} <= set(answer)
    assert answer["object"] == "text_completion" and answer["model"] == body["model"]
    assert isinstance(answer["id"], str) and isinstance(answer["created"], int)
    text, prompt_tokens, completion_tokens, finish = greedy(tiny_loaded, ZETA_PROMPT, 48, stops)
    choice = answer["choices"][0]
    assert (choice["text"], choice["finish_reason"]) == (text, finish)
    usage = answer["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (prompt_tokens, completion_tokens)
    assert usage["total_tokens"] == prompt_tokens + completion_tokens


def test_greedy_text_equals_plain_greedy_with_and_without_a_prediction(server, tiny_loaded):
    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)
    model = model_name(server)
    expected, prompt_tokens, completion_tokens, finish = greedy(tiny_loaded, ZETA_PROMPT, 40)

    plain = client.completions.create(model=model, prompt=ZETA_PROMPT, max_tokens=40, temperature=0)
    assert (plain.choices[0].text, plain.choices[0].finish_reason) == (expected, finish)
    assert (plain.usage.prompt_tokens, plain.usage.completion_tokens) == (prompt_tokens, completion_tokens)
    assert plain.usage.completion_tokens_details.accepted_prediction_tokens == 0  # no prediction given

    # A prediction that is the answer itself: most of it is accepted, the text is unchanged.
    predicted = client.completions.create(model=model, prompt=[ZETA_PROMPT], max_tokens=40,
                                          extra_body={"prediction": {"type": "content", "content": expected}})
    assert predicted.choices[0].text == expected
    assert predicted.usage.completion_tokens_details.accepted_prediction_tokens >= completion_tokens // 2

    # A wrong prediction costs rejected tokens, never a different text; streamed as OpenAI streams.
    pieces, finish_reason, usage = [], None, None
    for chunk in client.completions.create(model=model, prompt=ZETA_PROMPT, max_tokens=40, stream=True,
                                           stream_options={"include_usage": True},
                                           extra_body={"prediction": {"type": "content",
                                                                      "content": "def total(values):\n"}}):
        assert chunk.object == "text_completion"
        usage = chunk.usage or usage
        for choice in chunk.choices:
            pieces.append(choice.text)
            finish_reason = choice.finish_reason or finish_reason
    assert ("".join(pieces), finish_reason) == (expected, finish)
    assert usage.completion_tokens == completion_tokens
    assert usage.completion_tokens_details.rejected_prediction_tokens > 0


def test_a_sampled_completion_is_served_and_repeats_with_its_seed(server):
    body = {"model": model_name(server), "prompt": ZETA_PROMPT, "max_tokens": 12, "temperature": 0.8, "seed": 7}
    first, second = post(server, body), post(server, body)
    assert first.status_code == 200, first.text
    assert first.json()["choices"][0]["text"] == second.json()["choices"][0]["text"]


def assert_error(response: httpx.Response, status: int, code: str, param: str | None) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert (error["code"], error["param"]) == (code, param), error


def test_malformed_completions_get_openai_errors(server):
    ok = {"model": model_name(server), "prompt": "def f(x):\n", "max_tokens": 2}
    assert post(server, ok).status_code == 200
    assert post(server, {**ok, "logprobs": 0, "echo": False, "n": 1, "unknown_field": 1}).status_code == 200
    cases = [
        ({"prompt": None}, 400, "missing_required_parameter", "prompt"),
        ({"prompt": ""}, 400, "invalid_value", "prompt"),
        ({"prompt": 5}, 400, "invalid_type", "prompt"),
        ({"prompt": [1, 2, 3]}, 400, "invalid_value", "prompt"),  # token ids
        ({"prompt": ["a", "b"]}, 400, "invalid_value", "prompt"),  # a batch
        ({"prompt": []}, 400, "invalid_value", "prompt"),
        ({"model": "gpt-3.5-turbo-instruct"}, 404, "model_not_found", "model"),
        ({"model": "rewriter-apply"}, 404, "model_not_found", "model"),  # the apply model is chat only
        ({"max_tokens": 0}, 400, "integer_below_min_value", "max_tokens"),
        ({"max_tokens": 10**6}, 400, "integer_above_max_value", "max_tokens"),
        ({"stop": 5}, 400, "invalid_type", "stop"),
        ({"temperature": 3}, 400, "decimal_above_max_value", "temperature"),
        ({"n": 2}, 400, "unsupported_parameter", "n"),
        ({"best_of": 3}, 400, "unsupported_parameter", "best_of"),
        ({"logprobs": 5}, 400, "unsupported_parameter", "logprobs"),
        ({"echo": True}, 400, "unsupported_parameter", "echo"),
        ({"suffix": "\n"}, 400, "unsupported_parameter", "suffix"),
        ({"prediction": "x"}, 400, "invalid_type", "prediction"),
        ({"prediction": {"type": "content"}}, 400, "missing_required_parameter", "prediction.content"),
        ({"stream_options": {"include_usage": True}}, 400, "invalid_value", "stream_options"),
    ]
    for change, status, code, param in cases:
        body = {key: value for key, value in {**ok, **change}.items() if value is not None}
        assert_error(post(server, body), status, code, param)
    assert server.health()["status"] == "ok"  # none of them hurt the service
