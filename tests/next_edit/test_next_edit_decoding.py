"""A next-edit prompt decoded on a tiny random model (Rewriter.complete): the answer is plain greedy
decoding of the prompt whatever the prediction, a stop gives way within the prompt's pass and
leaves nothing behind, and the stable part computed ahead changes no token."""
from __future__ import annotations

from dataclasses import replace

import pytest

from rewriter.decoding.rendered import prompt_ids, stable_ids
from rewriter.decoding.rewrite import Rewriter
from rewriter.next_edit.base import NextEditInput
from rewriter.next_edit.formats.instruct import InstructFormat
from rewriter.passes import PROMPT_CHUNK
from tests.helpers.engines import untimed_lookahead
from tests.helpers.models import greedy_reference

DOC = "".join(f"def step_{n}(value):\n    return value * {n}\n\n\n" for n in range(30))


@pytest.fixture(scope="module")
def rewriter(tiny_loaded):
    return Rewriter(tiny_loaded, prefix_cache=True)


def prompt_of(cursor_line: int = 40, above: int = 20):
    request = NextEditInput("steps.py", "python", DOC, (cursor_line - 8, cursor_line + 12), (cursor_line, 4))
    return InstructFormat(context_above=above).render(request)


def greedy_text(rewriter, prompt, tokens: int) -> str:
    reference = greedy_reference(rewriter.loaded.model, prompt_ids(rewriter, prompt), tokens)
    return rewriter.tokenizer.decode(reference, skip_special_tokens=True)


def test_the_answer_is_plain_greedy_whatever_the_prediction(rewriter):
    prompt = prompt_of()
    done = rewriter.complete_prompt(prompt, max_new_tokens=24)
    assert not done.stopped and done.stats.output_tokens == 24 and done.stats.finish_reason == "length"
    assert done.text == greedy_text(rewriter, prompt, 24)
    # A prediction that is the greedy answer itself is accepted many tokens a pass: the same text.
    with untimed_lookahead(rewriter.decoder):
        right = rewriter.complete_prompt(replace(prompt, prediction=done.text), max_new_tokens=24)
    assert right.text == done.text and right.stats.forward_passes < 24 / 2


def test_a_stop_gives_way_within_the_prompts_pass_and_keeps_nothing(tiny_loaded):
    # A prefix cache of its own: what the module's other prompts left would share their start.
    rewriter = Rewriter(tiny_loaded, prefix_cache=True)
    prompt = prompt_of(60)
    passes = []
    hook = rewriter.loaded.model.register_forward_pre_hook(lambda module, args: passes.append(1))
    asked = []
    try:
        stopped = rewriter.complete_prompt(prompt, max_new_tokens=16, stopped=lambda: len(asked.append(1) or asked) > 3)
    finally:
        hook.remove()
    assert stopped.stopped and stopped.stats.output_tokens == 0 and len(passes) <= 1
    again = rewriter.complete_prompt(prompt, max_new_tokens=16)
    assert again.stats.cached_prompt_tokens == 0  # nothing of the abandoned pass was kept
    assert again.text == greedy_text(rewriter, prompt, 16)


def test_the_stable_part_computed_ahead_is_reused_and_changes_no_token(rewriter):
    prompt = prompt_of(80, above=40)
    stable = stable_ids(rewriter, prompt, prompt_ids(rewriter, prompt))
    assert 300 < len(stable) < len(prompt_ids(rewriter, prompt)) - 50
    assert rewriter.prefill_prompt(prompt) == len(stable)
    warm = rewriter.complete_prompt(prompt, max_new_tokens=16)
    # The int8 paths' chunked prompts reuse whole chunks (passes.PROMPT_CHUNK) of the stable part.
    assert warm.stats.cached_prompt_tokens >= PROMPT_CHUNK
    assert warm.text == greedy_text(rewriter, prompt, 16)
