"""The vLLM proposer, driven the way vLLM 0.32's model runner drives a `custom_class` proposer:
rows of a token array, the tokens each row sampled in the last step, rows moving as requests end.
A stand-in verifier accepts a draft's longest prefix that matches a known answer."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from drafters.vllm_proposer import RewriteProposer
from rewriter.prompt import build_prompt

MAX_MODEL_LEN = 2048
ROOT = Path(__file__).resolve().parents[2]
INVENTORY = (ROOT / "samples" / "inventory.py").read_text()  # 43 lines, about 350 tokens


def make_proposer(tokenizer, k: int = 16, device: str = "cpu") -> RewriteProposer:
    config = SimpleNamespace(
        model_config=SimpleNamespace(tokenizer="unused", max_model_len=MAX_MODEL_LEN),
        speculative_config=SimpleNamespace(num_speculative_tokens=k),
        scheduler_config=SimpleNamespace(max_num_seqs=4),
        device_config=SimpleNamespace(device_type=device),
    )
    return RewriteProposer(config, tokenizer=tokenizer)


class Runner:
    """Requests in rows of one array, as vLLM keeps them; each step verifies the last drafts."""

    def __init__(self, proposer: RewriteProposer, max_rows: int = 4):
        self.proposer = proposer
        self.tokens = np.zeros((max_rows, MAX_MODEL_LEN), dtype=np.int32)
        self.requests: list[dict] = []  # row order
        self.steps = 0

    def add(self, prompt: list[int], answer: list[int]) -> dict:
        request = {"prompt": prompt, "answer": answer, "output": [answer[0]], "draft": [], "sampled": [answer[0]],
                   "accepted": 0, "drafted": 0, "steps": 0}
        self.requests.append(request)
        return request

    def step(self) -> None:
        """One engine step: verify each row's draft, then ask the proposer for the next ones."""
        for request in self.requests:
            if request["draft"] or request["steps"]:
                answer, done = request["answer"], len(request["output"])
                accepted = 0
                for token in request["draft"]:
                    if done + accepted < len(answer) and answer[done + accepted] == token:
                        accepted += 1
                    else:
                        break
                request["accepted"] += accepted
                request["drafted"] += len(request["draft"])
                request["sampled"] = answer[done:done + accepted + 1]
                request["output"] += request["sampled"]
            request["steps"] += 1
        self.requests = [r for r in self.requests if len(r["output"]) < len(r["answer"])]  # rows close up
        for i, request in enumerate(self.requests):
            row = request["prompt"] + request["output"]
            self.tokens[i, :len(row)] = row
        drafts = self.proposer.propose([r["sampled"] for r in self.requests],
                                       np.array([len(r["prompt"]) + len(r["output"]) for r in self.requests]),
                                       self.tokens)
        assert len(drafts) == len(self.requests)
        for request, draft in zip(self.requests, drafts):
            assert len(draft) <= self.proposer.max_draft
            request["draft"] = draft
        self.steps += 1

    def run(self) -> None:
        while self.requests:
            self.step()
            assert self.steps < 10_000


def chat_ids(tokenizer, code: str, instruction: str, context: str | None = None) -> list[int]:
    prompt = build_prompt(code, instruction, "python", context)
    return list(tokenizer.apply_chat_template(prompt.messages, add_generation_prompt=True)["input_ids"])


def answer_ids(tokenizer, code: str) -> list[int]:
    return tokenizer.encode(f"```python\n{code}```", add_special_tokens=False) + [tokenizer.eos_token_id]


EDITED = INVENTORY.replace("quantity += count", "quantity += int(count)")
assert EDITED != INVENTORY


@pytest.mark.parametrize("context", [False, True], ids=["whole file", "span with the file as context"])
def test_the_prediction_is_the_code_block_the_prompt_ends_with(qwen_tokenizer, context):
    proposer = make_proposer(qwen_tokenizer)
    span = INVENTORY[INVENTORY.index("    def restock"):INVENTORY.index("    def low_stock")]
    code = span if context else INVENTORY
    prompt = chat_ids(qwen_tokenizer, code, "Add type hints", INVENTORY if context else None)
    assert proposer.prediction(prompt) == answer_ids(qwen_tokenizer, code)


def test_an_edit_is_drafted_around_and_the_rest_accepted(qwen_tokenizer):
    proposer = make_proposer(qwen_tokenizer)
    runner = Runner(proposer)
    prompt = chat_ids(qwen_tokenizer, INVENTORY, "Convert count to int")
    answer = answer_ids(qwen_tokenizer, EDITED)
    request = runner.add(prompt, answer)
    runner.run()
    assert request["output"] == answer  # verification decides every token; drafts only save steps
    assert request["steps"] < len(answer) / 4
    assert request["accepted"] > 0.85 * len(answer)
    assert len(proposer._requests) == 1


def test_requests_keep_their_drafters_when_rows_move(qwen_tokenizer):
    proposer = make_proposer(qwen_tokenizer)
    runner = Runner(proposer)
    short = "def unit():\n    return 1\n"
    first = runner.add(chat_ids(qwen_tokenizer, short, "Rename unit to one"),
                       answer_ids(qwen_tokenizer, short.replace("unit", "one")))
    second = runner.add(chat_ids(qwen_tokenizer, INVENTORY, "Convert count to int"), answer_ids(qwen_tokenizer, EDITED))
    third = runner.add(chat_ids(qwen_tokenizer, INVENTORY, "Add type hints"), answer_ids(qwen_tokenizer, INVENTORY))
    runner.run()
    # The first ends early: the others move up a row and must go on with their own predictions.
    assert first["steps"] < second["steps"]
    assert len(proposer._requests) == 3
    for request in (second, third):
        assert request["accepted"] > 0.85 * len(request["answer"])
        assert request["steps"] < len(request["answer"]) / 4


