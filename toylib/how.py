"""The measurements behind the chapter "How transformers work".

Retells T. A. Wheeler, "Transformers - How and Why They Work" (2024), the companion to his
Sokoban post: each idea of the transformer measured with the code this book runs
(`toylib.attention`). How peaked attention's softmax gets without the 1/sqrt(d_head) scale,
and how little gradient then passes (`softmax_saturation`); how a gradient's size changes with
depth, with and without residual connections and LayerNorm (`gradient_norms_by_depth`); the
shape of every tensor in one multi-head attention (`head_shapes`); and what greedy decoding
with an encoder-decoder costs when the encoder runs once or at every step
(`greedy_decode_work`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from toylib.attention import EncoderDecoder, MultiHeadAttention, attention, mlp, sinusoidal_positions
from toylib.infer import model_device


class SaturationRow(NamedTuple):
    """How peaked attention is for one d_head, over random queries."""

    d_head: int
    max_weight: float  # the largest weight in a pattern, mean over queries
    one_hot: float  # share of queries whose largest weight exceeds 0.99
    grad: float  # median size of the softmax's Jacobian (Frobenius norm)


def softmax_saturation(
    d_heads: Sequence[int] = (2, 8, 32, 128, 512),
    n_keys: int = 16,
    n_queries: int = 500,
    scaled: bool = True,
    seed: int = 0,
) -> list[SaturationRow]:
    """How peaked `attention`'s pattern is, with and without its scale.

    For each d_head, draws n_queries queries, each with its own n_keys keys,
    every entry N(0, 1), so that a score q . k has variance d_head. The
    pattern comes from toylib's `attention`, which divides the scores by
    sqrt(d_head); with scaled=False the queries are multiplied by
    sqrt(d_head) first, which cancels the division and leaves raw q . k.

    `grad` is the Frobenius norm of the softmax's Jacobian d pattern /
    d scores, diag(p) - p p^T: the gradient that reaches the scores is this
    matrix times the gradient that reaches the pattern, so where it is
    near zero the queries and keys stop learning. Its median over queries
    is reported, because a rare near-tie between two keys dominates a mean.
    """
    if not d_heads or any(int(d) != d or d < 1 for d in d_heads):
        raise ValueError(f"d_heads must be positive ints, got {d_heads!r}")
    if n_keys < 2:
        raise ValueError(f"need n_keys >= 2 to have a choice, got {n_keys}")
    if n_queries < 1:
        raise ValueError(f"n_queries must be positive, got {n_queries}")
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for d in d_heads:
        q = torch.randn(n_queries, 1, d, generator=gen)  # (query, 1, d)
        k = torch.randn(n_queries, n_keys, d, generator=gen)  # (q, key, d)
        q_in = q if scaled else q * math.sqrt(d)
        _, pattern = attention(q_in, k, k)  # (query, 1, key)
        p = pattern[:, 0]  # (query, key)
        s2, s3 = (p**2).sum(-1), (p**3).sum(-1)  # (query,)
        # |diag(p) - p p^T|_F^2 = sum p^2 - 2 sum p^3 + (sum p^2)^2
        jac = (s2 - 2 * s3 + s2**2).clamp_min(0).sqrt()  # (query,)
        top = p.max(-1).values  # (query,)
        rows.append(SaturationRow(int(d), top.mean().item(),
                                  (top > 0.99).float().mean().item(),
                                  jac.median().item()))
    return rows


def gradient_norms_by_depth(
    n_layers: int = 32,
    residual: bool = True,
    norm: bool = True,
    d_model: int = 32,
    d_mlp: int = 128,
    batch: int = 64,
    seed: int = 0,
) -> list[float]:
    """The gradient norm of each layer's first weight matrix in a deep
    stack of toylib's feed-forward sublayer `mlp`, freshly initialised,
    for one loss on random input. Index 0 is the layer nearest the input.

    Each layer is one of
        residual and norm:  x = x + mlp(ln(x))  (toylib's pre-LN sublayer)
        norm only:          x = mlp(ln(x))
        residual only:      x = x + mlp(x)
        neither:            x = mlp(x)
    The loss is the mean squared error between the normalised output and
    a random target. Computed in float64: without residuals the first
    layers' gradients fall below what float32 can square.

    With the defaults (seeds 0 to 2), a stack with neither loses about a
    factor 5 per layer, 22 orders of magnitude over 32 layers; with a
    residual every layer's norm is within a factor 2 of every other's.
    LayerNorm alone also keeps this fresh stack within a factor 10: it
    re-scales each layer's input, which undoes the shrinking.
    """
    if n_layers < 1 or d_model < 2 or d_mlp < 1 or batch < 1:
        raise ValueError("need n_layers, d_mlp, batch >= 1, d_model >= 2, "
                         f"got {n_layers}, {d_mlp}, {batch} and {d_model}")
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):  # leave the caller's seed be
        torch.manual_seed(seed)
        layers = [mlp(d_model, d_mlp).double() for _ in range(n_layers)]
        norms = [nn.LayerNorm(d_model).double() for _ in range(n_layers)]
    x = torch.randn(batch, d_model, generator=gen, dtype=torch.float64)
    target = torch.randn(batch, d_model, generator=gen, dtype=torch.float64)
    for f, ln in zip(layers, norms):
        h = f(ln(x)) if norm else f(x)  # (batch, d_model)
        x = x + h if residual else h
    out = nn.functional.layer_norm(x, (d_model,))  # (batch, d_model)
    nn.functional.mse_loss(out, target).backward()
    return [f[0].weight.grad.norm().item() for f in layers]


def head_shapes(
    mha: MultiHeadAttention,
    x: torch.Tensor,
    context: torch.Tensor | None = None,
) -> list[tuple[str, tuple[int, ...]]]:
    """The shape of each tensor in one real forward pass of `mha`, in the
    order it computes them: (name, shape) pairs, for printing.

    The shapes are recorded as `mha.forward` runs, by hooks on its
    projections and by wrapping its `_heads` reshape for this one call;
    the hooks are removed afterwards. x: (batch, query_pos, d_model);
    context (batch, key_pos, d_model) for cross-attention.
    """
    d_model = mha.W_Q.in_features
    for name, t in (("x", x), ("context", context)):
        if t is not None and (t.dim() != 3 or t.shape[-1] != d_model):
            raise ValueError(f"{name} must be (batch, pos, {d_model}), "
                             f"got shape {tuple(t.shape)}")
    shapes = [("x", tuple(x.shape))]
    split = mha._heads

    def record(name: str):
        def hook(module, inputs, output):
            shapes.append((name, tuple(output.shape)))
        return hook

    def heads(t: torch.Tensor) -> torch.Tensor:
        out = split(t)  # (batch, head, pos, d_head)
        shapes.append(("  split into heads", tuple(out.shape)))
        return out

    def merged(module, inputs):
        shapes.append(("heads side by side", tuple(inputs[0].shape)))

    hooks = [mha.W_Q.register_forward_hook(record("q = W_Q(x)")),
             mha.W_K.register_forward_hook(record("k = W_K(context)")),
             mha.W_V.register_forward_hook(record("v = W_V(context)")),
             mha.W_O.register_forward_pre_hook(merged)]
    mha._heads = heads  # the instance's attribute hides the method
    try:
        out, pattern = mha(x, context)
    finally:
        del mha._heads
        for h in hooks:
            h.remove()
    # the pattern is made between the heads' split and their merge
    shapes.insert(-1, ("pattern", tuple(pattern.shape)))
    shapes.append(("output = W_O(...)", tuple(out.shape)))
    return shapes


class DecodeWork(NamedTuple):
    """What a greedy decode did, counted as it ran."""

    tokens: torch.Tensor  # (batch, n_steps) the chosen tokens, on the CPU
    encoder_calls: int  # times the encoder stack ran
    decoder_calls: int  # times the decoder stack ran
    encoder_positions: int  # source positions through the encoder, summed
    decoder_positions: int  # target positions through the decoder, summed


@torch.no_grad()
def greedy_decode_work(
    model: EncoderDecoder,
    embed: nn.Embedding,
    unembed: nn.Linear,
    src: torch.Tensor,
    n_steps: int,
    reencode: bool = False,
    start: int = 0,
) -> DecodeWork:
    """Greedy decoding with toylib's EncoderDecoder, counting the work.

    src: (batch, src_pos, d_model), already embedded. The target starts as
    the `start` token; each step embeds the tokens so far (plus the
    sinusoidal positions), runs `decode` against the encoder's memory and
    appends the most likely next token. `encode` runs once, or before every
    step with reencode=True, which repeats the same work for the same
    memory. The calls are counted by hooks on the two stacks. Put a model
    with dropout in eval() mode first, or the tokens are random. The tokens
    come back on the CPU, wherever the model runs.
    """
    d_model = embed.embedding_dim
    if src.dim() != 3 or src.shape[-1] != d_model:
        raise ValueError(f"src must be (batch, src_pos, {d_model}), "
                         f"got shape {tuple(src.shape)}")
    if n_steps < 1:
        raise ValueError(f"n_steps must be at least 1, got {n_steps}")
    if not 0 <= start < embed.num_embeddings:
        last = embed.num_embeddings - 1
        raise ValueError(f"start must be a token 0..{last}, got {start}")
    # made where the model runs (a GPU on Colab), to meet its outputs there
    device = model_device(model)
    positions = sinusoidal_positions(n_steps + 1, d_model).to(device)
    calls = {"encoder": [0, 0], "decoder": [0, 0]}

    def count(name: str):
        def hook(module, inputs, output):
            calls[name][0] += 1
            calls[name][1] += inputs[0].shape[1]  # positions in this call
        return hook

    hooks = [model.encoder.register_forward_hook(count("encoder")),
             model.decoder.register_forward_hook(count("decoder"))]
    try:
        tokens = torch.full((src.shape[0], 1), start, device=device)
        memory = None
        for _ in range(n_steps):
            if memory is None or reencode:
                memory, _ = model.encode(src)  # (batch, src_pos, d_model)
            n = tokens.shape[1]
            tgt = embed(tokens) + positions[:n]  # (batch, n, d_model)
            x, _, _ = model.decode(tgt, memory)  # (batch, n, d_model)
            nxt = unembed(x[:, -1]).argmax(-1)  # (batch,)
            tokens = torch.cat([tokens, nxt[:, None]], 1)  # (batch, n + 1)
    finally:
        for h in hooks:
            h.remove()
    (enc_calls, enc_pos), (dec_calls, dec_pos) = calls.values()
    return DecodeWork(tokens[:, 1:].cpu(), enc_calls, dec_calls, enc_pos,
                      dec_pos)


def depth_spread(norms: Sequence[float]) -> float:
    """The largest ratio of two layers' gradient norms (`gradient_norms_by_depth`)."""
    norms = np.asarray(norms, dtype=float)
    if norms.size < 2 or (norms <= 0).any():
        raise ValueError("depth_spread needs two layers' gradient norms or more, all positive")
    return float(norms.max() / norms.min())


def depth_claims(norms: dict[tuple[str, int], Sequence[float]]) -> dict[str, bool]:
    """What the tour says of gradients through 32 layers (`norms`: (variant, seed) -> each
    layer's gradient norm): with a residual every layer is within a factor 2 of every other,
    with LayerNorm alone within 10, over every seed."""
    def spread(name):
        return max(depth_spread(g) for (n, _), g in norms.items() if n == name)

    return {
        "with a residual, every layer within a factor 2 of every other":
            max(spread("residual + LayerNorm"), spread("residual only")) <= 2,
        "LayerNorm alone: within a factor 10": spread("LayerNorm only") <= 10,
    }


# ----------------------------------------------------------------------------- the opening picture


class LookUp(NamedTuple):
    """One query's soft look-up over `n` keys, and the pattern of `n` tokens under the look-ahead
    mask: what the chapter's opening picture draws."""

    scores: np.ndarray  # (n,): the query's score against each key, scaled by 1/sqrt(d)
    weights: np.ndarray  # (n,): after the softmax, positive and summing to one
    nearest: int  # the key the query was drawn near
    causal: np.ndarray  # (n, n): a pattern of n tokens reading each other under the mask


def soft_look_up(n: int = 8, d: int = 16, nearest: int = 5, seed: int = 0) -> LookUp:
    """Random keys, and a query drawn half from key `nearest`: attention (`toylib.attention`)
    reads that key most, and the others a little. Then the random queries and keys of n tokens
    under the look-ahead mask: each token reads itself and those before it only."""
    if not 0 <= nearest < n or d < 1:
        raise ValueError(f"need 0 <= nearest < n and d >= 1, got nearest={nearest}, n={n}, d={d}")
    gen = torch.Generator().manual_seed(seed)
    keys = torch.randn(n, d, generator=gen)  # (key, d)
    # near key `nearest`, not on it: the look-up is soft, and the picture shows it
    query = 0.5 * keys[nearest] + 0.5 * torch.randn(d, generator=gen)  # (d,)
    _, pattern = attention(query[None], keys, keys)  # (1, key)
    # queries and keys of n tokens, as two projections of them would give
    q, k = 0.5 * torch.randn(2, n, d, generator=gen)  # (pos, d) each
    mask = torch.ones(n, n, dtype=torch.bool).tril()  # (query, key): itself and before
    _, causal = attention(q, k, k, mask)  # (query, key)
    return LookUp((keys @ query / math.sqrt(d)).numpy(), pattern[0].numpy(), nearest, causal.numpy())


def opening_picture(columns: int = 3, width: float = 9.0):
    """The chapter's opening picture (a matplotlib Figure) from `soft_look_up`: one query's
    scores against eight keys, its weights after the softmax, and eight tokens' pattern under
    the look-ahead mask. columns=1 stacks the three for a phone."""
    import matplotlib.pyplot as plt

    from toylib.plot import LABEL_PT, TITLE_PT, colorbar

    if columns not in (1, 3):
        raise ValueError(f"columns is 3 (side by side) or 1 (stacked for a phone), got {columns}")
    look = soft_look_up()
    n = len(look.weights)
    rows = 3 // columns
    fig, axes = plt.subplots(rows, columns, figsize=(width, 2.8) if columns == 3 else (width / 2, 8.4))
    colours = ["#d62728" if k == look.nearest else "#7f7f7f" for k in range(n)]
    for ax, values, title, label in ((axes[0], look.scores, "1. score of one query\nagainst each key", "score"),
                                      (axes[1], look.weights, "2. softmax: weights\nthat sum to one", "weight")):
        ax.bar(range(n), values, color=colours)
        ax.axhline(0, c="black", lw=0.8)
        ax.set_title(title, fontsize=TITLE_PT)
        ax.set_xlabel("key", fontsize=LABEL_PT)
        ax.set_ylabel(label, fontsize=LABEL_PT)
        ax.set_xticks(range(n))
        ax.tick_params(labelsize=LABEL_PT)
    image = axes[2].imshow(look.causal, cmap="magma", vmin=0, vmax=1)
    axes[2].set_title("3. look-ahead mask: each\ntoken reads itself and before", fontsize=TITLE_PT)
    axes[2].set_xlabel("key (token read)", fontsize=LABEL_PT)
    axes[2].set_ylabel("query (token reading)", fontsize=LABEL_PT)
    axes[2].set_xticks(range(n))
    axes[2].set_yticks(range(n))
    axes[2].tick_params(labelsize=LABEL_PT)
    colorbar(fig, image, axes[2], "weight", shrink=0.85)
    fig.tight_layout()
    return fig
