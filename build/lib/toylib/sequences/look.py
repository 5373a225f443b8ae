"""Looking inside the sequences chapter's models: which inputs W_Q, W_K and W_V read
(`weight_splits`, `plot_weight_splits`), and one sequence drawn as the post draws it
(`plot_example`). The attention patterns themselves are toylib.plot.attention_grid's job."""

from __future__ import annotations

import numpy as np

from toylib.sequences.measure import predict
from toylib.sequences.numpy_net import NumpyTransformer
from toylib.sequences.world import _check_sequences, make_targets


# ----------------------------------------------------------------------------- what the projections read


def weight_splits(model, layer: int = 0) -> dict[str, dict[str, np.ndarray]]:
    """W_Q, W_K and W_V of one layer, each split by input rows into the part that reads the
    content (vocab, d_model) and the part that reads the position (d_pos, d_model).

    Matrices are (input, output), as the post draws them: content above position. Works
    for a SeqTransformer and a NumpyTransformer alike (sinusoids only: a relative model's
    tokens have no position rows)."""
    if model.config.relative:
        raise ValueError("weight_splits needs sinusoidal positions; a relative model's tokens are content only")
    if isinstance(model, NumpyTransformer):
        model = model.to_torch()
    out, vocab = {}, model.config.vocab
    for name in ("W_Q", "W_K", "W_V"):
        w = getattr(model.attention_layer(layer), name).weight.detach().cpu().numpy().T  # (input, output)
        out[name] = {"content": w[:vocab], "position": w[vocab:]}
    return out


# ----------------------------------------------------------------------------- figures


def plot_example(model, x, title: str | None = None):
    """One sequence as the post draws it: input, target and the model's output, each a
    (symbol, position) one-hot image. Its attention is toylib.plot.attention_grid's job."""
    import matplotlib.pyplot as plt

    c = model.config
    x = _check_sequences(np.asarray(x).reshape(1, -1), c.vocab)
    rows = {"input": x[0], "target": make_targets(c.task, x, c.threshold)[0], "output": predict(model, x)[0]}
    fig, axes = plt.subplots(1, 3, figsize=(7, 2.6), sharey=True)
    for ax, (name, seq) in zip(axes, rows.items()):
        ax.imshow(np.eye(c.vocab)[seq].T, cmap="Greys", origin="lower", interpolation="nearest")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("position")
        ax.set_yticks(range(c.vocab))
    axes[0].set_ylabel("symbol")
    fig.suptitle(title or f"{c.task}, length {x.shape[1]}")
    fig.tight_layout()
    return fig


def plot_weight_splits(model, layer: int = 0, title: str | None = None):
    """W_Q, W_K, W_V as (input, output) images, the content rows above the position rows:
    the post's picture of which inputs each projection reads."""
    import matplotlib.pyplot as plt

    splits = weight_splits(model, layer)
    c = model.config
    fig, axes = plt.subplots(2, 3, figsize=(8, 4.2), gridspec_kw={"height_ratios": [c.vocab, c.d_pos]}, sharex=True)
    for j, (name, parts) in enumerate(splits.items()):
        vmax = max(np.abs(parts["content"]).max(), np.abs(parts["position"]).max())
        for i, part in enumerate(("content", "position")):
            ax = axes[i, j]
            ax.imshow(parts[part], cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto", interpolation="nearest")
            ax.set_yticks([])
            if i == 0:
                ax.set_title(name, fontsize=10)
            if j == 0:
                ax.set_ylabel(part)
        axes[1, j].set_xlabel("output unit")
    fig.suptitle(title or f"{c.task}: what Q, K and V read (layer {layer})")
    fig.tight_layout()
    return fig
