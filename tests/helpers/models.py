"""Tiny random models and a character tokenizer for exactness tests."""
from __future__ import annotations

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

QWEN_VOCAB = 151936  # the real tokenizer's vocabulary, for tiny models that use it


def tiny_model(seed: int = 0, vocab_size: int = 256, hidden: int = 64, layers: int = 2,
               eos_token_id: int = 0, heads: int = 4, key_heads: int = 2) -> Qwen2ForCausalLM:
    """A real Qwen2 architecture with random weights: loads in milliseconds."""
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=key_heads,
        max_position_embeddings=4096, initializer_range=0.2, eos_token_id=eos_token_id,
        bos_token_id=eos_token_id, pad_token_id=eos_token_id, tie_word_embeddings=False,
    )
    model = Qwen2ForCausalLM(config).eval()
    model.generation_config.eos_token_id = eos_token_id
    model.generation_config.pad_token_id = eos_token_id
    return model


class CharTokenizer:
    """Enough of a tokenizer for the decoding loop: ids map to letters."""

    pad_token_id = 0

    def __init__(self, eos_token_id: int | None = 0):
        self.eos_token_id = eos_token_id  # tiny models made with eos_token_id=255 end there instead

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(0x41 + i % 58) for i in ids if not (skip_special_tokens and i == 0))


def greedy_reference(model, prompt: list[int], max_new_tokens: int) -> list[int]:
    """Plain greedy decoding with transformers: the ground truth every speed-up must reproduce."""
    ids = torch.tensor([prompt])
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=max_new_tokens)
    return out[0, len(prompt):].tolist()
