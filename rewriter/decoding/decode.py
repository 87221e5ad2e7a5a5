"""The speculative decoding loop: draft, verify in one forward pass, keep what matches.

One step feeds the last token plus a draft through the model with the KV cache, lets the
verifier accept a prefix of the draft and add the model's own next token, and drops the
rejected tail from the cache. With the greedy verifier the tokens are exactly those of plain
greedy decoding; only the number of forward passes changes.
"""
from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from transformers import DynamicCache

from drafters.base import Drafter

from ..lookahead import Lookahead
from ..passes import (
    PROMPT_CHUNK,
    WIDEST_DECODING_PASS,
    PassCosts,
    decoding_passes,
    has_int8_attention,
    is_batch_invariant,
    prompt_passes,
)
from ..results import Stats
from .forward import LeanPass
from .static import StaticCache, StaticPass
from .verify import GreedyVerifier, Verifier

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)

# The KV cache a request extends: transformers' own, or the static path's preallocated one.
Cache = DynamicCache | StaticCache
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


# What the prefix caches kept may hold at once: about four 2,000-token files of the 1.5B model
# (its float32 keys and values take 57 KB a token), which a laptop with 8 GB can spare.
PREFIX_CACHE_BYTES = 512 << 20


@dataclass
class _Kept:
    """One request's cache: its prompt and what of its answer was fed (`tokens`), the prompt's
    positions from `narrow_from` on computed as decoding passes."""

    tokens: list[int]
    narrow_from: int
    cache: Cache


class PrefixCache:
    """The KV caches of recent requests, their prompts and answers, so that a request sharing a
    prefix with one of them prefills only the rest.

    Repeated requests on one file (a user trying instructions one after another) share the
    system message and the code, which the prompt puts before the instruction; a conversation's
    next turn (a refine) shares the whole earlier turn, its answer included; requests on several
    files in turn (an editor's open files, a service's clients) each find their own. What is kept
    stays within `budget` bytes: the least recently used cache goes first, and the log says so.
    """

    def __init__(self, rows_independent: bool = False, budget: int = PREFIX_CACHE_BYTES):
        """`rows_independent`: every row of a pass gets the bits it has alone (a batch-invariant
        model), so any shared prefix computes as a cold prefill would."""
        self.kept: list[_Kept] = []  # least recently used first
        self.rows_independent = rows_independent
        self.budget = budget

    def take(self, prompt: Sequence[int], narrow_from: int | None = None) -> tuple[Cache | None, int]:
        """A private copy of the kept cache with the longest shared prefix that a cold prefill
        would compute the same way (Decoder._prefill), and that prefix's length.

        A prompt's positions before `narrow_from` (default: all of them) are computed in chunks
        when wider than any decoding pass (passes.PROMPT_CHUNK), the rest as decoding passes, each
        row alone. A prompt that starts with a kept one's prompt part, at the same bound, reuses
        all it shares, answer included; otherwise only whole chunks of both prompt parts are
        reused, and the rest of a wide part stays wide; a narrow prompt part reuses only a narrow one.
        """
        bound = len(prompt) if narrow_from is None else narrow_from
        best, shared = None, 0
        for kept in reversed(self.kept):  # the most recently used first: it wins a tie
            reusable = self._reusable(kept, prompt, bound)
            if reusable > shared:
                best, shared = kept, reusable
        if best is None:
            return None, 0
        self.kept.remove(best)
        self.kept.append(best)
        if isinstance(best.cache, StaticCache):
            # One buffer, which this request writes past `shared`: what lies there is no longer kept.
            del best.tokens[shared:]
        cache = _share(best.cache)
        if len(best.tokens) > shared:
            cache.crop(shared - len(best.tokens))
        return cache, shared

    def _reusable(self, kept: _Kept, prompt: Sequence[int], bound: int) -> int:
        """How much of `kept` a prompt with this bound can reuse (see take)."""
        shared = 0
        limit = min(len(prompt) - 1, len(kept.tokens))  # the last prompt token must be fed for its logits
        while shared < limit and prompt[shared] == kept.tokens[shared]:
            shared += 1
        if not (self.rows_independent or (bound == kept.narrow_from and shared >= bound)):
            wide = bound > WIDEST_DECODING_PASS
            if wide != (kept.narrow_from > WIDEST_DECODING_PASS):
                return 0
            shared = min(shared, bound, kept.narrow_from)
            if wide:
                shared = min(shared, bound - WIDEST_DECODING_PASS - 1) // PROMPT_CHUNK * PROMPT_CHUNK
        return max(shared, 0)

    def store(self, tokens: Sequence[int], cache: Cache, narrow_from: int) -> None:
        """Keep `cache`, which holds `tokens`: a prompt whose positions from `narrow_from` on
        were computed as decoding passes, and what of its answer was fed. It replaces a kept cache
        whose tokens it extends or starts (the same request's prompt, kept at its prefill; the same
        prompt again), and a static cache, which is the decoder's one buffer."""
        tokens = list(tokens)
        self.kept = [kept for kept in self.kept if not (
            isinstance(kept.cache, StaticCache) or _starts(kept.tokens, tokens) or _starts(tokens, kept.tokens))]
        self.kept.append(_Kept(tokens, narrow_from, _share(cache)))
        held = [cache_bytes(kept.cache) for kept in self.kept]
        while len(self.kept) > 1 and sum(held) > self.budget:
            dropped = self.kept.pop(0)
            log.info("prefix cache: dropped the least recently used cache, %d tokens (%.1f MB), to stay within "
                     "%.0f MB", len(dropped.tokens), held.pop(0) / 2**20, self.budget / 2**20)


