"""Shared fixtures: tiny random models (fast, exact properties) and the embedded real model."""
from __future__ import annotations

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

QWEN_VOCAB = 151936


def tiny_model(seed: int = 0, vocab_size: int = 256, hidden: int = 64, layers: int = 2,
               eos_token_id: int = 0) -> Qwen2ForCausalLM:
    """A real Qwen2 architecture with random weights: loads in milliseconds."""
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=4096, initializer_range=0.2, eos_token_id=eos_token_id,
        bos_token_id=eos_token_id, pad_token_id=eos_token_id, tie_word_embeddings=False,
    )
    model = Qwen2ForCausalLM(config).eval()
    model.generation_config.eos_token_id = eos_token_id
    model.generation_config.pad_token_id = eos_token_id
    return model


class CharTokenizer:
    """Enough of a tokenizer for the decoding loop: ids map to letters."""

    eos_token_id = 0
    pad_token_id = 0

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(0x41 + i % 58) for i in ids if not (skip_special_tokens and i == 0))


def greedy_reference(model, prompt: list[int], max_new_tokens: int) -> list[int]:
    """Plain greedy decoding with transformers: the ground truth every speed-up must reproduce."""
    ids = torch.tensor([prompt])
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=max_new_tokens)
    return out[0, len(prompt):].tolist()


@pytest.fixture(scope="session")
def embedded_checkpoint():
    """The embedded model, converted once into the cache (about a minute the first time)."""
    from rewriter.decoding.models import resolve_checkpoint

    return resolve_checkpoint(None)


@pytest.fixture(scope="session")
def qwen_tokenizer(embedded_checkpoint):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(embedded_checkpoint)


@pytest.fixture(scope="session")
def embedded(embedded_checkpoint):
    from rewriter.decoding.models import load_model

    return load_model(str(embedded_checkpoint))


@pytest.fixture(scope="session")
def embedded_rewriter(embedded):
    from rewriter.decoding.rewrite import Rewriter

    return Rewriter(embedded)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, qwen_tokenizer):
    """A tiny random model with the real Qwen tokenizer and a short context, saved like any checkpoint."""
    path = tmp_path_factory.mktemp("tiny-qwen")
    model = tiny_model(vocab_size=QWEN_VOCAB, hidden=32, layers=1, eos_token_id=qwen_tokenizer.eos_token_id)
    model.config.max_position_embeddings = 256
    model.save_pretrained(path)
    qwen_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory, qwen_tokenizer):
    """A tiny random Qwen2 with the real tokenizer, saved for the service tests."""
    from tests.test_service_helpers import save_tiny_qwen

    return save_tiny_qwen(tmp_path_factory.mktemp("tiny-qwen"), qwen_tokenizer)


@pytest.fixture(scope="module")
def tiny_loaded(tiny_dir):
    from rewriter.decoding.models import load_model

    return load_model(str(tiny_dir))
