"""Attention and the transformer blocks that every chapter builds its model from.

Every function and module here returns its attention *pattern* (the weights after the
softmax) from the same forward pass that computes its output, so that what a chapter
plots is exactly what the model used. Names follow TransformerLens: *scores* are the
logits before the softmax, the *pattern* is after it, and a stack returns its patterns as
(batch, layer, head, query_pos, key_pos).

Blocks are pre-LayerNorm (normalise, transform, add back to the residual stream), which
trains without warm-up tricks at the small sizes the book uses.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import nn


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention, returning (output, pattern).

    q: (..., query_pos, d_head), k and v: (..., key_pos, d_head).
    mask, broadcastable to (..., query_pos, key_pos): boolean, True where a
    query may attend; or floating point, a bias added to the scores (a
    learned preference for some keys). A query row that may attend to
    nothing gets a pattern of zeros, not NaNs.
    """
    # (..., query_pos, key_pos); in place: backward keeps q and k, not this
    scores = (q @ k.transpose(-2, -1)).div_(math.sqrt(q.shape[-1]))
    may_attend = None
    if mask is not None and mask.dtype == torch.bool:
        # True and False become a bias of 0 and -inf, added as a float mask
        # is: the same scores as masked_fill_, which took ten times as long
        # on a CPU broadcast over a batch, and whose backward fills again
        may_attend = mask
        mask = torch.zeros_like(may_attend, dtype=scores.dtype)
        mask.masked_fill_(~may_attend, float("-inf"))
    if mask is not None:
        scores = scores + mask
    pattern = torch.softmax(scores, dim=-1)  # (..., query_pos, key_pos)
    if may_attend is not None and not _every_row_open_on_cpu(may_attend):
        # softmax of an all -inf row is NaN; such a query reads nothing
        pattern = torch.nan_to_num(pattern, nan=0.0)
    # (..., query_pos, d_head), (..., query_pos, key_pos)
    return pattern @ v, pattern


def _every_row_open_on_cpu(mask: torch.Tensor) -> bool:
    """On the CPU, whether every query of a boolean mask may read some key: then nan_to_num
    would change nothing, and its passes over the pattern took a fifth of a Life training step,
    so the mask (smaller than the pattern) is asked first. Elsewhere False without asking: the
    answer would wait for the device, and the pass is cheap there."""
    return mask.device.type == "cpu" and bool(mask.any(-1).all())