def _starts(prefix: list[int], tokens: list[int]) -> bool:
    return len(prefix) <= len(tokens) and tokens[:len(prefix)] == prefix


def cache_bytes(cache: Cache) -> int:
    """The memory a kept cache holds on to (a static cache is its decoder's either way)."""
    if isinstance(cache, StaticCache):
        return 0
    storages = {}
    for layer in cache.layers:
        for tensor in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(tensor, torch.Tensor):
                storage = tensor.untyped_storage()
                storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


def _share(cache: Cache) -> Cache:
    """A cache that shares the tensors of `cache` without copying them.

    Cache layers never write into their tensors: appending concatenates into new ones and
    cropping takes a view, so the stored prefix stays intact while a request extends its copy.
    A StaticCache is its decoder's one buffer, written in place: it is itself.
    """
    if isinstance(cache, StaticCache):
        return cache
    shared = copy.copy(cache)
    shared.layers = [copy.copy(layer) for layer in cache.layers]
    return shared


class Decoder:
    """Decodes one request at a time with one model (not thread-safe: callers serialise)."""

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, verifier: Verifier | None = None,
                 lookahead: Lookahead | None = None, prefix_cache: bool = False,
                 pass_costs: PassCosts | None = None, static: bool | None = None):
        """`pass_costs`: what the weights say a pass costs (LoadedModel.pass_costs()), the window
        policy's start; None: the device's default shape. Ignored when `lookahead` is given.
        `static`: decode through fixed-shape passes on a preallocated cache (static.py), captured
        as CUDA graphs on a GPU; default: on a CUDA device, for a batch-invariant model."""
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
        self.prefix_cache = PrefixCache(is_batch_invariant(model)) if prefix_cache else None
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
        cache, reused = self.prefix_cache.take(prompt, bound) if self.prefix_cache else (None, 0)
        if self.static is not None and not self.static.confirmed():
            self.static = None  # it said why
            cache, reused = None, 0
        if self.static is not None:
            cache = self.static.fresh(len(prompt) + room, keep=reused)
        cache = cache or DynamicCache(config=self.model.config)
        if self.prompt_in_chunks:
            passes = prompt_passes(reused, bound) if reused < bound else []
            passes += decoding_passes(max(reused, bound), len(prompt))
        else:
            passes = [(reused, len(prompt))]
        for begin, end in passes:
            logits = self._forward(prompt[begin:end], cache, last_only=True)[-1]
        if self.prefix_cache:
            self.prefix_cache.store(prompt, cache, bound)
        stats.cached_prompt_tokens = reused
        return cache, logits

    def generate(self, prompt: Sequence[int], drafter: Drafter | None, max_new_tokens: int,
                 stop: StopCheck | None = None, verifier: Verifier | None = None,
                 narrow_from: int | None = None) -> Iterator[Step]:
        """Decode after `prompt`, yielding a Step each time tokens are accepted.

        `verifier` overrides the decoder's own for this request (e.g. one seeded sampler).
        `narrow_from`: the prompt's positions from here on are computed as decoding passes, as a
        chat that keeps its cache computed an earlier answer (a conversation's next turn), so the
        cache of that answer's decoding is what a cold prefill computes too. Default: none of them.
        """
        if not prompt:
            raise ValueError("the prompt is empty")
        if max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        verifier = verifier or self.verifier
        start = time.perf_counter()
        stats = Stats(prompt_tokens=len(prompt))
        prompt = list(prompt)
        bound = len(prompt) if narrow_from is None else narrow_from
        cache, logits = self._prefill(prompt, stats, bound, max_new_tokens)
        first = verifier.first_token(logits)
        stats.forward_passes = 1
        stats.prefill_s = stats.ttft_s = time.perf_counter() - start
        output: list[int] = []
        pending = [first]
        source = None  # the drafter of the tokens in `pending`
        text = _Detokenizer(self.tokenizer)
        while True:
            before = len(output)
            output.extend(pending)
            keep = self._finish(output, before, max_new_tokens, stop, stats)
            if keep is not None:
                # Accepted draft tokens past the end were never used: do not count them.
                unused = max(0, len(output) - keep - 1)
                stats.accepted_draft_tokens -= unused
                if source == "prediction":
                    stats.accepted_prediction_tokens -= unused
                del output[keep:]
            stats.output_tokens = len(output)
            stats.total_s = time.perf_counter() - start
            if keep is not None and self.prefix_cache:  # the next turn of a conversation reuses the answer too
                held = min(cache.get_seq_length(), len(prompt) + len(output))
                if cache.get_seq_length() > held:  # a stop kept fewer tokens than were fed
                    cache.crop(held - cache.get_seq_length())
                self.prefix_cache.store((prompt + output)[:held], cache, bound)
            yield Step(tokens=output[before:], text=text.settle(output, final=keep is not None),
                       stats=stats, done=keep is not None)
            if keep is not None:
                return

            room = max_new_tokens - len(output) - 1  # the step's own next token takes one
            draft = drafter.propose(prompt + output, len(prompt), room) if drafter and room > 0 else None
            context = len(prompt) + len(output)
            draft = self.lookahead.fit(draft, room, context)
            drafted = draft.tokens if draft else []
            step_start = time.perf_counter()
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
            self.lookahead.record(len(drafted) + 1, time.perf_counter() - step_start, context)
            stats.forward_passes += 1
            stats.accepted_draft_tokens += accepted
            stats.rejected_draft_tokens += rejected
            if draft is not None and draft.source == "prediction":
                stats.accepted_prediction_tokens += accepted
                stats.rejected_prediction_tokens += rejected
            pending = drafted[:accepted] + [following]
            source = draft.source if draft else None

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
