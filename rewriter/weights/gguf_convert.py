"""A GGUF file to a float32 safetensors checkpoint, one tensor at a time.

transformers' own GGUF loading de-quantizes every tensor into memory before a model exists, and
keeping that model to save it holds a second copy: 12 GB for the 1.5B. Here the safetensors
header is written first, from the GGUF's shapes, and each tensor is de-quantized and written in
turn, so the conversion holds one tensor at a time (the 1.5B's embedding, 0.9 GB, is the largest).
Names come from transformers' GGUF name map; architectures whose tensors transformers reshapes
across several GGUF tensors (mixtures of experts) are converted by transformers, whole.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

import numpy as np
import torch

from ..results import ModelError

# The dtype every converted tensor is written in: the int8 paths round from these weights.
STORED_DTYPE = "F32"


def convert_gguf(gguf_path: Path, work: Path, say: Callable[[str], None]) -> None:
    """Write config, tokenizer and model.safetensors for `gguf_path` into the folder `work`."""
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    streamed = _streamed_tensors(gguf_path, config)
    if streamed is None:
        say(f"{gguf_path.name}: this architecture is de-quantized whole by transformers")
        _convert_whole(gguf_path, work)
    else:
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.dtype = torch.float32
        config.save_pretrained(work)
        write_safetensors(work / "model.safetensors", streamed, Countdown(f"converting {gguf_path.name}", say))
    AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name).save_pretrained(work)


TensorSource = tuple[str, tuple[int, ...], Callable[[], np.ndarray]]


def _streamed_tensors(gguf_path: Path, config) -> list[TensorSource] | None:
    """Each checkpoint tensor's name, shape and a function de-quantizing it; None where this
    architecture's tensors are not one GGUF tensor each."""
    from gguf import GGUFReader
    from gguf.quants import dequantize
    from transformers import AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import (
        TENSOR_PROCESSORS,
        TensorProcessor,
        get_gguf_hf_weights_map,
        read_field,
    )

    reader = GGUFReader(gguf_path)
    architecture = read_field(reader, "general.architecture")[0]
    if TENSOR_PROCESSORS.get(architecture, TensorProcessor) is not TensorProcessor:
        return None
    with torch.device("meta"):  # names and shapes only: nothing allocated
        skeleton = AutoModelForCausalLM.from_config(config)
    names = get_gguf_hf_weights_map(skeleton, TensorProcessor())
    wanted = dict(skeleton.state_dict())
    if config.tie_word_embeddings:  # one tensor for both: safetensors stores it once
        wanted.pop("lm_head.weight", None)
    sources: list[TensorSource] = []
    for tensor in reader.tensors:
        name = names.get(tensor.name)
        if name is None or name not in wanted:
            continue
        shape = tuple(int(size) for size in reversed(tensor.shape.tolist()))
        if shape != tuple(wanted[name].shape):
            raise ModelError(f"{gguf_path.name}: {tensor.name} has shape {shape}, the model expects "
                             f"{tuple(wanted[name].shape)} for {name}")
        sources.append((name, shape, partial(dequantize, tensor.data, tensor.tensor_type)))
    missing = sorted(set(wanted) - {name for name, _, _ in sources})
    if missing:
        raise ModelError(f"{gguf_path.name} lacks tensors the model needs: {', '.join(missing[:5])}")
    return sources


class Countdown:
    """Says, at each quarter of a long job done, how far it is and about how long is left (the
    rest taken at the pace so far): a first start converts for a minute or more, in silence else."""

    def __init__(self, job: str, say: Callable[[str], None], quarters: int = 4):
        self.job, self.say, self.quarters = job, say, quarters
        self.started = time.perf_counter()
        self.said = 0

    def done(self, share: float) -> None:
        """`share` of the job (0 to 1) is done."""
        quarter = int(share * self.quarters + 1e-9)
        if quarter <= self.said or quarter >= self.quarters:
            return
        self.said = quarter
        spent = time.perf_counter() - self.started
        self.say(f"{self.job}: {share:.0%} done, about {spent * (1 - share) / share:.0f} s left")


def write_safetensors(path: Path, tensors: Iterable[TensorSource], countdown: Countdown | None = None) -> None:
    """A float32 safetensors file whose tensors are made one at a time, each written then freed;
    `countdown` hears how many of the bytes are written."""
    tensors = list(tensors)
    header: dict[str, dict] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape, _ in tensors:
        size = 4 * int(np.prod(shape, dtype=np.int64))
        header[name] = {"dtype": STORED_DTYPE, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as out:
        out.write(len(encoded).to_bytes(8, "little"))
        out.write(encoded)
        written = 0
        for name, shape, make in tensors:
            values = np.ascontiguousarray(make(), dtype="<f4")
            if values.shape != shape:
                raise ModelError(f"{name} de-quantized to shape {values.shape}, not {shape}")
            out.write(values.data.cast("B"))
            written += values.nbytes
            del values
            if countdown is not None and offset:
                countdown.done(written / offset)


def _convert_whole(gguf_path: Path, work: Path) -> None:
    """transformers' own conversion: every tensor de-quantized into a model, then saved."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    config = model.config
    if hasattr(config, "quantization_config"):  # save_pretrained refuses GGUF-loaded models
        del config.quantization_config
    config.save_pretrained(work)
    state = {name: tensor.contiguous() for name, tensor in model.state_dict().items()
             if not (config.tie_word_embeddings and name == "lm_head.weight")}
    save_file(state, work / "model.safetensors", metadata={"format": "pt"})
