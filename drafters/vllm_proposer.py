"""Our drafting inside vLLM: a proposer for its `custom_class` speculative method.

    --speculative-config '{"method": "custom_class", "num_speculative_tokens": 16,
                           "model": "drafters.vllm_proposer.RewriteProposer"}'

vLLM (0.32) builds the class with its VllmConfig and, after each engine step, calls `propose`
with every running request's tokens so far (row i of `token_ids_cpu`, `num_tokens_no_spec[i]`
long, the tokens just sampled included) and the tokens each request sampled in that step. It
says neither which request a row holds nor where its prompt ends, and rows move as requests
finish; so a request is known by its prompt: a row seen for the first time is a prompt plus the
one token its prefill sampled. Each request drafts as our own loop does (rewrite_drafter): the
prompt's last fenced code block, the code being rewritten, is the predicted answer, realigned
after each edit, with prompt lookup where it has nothing; the window is sized by the loop's
Lookahead from the step times this server shows. vLLM verifies every proposed token, so a
draft can cost speed but never change the output.
"""
from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from rewriter.lookahead import Lookahead
from rewriter.prompt import last_code_block, prediction_ids

from .base import Draft, Drafter
from .combined import rewrite_drafter
from .prompt_lookup import PromptLookupDrafter

# Requests remembered; vLLM does not say when one ends, so the least recently seen go first.
MIN_REMEMBERED = 256


@dataclass
class _Request:
    number: int  # the order requests were first seen in
    prompt_length: int
    fingerprint: bytes
    drafter: Drafter
    length: int  # the row's length when last proposed for
    draft: Draft | None = None  # proposed then, its verdict unknown until the next step


def _fingerprint(tokens: Any) -> bytes:
    """A digest of a row's prefix (a numpy int array, or a list of ints in tests)."""
    data = tokens.tobytes() if hasattr(tokens, "tobytes") else repr(list(tokens)).encode()
    return hashlib.blake2b(data, digest_size=16).digest()


def _ints(tokens: Any) -> list[int]:
    return tokens.tolist() if hasattr(tokens, "tolist") else list(tokens)


class RewriteProposer:
    """vLLM's proposer: our drafters, one per running request."""

    def __init__(self, vllm_config: Any, tokenizer: Any = None):
        model_config = vllm_config.model_config
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(
                model_config.tokenizer, revision=getattr(model_config, "tokenizer_revision", None),
                trust_remote_code=getattr(model_config, "trust_remote_code", False))
        self.tokenizer = tokenizer
        self.max_draft = vllm_config.speculative_config.num_speculative_tokens
        self.max_model_len = model_config.max_model_len
        device = getattr(getattr(vllm_config, "device_config", None), "device_type", "cpu")
        self.lookahead = Lookahead("cuda" if device == "cuda" else "cpu", max_window=self.max_draft)
        max_num_seqs = getattr(getattr(vllm_config, "scheduler_config", None), "max_num_seqs", 0) or 0
        self.capacity = max(MIN_REMEMBERED, 2 * max_num_seqs)
        self._requests: OrderedDict[int, _Request] = OrderedDict()
        self._count = 0
        self._rows: dict[int, _Request] = {}  # row -> request, as of the last call
        self._last_step: tuple[float, _Request, int, int] | None = None  # a lone request's last pass and its context

    def load_model(self, *args, **kwargs) -> None:
        """vLLM hands a drafter the target model; this one needs none."""

    def propose(self, sampled_token_ids: Sequence[Sequence[int]], num_tokens_no_spec: Any,
                token_ids_cpu: Any, slot_mappings: Any = None) -> list[list[int]]:
        """Draft tokens for each row (an empty list: no draft this step)."""
        now = time.perf_counter()
        drafts: list[list[int]] = []
        rows: dict[int, _Request] = {}
        for i, sampled in enumerate(sampled_token_ids):
            length = int(num_tokens_no_spec[i])
            if not len(sampled) or length >= self.max_model_len:
                drafts.append([])  # a prefill still running, or a request at the end of its context
                continue
            row = token_ids_cpu[i][:length]
            request = self._request(i, row, len(sampled))
            if request.draft is not None:  # the last step's draft: all sampled tokens but one were it
                request.drafter.feedback(request.draft, min(len(sampled) - 1, len(request.draft.tokens)))
            room = min(self.max_draft, self.max_model_len - length)
            draft = request.drafter.propose(_ints(row), request.prompt_length, room)
            request.draft = self.lookahead.fit(draft, room, length)
            request.length = length
            rows[i] = request
            drafts.append(list(request.draft.tokens) if request.draft else [])
        self._learn_pass_cost(now, rows)
        self._rows = rows
        return drafts

    def _request(self, row_index: int, row: Any, sampled: int) -> _Request:
        """The request whose tokens fill this row: the one seen here last step, one that moved
        here, or a new one."""
        length = len(row)
        previous = self._rows.get(row_index)
        for request in chain([previous] if previous else [], reversed(self._requests.values())):
            if (request.length + sampled == length and request.prompt_length < length
                    and _fingerprint(row[:request.prompt_length]) == request.fingerprint):
                self._requests.pop(request.number, None)
                self._requests[request.number] = request  # the most recently seen now
                return request
        prompt = row[: length - sampled]
        prediction = self.prediction(_ints(prompt))
        self._count += 1
        request = _Request(self._count, len(prompt), _fingerprint(prompt),
                           rewrite_drafter(prediction) if prediction else PromptLookupDrafter(), length)
        self._requests[request.number] = request
        while len(self._requests) > self.capacity:
            self._requests.popitem(last=False)
        return request

    def prediction(self, prompt: list[int]) -> list[int] | None:
        """The answer predicted for this prompt: its last fenced code block, ending the turn."""
        block = last_code_block(self.tokenizer.decode(prompt, skip_special_tokens=True))
        return prediction_ids(self.tokenizer, block) if block is not None else None

    def _learn_pass_cost(self, now: float, rows: dict[int, _Request]) -> None:
        """With one request running, the time from one call to the next is one verification pass
        over its last draft and the token before it: what Lookahead weighs a window by."""
        if self._last_step is not None and len(rows) == 1:
            then, request, pass_tokens, context = self._last_step
            if next(iter(rows.values())) is request:
                self.lookahead.record(pass_tokens, now - then, context)
        self._last_step = None
        if len(rows) == 1:
            request = next(iter(rows.values()))
            self._last_step = (now, request, 1 + (len(request.draft.tokens) if request.draft else 0), request.length)
