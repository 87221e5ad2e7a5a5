"""The default model: the 1.5B where the machine affords it, else the 0.5B with a line saying why;
a draft model only where one is named; and a rewriter with a draft model gives plain greedy's answer."""
import importlib.util

import pytest
import torch

from rewriter import CODER_1_5B_NAME, EMBEDDED_NAME, engine_factory
from rewriter.engine_factory import DEFAULT_MODEL_MEMORY, EngineSettings, default_model


@pytest.fixture
def installed(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: object() if name == engine_factory.DEFAULT_PACKAGE else real(name, *args))


def test_a_machine_with_the_memory_gets_the_1_5b(installed, monkeypatch):
    monkeypatch.setattr(engine_factory, "available_memory", lambda: DEFAULT_MODEL_MEMORY + 1)
    said = []
    assert default_model(said.append) == CODER_1_5B_NAME
    assert said == []


def test_too_little_memory_falls_back_to_the_0_5b_with_one_line_saying_why(installed, monkeypatch):
    monkeypatch.setattr(engine_factory, "available_memory", lambda: 2 << 30)
    said = []
    assert default_model(said.append) == EMBEDDED_NAME
    assert len(said) == 1 and "2.0 GB is free" in said[0] and f"--model {CODER_1_5B_NAME}" in said[0]


def test_missing_packages_fall_back_to_the_0_5b(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == engine_factory.DEFAULT_PACKAGE else real(name, *args))
    said = []
    assert default_model(said.append) == EMBEDDED_NAME
    assert "not installed" in said[0]


def test_available_memory_is_read_here():
    available = engine_factory.available_memory()
    assert available is None or available > 0


def test_no_model_named_loads_the_default_alone_and_a_named_draft_model_beside_it(monkeypatch, tiny_checkpoint):
    from rewriter.weights import models

    loads = []
    real_load = models.load_model

    def load(name, **kwargs):
        loads.append(name)
        return real_load(str(tiny_checkpoint), dtype="float32")

    monkeypatch.setattr(models, "load_model", load)
    monkeypatch.setattr(engine_factory, "default_model", lambda say: CODER_1_5B_NAME)
    alone = engine_factory.load_rewriter(EngineSettings(), lambda message: None)
    assert loads == [CODER_1_5B_NAME] and alone.draft is None
    loads.clear()
    drafted = engine_factory.load_rewriter(EngineSettings(draft_model=EMBEDDED_NAME), lambda message: None)
    assert loads == [CODER_1_5B_NAME, EMBEDDED_NAME] and drafted.draft is not None
    assert drafted.drafter([1, 2, 3]).name == "prediction+draft_model"
    loads.clear()
    named = engine_factory.load_rewriter(EngineSettings(model="embedded"), lambda message: None)
    assert loads == ["embedded"] and named.draft is None


def test_a_draft_model_leaves_the_greedy_answer_as_plain_greedy_gives_it(tiny_checkpoint):
    from rewriter.decoding.rewrite import Rewriter
    from rewriter.weights.models import load_model

    target = load_model(str(tiny_checkpoint), dtype="float32")
    draft = load_model(str(tiny_checkpoint), dtype="float32")
    torch.manual_seed(1)
    for parameter in draft.model.parameters():  # a draft model that disagrees with the target often
        parameter.data.add_(0.5 * torch.randn_like(parameter))
    calls = []
    draft.model.register_forward_hook(lambda module, args, output: calls.append(1))
    plain, drafting = Rewriter(target), Rewriter(target, draft=draft)
    prompt, prediction, _ = plain.plan("def add(a, b):\n    return a + b\n", "Add type hints", "python")

    def tokens(rewriter):
        return [token for step in rewriter.decoder.generate(prompt, rewriter.drafter(prediction), 40)
                for token in step.tokens]

    assert tokens(drafting) == tokens(plain)
    assert calls  # the draft model did draft
