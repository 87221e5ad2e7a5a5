"""The embedded model on small functions of a file (issue 17): the prefilled answer is plain greedy
decoding of the prompt that holds the prefill, and the echo stop only ends it early."""
import pytest
import torch

from rewriter.answer import echo_scan
from rewriter.edits.pipeline import reindent
from rewriter.prompt import build_prompt, common_indent

pytestmark = pytest.mark.real_model

MODULE = '''"""Runs of integers packed into single integers, and lookups in them."""

import bisect


def pack_runs(values: list[int]) -> tuple[int, ...]:
    """Pack sorted runs of consecutive integers as (start << 32 | end)."""
    ordered = sorted(values)
    runs = []
    first = 0
    for i in range(len(ordered)):
        if i + 1 < len(ordered) and ordered[i] + 1 == ordered[i + 1]:
            continue
        runs.append(_pack(ordered[first], ordered[i] + 1))
        first = i + 1
    return tuple(runs)


def _pack(start: int, end: int) -> int:
    return (start << 32) | end


def _unpack(packed: int) -> tuple[int, int]:
    return packed >> 32, packed & ((1 << 32) - 1)


def contains(value: int, runs: tuple[int, ...]) -> bool:
    """Whether value lies in one of the packed runs."""
    at = bisect.bisect_left(runs, _pack(value, 0))
    if at > 0:
        start, end = _unpack(runs[at - 1])
        if start <= value < end:
            return True
    if at < len(runs):
        start, _ = _unpack(runs[at])
        return start == value
    return False
'''


def plain_greedy(model, prompt, max_new_tokens):
    ids = torch.tensor([prompt])
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=max_new_tokens)
    return out[0, len(prompt):].tolist()


@pytest.mark.parametrize("name", ["_pack", "_unpack"])
def test_small_functions_get_plain_greedy_answers_that_stop_at_their_end(embedded_rewriter, qwen_tokenizer, name):
    start = MODULE.index(f"def {name}(")
    end = MODULE.index("\n\n\n", start) + 1
    span = MODULE[start:end]
    instruction = "Add a one-line docstring to this function."
    prompt = build_prompt(span, instruction, "python", context=MODULE)
    prompt_ids, _, _ = embedded_rewriter.plan(span, instruction, "python", MODULE)
    result = embedded_rewriter.rewrite(span, instruction, "python", context=MODULE, max_new_tokens=200)
    # The kept tokens are plain greedy's, up to where decoding stopped.
    reference = plain_greedy(embedded_rewriter.loaded.model, prompt_ids, result.stats.output_tokens + 40)
    greedy_text = prompt.prefill + qwen_tokenizer.decode(reference, skip_special_tokens=True)
    assert greedy_text.startswith(result.answer)
    kept_text = prompt.prefill + qwen_tokenizer.decode(reference[: result.stats.output_tokens], skip_special_tokens=True)
    assert kept_text.startswith(result.answer)
    if result.stats.echo_dropped_chars:
        # Greedy went on copying the file; the answer ends where that copy begins.
        assert echo_scan(greedy_text, prompt.echo_targets).cut == len(result.answer)
    following = MODULE[end:].split("def ", 2)[1].split("(")[0]
    assert f"def {following}" not in result.text
    assert result.stats.finish_reason == "stop"
    assert reindent(result.text, common_indent(span)).startswith(f"def {name}(")
