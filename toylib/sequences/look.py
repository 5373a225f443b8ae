"""Looking inside the sequences chapter's models: which inputs W_Q, W_K and W_V read
(`weight_splits`, `plot_weight_splits`), one sequence drawn as the post draws it
(`plot_example`, `plot_examples` for several models), and several models' attention on one sequence side by side
(`plot_task_attention`, the chapter's opening picture). A single model's layers and heads are
toylib.plot.attention_grid's job."""

from __future__ import annotations

import numpy as np
import torch

from toylib.plot import LABEL_PT, TITLE_PT, finish_attention_figure
from toylib.sequences.measure import predict, run_model
from toylib.sequences.net import SeqTransformer
from toylib.sequences.numpy_net import NumpyTransformer
from toylib.sequences.world import TASKS, check_sequences, make_targets, source_positions


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


def _example_rows(model, x) -> dict[str, np.ndarray]:
    """{"input", "target", "output"}: one sequence (pos,) and what the model makes of it."""
    c = model.config
    x = check_sequences(np.asarray(x).reshape(1, -1), c.vocab)
    return {"input": x[0], "target": make_targets(c.task, x, c.threshold)[0], "output": predict(model, x)[0]}


def _draw_example(axes, rows: dict[str, np.ndarray], vocab: int, ticks) -> None:
    for ax, (name, seq) in zip(axes, rows.items()):
        ax.imshow(np.eye(vocab)[seq].T, cmap="Greys", origin="lower", interpolation="nearest", aspect="auto")
        ax.set_yticks(ticks)
        ax.tick_params(labelsize=LABEL_PT)


def plot_example(model, x, title: str | None = None):
    """One sequence as the post draws it: input, target and the model's output, each a
    (symbol, position) one-hot image. Its attention is toylib.plot.attention_grid's job."""
    import matplotlib.pyplot as plt

    c = model.config
    rows = _example_rows(model, x)
    fig, axes = plt.subplots(1, 3, figsize=(7, 2.6), sharey=True, dpi=100)
    _draw_example(axes, rows, c.vocab, range(c.vocab))
    for ax, name in zip(axes, rows):
        ax.set_title(name, fontsize=LABEL_PT)
        ax.set_xlabel("position", fontsize=LABEL_PT)
    axes[0].set_ylabel("symbol", fontsize=LABEL_PT)
    fig.suptitle(title or f"{c.task}, length {len(rows['input'])}", fontsize=TITLE_PT)
    fig.tight_layout()
    return fig


def plot_examples(models: dict, x, title: str | None = None):
    """`plot_example` for several models on one sequence, in one compact figure: a row per
    model (named by its key, e.g. the task), its columns the input, the target and the
    model's output, each a (symbol, position) one-hot image."""
    import matplotlib.pyplot as plt

    if not models:
        raise ValueError("models is empty; give at least one {name: model}")
    fig, axes = plt.subplots(len(models), 3, figsize=(5.5, 1.15 * len(models) + 0.5 + 0.3 * bool(title)),
                             sharex=True, sharey=True, squeeze=False, dpi=100, layout="constrained")
    for r, (name, model) in enumerate(models.items()):
        rows = _example_rows(model, x)
        _draw_example(axes[r], rows, model.config.vocab, range(0, model.config.vocab, 3))
        axes[r, 0].set_ylabel(f"{name}\nsymbol", fontsize=LABEL_PT)
    for ax, name in zip(axes[0], rows):
        ax.set_title(name, fontsize=LABEL_PT)
    for ax in axes[-1]:
        ax.set_xlabel("position", fontsize=LABEL_PT)
    if title:
        fig.suptitle(title, fontsize=TITLE_PT)
    return fig


