"""Attention for the row-independent paths: each row of a decoding pass gets the bits it has alone.

The int8 paths (quantize.py) keep every linear layer's rows independent; attention, the one part
left in floating point, computes each row of a pass decoding makes with products of shapes fixed
by the row's own position (_span_attention), so its summation order is the same in any pass.
Where this machine's kernels still sum a row differently by the pass's shape (checked at load,
_float32_keeps_rows), it runs in float64 and rounds back, and the difference vanishes in the
rounding. A prompt's pass, wider than any decoding pass, is computed row by row in the same way
where float32 keeps the rows' bits (_int8_row_attention: then a prompt's cache computed in any split
is the same, at no cost); elsewhere, float64 would cost too much there, and it runs in float32 in
fixed chunks (_int8_attention): the same computation however the prompt is split at chunk bounds.

The GPU path (batch_invariant.py) runs all attention in float64, rounded back (_float64_attention).
Both register with transformers under their own names (register_float64_attention,
prepare_int8_attention).
"""
from __future__ import annotations

import functools

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from ..passes import FLOAT64_ATTENTION, INT8_ATTENTION, INT8_ROW_ATTENTION, PROMPT_CHUNK, WIDEST_DECODING_PASS

# The GPU path's float64 attention (_float64_attention) and the int8 paths' (_int8_attention,
# _int8_row_attention) are named in passes.py, which the decoding loop reads too.
# Positions a decoding pass's attention takes at a time (measured: 8 to 32 do alike).
DECODING_ATTENTION_BLOCK = 16
# A decoding row attends over its keys rounded up to a multiple of this (_span_attention).
DECODING_KEY_BUCKET = 64


def _float64_attention(module, query, key, value, attention_mask, **kwargs):
    if attention_mask is not None and attention_mask.is_floating_point():
        attention_mask = attention_mask.double()
    out, _ = sdpa_attention_forward(module, query.double(), key.double(), value.double(), attention_mask, **kwargs)
    return out.to(query.dtype), None


def _span_attention(module, query, key, value, attention_mask, scaling=None, **kwargs):
    """Attention for a decoding pass, in its inputs' dtype (float32 on the int8 paths), each row
    the same bits in a pass of any width.

    A row's bits depend on the shapes of the products that compute it: on this machine's kernels,
    a score's last bits move with the number of keys in its product, and a weighted sum's with the
    number it adds (rows are free to vary). So every row at position p attends over keys
    0..span(p)-1, span(p) being p + 1 rounded up to a whole DECODING_KEY_BUCKET, whatever else is
    in the pass: keys past p (later rows of the pass, or zero padding past the cache) are masked.
    Its scores, softmax and weighted sum then have the same shapes in a one-token pass as in a
    wide one. Positions go DECODING_ATTENTION_BLOCK at a time, a block never straddling a bucket,
    so the scores stay in the CPU's caches. Where this machine's kernels do not keep those bits
    (`_float32_keeps_rows`), decoding attends in float64 instead.
    """
    batch, heads, rows, width = query.shape
    key_heads, keys = key.shape[1], key.shape[2]
    group = heads // key_heads
    # (batch, key head, position, query head of the group, width): a block of positions is a slice.
    grouped = query.view(batch, key_heads, group, rows, width).transpose(2, 3).reshape(
        batch, key_heads, rows * group, width)
    scale = width ** -0.5 if scaling is None else scaling
    start = keys - rows  # the position of the pass's first row
    padding = _key_span(keys - 1) - keys
    if padding:
        key = torch.nn.functional.pad(key, (0, 0, 0, padding))
        value = torch.nn.functional.pad(value, (0, 0, 0, padding))
    pieces = []
    first = 0
    while first < rows:
        span = _key_span(start + first)
        last = min(first + DECODING_ATTENTION_BLOCK, rows, span - start)
        count, own = last - first, start + first  # the block's rows; the first one's position
        scores = (grouped[:, :, first * group:last * group] @ key[:, :, :span].transpose(-1, -2)).mul_(scale)
        by_position = scores.view(batch, key_heads, count, group, span)
        later = (torch.arange(own, span, device=query.device)
                 > torch.arange(own, own + count, device=query.device)[:, None])
        by_position[..., own:].masked_fill_(later.unsqueeze(1), float("-inf"))
        if attention_mask is not None:  # padding in a batch: what the caller hides stays hidden
            visible = attention_mask.bool()[:, :, first:last, -keys:][..., :min(span, keys)]
            by_position[..., :visible.shape[-1]].masked_fill_(~visible.unsqueeze(3), float("-inf"))
        pieces.append(torch.softmax(scores, dim=-1) @ value[:, :, :span])
        first = last
    out = pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=2)
    return out.view(batch, key_heads, rows, group, width).transpose(1, 2).reshape(batch, rows, heads, width), None


