"""The speculative decoding loop: draft, verify in one forward pass, keep what matches.

One step feeds the last token plus a draft through the model with the KV cache, lets the
verifier accept a prefix of the draft and add the model's own next token, and drops the
rejected tail from the cache. With the greedy verifier the tokens are exactly those of plain
greedy decoding; only the number of forward passes changes.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from transformers import DynamicCache

from drafters.base import Draft, Drafter

from ..lookahead import Lookahead
from ..passes import PassCosts, decoding_passes, has_int8_attention, has_row_independent_prompts, prompt_passes
from ..results import Stats
from ..vector_math import settle_vector_math
from .forward import LeanPass
from .preempt import Preempted, preemptible, roll_back
from .prefix_cache import PREFIX_CACHE_BYTES, Cache, PrefixCache
from .static import StaticCache, StaticPass
from .verify import GreedyVerifier, Verifier

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)

# Returns the number of output tokens to keep once the output is complete, else None. It may
# keep fewer than earlier steps yielded (an echo of the file is dropped): Stats.output_tokens
# counts the kept ones.
StopCheck = Callable[[list[int]], "int | None"]


@dataclass
class Step:
    """What one decoding step added: its tokens, the text they settle, the running stats."""

    tokens: list[int]
    text: str
    stats: Stats
    done: bool = False


class Decoder:
    """Decodes one request at a time with one model (not thread-safe: callers serialise)."""

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, verifier: Verifier | None = None,
                 lookahead: Lookahead | None = None, prefix_cache: bool = False,
                 pass_costs: PassCosts | None = None, static: bool | None = None,
                 prefix_cache_bytes: int = PREFIX_CACHE_BYTES):
        """`pass_costs`: what the weights say a pass costs (LoadedModel.pass_costs()), the window
        policy's start; None: the device's default shape. Ignored when `lookahead` is given.
        `static`: decode through fixed-shape passes on a preallocated cache (static.py), captured
        as CUDA graphs on a GPU; default: on a CUDA device, for a batch-invariant model.
        `prefix_cache_bytes`: what the prefix caches kept may hold at once."""
        settle_vector_math()  # a model not made by load_model: its first pass must not race either
        self.model = model
        self.tokenizer = tokenizer
        self.verifier = verifier or GreedyVerifier()
        self.device = next(model.parameters()).device
        # One window policy per decoder: what passes cost on this device carries across requests.
        self.lookahead = lookahead or Lookahead(self.device.type, prior=pass_costs)
        eos = model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if tokenizer.eos_token_id is not None:
            eos_ids.add(tokenizer.eos_token_id)
        self.eos_ids = frozenset(eos_ids)
        self.lean = LeanPass.for_model(model)  # decoding passes without transformers' overhead, where it applies
        if static is None:
            static = self.device.type == "cuda"
        self.static = StaticPass.for_model(model) if static else None
        self.prefix_cache = (PrefixCache(has_row_independent_prompts(model), prefix_cache_bytes)
                             if prefix_cache else None)
        # The int8 paths compute a prompt the same in chunks as in one pass; other paths feed it whole.
        self.prompt_in_chunks = has_int8_attention(model)

    @torch.inference_mode()
    def _forward(self, tokens: Sequence[int], cache: Cache, last_only: bool = False) -> torch.Tensor:
        if isinstance(cache, StaticCache):
            assert self.static is not None  # it made the cache
            return self.static(list(tokens), cache, last_only)
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
        if self.lean is not None and not last_only:
            logits = self.lean(ids, cache)
            if logits is not None:
                return logits[0].float()
        out = self.model(input_ids=ids, cache=cache, use_cache=True,
                         logits_to_keep=1 if last_only else 0)
        return out.logits[0].float()

    def _prefill(self, prompt: Sequence[int], stats: Stats, bound: int,
                 room: int = 0) -> tuple[Cache, torch.Tensor]:
        """The prompt's cache and last logits; its positions from `bound` on as decoding passes.
        `room`: how many tokens the cache must take after the prompt."""
        cache, reused = self._start_cache(prompt, bound, len(prompt) + room)
        for begin, end in self._passes(reused, bound, len(prompt)):
            logits = self._forward(prompt[begin:end], cache, last_only=True)[-1]
        if self.prefix_cache:
            self.prefix_cache.store(prompt, cache, bound)
        stats.cached_prompt_tokens = reused
        return cache, logits

    def _start_cache(self, prompt: Sequence[int], bound: int, capacity: int) -> tuple[Cache, int]:
        """A cache for `prompt` holding what the prefix cache has of it, and how many tokens that is."""
        cache, reused = self.prefix_cache.take(prompt, bound) if self.prefix_cache else (None, 0)
        if self.static is not None and not self.static.confirmed():
            self.static = None  # it said why
            cache, reused = None, 0
        if self.static is not None:
            cache = self.static.fresh(capacity, keep=reused)
        return cache or DynamicCache(config=self.model.config), reused

    def _passes(self, start: int, bound: int, end: int) -> list[tuple[int, int]]:
        """The passes that feed a prompt's positions start..end, those from `bound` on as decoding passes."""
        if not self.prompt_in_chunks:
            return [(start, end)] if start < end else []  # all of it held already: no pass
        passes = prompt_passes(start, min(bound, end)) if start < min(bound, end) else []
        return passes + decoding_passes(max(start, bound), end)

    @torch.inference_mode()
    def prefill(self, prompt: Sequence[int], narrow_from: int | None = None,
                stopped: Callable[[], bool] = lambda: False) -> int:
        """Compute the cache of `prompt`, the start of requests to come, as `generate` would with
        the same `narrow_from`, and keep it in the prefix cache; what was kept before is reused.

        `stopped` is asked before every pass and, on the dynamic path, before every module of a
        pass: once it is true the work stops within a fraction of a pass, the passes done are
        kept and the abandoned one is dropped. Returns how many of the tokens are now kept.
        """
        if self.prefix_cache is None:
            raise ValueError("prefill needs a decoder that keeps prefix caches")
        prompt = list(prompt)
        bound = len(prompt) if narrow_from is None else narrow_from
        if not prompt or self.prefix_cache.holds(prompt, bound):
            return len(prompt)
        # take() leaves a prompt's last token to be fed: a cache of all of it would be taken whole.
        cache, reused = self._start_cache(prompt + [prompt[-1]], bound, len(prompt))
        done = reused
        try:
            with preemptible(self.model, stopped) if isinstance(cache, DynamicCache) else nullcontext():
                for begin, end in self._passes(reused, bound, len(prompt)):
                    if stopped():
                        break
                    self._forward(prompt[begin:end], cache, last_only=True)
                    done = end
        except Preempted:
            roll_back(cache, done)
        if done > reused:
            self.prefix_cache.store(prompt[:done], cache, bound)
        return done

    def generate(self, prompt: Sequence[int], drafter: Drafter | None, max_new_tokens: int,
                 stop: StopCheck | None = None, verifier: Verifier | None = None,
                 narrow_from: int | None = None, forced: Sequence[int] = ()) -> Iterator[Step]:
        """Decode after `prompt`, yielding a Step each time tokens are accepted.

        `verifier` overrides the decoder's own for this request (e.g. one seeded sampler).
        `forced`: the output's first tokens, given instead of chosen (a branch of an earlier
        answer); what follows them is decoded as after a prompt that ends with them.
        `narrow_from`: the prompt's positions from here on are computed as decoding passes, as a
        chat that keeps its cache computed an earlier answer (a conversation's next turn), so the
        cache of that answer's decoding is what a cold prefill computes too. Default: none of them.
        """
        _check_request(prompt, max_new_tokens)
        verifier = verifier or self.verifier
        start = time.perf_counter()
        stats = Stats(prompt_tokens=len(prompt))
        prompt = list(prompt)
        bound = len(prompt) if narrow_from is None else narrow_from
        if len(forced) > max_new_tokens:
            raise ValueError("more forced tokens than max_new_tokens")
        # The cache takes the forced tokens but the last, which the first pass feeds as it does a chosen one.
        cache, first = self._first_token(prompt + list(forced[:-1]), bound, max_new_tokens, verifier, stats, start)
        output: list[int] = []
        pending = list(forced) or [first]
        source = None  # the drafter of the tokens in `pending`
        text = _Detokenizer(self.tokenizer)
        while True:
            before = len(output)
            output.extend(pending)
            keep = self._finish(output, before, max_new_tokens, stop, stats)
            if keep is not None:
                _drop_past_end(output, keep, source, stats)
            stats.output_tokens = len(output)
            stats.total_s = time.perf_counter() - start
            if keep is not None:
                self._keep_answer(prompt, output, cache, bound)
            yield Step(tokens=output[before:], text=text.settle(output, final=keep is not None),
                       stats=stats, done=keep is not None)
            if keep is not None:
                return
            pending, source = self._decoding_pass(prompt, output, cache, drafter, verifier, max_new_tokens, stats)

    def _first_token(self, prompt: list[int], bound: int, max_new_tokens: int, verifier: Verifier, stats: Stats,
                     start: float) -> tuple[Cache, int]:
        """The prompt's cache and the token after it; the prefill counts as the first pass."""
        cache, logits = self._prefill(prompt, stats, bound, max_new_tokens)
        first = verifier.first_token(logits)
        stats.forward_passes = 1
        stats.prefill_s = stats.ttft_s = time.perf_counter() - start
        return cache, first

    def _keep_answer(self, prompt: list[int], output: list[int], cache: Cache, bound: int) -> None:
        """Keep the finished answer's cache: the next turn of a conversation reuses the answer too."""
        if not self.prefix_cache:
            return
        held = min(cache.get_seq_length(), len(prompt) + len(output))
        if cache.get_seq_length() > held:  # a stop kept fewer tokens than were fed
            cache.crop(held - cache.get_seq_length())
        self.prefix_cache.store((prompt + output)[:held], cache, bound)

    def _decoding_pass(self, prompt: list[int], output: list[int], cache: Cache, drafter: Drafter | None,
                       verifier: Verifier, max_new_tokens: int, stats: Stats) -> tuple[list[int], str | None]:
        """One forward pass over the last token and a draft: the tokens it settles, and who drafted them."""
        room = max_new_tokens - len(output) - 1  # the pass's own next token takes one
        draft = drafter.propose(prompt + output, len(prompt), room) if drafter and room > 0 else None
        context = len(prompt) + len(output)
        draft = self.lookahead.fit(draft, room, context)
        drafted = draft.tokens if draft else []
        pass_start = time.perf_counter()
        logits = self._forward([output[-1]] + drafted, cache)
        if draft is None:
            accepted, following = 0, verifier.first_token(logits[-1])
        else:
            accepted, following = verifier.verify(logits, draft)
            assert drafter is not None  # it made the draft
            drafter.feedback(draft, accepted)
        rejected = len(drafted) - accepted
        if rejected:
            cache.crop(-rejected)
        self.lookahead.record(len(drafted) + 1, time.perf_counter() - pass_start, context)
        _count_pass(stats, draft, accepted, rejected)
        return drafted[:accepted] + [following], (draft.source if draft else None)

    def _finish(self, output: list[int], checked: int, max_new_tokens: int,
                stop: StopCheck | None, stats: Stats) -> int | None:
        """How many output tokens to keep if decoding is over, else None."""
        for i in range(checked, len(output)):
            if output[i] in self.eos_ids:
                stats.finish_reason = "stop"
                return min(i + 1, max_new_tokens)
        if stop is not None:
            keep = stop(output)
            if keep is not None:
                stats.finish_reason = "stop"
                return keep
        if len(output) >= max_new_tokens:
            stats.finish_reason = "length"
            return max_new_tokens
        return None


