"""Reading an answer and the answer stream (rewriter/answer.py), and the same answer through both
engines: the local one (its decoder scripted) and the remote one (an OpenAI-compatible endpoint
scripted) hand on the same settled text and give the same result."""
from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import httpx
import pytest

from rewriter.answer import AnswerStream, NoCodeBlock, closing_fence_end, extract_code
from rewriter.decoding.rewrite import Rewriter
from rewriter.engine import EditRequest, Turn
from rewriter.remote import RemoteRewriter
from rewriter.results import Progress, RewriteResult, Stats
from tests.helpers.scripted_model import ScriptedDecoder

FILE = "import os\n\n\ndef first(value):\n    return value + 1\n\n\ndef second(value):\n    return value * 2\n"
FIRST = "def first(value):\n    return value + 1\n"
EDITED = 'def first(value):\n    """Add one."""\n    return value + 1\n'
ECHO = "def second(value):\n    return value * 2\n"


def test_extract_code_takes_the_first_block_and_tolerates_prose_and_no_closing_fence():
    assert extract_code("Here it is:\n```python\nx = 2\n```\nDone.") == "x = 2\n"
    assert extract_code("```\nx = 2\n") == "x = 2\n"
    with pytest.raises(NoCodeBlock):
        extract_code("I cannot do that.")


def test_closing_fence_end_waits_for_the_end_of_the_fence_line():
    assert closing_fence_end("```python\nx\n```") is None  # could still be ```python...
    assert closing_fence_end("```python\nx\n```\n") == len("```python\nx\n```\n")
    assert closing_fence_end("```python\nx\n```js\n") is None


def test_lines_that_may_begin_an_echo_wait_and_an_echo_ends_the_answer():
    answer = AnswerStream(EditRequest(FIRST, "Add a docstring.", "python", FILE), prefilled=False)
    assert answer.feed("```python\ndef first(value):\n") == "```python\ndef first(value):\n"
    assert answer.feed("    return value + 1\n\n\ndef sec") == "    return value + 1\n\n\n"  # may begin the copy
    assert answer.feed("ond(value):\n") == ""  # one line of the file after the span: not yet a copy
    assert not answer.echoed
    assert answer.feed("    return value * 2\n```\n") == "" and answer.echoed
    stats = Stats(finish_reason="length")
    *rest, result = answer.finish(stats)
    assert rest == [] and result.answer == "```python\n" + FIRST + "\n\n"
    assert result.text == FIRST and stats.echo_dropped_chars == len(ECHO + "```\n") and stats.finish_reason == "stop"


def test_a_prefilled_answer_starts_with_the_prefill_and_the_code_keeps_its_line_endings():
    answer = AnswerStream(EditRequest(FIRST.replace("\n", "\r\n"), "Add a docstring.", "python", FILE), prefilled=True)
    assert answer.text == "```python\ndef first"
    assert answer.feed("(value):\n    return value + 1\nd") == "```python\ndef first(value):\n    return value + 1\n"
    assert answer.feed("ef") == ""  # may still begin the copy of `def second`
    *rest, result = answer.finish(Stats())
    assert [event.text for event in rest] == ["def"]  # what was held back comes with the end
    assert result.text == (FIRST + "def\n").replace("\n", "\r\n")


def scripted_endpoint(pieces: list[str]) -> httpx.Client:
    """An OpenAI-compatible endpoint that streams these pieces of text, then stops."""

    def handle(request: httpx.Request) -> httpx.Response:
        chunks = [{"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]} for piece in pieces]
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        body = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
        return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})

    return httpx.Client(transport=httpx.MockTransport(handle))


def both_engines(tokenizer, request: EditRequest, answer: str) -> list[list[Progress | RewriteResult]]:
    """The events of each engine whose model writes `answer` (the local one after its prefill)."""
    prefill = AnswerStream(request, prefilled=True).text
    assert answer.startswith(prefill)
    local = Rewriter(SimpleNamespace(tokenizer=tokenizer, context_length=4096),
                     decoder=ScriptedDecoder(tokenizer, answer[len(prefill):]))
    # The endpoint streams the same tokens' text as the local decoder writes.
    ids = tokenizer.encode(answer, add_special_tokens=False)
    remote = RemoteRewriter("http://h/v1", protocol="openai", http=scripted_endpoint([tokenizer.decode([i]) for i in ids]))
    return [list(local.stream(request)), list(remote.stream(request))]


ANSWERS = {  # name -> (the request, the model's answer)
    "echo cut": (EditRequest(FIRST, "Add a docstring.", "python", FILE),
                 '```python\ndef first(value):\n    """Add one."""\n    return value + 1\n\n\n' + ECHO + "```\n"),
    "span": (EditRequest(FIRST, "Add a docstring.", "python", FILE), f"```python\n{EDITED}```\n"),
    "whole file": (EditRequest(FILE.replace("\n", "\r\n"), "Add a docstring.", "python"),
                   "Sure:\n```python\n" + FILE.replace(FIRST, EDITED) + "```\n"),
}


@pytest.mark.parametrize("case", ANSWERS)
def test_both_engines_give_the_same_answer_and_result(case, qwen_tokenizer):
    request, answer = ANSWERS[case]
    local, remote = both_engines(qwen_tokenizer, request, answer)
    for events in (local, remote):
        assert all(isinstance(event, Progress) for event in events[:-1])
        assert "".join(event.text for event in events[:-1]) == events[-1].answer
    ends = [(events[-1].text, events[-1].answer, events[-1].stats.echo_dropped_chars, events[-1].stats.finish_reason)
            for events in (local, remote)]
    assert ends[0] == ends[1]
    if case == "echo cut":
        assert ends[0][:3] == (EDITED, '```python\n' + EDITED + "\n\n", len(ECHO))


def test_both_engines_refuse_an_answer_without_code(qwen_tokenizer):
    for engine in range(2):
        with pytest.raises(NoCodeBlock):
            both_engines(qwen_tokenizer, EditRequest(FIRST, "Add a docstring.", "python"), "I cannot.")[engine]


@pytest.mark.parametrize("fits", [True, False])
def test_a_refine_is_asked_as_the_next_turn_where_it_fits_and_alone_where_not(qwen_tokenizer, fits):
    first = EditRequest(FIRST, "Add a docstring.", "python", FILE)
    refine = EditRequest(EDITED, "Add type hints.", "python", FILE, conversation=(Turn(FIRST, "Add a docstring."),))
    decoder = ScriptedDecoder(qwen_tokenizer, "(value):\n    return value + 1\n```\n")  # after the prefill
    planner = Rewriter(SimpleNamespace(tokenizer=qwen_tokenizer, context_length=4096), decoder=decoder)
    first_prompt = planner.encode_prompt(AnswerStream(first, prefilled=True).prompt)
    alone = AnswerStream(replace(refine, conversation=()), prefilled=True).prompt
    alone_ids = planner.encode_prompt(alone)
    # Room for the request alone and no more: the conversation's longer prompt does not fit.
    context_length = 4096 if fits else len(alone_ids) + len(planner.encode_prediction(alone)) + 16
    local = Rewriter(SimpleNamespace(tokenizer=qwen_tokenizer, context_length=context_length), decoder=decoder)
    result = list(local.stream(refine))[-1]
    prompt, narrow_from = decoder.asked[-1]
    if fits:  # the first turn's prompt is the prefix; from its end on, what its answer computed
        assert prompt[:len(first_prompt)] == first_prompt and narrow_from == len(first_prompt)
        assert len(prompt) > len(alone_ids)
    else:
        assert prompt == alone_ids and narrow_from is None
    assert result.text == "def first(value):\n    return value + 1\n"
