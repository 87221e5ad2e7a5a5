"""The service with a draft model: `rewriter serve` with no model loads default_model's choice,
alone unless `--draft-model` names one,
and its chat completions and /v1/rewrites draft with the draft model where the prediction does
not, as `rewriter apply` does, the greedy answer still plain greedy's (tiny random models)."""
from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from starlette.testclient import TestClient

from rewriter import CODER_1_5B_NAME, EMBEDDED_NAME, cli, engine_factory
from rewriter.decoding.verify import GreedyVerifier
from rewriter.engine import SamplingParams
from rewriter.serve.app import create_app
from rewriter.serve.chat_request import ChatRequest
from tests.helpers.models import greedy_reference

MESSAGES = [{"role": "user", "content": "Rename x to y:\n```python\ndef f(x):\n    return x + 1\n```"}]
WRONG_PREDICTION = "def f(y):\n    return y + 1\n"  # departs from the answer at once: the draft model takes over
CODE = "def area(width, height):\n    return width * height\n"


@pytest.fixture(scope="module")
def draft(tiny_dir):
    """A draft model that mostly agrees with the target, as the 0.5B does with the 1.5B: the same
    weights in float32 (the target runs int8), its head a little off."""
    from rewriter.weights.models import load_model

    loaded = load_model(str(tiny_dir), dtype="float32")
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        head = loaded.model.lm_head.weight
        head.add_(0.02 * torch.randn(head.shape, generator=generator))
    return dataclasses.replace(loaded, name="tiny-draft")


