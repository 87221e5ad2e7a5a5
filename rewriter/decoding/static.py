"""A decoding pass of fixed shapes, for GPUs: a preallocated KV cache, passes padded to a few
widths, and each shape captured once as a CUDA graph.

On a GPU a small model's pass is launch-bound: over a thousand small kernels, each launched from
Python, cost far more than the arithmetic, so a pass of 1 token costs what one of 256 does. A
captured graph launches them all at once. A graph replays fixed shapes at fixed addresses, so:

- the cache is preallocated (`StaticCache`), and a pass writes its keys and values in place at
  its own positions, which it takes from a device tensor;
- a pass of n tokens is padded to the next of STATIC_WIDTHS, and its rows to whole blocks of the
  linear layers (batch_invariant.ROWS), which compute that many rows whatever the pass: padding
  rows cost nothing there and spare each product a copy; only a pass's own rows attend and write
  keys;
- attention covers the first `span` keys (a power of two or 1.5 times one), the keys after a
  row's own masked;

so one graph per (width, span) replays every pass of that shape, wherever it starts.

Exactness rests on the batch-invariant patch (weights/batch_invariant.py): every linear product
has the same rows whatever the pass, norms and attention sum in float64. Masked keys add exact
zeros, so a row's attention differs from the model's own only in float64 rounding, which vanishes
when rounded back. The pass is the model's arithmetic through its own submodules, in transformers'
order; it is compared with the model's forward once (`confirmed`) before any request uses it.
On a CPU the same pass runs eagerly, which is how CI checks it.
"""
from __future__ import annotations

import warnings
from typing import Any

import torch

from ..passes import is_batch_invariant
from .forward import llama_rotation

# The widths a pass is padded to. The linear layers compute blocks of 256 rows whatever the width
# (batch_invariant.ROWS), so a width costs only its attention and logits: a few widths do.
STATIC_WIDTHS = (1, 4, 16, 64, 256, 512)
SMALLEST_SPAN = 256  # keys attended: from here, powers of two and 1.5 times them, the context rounded up
# The rotary embeddings that recompute their frequencies from the positions on the host.
_HOST_ROPE = ("dynamic", "longrope")


def _width(count: int) -> int:
    return next(width for width in STATIC_WIDTHS if width >= count)


def _span(end: int) -> int:
    """The keys a pass attends to whose last row is at `end - 1`. Steps of 1.5x and 2x keep the
    float64 attention's padding under half of it with few graphs."""
    span = SMALLEST_SPAN
    while True:
        for candidate in (span, span * 3 // 2):
            if candidate >= end:
                return candidate
        span *= 2


class StaticCache:
    """Keys and values of every layer in preallocated tensors; the first `length` positions hold
    the sequence. Answers the two questions the decoding loop asks of a cache (its length, and
    `crop`), as transformers' caches do."""

    def __init__(self, config, capacity: int, device: torch.device, dtype: torch.dtype):
        heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        shape = (1, heads, capacity, head_dim)
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.num_hidden_layers)]
        self.values = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.num_hidden_layers)]
        self.capacity = capacity
        self.length = 0

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, max_length: int) -> None:
        """Keep the first `max_length` positions; a negative number drops that many from the end."""
        if max_length < 0:
            max_length += self.length
        self.length = max(0, min(self.length, max_length))


