"""The default model (the 1.5B), drafted for by the embedded 0.5B, gives plain greedy's answer.

The one real-model test on the 1.5B: its first start converts it (minutes); the others use the 0.5B.
"""
import pytest
import torch
from transformers import StoppingCriteriaList

from rewriter import CODER_1_5B_NAME, EMBEDDED_NAME
from rewriter.bench.bench import FenceCriteria
from rewriter.engine_factory import EngineSettings, load_rewriter

pytestmark = pytest.mark.real_model

CODE = '''def total_price(items, tax):
    total = 0
    for item in items:
        total += item.price * item.count
    return total * (1 + tax)
'''


def test_the_default_drafted_for_by_the_0_5b_answers_as_plain_greedy():
    said: list[str] = []
    rewriter = load_rewriter(EngineSettings(draft_model=EMBEDDED_NAME), said.append)
    if rewriter.loaded.name != CODER_1_5B_NAME:  # the machine cannot hold it: the one line says why
        pytest.skip(next(line for line in said if line.startswith(f"using {EMBEDDED_NAME}")))
    assert rewriter.draft is not None and rewriter.draft.name == EMBEDDED_NAME
    prompt, prediction, _ = rewriter.plan(CODE, "Add a one-line docstring to total_price.", "python")
    drafted = []
    for step in rewriter.decoder.generate(prompt, rewriter.drafter(prediction), 96, rewriter.stop):
        drafted.extend(step.tokens)
    ids = torch.tensor([prompt])
    with torch.inference_mode():
        out = rewriter.loaded.model.generate(
            ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=96,
            stopping_criteria=StoppingCriteriaList([FenceCriteria(rewriter, len(prompt))]))
    plain = out[0, len(prompt):].tolist()
    assert drafted == plain
    assert '"""' in rewriter.tokenizer.decode(drafted)  # the model did edit
