"""The embedded model suggesting the next edit after a rename: its answer is plain greedy decoding
of the prompt, token for token, and what is suggested is that answer's change or nothing."""
from __future__ import annotations

import pytest
import torch

from rewriter.decoding.rendered import prompt_ids
from rewriter.next_edit.base import NextEditInput, RecentEdit
from rewriter.next_edit.formats.instruct import InstructFormat
from rewriter.next_edit.suggest import judge, suggest
from rewriter.next_edit.window import choose_window

pytestmark = pytest.mark.real_model

BEFORE = '''def area(width, height):
    """The area of a rectangle."""
    return width * height


def describe(width, height):
    return f"{width} by {height}: {area(width, height)}"
'''
AFTER = BEFORE.replace("def area(width, height):", "def area(w, h):")


def test_the_suggestion_after_a_rename_is_the_plain_greedy_answer(embedded_rewriter, qwen_tokenizer):
    edit = RecentEdit("shapes.py", 0, "def area(width, height):\n", "def area(w, h):\n")
    request = NextEditInput("shapes.py", "python", AFTER, choose_window(AFTER, 0), (0, 15), (edit,))
    form = InstructFormat()
    outcome = suggest(embedded_rewriter, form, request)
    ids = prompt_ids(embedded_rewriter, form.render(request))
    with torch.inference_mode():
        out = embedded_rewriter.loaded.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids)),
                                                      do_sample=False, max_new_tokens=outcome.stats.output_tokens)
    assert outcome.answer == qwen_tokenizer.decode(out[0, len(ids):].tolist(), skip_special_tokens=True)
    window = form.window_of(outcome.answer, request)
    assert outcome.stats.accepted_prediction_tokens > 0
    if outcome.suggestion is None:
        assert window is None or judge(request, window) == outcome.reason
    else:
        assert outcome.suggestion.window == window and judge(request, window) == ""