class StaticPass:
    """Called with a pass's token ids and the cache: the logits of every row (rows, vocab) as
    float32, the cache's length grown by the pass. Owns the one StaticCache its decoder uses."""

    def __init__(self, model, rotate, graphs: bool):
        inner = model.model
        self.model = model
        self.embed, self.layers, self.norm = inner.embed_tokens, list(inner.layers), inner.norm
        self.rotary, self.head = inner.rotary_emb, model.lm_head
        self.rotate = rotate  # the layers' own apply_rotary_pos_emb
        self.device = next(model.parameters()).device
        self.dtype = self.embed.weight.dtype
        self.graphs = graphs
        self.cache: StaticCache | None = None
        self.block = model.lm_head.rows  # the linear layers' rows per product (make_batch_invariant's)
        self.heads = model.config.num_attention_heads
        # Inputs at fixed addresses: a graph reads its pass's ids and positions from these.
        self.ids = torch.zeros(self._rows(STATIC_WIDTHS[-1]), dtype=torch.long, device=self.device)
        self.positions = torch.zeros(self._rows(STATIC_WIDTHS[-1]), dtype=torch.long, device=self.device)
        self.captured: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}
        self.logits: torch.Tensor | None = None  # every graph's logits, written at one address
        self.pool: Any = None  # the captured graphs share one memory pool: they never run at once
        self.checked: bool | None = None  # None: not compared with the model's forward yet

    @classmethod
    def for_model(cls, model, graphs: bool | None = None) -> StaticPass | None:
        """A StaticPass for a batch-invariant Llama-shaped `model`, or None where it does not apply.
        `graphs`: capture CUDA graphs (default: on a CUDA device)."""
        if not is_batch_invariant(model):
            return None
        rotate = llama_rotation(model)
        if rotate is None or getattr(model.model.rotary_emb, "rope_type", "default") in _HOST_ROPE:
            return None
        device = next(model.parameters()).device
        return cls(model, rotate, device.type == "cuda" if graphs is None else graphs)

    def fresh(self, needed: int, keep: int = 0) -> StaticCache:
        """The cache, holding its first `keep` positions, with room for `needed` in all. Growing
        it moves those positions to new tensors and drops the graphs that read the old ones."""
        needed += STATIC_WIDTHS[-1]  # a pass's width, padded, may reach past the sequence's end
        kept = min(keep, self.cache.length) if self.cache is not None else 0
        if self.cache is None or self.cache.capacity < needed:
            grown = StaticCache(self.model.config, _span(needed), self.device, self.dtype)
            if self.cache is not None:
                for old, new in zip(self.cache.keys + self.cache.values, grown.keys + grown.values):
                    new[:, :, :kept] = old[:, :, :kept]
            self.cache, self.captured, self.pool = grown, {}, None
        self.cache.length = kept
        return self.cache

    def confirmed(self) -> bool:
        """Whether this pass gives the model's own logits, compared once on a short random
        sequence fed in two passes (a prompt, then a padded decoding pass)."""
        if self.checked is None:
            from transformers import DynamicCache

            generator = torch.Generator().manual_seed(0)
            tokens = torch.randint(0, self.embed.num_embeddings, (40,), generator=generator).tolist()
            with torch.inference_mode():
                # A cache of its own, so eager: the decoder's cache and graphs are left as they are.
                cache = StaticCache(self.model.config, _span(len(tokens) + STATIC_WIDTHS[-1]), self.device, self.dtype)
                self(tokens[:33], cache)
                ours = self(tokens[33:], cache)
                ids = torch.tensor([tokens], device=self.device)
                theirs = self.model(input_ids=ids, cache=DynamicCache(config=self.model.config),
                                    use_cache=True).logits[0, 33:].float()
            self.checked = torch.equal(ours, theirs)
            if not self.checked:
                warnings.warn("the static decoding pass differs from the model's forward with this transformers "
                              "version; decoding uses the model's forward", RuntimeWarning, stacklevel=2)
        return self.checked

    def __call__(self, tokens: list[int], cache: StaticCache, last_only: bool = False) -> torch.Tensor:
        pieces = []
        for begin in range(0, len(tokens), STATIC_WIDTHS[-1]):
            chunk = tokens[begin:begin + STATIC_WIDTHS[-1]]
            logits = self._pass(chunk, cache)
            if not last_only or begin + len(chunk) == len(tokens):
                pieces.append(logits[-1:] if last_only else logits)
        return pieces[0] if len(pieces) == 1 else torch.cat(pieces)

    def _rows(self, width: int) -> int:
        """The rows a pass of `width` computes: whole blocks of the linear layers."""
        return -(-width // self.block) * self.block

    def _pass(self, tokens: list[int], cache: StaticCache) -> torch.Tensor:
        count, start = len(tokens), cache.length
        width = _width(count)
        if start + width > cache.capacity:
            raise ValueError(f"the static cache holds {cache.capacity} positions; this pass needs {start + width}")
        span = _span(start + width)
        self.ids[:count].copy_(torch.tensor(tokens, dtype=torch.long), non_blocking=True)
        torch.arange(start, start + len(self.positions), out=self.positions)
        # Graphs read the decoder's cache (fresh); another cache, such as confirmed's, runs eagerly.
        captured = self.graphs and cache is self.cache
        logits = self._replay(width, span) if captured else self._run(cache, width, span)
        cache.length = start + count
        # A copy: the next replay writes the graph's output again.
        return logits[0, :count].to(torch.float32, copy=True)

    def _replay(self, width: int, span: int) -> torch.Tensor:
        assert self.cache is not None
        if self.logits is None:
            vocab = self.head.out_features
            self.logits = torch.empty(1, STATIC_WIDTHS[-1], vocab, device=self.device, dtype=self.dtype)
        logits = self.logits[:, :width]
        if (width, span) not in self.captured:
            # The warm-up run is this very pass (its inputs are set), so what it writes is right.
            stream = torch.cuda.Stream(self.device)
            stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(stream):
                logits.copy_(self._run(self.cache, width, span)[:, :width])
            torch.cuda.current_stream(self.device).wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            # What a graph allocates is free for the next capture once it is captured: the graphs
            # never run at once, and each leaves its result in `self.logits`.
            with torch.cuda.graph(graph, pool=self.pool):
                logits.copy_(self._run(self.cache, width, span)[:, :width])
            self.pool = graph.pool()
            self.captured[(width, span)] = graph
        self.captured[(width, span)].replay()
        return logits

    def _run(self, cache: StaticCache, width: int, span: int) -> torch.Tensor:
        """The pass over ids[:width] at positions[:width], attending to the cache's first `span`
        keys: the logits of whole blocks of rows, the pass's own first."""
        rows = self._rows(width)
        positions = self.positions[:width]
        hidden = self.embed(self.ids[:rows].unsqueeze(0))
        cos, sin = self.rotary(hidden, self.positions[:rows].unsqueeze(0))
        later = torch.arange(span, device=self.device) > positions[:, None]  # the keys each row must not see
        # Added to the scores of every query head of a key head, stacked as _float64_attention has them.
        mask = torch.zeros(width, span, dtype=torch.float64, device=self.device).masked_fill_(
            later, float("-inf")).repeat(self.heads // cache.keys[0].shape[1], 1)
        for index, layer in enumerate(self.layers):
            attention = layer.self_attn
            normed = layer.input_layernorm(hidden)
            heads = (1, rows, -1, attention.head_dim)
            query = attention.q_proj(normed).view(heads).transpose(1, 2)
            key = attention.k_proj(normed).view(heads).transpose(1, 2)
            value = attention.v_proj(normed).view(heads).transpose(1, 2)
            query, key = self.rotate(query, key, cos, sin)
            cache.keys[index].index_copy_(2, positions, key[:, :, :width])
            cache.values[index].index_copy_(2, positions, value[:, :, :width])
            attended = hidden.new_empty(1, rows, self.heads * attention.head_dim)
            _float64_attention(query[:, :, :width], cache.keys[index][:, :, :span], cache.values[index][:, :, :span],
                               mask, attention.scaling, attended[:, :width])
            hidden = hidden + attention.o_proj(attended)
            hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
        return self.head(self.norm(hidden))


def _float64_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor,
                       scaling: float, out: torch.Tensor) -> None:
    """Attention in float64, rounded into `out` (1, rows, heads * dim) in its dtype: (1, heads, rows,
    dim) queries over (1, key heads, span, dim) keys, `mask` (group * rows, span) added to each key
    head's scores. Few kernels: each is a launch in every layer of every pass."""
    _, heads, rows, dim = query.shape
    key_heads = key.shape[1]
    # A key head's query heads one after another: (key heads, group * rows, dim), heads in order.
    grouped = query.to(torch.float64, memory_format=torch.contiguous_format).view(key_heads, -1, dim)
    scores = torch.baddbmm(mask, grouped, key[0].double().transpose(-1, -2), alpha=scaling)
    attended = torch.bmm(torch.softmax(scores, dim=-1), value[0].double())
    out.view(1, rows, heads, dim).copy_(attended.view(1, heads, rows, dim).transpose(1, 2))