def attention_beside(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    offsets: Sequence[int] | torch.Tensor,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`attention` in which each query reads two keys only: its own position, and the one
    `offsets[h]` positions further on (head h; negative offsets look back). For tokens laid
    out row by row on a grid, an offset of 1 is the tile to the right and one of a row's
    length the tile below, so each head reads one neighbour: a pass costs a few operations per
    token, with no score for any other pair. The same output as `attention` with a mask that
    is False everywhere but those two keys.

    q, k: (..., head, pos, d_head), v: (..., head, pos, d_v); offsets: one int per head, or
    a (head, pos) long tensor, one per head and query (tokens gathered from a grid, in no
    order of their own, each still reading its neighbour).
    mask, broadcastable to (..., head, pos, 2): as in `attention`, over (the query's own
    position, the one beside it); a query always reads at least its own position, so the
    mask may rule out only the one beside it. A key beside that falls off either end reads
    the key at that end instead: mask it.
    Returns (output (..., head, pos, d_v), pattern (..., head, pos, 2)).
    """
    heads, n = k.shape[-3], k.shape[-2]
    if isinstance(offsets, torch.Tensor):
        if offsets.shape != (heads, n) or offsets.dtype != torch.long:
            raise ValueError(f"offsets as a tensor are (head, pos) = ({heads}, {n}) long, got "
                             f"{tuple(offsets.shape)} {offsets.dtype}")
        there = _rows_at(n, offsets)  # (head * pos,)
    elif len(offsets) != heads or any(not isinstance(o, int) for o in offsets):
        raise ValueError(f"offsets are one int per head ({heads}), or a (head, pos) tensor, got {offsets!r}")
    else:
        there = _rows_beside(n, tuple(offsets), k.device)  # (head * pos,)
    # one index_select costs a fraction of slicing each head (whose backward builds a zero tensor per head)
    k_beside, v_beside = (t.flatten(-3, -2).index_select(-2, there).view(t.shape) for t in (k, v))
    # over two keys the softmax is a sigmoid of the difference of their scores: a third of
    # the operations, each over every token, of scoring both and normalising (a maze pass)
    gap = (q * (k_beside - k)).sum(-1) / math.sqrt(q.shape[-1])  # (..., head, pos)
    if mask is not None and mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, device=mask.device).masked_fill(~mask, float("-inf"))
    if mask is not None:
        gap = gap + (mask[..., 1] - mask[..., 0])
    beside = torch.sigmoid(gap)[..., None]  # (..., head, pos, 1): the weight on the key beside
    return v + beside * (v_beside - v), torch.cat((1 - beside, beside), -1)


@functools.lru_cache(maxsize=64)
def _rows_beside(n: int, offsets: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """(head * pos,) long: for each head and query, the row of the key beside it in keys viewed
    as (..., head * pos, d), held to the sequence at its ends. Cached: a looped encoder asks for
    the same rows at every pass; made outside inference mode, so that training may use them too."""
    with torch.inference_mode(False):
        return _rows_at(n, torch.tensor(offsets, device=device)[:, None])


def _rows_at(n: int, offsets: torch.Tensor) -> torch.Tensor:
    """(head * pos,) long: the rows of `_rows_beside` for offsets (head, pos) or (head, 1)."""
    there = (torch.arange(n, device=offsets.device) + offsets).clamp(0, n - 1)  # (head, pos)
    return (there + n * torch.arange(len(offsets), device=offsets.device)[:, None]).flatten()


def causal_mask(
    n: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """(n, n) boolean mask, True on and below the diagonal: position i
    sees positions <= i."""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def sinusoidal_positions(n_ctx: int, d_model: int) -> torch.Tensor:
    """The fixed position encoding of "Attention Is All You Need":
    (n_ctx, d_model).

    Even columns hold sin(pos / 10000^(2i/d)), odd columns the matching
    cos, so that a fixed offset between two positions is a rotation of
    each (sin, cos) pair.
    """
    if n_ctx < 1 or d_model < 2:
        raise ValueError(f"need n_ctx >= 1 and d_model >= 2, got "
                         f"n_ctx={n_ctx}, d_model={d_model}")
    pos = torch.arange(n_ctx, dtype=torch.float32)[:, None]  # (n_ctx, 1)
    i = torch.arange(0, d_model, 2)
    freq = torch.exp(-math.log(10000.0) * i / d_model)  # (ceil(d/2),)
    table = torch.zeros(n_ctx, d_model)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq[: d_model // 2])
    return table


class MultiHeadAttention(nn.Module):
    """Multi-head attention. Self-attention by default; pass `context` for cross-attention.

    forward(x, context=None, mask=None) -> (output (batch, query_pos, d_model),
                                            pattern (batch, head, query_pos, key_pos))
    """

    def __init__(self, d_model: int, n_heads: int, causal: bool = False, bias: bool = True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.n_heads, self.d_head, self.causal = n_heads, d_model // n_heads, causal
        self.W_Q = nn.Linear(d_model, d_model, bias=bias)
        self.W_K = nn.Linear(d_model, d_model, bias=bias)
        self.W_V = nn.Linear(d_model, d_model, bias=bias)
        self.W_O = nn.Linear(d_model, d_model, bias=bias)

    def keys_values(self, context: torch.Tensor) -> KeysValues:
        """The keys and values of `context` (batch, pos, d_model), each (batch, head, pos,
        d_head). Cross-attention that reads one context at every step of a decoding (the
        encoder's memory) computes them once here and takes them as `context`: the same
        numbers as computing them at every step, for the price of one."""
        return KeysValues(self._heads(self.W_K(context)), self._heads(self.W_V(context)))

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        b, n, _ = t.shape
        # (batch, pos, d_model) -> (batch, head, pos, d_head)
        return t.view(b, n, self.n_heads, self.d_head).transpose(1, 2)

    def forward(
        self, x: torch.Tensor, context: torch.Tensor | KeysValues | None = None, mask: torch.Tensor | None = None,
        offsets: Sequence[int] | torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """context: what cross-attention reads, (batch, key_pos, d_model), or its
        `keys_values`; None for self-attention.
        offsets: one int per head, a (head, pos) tensor, or None: with offsets, each query
        reads only itself and the position offsets[h] further on (`attention_beside`), mask is for those two (batch
        or 1, head or 1, query_pos, 2), and the pattern is (batch, head, query_pos, 2)."""
        q = self._heads(self.W_Q(x))  # (batch, head, query_pos, d_head)
        if isinstance(context, KeysValues):  # a context read before (`keys_values`)
            k, v = context
        else:
            context = x if context is None else context
            k, v = self.keys_values(context)  # (batch, head, key_pos, d_head) each
        if offsets is not None and (self.causal or context is not x):
            raise ValueError("offsets are for self-attention without a causal mask: each position reads beside it")
        if self.causal:
            if context is not x:
                raise ValueError("a causal mask applies to self-attention only")
            cm = causal_mask(x.shape[1], x.device)
            if mask is None:
                mask = cm
            else:
                mask = mask & cm if mask.dtype == torch.bool else mask.masked_fill(~cm, float("-inf"))
        if mask is not None and mask.dim() == 3:  # (batch, query_pos, key_pos): same for every head;
            # a per-head mask or bias comes as (batch or 1, head, query_pos, key_pos)
            mask = mask[:, None]
        # (batch, head, query_pos, d_head)
        z, pattern = attention(q, k, v, mask) if offsets is None else attention_beside(q, k, v, offsets, mask)
        b, _, n, _ = z.shape
        z = z.transpose(1, 2).reshape(b, n, self.n_heads * self.d_head)  # (batch, query_pos, d_model)
        return self.W_O(z), pattern

    def extend(
        self, x: torch.Tensor, past: KeysValues | None = None, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, KeysValues]:
        """Self-attention for positions appended to a sequence whose keys and values are
        `past` (None: x is the sequence's start): x (batch, new, d_model), mask (batch or 1,
        new, past + new) for the new queries over every position, causal or not as the module
        is. What `forward` gives at the new positions of the whole sequence, computed for them
        alone, so that decoding one position at a time costs as the sequence, not its square.
        Returns (output (batch, new, d_model), pattern (batch, head, new, past + new), the
        keys and values with the new positions appended)."""
        q = self._heads(self.W_Q(x))  # (batch, head, new, d_head)
        k, v = self._heads(self.W_K(x)), self._heads(self.W_V(x))
        if past is not None:
            k, v = torch.cat([past.k, k], 2), torch.cat([past.v, v], 2)  # (batch, head, past + new, d_head)
        n_new, n_all = x.shape[1], k.shape[2]
        if self.causal and n_new > 1:  # one new position reads every position: no mask
            # (new, past + new): the causal mask's rows of the new positions alone,
            # so that a decoding step builds its own row, not the whole square again
            cm = (torch.arange(n_all, device=x.device)
                  <= torch.arange(n_all - n_new, n_all, device=x.device)[:, None])
            mask = cm if mask is None else mask & cm
        if mask is not None and mask.dim() == 3:
            mask = mask[:, None]  # the same for every head
        z, pattern = attention(q, k, v, mask)
        z = z.transpose(1, 2).reshape(len(x), n_new, self.n_heads * self.d_head)  # (batch, new, d_model)
        return self.W_O(z), pattern, KeysValues(k, v)


class KeysValues(NamedTuple):
    """One attention layer's keys and values of the positions so far, each (batch, head,
    pos, d_head): what `extend` appends to. `take` keeps (and reorders) rows, as a search
    that drops and copies sequences needs."""

    k: torch.Tensor
    v: torch.Tensor

    def take(self, index: torch.Tensor) -> KeysValues:
        return KeysValues(self.k[index], self.v[index])


def mlp(d_model: int, d_mlp: int, dropout: float = 0.0) -> nn.Sequential:
    """The position-wise feed-forward layer: d_model -> d_mlp -> d_model."""
    return nn.Sequential(nn.Linear(d_model, d_mlp), nn.GELU(), nn.Linear(d_mlp, d_model), nn.Dropout(dropout))


class EncoderBlock(nn.Module):
    """Pre-LayerNorm block: self-attention, then a feed-forward layer, each added to the residual.

    With causal=True this is the GPT-style "decoder-only" block.
    forward(x, mask=None, offsets=None) -> (x, pattern (batch, head, query_pos, key_pos)); with
    `offsets`, each position reads only itself and one position beside it (see
    MultiHeadAttention) and the pattern is (batch, head, query_pos, 2).
    """

    def __init__(self, d_model: int, n_heads: int, d_mlp: int, dropout: float = 0.0, causal: bool = False):
        super().__init__()
        self.ln_attn, self.ln_mlp = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, causal=causal)
        self.mlp = mlp(d_model, d_mlp, dropout)
        self.drop = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None,
        offsets: Sequence[int] | torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        z, pattern = self.attn(self.ln_attn(x), mask=mask, offsets=offsets)
        x = x + self.drop(z)  # (batch, pos, d_model)
        x = x + self.mlp(self.ln_mlp(x))
        return x, pattern

    def extend(
        self, x: torch.Tensor, past: KeysValues | None = None, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, KeysValues]:
        """`forward` at positions x (batch, new, d_model) appended to a sequence whose keys
        and values are `past` (see MultiHeadAttention.extend): (x, pattern, keys and values)."""
        z, pattern, kv = self.attn.extend(self.ln_attn(x), past, mask)
        x = x + self.drop(z)  # (batch, new, d_model)
        x = x + self.mlp(self.ln_mlp(x))
        return x, pattern, kv


class DecoderBlock(nn.Module):
    """Pre-LayerNorm decoder block: causal self-attention, cross-attention to the encoder's
    output (`memory`), then a feed-forward layer.

    forward(x, memory, memory_mask=None) -> (x, self_pattern, cross_pattern)
    """

    def __init__(self, d_model: int, n_heads: int, d_mlp: int, dropout: float = 0.0):
        super().__init__()
        self.ln_self, self.ln_cross, self.ln_mlp = (nn.LayerNorm(d_model) for _ in range(3))
        self.self_attn = MultiHeadAttention(d_model, n_heads, causal=True)
        self.cross_attn = MultiHeadAttention(d_model, n_heads)
        self.mlp = mlp(d_model, d_mlp, dropout)
        self.drop = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        z, self_pattern = self.self_attn(self.ln_self(x))
        x = x + self.drop(z)  # (batch, target_pos, d_model)
        z, cross_pattern = self.cross_attn(self.ln_cross(x), context=memory, mask=memory_mask)
        x = x + self.drop(z)
        x = x + self.mlp(self.ln_mlp(x))
        return x, self_pattern, cross_pattern

    def extend(
        self, x: torch.Tensor, memory: torch.Tensor | KeysValues, past: KeysValues | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, KeysValues]:
        """`forward` at target positions x (batch, new, d_model) appended to those whose
        self-attention keys and values are `past` (None: x starts the sequence); memory, or
        its keys and values (`cross_attn.keys_values`); memory_mask is for the new positions
        only. Returns (x, self_pattern (batch, head, new, past + new),
        cross_pattern (batch, head, new, src_pos), the keys and values with x's appended)."""
        z, self_pattern, kv = self.self_attn.extend(self.ln_self(x), past)
        x = x + self.drop(z)  # (batch, new, d_model)
        z, cross_pattern = self.cross_attn(self.ln_cross(x), context=memory, mask=memory_mask)
        x = x + self.drop(z)
        x = x + self.mlp(self.ln_mlp(x))
        return x, self_pattern, cross_pattern, kv


class Encoder(nn.Module):
    """A stack of EncoderBlocks with a final LayerNorm.

    forward(x, mask=None) -> (x (batch, pos, d_model), patterns (batch, layer, head, query_pos, key_pos))

    mask is what `attention` accepts (a boolean mask or a float bias), given to every block;
    or a list or tuple with one entry per layer (each a mask, a bias or None), so that a
    model with a learned bias per layer passes `[bias[layer] for layer in ...]`.
    """

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_mlp: int, dropout: float = 0.0, causal: bool = False):
        super().__init__()
        if n_layers < 1:
            raise ValueError(f"n_layers must be at least 1, got {n_layers}")
        self.blocks = nn.ModuleList(EncoderBlock(d_model, n_heads, d_mlp, dropout, causal) for _ in range(n_layers))
        self.ln_final = nn.LayerNorm(d_model)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | Sequence[torch.Tensor | None] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if isinstance(mask, (list, tuple)):
            if len(mask) != len(self.blocks):
                raise ValueError(f"got {len(mask)} per-layer masks for an encoder of {len(self.blocks)} layers")
            masks = mask
        else:
            masks = [mask] * len(self.blocks)
        patterns = []
        for block, layer_mask in zip(self.blocks, masks):
            x, pattern = block(x, layer_mask)  # (batch, pos, d_model), (batch, head, query_pos, key_pos)
            patterns.append(pattern)
        return self.ln_final(x), torch.stack(patterns, dim=1)

    def extend(
        self, x: torch.Tensor, past: Sequence[KeysValues] | None = None, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, list[KeysValues]]:
        """`forward` for positions x (batch, new, d_model) appended to a sequence that earlier
        calls attended, `past` holding each layer's keys and values (None: x starts the
        sequence): (x (batch, new, d_model), patterns (batch, layer, head, new, past + new),
        each layer's keys and values with x's positions appended). Only a causal stack gives
        what `forward` over the whole sequence gives, since earlier positions never see later
        ones; `mask` is one mask for every layer, (batch or 1, new, past + new)."""
        if not self.blocks[0].attn.causal:
            raise ValueError("extend needs a causal encoder: in any other, earlier positions see the new ones")
        if past is not None and len(past) != len(self.blocks):
            raise ValueError(f"got keys and values of {len(past)} layers for an encoder of {len(self.blocks)}")
        patterns, cache = [], []
        for i, block in enumerate(self.blocks):
            x, pattern, kv = block.extend(x, None if past is None else past[i], mask)
            patterns.append(pattern)
            cache.append(kv)
        return self.ln_final(x), torch.stack(patterns, dim=1), cache


class Decoder(nn.Module):
    """A stack of DecoderBlocks with a final LayerNorm.

    forward(x, memory, memory_mask=None) -> (x, self_patterns, cross_patterns), the patterns
    shaped (batch, layer, head, query_pos, key_pos).
    """

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_mlp: int, dropout: float = 0.0):
        super().__init__()
        if n_layers < 1:
            raise ValueError(f"n_layers must be at least 1, got {n_layers}")
        self.blocks = nn.ModuleList(DecoderBlock(d_model, n_heads, d_mlp, dropout) for _ in range(n_layers))
        self.ln_final = nn.LayerNorm(d_model)

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        self_patterns, cross_patterns = [], []
        for block in self.blocks:
            x, sp, cp = block(x, memory, memory_mask)
            self_patterns.append(sp)
            cross_patterns.append(cp)
        return self.ln_final(x), torch.stack(self_patterns, 1), torch.stack(cross_patterns, 1)

    def extend(
        self, x: torch.Tensor, memory: torch.Tensor | Sequence[KeysValues], past: Sequence[KeysValues] | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[KeysValues]]:
        """`forward` at target positions x (batch, new, d_model) appended to a sequence that
        earlier calls decoded, `past` holding each layer's self-attention keys and values
        (None: x starts it); memory (batch, src_pos, d_model), or each layer's keys and values
        of it (`memory_keys_values`: a decoding computes them once, not at every token);
        memory_mask is for the new positions, (batch, [head,] new, src_pos). What `forward`
        gives at those positions, computed for them alone, so that
        decoding a token per step costs as the sequence, not its square. Returns (x, the two
        patterns over the new positions, each layer's keys and values with x's appended)."""
        if past is not None and len(past) != len(self.blocks):
            raise ValueError(f"got keys and values of {len(past)} layers for a decoder of {len(self.blocks)}")
        read = memory if isinstance(memory, torch.Tensor) else list(memory)
        if not isinstance(memory, torch.Tensor) and len(read) != len(self.blocks):
            raise ValueError(f"got the memory's keys and values of {len(read)} layers for a decoder of {len(self.blocks)}")
        self_patterns, cross_patterns, cache = [], [], []
        for i, block in enumerate(self.blocks):
            x, sp, cp, kv = block.extend(x, memory if isinstance(memory, torch.Tensor) else read[i],
                                         None if past is None else past[i], memory_mask)
            self_patterns.append(sp)
            cross_patterns.append(cp)
            cache.append(kv)
        return self.ln_final(x), torch.stack(self_patterns, 1), torch.stack(cross_patterns, 1), cache

    def memory_keys_values(self, memory: torch.Tensor) -> list[KeysValues]:
        """Each layer's cross-attention keys and values of `memory` (batch, src_pos, d_model),
        for `extend`: the memory is the same at every token of a decoding. Laid out in memory
        as a head's product reads them, which each token would otherwise copy them into."""
        return [KeysValues(*(t.contiguous() for t in block.cross_attn.keys_values(memory))) for block in self.blocks]


