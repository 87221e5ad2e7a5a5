"""Raw completions on the local engine (decoding/completion.py): the prompt's own tokens, no chat
template; greedy output is plain greedy decoding's with a prediction, with the prompt span
drafter and with none; stop strings cut the answer."""
from __future__ import annotations

import pytest
import torch

from rewriter.decoding.rewrite import Rewriter
from rewriter.engine import CompletionRequest, SamplingParams
from rewriter.results import ContextTooLarge
from tests.helpers.models import greedy_reference

PROMPT = "<|file_sep|>current/sums.py\ndef total(xs):\n    return sum(xs)\n<|file_sep|>updated/sums.py\n"


@pytest.fixture(scope="module")
def rewriter(tiny_loaded):
    return Rewriter(tiny_loaded)


def reference(rewriter, prompt: str, tokens: int) -> list[int]:
    ids = rewriter.tokenizer.encode(prompt, add_special_tokens=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return greedy_reference(rewriter.loaded.model, ids, tokens)
    finally:
        torch.set_num_threads(threads)


def answer(rewriter, request: CompletionRequest) -> tuple[str, list[int]]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the reference runs: the same kernels, the same rounding
    try:
        pieces = list(rewriter.complete(request))
    finally:
        torch.set_num_threads(threads)
    assert pieces[-1].done and not any(piece.done for piece in pieces[:-1])
    return "".join(piece.text for piece in pieces), pieces[-1].output


def test_greedy_completions_equal_plain_greedy_whatever_drafts_them(rewriter):
    expected = reference(rewriter, PROMPT, 30)
    text = rewriter.tokenizer.decode(expected, skip_special_tokens=True)
    for prediction in (None, text, "def total(values):\n    return sum(values)\n"):
        got, output = answer(rewriter, CompletionRequest(PROMPT, prediction, max_new_tokens=30))
        assert output == expected and got == text, prediction


def test_a_stop_string_ends_the_answer_and_is_cut(rewriter):
    text = rewriter.tokenizer.decode(reference(rewriter, PROMPT, 30), skip_special_tokens=True)
    stop = text[len(text) // 2:len(text) // 2 + 2]
    got, _ = answer(rewriter, CompletionRequest(PROMPT, max_new_tokens=30, stop=(stop,)))
    assert got == text[:text.find(stop)]


def test_sampled_completions_repeat_with_their_seed_and_an_empty_prompt_is_refused(rewriter):
    sampled = CompletionRequest(PROMPT, max_new_tokens=12, sampling=SamplingParams(temperature=0.9, seed=3))
    assert answer(rewriter, sampled) == answer(rewriter, sampled)
    with pytest.raises(ContextTooLarge, match="empty"):
        rewriter.plan_completion(CompletionRequest(""))