def _key_span(position: int) -> int:
    """How many keys a decoding row at `position` attends over, the masked ones included."""
    return (position // DECODING_KEY_BUCKET + 1) * DECODING_KEY_BUCKET


@functools.cache
def _float32_keeps_rows(key_heads: int, group: int, width: int, threads: int) -> bool:
    """Whether this machine's kernels give `_span_attention`'s rows the same bits in a
    wide pass as alone, for `key_heads` key heads of `width`, each shared by `group` query heads,
    on `threads` threads: checked once per machine's kernels, the answer kept in the cache
    (kept_checks.py)."""
    from ..kept_checks import kept_answer

    return kept_answer(f"float32 attention keeps rows {key_heads}x{group}x{width}", threads,
                       lambda: _check_float32_keeps_rows(key_heads, group, width))


def _check_float32_keeps_rows(key_heads: int, group: int, width: int) -> bool:
    """_float32_keeps_rows, checked on random values: a block of every size within a bucket, near
    the start and 2,000 tokens in, then a widest pass across buckets. (Kernels switch with the
    shape: here a product of 2 rows sums in another order than one of 32, while 7 and 112 agree;
    so do 2 key heads, but not 1.)
    """
    generator = torch.Generator().manual_seed(0)
    for context in (DECODING_KEY_BUCKET, 31 * DECODING_KEY_BUCKET):
        for rows in range(1, DECODING_ATTENTION_BLOCK + 1):
            if not _rows_kept(key_heads, group, width, context, rows, generator):
                return False
    return _rows_kept(key_heads, group, width, 1000, WIDEST_DECODING_PASS, generator)


def _rows_kept(key_heads: int, group: int, width: int, context: int, rows: int, generator: torch.Generator) -> bool:
    """Whether a pass of `rows` after `context` keys gives each row the bits it has alone."""
    query = torch.randn(1, key_heads * group, rows, width, generator=generator) * 3
    key, value = (torch.randn(1, key_heads, context + rows, width, generator=generator) * 3 for _ in range(2))
    with torch.inference_mode():
        wide, _ = _span_attention(None, query, key, value, None)
        for row in range(rows):
            seen = context + row + 1
            alone, _ = _span_attention(None, query[:, :, row:row + 1], key[:, :, :seen],
                                                   value[:, :, :seen], None)
            if not torch.equal(alone[0, 0], wide[0, row]):
                return False
    return True


def _float64_decoding_attention(module, query, key, value, attention_mask, **kwargs):
    """Decoding attention where float32 would not keep each row's bits (`_float32_keeps_rows`):
    `_span_attention` in float64, rounded back, so a summation order that moves with the pass's
    shape vanishes in the rounding. Slower: a 64-token pass at 2,000 tokens of context spent 132
    of 266 ms in float64 attention (0.5B).
    """
    out, _ = _span_attention(module, query.double(), key.double(), value.double(), attention_mask, **kwargs)
    return out.to(query.dtype), None


def _decoding_attention(module, query, key, value, attention_mask, **kwargs):
    key_heads, width = key.shape[1], query.shape[-1]
    keeps_rows = _float32_keeps_rows(key_heads, query.shape[1] // key_heads, width, torch.get_num_threads())
    exact = _span_attention if keeps_rows else _float64_decoding_attention
    return exact(module, query, key, value, attention_mask, **kwargs)


def _int8_attention(module, query, key, value, attention_mask, **kwargs):
    """The int8 paths' attention: a pass decoding makes (up to WIDEST_DECODING_PASS rows) gives
    each row the bits it has alone (`_decoding_attention`); a prompt's pass, wider than any of
    those, runs SDPA in float32, chunk by chunk.

    SDPA is not row-independent, so a prompt's rows are computed in chunks that start at whole
    multiples of PROMPT_CHUNK (absolute positions), each attending to the keys up to its end: a
    chunk is then the same computation on the same values whether the prompt came in one pass or
    its first chunks came from a cache (decode.PrefixCache reuses whole chunks only).
    """
    rows = query.shape[2]
    if rows <= WIDEST_DECODING_PASS:
        return _decoding_attention(module, query, key, value, attention_mask, **kwargs)
    first = key.shape[2] - rows  # the absolute position of the pass's first row
    pieces = []
    begin = first
    while begin < first + rows:
        end = min((begin // PROMPT_CHUNK + 1) * PROMPT_CHUNK, first + rows)
        if attention_mask is None and begin == 0:  # a prompt's first chunk: causal, as SDPA knows it
            mask = None
        elif attention_mask is None:  # no padding
            mask = torch.ones(1, 1, end - begin, end, dtype=torch.bool, device=query.device).tril(diagonal=begin)
        else:
            mask = attention_mask[:, :, begin - first:end - first, :end].bool()
        piece, _ = sdpa_attention_forward(module, query[:, :, begin - first:end - first], key[:, :, :end],
                                          value[:, :, :end], mask, **kwargs)
        pieces.append(piece)
        begin = end
    return torch.cat(pieces, dim=1), None


def _int8_row_attention(module, query, key, value, attention_mask, **kwargs):
    """The int8 paths' attention where float32 keeps each row's bits (_float32_keeps_rows): every
    pass, a prompt's included, as a decoding pass (_decoding_attention)."""
    return _decoding_attention(module, query, key, value, attention_mask, **kwargs)


def register_float64_attention() -> str:
    """Register float64 SDPA with transformers; returns its name for `_attn_implementation`."""
    return _register(FLOAT64_ATTENTION, _float64_attention)


def prepare_int8_attention(config) -> str:
    """Register the int8 paths' attentions and settle, for `config`'s heads on this machine,
    whether they attend in float32 (checked once per machine's kernels, here, so that neither a
    request nor a timed pass pays it); returns the name of the one to run: every row alone where
    float32 keeps the rows' bits (_int8_row_attention), else prompts in chunks (_int8_attention)."""
    heads = config.num_attention_heads
    key_heads = getattr(config, "num_key_value_heads", None) or heads
    width = getattr(config, "head_dim", None) or config.hidden_size // heads
    keeps_rows = _float32_keeps_rows(key_heads, heads // key_heads, width, torch.get_num_threads())
    chunked = _register(INT8_ATTENTION, _int8_attention)
    by_row = _register(INT8_ROW_ATTENTION, _int8_row_attention)
    return by_row if keeps_rows else chunked


def _register(name: str, attention) -> str:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(name, attention)
    AttentionMaskInterface.register(name, sdpa_mask)
    return name