def plot_task_attention(models: dict, x, *, columns: int | None = None, size: float = 1.75,
                        title: str | None = None):
    """The attention of several one-layer models on one sequence, a panel per model (titled
    by its key, e.g. the task), on one colour scale from 0 to 1 with its colour bar. Row i is
    output slot i, column j input position j. Up to 16 positions, the ticks name the symbols:
    the input's along the bottom, each model's output along its left side (so a panel reads
    "this output symbol came from that input symbol"); longer sequences get position ticks.
    columns: panels per row (default: all in one row)."""
    import matplotlib.pyplot as plt

    if not models:
        raise ValueError("models is empty; give at least one {name: model}")
    x = np.asarray(x)
    if x.ndim == 2 and len(x) == 1:
        x = x[0]
    if x.ndim != 1 or len(x) == 0:
        raise ValueError(f"x must be one sequence (pos,) or (1, pos), got shape {x.shape}")
    columns = len(models) if columns is None else columns
    if columns < 1:
        raise ValueError(f"columns must be at least 1, got {columns}")
    n, n_cols = len(x), min(columns, len(models))
    n_rows = -(-len(models) // n_cols)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(size * n_cols + 1.0, size * n_rows + 0.5 * bool(title) + 0.3),
                             squeeze=False, dpi=100, layout="constrained")
    symbols = n <= 16
    ticks = range(n) if symbols else range(0, n, max(1, n // 4))
    image = None
    for i, ax in enumerate(axes.flat):
        if i >= len(models):
            ax.axis("off")
            continue
        name, model = list(models.items())[i]
        logits, patterns = run_model(model, x[None])
        image = ax.imshow(patterns[0, 0, 0], cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(str(name), fontsize=TITLE_PT)
        if symbols:  # which symbol each slot wrote, and which symbol it read
            ax.set_xticks(ticks, x.tolist(), fontsize=LABEL_PT)
            ax.set_yticks(ticks, logits[0].argmax(-1).tolist(), fontsize=LABEL_PT)
        else:
            ax.set_xticks(ticks, list(ticks), fontsize=LABEL_PT)
            ax.set_yticks(ticks, list(ticks), fontsize=LABEL_PT)
        ax.tick_params(length=0)
        if i % n_cols == 0:
            ax.set_ylabel("output symbol" if symbols else "output slot", fontsize=LABEL_PT)
        if i + n_cols >= len(models):
            ax.set_xlabel("input symbol" if symbols else "input position", fontsize=LABEL_PT)
    return finish_attention_figure(fig, image, axes, n_rows, title, aspect=25)


def plot_weight_splits(model, layer: int = 0, title: str | None = None):
    """W_Q, W_K, W_V as (input, output) images, the content rows above the position rows:
    the post's picture of which inputs each projection reads."""
    import matplotlib.pyplot as plt

    splits = weight_splits(model, layer)
    c = model.config
    fig, axes = plt.subplots(2, 3, figsize=(6.4, 4.0), gridspec_kw={"height_ratios": [c.vocab, c.d_pos]}, sharex=True,
                             dpi=100)
    for j, (name, parts) in enumerate(splits.items()):
        vmax = max(np.abs(parts["content"]).max(), np.abs(parts["position"]).max())
        for i, part in enumerate(("content", "position")):
            ax = axes[i, j]
            ax.imshow(parts[part], cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto", interpolation="nearest")
            ax.set_yticks([])
            if i == 0:
                ax.set_title(name, fontsize=LABEL_PT)
            if j == 0:
                ax.set_ylabel(part, fontsize=LABEL_PT)
            ax.tick_params(labelsize=LABEL_PT)
        axes[1, j].set_xlabel("output unit", fontsize=LABEL_PT)
    fig.suptitle(title or f"{c.task}: what Q, K and V read (layer {layer})", fontsize=TITLE_PT)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- the prose's claims


def bias_table(model, part: str) -> np.ndarray:
    """A relative model's bias by offset, in nats: its "start" table (offsets from the slot)
    or its "end" table (from the slot's mirror), offsets -max_offset..max_offset."""
    if part not in ("start", "end"):
        raise ValueError(f"part must be 'start' or 'end', got {part!r}")
    return getattr(model.biases[0], part)[0].detach().cpu().numpy() * model.config.bias_scale


def relative_claims(models: dict, exact: dict[str, dict[int, float]], x32: np.ndarray) -> dict[str, bool]:
    """What the chapter reads in the relative models (`models`: task -> model trained on lengths
    2 to 16; `exact`: task -> length -> exact share; `x32`: one length-32 sequence): exact up to
    256; each task's program in its bias tables (copy and filter peak at the slot, rotate one
    past it; reverse peaks at the mirror, its slot table flat beside it; rotate's mirror table
    at 0); every slot's strongest attention on its source at length 32."""
    peak = {(t, part): int(bias_table(m, part).argmax()) - m.config.max_offset
            for t, m in models.items() for part in ("start", "end")}
    span = {(t, part): float(np.ptp(bias_table(m, part))) for t, m in models.items() for part in ("start", "end")}
    programs = all((run_model(m, x32)[1][0, 0, 0].argmax(-1) == source_positions(t, x32.shape[1])).all()
                   for t, m in models.items())
    return {
        "relative: every task exact at lengths 32 to 256": all(exact[t][n] == 1 for t in TASKS for n in (32, 64, 128, 256)),
        "copy, filter peak at offset 0 from the slot; rotate at +1":
            (peak["copy", "start"], peak["filter", "start"], peak["rotate", "start"]) == (0, 0, 1),
        "reverse peaks at 0 from its mirror, its slot table < 1/3 as wide":
            peak["reverse", "end"] == 0 and span["reverse", "start"] < span["reverse", "end"] / 3,
        "rotate's mirror table peaks at 0": peak["rotate", "end"] == 0,
        "at length 32 every slot's strongest attention is on its source": bool(programs),
    }


def initial_model(config):
    """The weights `training.train` starts `config`'s model from (its seed's draw), leaving
    the caller's random state alone."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return SeqTransformer(config)


def weight_claims(models: dict) -> dict[str, bool]:
    """What the chapter reads in the trained weights (`models`: task -> a length-8 model with
    queries from position): the queries' content rows never move from their start (no gradient
    reaches them), the keys read the position far more than the content, the values the content
    far more than the position (norms at least twice)."""
    splits = {t: weight_splits(m) for t, m in models.items()}
    norm = {(t, w, part): float(np.linalg.norm(a)) for t, s in splits.items() for w in ("W_K", "W_V")
            for part, a in s[w].items()}
    return {
        "the queries' content rows keep their initial values": all(
            np.array_equal(splits[t]["W_Q"]["content"], weight_splits(initial_model(m.config))["W_Q"]["content"])
            for t, m in models.items()),
        "keys: position rows' norm >= 2x the content rows'":
            all(norm[t, "W_K", "position"] >= 2 * norm[t, "W_K", "content"] for t in models),
        "values: content rows' norm >= 2x the position rows'":
            all(norm[t, "W_V", "content"] >= 2 * norm[t, "W_V", "position"] for t in models),
    }


def other_copies_share(pattern: np.ndarray, x: np.ndarray) -> float:
    """For one sequence `x` (length,) and its attention `pattern` (query, key): the mean share
    of attention that the slots whose symbol occurs more than once put on the symbol's other
    copies."""
    other = (x[:, None] == x[None, :]) & ~np.eye(len(x), dtype=bool)  # (query, key)
    repeated = other.any(1)
    if not repeated.any():
        raise ValueError("other_copies_share needs a sequence with a repeated symbol")
    return float((pattern * other).sum(1)[repeated].mean())