def test_same_prompt_twice_are_two_requests(qwen_tokenizer):
    proposer = make_proposer(qwen_tokenizer)
    runner = Runner(proposer)
    prompt = chat_ids(qwen_tokenizer, INVENTORY, "Convert count to int")
    runner.add(prompt, answer_ids(qwen_tokenizer, EDITED))
    runner.step()
    runner.step()
    later = runner.add(prompt, answer_ids(qwen_tokenizer, INVENTORY))  # arrives two steps later
    runner.run()
    assert len(proposer._requests) == 2
    assert later["accepted"] > 0.85 * len(later["answer"])


def test_without_a_code_block_prompt_lookup_drafts(qwen_tokenizer):
    proposer = make_proposer(qwen_tokenizer)
    runner = Runner(proposer)
    text = "Repeat after me: the quick brown fox jumps over the lazy dog."
    prompt = list(qwen_tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                                     add_generation_prompt=True)["input_ids"])
    answer = qwen_tokenizer.encode("The quick brown fox jumps over the lazy dog.", add_special_tokens=False)
    request = runner.add(prompt, answer + [qwen_tokenizer.eos_token_id])
    runner.run()
    assert proposer.prediction(prompt) is None
    assert request["accepted"] > 0


def test_rows_in_prefill_or_at_the_context_end_get_no_draft(qwen_tokenizer):
    proposer = make_proposer(qwen_tokenizer)
    prompt = chat_ids(qwen_tokenizer, INVENTORY, "Convert count to int")
    tokens = np.zeros((2, MAX_MODEL_LEN), dtype=np.int32)
    tokens[0, :len(prompt)] = prompt
    tokens[1, :] = 7
    drafts = proposer.propose([[], [7]], np.array([len(prompt), MAX_MODEL_LEN]), tokens)
    assert drafts == [[], []]
    assert proposer._requests == {}


def test_drafts_end_at_the_context_limit(qwen_tokenizer):
    proposer = make_proposer(qwen_tokenizer)
    prompt = chat_ids(qwen_tokenizer, INVENTORY, "Convert count to int")
    answer = answer_ids(qwen_tokenizer, INVENTORY)
    tokens = np.zeros((1, MAX_MODEL_LEN), dtype=np.int32)
    tokens[0, :len(prompt) + 1] = prompt + answer[:1]
    proposer.max_model_len = len(prompt) + 4
    (draft,) = proposer.propose([answer[:1]], np.array([len(prompt) + 1]), tokens)
    assert draft == answer[1:4]


def test_the_window_policy_starts_from_the_device_s_prior(qwen_tokenizer):
    from rewriter.passes import CPU_PRIOR, GPU_PRIOR

    assert make_proposer(qwen_tokenizer, device="cuda").lookahead.prior is GPU_PRIOR
    assert make_proposer(qwen_tokenizer, device="cpu").lookahead.prior is CPU_PRIOR


def test_step_times_teach_the_window_what_a_pass_of_each_width_costs(qwen_tokenizer, monkeypatch):
    """With one request running, the time from one call to the next is the pass that verified its
    last draft; with several, a step's time is no single request's, and nothing is learnt."""
    import drafters.vllm_proposer as module

    clock = [0.0]
    monkeypatch.setattr(module.time, "perf_counter", lambda: clock[0])

    def steps(requests: int) -> RewriteProposer:
        proposer = make_proposer(qwen_tokenizer, k=31)
        runner = Runner(proposer)
        for _ in range(requests):
            runner.add(chat_ids(qwen_tokenizer, INVENTORY, "Convert count to int"), answer_ids(qwen_tokenizer, INVENTORY))
        for _ in range(4):
            clock[0] += 0.01 * sum(1 + len(request["draft"]) for request in runner.requests)
            runner.step()
        return proposer

    alone = steps(1)
    # 31 drafted tokens and the one before them, in the band of the request's length
    assert list(alone.lookahead.tables.values()) == [{32: pytest.approx(0.32)}]
    assert steps(2).lookahead.tables == {}


def test_a_long_request_is_remembered_while_short_ones_come_and_go(qwen_tokenizer):
    proposer = make_proposer(qwen_tokenizer)
    proposer.capacity = 2  # vLLM never says a request ended: the least recently seen are forgotten
    runner = Runner(proposer)
    long = runner.add(chat_ids(qwen_tokenizer, INVENTORY, "Convert count to int"), answer_ids(qwen_tokenizer, EDITED))
    short = "def unit():\n    return 1\n"
    for _ in range(3):  # one after another, each beside the long one
        request = runner.add(chat_ids(qwen_tokenizer, short, "Rename unit to one"),
                             answer_ids(qwen_tokenizer, short.replace("unit", "one")))
        while request in runner.requests:
            runner.step()
    assert long in runner.requests
    runner.run()
    assert proposer._count == 4  # the long one was never taken for a new request
    assert len(proposer._requests) == 2
    assert long["accepted"] > 0.85 * len(long["answer"])