class Seq2SeqPatterns(NamedTuple):
    """The attention patterns of one EncoderDecoder forward pass, each (batch, layer, head, query_pos, key_pos)."""

    encoder: torch.Tensor  # (batch, layer, head, src_pos, src_pos)
    decoder_self: torch.Tensor  # (batch, layer, head, tgt_pos, tgt_pos), causal
    cross: torch.Tensor  # (batch, layer, head, tgt_pos, src_pos)


class EncoderDecoder(nn.Module):
    """The two stacks of a sequence-to-sequence transformer; embeddings and unembedding are
    the chapter's, since source and target are usually different vocabularies.

    encode(src, src_mask=None) -> (memory, encoder_patterns): once per input.
    decode(tgt, memory, memory_mask=None) -> (x, self_patterns, cross_patterns): once per
        decoding step, against the same memory; self-attention is causal.
    forward(src, tgt, src_mask=None, memory_mask=None) -> (x (batch, tgt_pos, d_model), Seq2SeqPatterns)

    src_mask is what Encoder takes (one mask or bias, or one per layer); memory_mask hides
    source positions from cross-attention, e.g. keep[:, None, :] for a (batch, src_pos) keep.
    """

    def __init__(self, n_encoder_layers: int, n_decoder_layers: int, d_model: int, n_heads: int, d_mlp: int,
                 dropout: float = 0.0):
        super().__init__()
        if n_encoder_layers < 1 or n_decoder_layers < 1:
            raise ValueError("n_encoder_layers and n_decoder_layers must be at least 1, "
                             f"got {n_encoder_layers} and {n_decoder_layers}")
        self.encoder = Encoder(n_encoder_layers, d_model, n_heads, d_mlp, dropout)
        self.decoder = Decoder(n_decoder_layers, d_model, n_heads, d_mlp, dropout)

    def encode(
        self, src: torch.Tensor, src_mask: torch.Tensor | Sequence[torch.Tensor | None] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # (batch, src_pos, d_model), (batch, layer, head, src_pos, src_pos)
        return self.encoder(src, src_mask)

    def decode(
        self, tgt: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # (batch, tgt_pos, d_model), (batch, layer, head, tgt_pos, tgt_pos), (batch, layer, head, tgt_pos, src_pos)
        return self.decoder(tgt, memory, memory_mask)

    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        src_mask: torch.Tensor | Sequence[torch.Tensor | None] | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, Seq2SeqPatterns]:
        # (batch, src_pos, d_model)
        memory, enc_patterns = self.encode(src, src_mask)
        # (batch, tgt_pos, d_model)
        x, self_patterns, cross_patterns = self.decode(
            tgt, memory, memory_mask)
        return x, Seq2SeqPatterns(enc_patterns, self_patterns,
                                  cross_patterns)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
