"""A rendered prompt (chat messages or raw text) decoded greedily with its prediction as the draft:
a next-edit suggestion's request (rewriter/next_edit/). The tokens are plain greedy decoding's of
the prompt; the prediction only decides how many are verified a pass.

It gives way to the caller within a pass: `stopped` is asked before every module of the prompt's
pass and between the decoding passes, and an answer given up leaves nothing in the prefix cache.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Protocol

from drafters import Drafter

from ..answer import closing_fence_end
from ..prompt import prediction_ids
from ..results import Completion, ContextTooLarge, RewriteError, Stats
from .completion import stop_once, stop_strings
from .decode import Decoder, StopCheck
from .preempt import Preempted, preemptible

if TYPE_CHECKING:
    from ..next_edit.base import NextEditPrompt

# The answer's budget past its prediction: a next edit rewrites a window and adds a few lines at
# most; an answer that runs on further is no next edit, and stopping it costs no suggestion.
GROWTH = 128


class Rewriter(Protocol):
    """What of the local model's Rewriter (decoding/rewrite.py, which calls this module) is used here."""

    tokenizer: Any
    loaded: Any
    decoder: Decoder

    def encode_messages(self, messages: list[dict]) -> list[int]: ...

    def drafter(self, prediction: list[int]) -> Drafter: ...


def prompt_ids(rewriter: Rewriter, prompt: NextEditPrompt) -> list[int]:
    if prompt.messages is not None:
        return rewriter.encode_messages(list(prompt.messages))
    if prompt.raw is None:
        raise RewriteError("the prompt has neither messages nor raw text")
    return list(rewriter.tokenizer.encode(prompt.raw, add_special_tokens=False))


def stable_ids(rewriter: Rewriter, prompt: NextEditPrompt, ids: Sequence[int]) -> list[int]:
    """The prompt's tokens up to its stable part's end (NextEditPrompt.stable_chars): those its
    text up to there tokenizes to, as far as they agree with the whole prompt's."""
    if prompt.stable_chars is None:
        return []
    if prompt.messages is not None:
        text = str(rewriter.tokenizer.apply_chat_template(list(prompt.messages), add_generation_prompt=True,
                                                         tokenize=False))
        at = text.rfind(prompt.messages[-1]["content"])
        if at < 0:  # a template that rewrites the message
            return []
        head = text[:at + prompt.stable_chars]
    else:
        assert prompt.raw is not None
        head = prompt.raw[:prompt.stable_chars]
    head_ids = rewriter.tokenizer.encode(head, add_special_tokens=False)
    shared = 0
    while shared < min(len(ids), len(head_ids)) and ids[shared] == head_ids[shared]:
        shared += 1
    return list(ids[:shared])


def stop_check(tokenizer, prompt: NextEditPrompt) -> StopCheck | None:
    """Chat: the answer's closing fence; raw: the prompt's stop strings (none: the end of text)."""
    if prompt.messages is not None:
        return stop_once(lambda output: closing_fence_end(tokenizer.decode(output, skip_special_tokens=True))
                         is not None)
    return stop_strings(tokenizer, prompt.stop) if prompt.stop else None


def complete(rewriter: Rewriter, prompt: NextEditPrompt, max_new_tokens: int | None = None,
             stopped: Callable[[], bool] = lambda: False) -> Completion:
    """The greedy answer to `prompt`, drafted from its prediction; given up (Completion.stopped)
    soon after `stopped()` says so. ContextTooLarge when prompt and answer do not fit."""
    ids = prompt_ids(rewriter, prompt)
    prediction = prediction_ids(rewriter.tokenizer, prompt.prediction)
    room = rewriter.loaded.context_length - len(ids)
    if room < len(prediction) + 16:
        raise ContextTooLarge(f"the prompt takes {len(ids)} tokens and its answer about {len(prediction)}, "
                              f"more than the model's {rewriter.loaded.context_length}")
    budget = min(max_new_tokens or len(prediction) + GROWTH, room)
    decoder = rewriter.decoder
    model = getattr(decoder, "model", None)
    static = getattr(decoder, "static", None) is not None  # its passes are checked between passes only
    # Only the prompt's pass is watched module by module: the decoding passes are short, and the
    # lean pass's first check (decoding/forward.py) must never be cut short.
    watch = preemptible(model, stopped) if model is not None and not static else nullcontext()
    steps = decoder.generate(ids, rewriter.drafter(prediction), budget, stop_check(rewriter.tokenizer, prompt))
    text, stats = "", Stats()
    try:
        with watch:
            step = next(steps)
        while True:
            text, stats = text + step.text, step.stats
            if step.done:
                return Completion(text, stats)
            if stopped():
                return Completion(text, stats, stopped=True)
            step = next(steps)
    except Preempted:
        return Completion(text, stats, stopped=True)
    finally:
        getattr(steps, "close", lambda: None)()  # a generator: decoding stops at once


def prefill_stable(rewriter: Rewriter, prompt: NextEditPrompt, stopped: Callable[[], bool] = lambda: False) -> int:
    """Compute ahead the prompt's stable part (Decoder.prefill); how many of its tokens are kept."""
    if rewriter.decoder.prefix_cache is None:
        return 0
    head = stable_ids(rewriter, prompt, prompt_ids(rewriter, prompt))
    return rewriter.decoder.prefill(head, stopped=stopped) if head else 0
