import pytest

from rewriter.decoding.rewrite import RewriteError, Rewriter, fence_stop
from rewriter.weights.models import load_model


@pytest.fixture(scope="module")
def tiny_rewriter(tiny_checkpoint):
    return Rewriter(load_model(str(tiny_checkpoint)))


def test_requests_that_cannot_fit_or_say_nothing_are_refused(tiny_rewriter):
    with pytest.raises(RewriteError, match="too large for the model's context"):
        tiny_rewriter.plan("".join(f"value_{i} = {i}\n" for i in range(200)), "rename value to item")
    with pytest.raises(RewriteError, match="instruction is empty"):
        tiny_rewriter.plan("x = 1\n", " ")


def test_prediction_is_the_fenced_code_and_the_end_of_turn(tiny_rewriter, qwen_tokenizer):
    _, prediction, budget = tiny_rewriter.plan("x = 1\n", "rename x", "python")
    assert qwen_tokenizer.decode(prediction) == "```python\nx = 1\n```<|im_end|>"
    assert budget <= 256


def test_fence_stop_keeps_the_fewest_tokens_that_close_the_block(qwen_tokenizer):
    stop = fence_stop(qwen_tokenizer)
    answer = qwen_tokenizer.encode("```python\nx = 1\n```\nThis renames x.")
    keep = stop(answer)
    assert qwen_tokenizer.decode(answer[:keep]) == "```python\nx = 1\n```\n"
    assert stop(qwen_tokenizer.encode("```python\nx = 1\n")) is None
