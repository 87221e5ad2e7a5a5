"""Safetensors files read and written one tensor at a time: what safetensors itself reads, and a
tensor that is not what the header says stops the writing."""
import pytest
import torch
from safetensors.torch import load_file

from rewriter.weights.quantize import quantize_int8, quantized_shapes, quantized_tensors
from rewriter.weights.stored import StoredTensors, write_tensors
from tests.helpers.models import tiny_model


def test_a_quantized_model_written_tensor_by_tensor_reads_back_with_safetensors_and_our_reader(tmp_path):
    model = tiny_model(seed=2, eos_token_id=255)
    shapes = quantized_shapes(model, "int8-fbgemm")
    quantize_int8(model, "int8-fbgemm")
    path = tmp_path / "kept.safetensors"
    write_tensors(path, shapes, quantized_tensors(model), {"key": "tiny"})
    expected = dict(quantized_tensors(model))
    theirs = load_file(str(path))  # safetensors' own checks of the header, offsets and alignment
    assert theirs.keys() == expected.keys() and all(torch.equal(theirs[k], v) for k, v in expected.items())
    with StoredTensors(path) as ours:
        assert ours.metadata == {"key": "tiny"} and ours.shapes() == shapes
        assert all(torch.equal(ours[name], tensor) for name, tensor in expected.items())


def test_a_tensor_that_is_not_what_the_header_says_stops_the_writing(tmp_path):
    shapes = {"a": ((2, 3), torch.float32), "b": ((4,), torch.int8)}
    wrong = [("a", torch.zeros(2, 3)), ("b", torch.zeros(5, dtype=torch.int8))]
    with pytest.raises(ValueError, match="b"):
        write_tensors(tmp_path / "x.safetensors", shapes, wrong, {})
    with pytest.raises(ValueError):  # fewer tensors than the header names
        write_tensors(tmp_path / "y.safetensors", shapes, wrong[:1], {})


def test_mapped_tensors_are_the_read_ones_and_released_pages_read_back_the_same(tmp_path):
    shapes = {"w": ((300, 4096), torch.int8), "s": ((300,), torch.float32), "e": ((0, 4), torch.int8)}
    generator = torch.Generator().manual_seed(1)
    tensors = {"w": torch.randint(-127, 128, (300, 4096), dtype=torch.int8, generator=generator),
               "s": torch.rand(300, generator=generator), "e": torch.zeros(0, 4, dtype=torch.int8)}
    path = tmp_path / "kept.safetensors"
    write_tensors(path, shapes, tensors.items(), {})
    with StoredTensors(path) as stored:
        for name, tensor in tensors.items():
            assert torch.equal(stored.mapped(name), tensor) and torch.equal(stored[name], tensor)
        mapped = stored.mapped("w")
        stored.release("w")  # its pages leave the process; what the file holds stays
        assert torch.equal(mapped, tensors["w"])
        del mapped