def _check_request(prompt: Sequence[int], max_new_tokens: int) -> None:
    """Refuse a request that cannot be decoded."""
    if not prompt:
        raise ValueError("the prompt is empty")
    if max_new_tokens < 1:
        raise ValueError("max_new_tokens must be at least 1")


def _drop_past_end(output: list[int], keep: int, source: str | None, stats: Stats) -> None:
    """Cut `output` to its first `keep` tokens."""
    # Accepted draft tokens past the end were never used: do not count them.
    unused = max(0, len(output) - keep - 1)
    stats.accepted_draft_tokens -= unused
    if source == "prediction":
        stats.accepted_prediction_tokens -= unused
    del output[keep:]


def _count_pass(stats: Stats, draft: Draft | None, accepted: int, rejected: int) -> None:
    """Add one decoding pass and what it made of its draft to `stats`."""
    stats.forward_passes += 1
    stats.accepted_draft_tokens += accepted
    stats.rejected_draft_tokens += rejected
    if draft is not None and draft.source == "prediction":
        stats.accepted_prediction_tokens += accepted
        stats.rejected_prediction_tokens += rejected


class _Detokenizer:
    """Turns the growing output into text increments, holding back incomplete characters."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.sent = 0

    def settle(self, output: list[int], final: bool = False) -> str:
        text = self.tokenizer.decode(output, skip_special_tokens=True)
        if not final:
            text = text.rstrip("\ufffd")
        piece = text[self.sent:]
        self.sent = max(self.sent, len(text))
        return piece
