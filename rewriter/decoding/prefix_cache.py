"""The KV caches of recent requests, kept so that a request sharing a prefix with one of them
prefills only the rest, within a memory budget."""
from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from ..engine import PREFIX_CACHE_MB
from ..passes import PROMPT_CHUNK, WIDEST_DECODING_PASS
from .static import StaticCache

log = logging.getLogger(__name__)

# The KV cache a request extends: transformers' own, or the static path's preallocated one.
Cache = DynamicCache | StaticCache

PREFIX_CACHE_BYTES = PREFIX_CACHE_MB << 20


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
        """`rows_independent`: every row of a pass gets the bits it has alone (passes.
        has_row_independent_prompts), so any shared prefix computes as a cold prefill would."""
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
        whose tokens it extends (the same request's prompt, kept at its prefill; a prefix computed
        ahead) and a static cache, which is the decoder's one buffer; a kept cache that holds all of
        it, computed the same way, stays instead."""
        tokens = list(tokens)
        holder = self._holder(tokens, narrow_from)
        if holder is not None and not isinstance(holder.cache, StaticCache):
            self.kept.remove(holder)
            self.kept.append(holder)
            return
        self.kept = [kept for kept in self.kept if not (
            isinstance(kept.cache, StaticCache) or _starts(kept.tokens, tokens))]
        self.kept.append(_Kept(tokens, narrow_from, _share(cache)))
        held = [cache_bytes(kept.cache) for kept in self.kept]
        while len(self.kept) > 1 and sum(held) > self.budget:
            dropped = self.kept.pop(0)
            log.info("prefix cache: dropped the least recently used cache, %d tokens (%.1f MB), to stay within "
                     "%.0f MB", len(dropped.tokens), held.pop(0) / 2**20, self.budget / 2**20)

    def holds(self, tokens: Sequence[int], narrow_from: int) -> bool:
        """Whether a kept cache holds all of `tokens`, computed as a prompt narrow from `narrow_from` is."""
        return self._holder(list(tokens), narrow_from) is not None

    def _holder(self, tokens: list[int], narrow_from: int) -> _Kept | None:
        return next((kept for kept in self.kept if _starts(tokens, kept.tokens) and (
            self.rows_independent or kept.narrow_from == narrow_from)), None)


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
