"""The GGUF conversion, tensor by tensor: the same checkpoint transformers' whole-model loading gives."""
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from rewriter.results import ModelError
from rewriter.weights.gguf_convert import Countdown, write_safetensors


def test_tensors_are_written_one_at_a_time_and_read_back_unchanged(tmp_path):
    made = []
    values = {"a.weight": np.arange(6, dtype=np.float32).reshape(2, 3) / 7,
              "b.bias": np.array([1.5, -2.25], dtype=np.float16),  # stored as float32, like a F16 GGUF tensor
              "c.weight": np.full((1, 5), 3.0, dtype=np.float32)}

    def source(name):
        def make():
            made.append(name)
            return values[name]
        return make

    write_safetensors(tmp_path / "model.safetensors",
                      [(name, array.shape, source(name)) for name, array in values.items()])
    assert made == list(values)  # each made once, in order
    loaded = load_file(tmp_path / "model.safetensors")
    assert set(loaded) == set(values)
    for name, array in values.items():
        assert loaded[name].dtype == torch.float32
        assert torch.equal(loaded[name], torch.from_numpy(array.astype(np.float32)))


def test_a_long_conversion_says_each_quarter_done_and_the_time_left(tmp_path):
    said = []
    sizes = [40, 10, 30, 20]  # shares of the bytes: 40%, 50%, 80%, 100%
    write_safetensors(tmp_path / "model.safetensors",
                      [(f"t{i}", (size,), lambda size=size: np.zeros(size, dtype=np.float32)) for i, size in enumerate(sizes)],
                      Countdown("converting m.gguf", said.append))
    assert [line.split(",")[0] for line in said] == ["converting m.gguf: 40% done", "converting m.gguf: 50% done",
                                                     "converting m.gguf: 80% done"]
    assert all(line.endswith(" s left") for line in said)


def test_a_tensor_of_another_shape_than_its_header_is_refused(tmp_path):
    with pytest.raises(ModelError, match="a.weight de-quantized to shape"):
        write_safetensors(tmp_path / "model.safetensors",
                          [("a.weight", (2, 3), lambda: np.zeros((3, 2), dtype=np.float32))])


def test_a_conversion_another_process_finished_meanwhile_is_kept_not_removed(tmp_path, monkeypatch):
    # Two starts on a fresh machine (an editor's server and a command line) both convert; the
    # later must not delete the cache the earlier one is already loading from.
    from rewriter.weights import gguf_convert, models

    cache = tmp_path / "models" / "m-0123"

    def convert(gguf_path, work, say):
        (work / "model.safetensors").write_text("ours")
        cache.mkdir(parents=True)
        (cache / "model.safetensors").write_text("theirs")
        (cache / "complete").write_text("{}")

    monkeypatch.setattr(gguf_convert, "convert_gguf", convert)
    assert models._convert_gguf(tmp_path / "m.gguf", cache, None) == cache
    assert (cache / "model.safetensors").read_text() == "theirs"
    assert list(cache.parent.iterdir()) == [cache]  # our own copy is gone


@pytest.mark.real_model
def test_the_embedded_gguf_converts_to_the_tensors_transformers_loads(tmp_path):
    from transformers import AutoModelForCausalLM

    from rewriter.weights.gguf_convert import convert_gguf
    from rewriter.weights.models import assemble_embedded_gguf

    gguf = assemble_embedded_gguf(tmp_path / "embedded.gguf")
    (tmp_path / "converted").mkdir()
    convert_gguf(gguf, tmp_path / "converted", lambda message: None)
    streamed = load_file(tmp_path / "converted" / "model.safetensors")
    model = AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file=gguf.name, dtype=torch.float32)
    whole = model.state_dict()
    if model.config.tie_word_embeddings:  # one tensor for both: stored once
        whole.pop("lm_head.weight")
    assert set(streamed) == set(whole)
    for name, tensor in whole.items():
        assert torch.equal(streamed[name], tensor), name
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "converted")
    assert torch.equal(loaded.lm_head.weight, model.lm_head.weight)