@pytest.fixture
def one_thread():
    """As the reference decodes: the same kernels, the same rounding."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def draft_calls(draft):
    calls: list[int] = []
    handle = draft.model.register_forward_hook(lambda module, args, output: calls.append(1))
    yield calls
    handle.remove()


def chat(app, prediction: str | None, max_tokens: int = 40):
    """The chat's last delta, decoded greedily on the app's backend: (text, stats)."""
    backend = app.state.service.backend
    request = ChatRequest(model=backend.loaded.name, messages=MESSAGES, sampling=SamplingParams(),
                          max_tokens=max_tokens, prediction=prediction)
    deltas = list(backend.chat(backend.prepare_chat(request), GreedyVerifier()))
    return "".join(delta.text for delta in deltas), deltas[-1].stats


@pytest.mark.parametrize("prediction", [None, WRONG_PREDICTION])
def test_a_greedy_chat_drafted_by_the_draft_model_is_plain_greedy(tiny_loaded, draft, draft_calls, one_thread,
                                                                    prediction):
    prompt = tiny_loaded.tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True)
    prompt = list(prompt["input_ids"] if not isinstance(prompt, list) else prompt)
    expected = tiny_loaded.tokenizer.decode(greedy_reference(tiny_loaded.model, prompt, 40), skip_special_tokens=True)

    plain_text, plain = chat(create_app(tiny_loaded), prediction)
    assert not draft_calls
    drafted_text, drafted = chat(create_app(tiny_loaded, draft=draft), prediction)
    assert plain_text == drafted_text == expected
    # The draft model's drafts were verified and kept: fewer passes of the target for the same tokens.
    assert draft_calls
    assert drafted.accepted_draft_tokens > plain.accepted_draft_tokens + 10
    assert drafted.forward_passes < plain.forward_passes


def rewrite_events(app) -> tuple[str, list[tuple[str, dict]]]:
    """/v1/rewrites' answer as it streamed (each step's deltas hold what it accepted), and the
    other events but the stats: the hunks and how it ended."""
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        response = client.post("/v1/rewrites", json={"text": CODE, "instruction": "Add type hints",
                                                     "language": "python", "max_tokens": 40})
    assert response.status_code == 200, response.text
    events = []
    for block in response.text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((fields["event"], json.loads(fields["data"])))
    answer = "".join(data["text"] for name, data in events if name == "delta")
    return answer, [(name, data) for name, data in events if name not in ("delta", "stats")]


def test_rewrites_draft_with_the_draft_model_and_answer_as_without(tiny_loaded, draft, draft_calls, one_thread):
    plain = rewrite_events(create_app(tiny_loaded))
    assert not draft_calls
    drafted = rewrite_events(create_app(tiny_loaded, draft=draft))
    assert draft_calls
    assert len(plain[0]) > 20  # the tiny model wrote something
    assert drafted == plain


def test_health_names_the_draft_model_and_the_target_is_the_served_model(tiny_loaded, draft):
    with TestClient(create_app(tiny_loaded, draft=draft), base_url="http://127.0.0.1:8000") as client:
        assert client.get("/health").json()["draft_model"] == "tiny-draft"
        assert [card["id"] for card in client.get("/v1/models").json()["data"]] == [tiny_loaded.name, "rewriter-apply"]
        sampled = client.post("/v1/chat/completions", json={"model": tiny_loaded.name, "messages": MESSAGES,
                                                            "max_tokens": 8, "temperature": 0.7, "seed": 3})
        assert sampled.status_code == 200 and 1 <= sampled.json()["usage"]["completion_tokens"] <= 8
    with TestClient(create_app(tiny_loaded), base_url="http://127.0.0.1:8000") as client:
        assert client.get("/health").json()["draft_model"] is None


@pytest.fixture
def served(monkeypatch, tiny_loaded, draft):
    """`rewriter serve` up to the point it would listen: the models it loads (by name; the tiny
    ones stand in), what it says, and the app it would serve."""
    import uvicorn

    from rewriter.weights import models

    seen: dict = {"loads": [], "said": []}

    def load(name, **kwargs):
        seen["loads"].append(name)
        return dataclasses.replace(draft if name == EMBEDDED_NAME else tiny_loaded, name=name)

    monkeypatch.setattr(models, "load_model", load)
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: seen.update(app=app))
    monkeypatch.setattr(cli, "_say", seen["said"].append)
    return seen


def test_serve_with_no_model_serves_the_default_and_the_draft_model_named(served, monkeypatch):
    monkeypatch.setattr(engine_factory, "default_model", lambda say: CODER_1_5B_NAME)
    assert cli.main(["serve", "--draft-model", EMBEDDED_NAME]) == 0
    assert served["loads"] == [CODER_1_5B_NAME, EMBEDDED_NAME]
    service = served["app"].state.service
    assert service.served == [CODER_1_5B_NAME, "rewriter-apply"] and service.draft_name == EMBEDDED_NAME
    assert any(line.startswith(f"model {CODER_1_5B_NAME} (") and f"drafted for by {EMBEDDED_NAME}" in line
               for line in served["said"])


def test_serve_with_no_model_and_no_draft_model_named_serves_the_default_alone(served, monkeypatch):
    monkeypatch.setattr(engine_factory, "default_model", lambda say: CODER_1_5B_NAME)
    assert cli.main(["serve"]) == 0
    assert served["loads"] == [CODER_1_5B_NAME]
    assert served["app"].state.service.draft_name is None
    assert any(line.startswith(f"model {CODER_1_5B_NAME} (") and "no draft model" in line for line in served["said"])


def test_serve_with_too_little_memory_serves_the_0_5b_and_says_why(served, monkeypatch):
    monkeypatch.setattr(engine_factory, "DEFAULT_PACKAGE", "rewriter")  # the 1.5B's packages count as installed
    monkeypatch.setattr(engine_factory, "available_memory", lambda: 2 << 30)
    assert cli.main(["serve"]) == 0
    assert served["loads"] == [EMBEDDED_NAME]
    assert served["app"].state.service.draft_name is None
    assert sum("2.0 GB is free" in line for line in served["said"]) == 1
    assert any("no draft model" in line for line in served["said"])


def test_serve_with_a_named_model_loads_it_alone(served, monkeypatch):
    monkeypatch.setattr(engine_factory, "default_model", lambda say: pytest.fail("a named model needs no default"))
    assert cli.main(["serve", "--model", "embedded"]) == 0
    assert served["loads"] == ["embedded"]
    assert served["app"].state.service.draft_name is None


def test_apply_builds_its_draft_model_and_sampling_through_the_engine_factory(served, monkeypatch, tmp_path):
    """`rewriter apply --draft-model ... --temperature ...`: the factory loads each model once and
    configures the engine; a command without those flags decodes with the model alone."""
    from drafters.draft_model import PredictionThenModelDrafter
    from rewriter.decoding.rewrite import Rewriter
    from rewriter.engine_factory import ConfiguredEngine, EngineSettings, build_engine

    sampled = build_engine(EngineSettings(model="target", draft_model=EMBEDDED_NAME,
                                          sampling=SamplingParams(temperature=0.7, seed=1)))
    assert served["loads"] == ["target", EMBEDDED_NAME]
    assert isinstance(sampled, ConfiguredEngine) and sampled.sampling == SamplingParams(temperature=0.7, seed=1)
    drafter = sampled.decoding["drafter"]([1, 2, 3])
    assert isinstance(drafter, PredictionThenModelDrafter) and drafter.model_drafter.shaper is not None
    assert isinstance(build_engine(EngineSettings(model="target")), Rewriter)

    made = []
    real = engine_factory.configured
    monkeypatch.setattr(engine_factory, "configured", lambda rewriter, settings: made.append(real(rewriter, settings)) or made[-1])
    monkeypatch.setattr(engine_factory, "default_model", lambda say: "target")
    source = tmp_path / "m.py"
    source.write_text("def f(x):\n    return x\n")
    assert cli.main(["apply", str(source), "-i", "Add type hints", "--draft-model", EMBEDDED_NAME,
                     "--temperature", "0.5", "--seed", "3", "--max-new-tokens", "8", "--json", "-q"]) in (0, 1)
    assert served["loads"][3:] == ["target", EMBEDDED_NAME]  # after the three above
    (engine,) = made
    assert isinstance(engine, ConfiguredEngine) and engine.sampling == SamplingParams(temperature=0.5, seed=3)
    assert isinstance(engine.decoding["drafter"]([1, 2]), PredictionThenModelDrafter)
