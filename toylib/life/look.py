"""Looking at a trained Life model: where each cell's attention goes, laid out on the grid;
the chapter's opening picture (the model's step beside the rule's, and one cell's attention);
and the live board, on which the reader draws and steps a grid in the browser."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from toylib.infer import infer
from toylib.life.config import ANY_SIZE, LifeConfig
from toylib.life.measure import attention_by_offset, offset_masks, predict
from toylib.life.net import OffsetAttentionNet, SingleAttentionNet
from toylib.life.world import check_grids, life_step
from toylib.live import Live, weights
from toylib.plot import DPI, LABEL_PT, TITLE_PT, colorbar


# ----------------------------------------------------------------------------- the rule, written by hand


@torch.no_grad()
def hand_set(config: LifeConfig = ANY_SIZE,
             sharpness: float = 20.0) -> OffsetAttentionNet:
    """The any-size model with weights written from the rule, not trained.

    Scores of 0 on the 8 neighbours and -30 beyond (a weight of e^-30):
    the attention on live cells is their count / 8. A token holding a
    constant and the cell's own state. Four SiLU units, made steep by
    `sharpness`, that act as ramps max(0, count - t) at t = 2 - state,
    3 - state, 3 and 4. A readout that adds them as +1, -1, -1, +1 less
    1/2: +1/2 where Life says alive (3 live neighbours, or 2 for a live
    cell), -1/2 everywhere else."""
    if (config.mixer != "offset" or config.d_model < 7
            or not config.mask_self):
        raise ValueError(
            "the rule is written into an offset model with d_model >= 7 "
            f"that masks the cell itself, got mixer={config.mixer!r}, "
            f"d_model={config.d_model}, mask_self={config.mask_self}")
    model = OffsetAttentionNet(config)
    for weight in model.parameters():
        weight.zero_()
    r, a = config.radius, sharpness
    model.offset_scores.fill_(-30.0)
    model.offset_scores[r - 1:r + 2, r - 1:r + 2] = 0.0  # self stays masked
    model.W_state[:, 0] = 1.0  # dimension 0: a constant, for thresholds
    model.W_state[1, 2] = 1.0  # dimension 2: the cell is alive
    # a live cell's value is 1 in dimension 1, which so receives the
    # attention on live cells
    model.W_V[2, 1] = 1.0
    ramps = [(2, 1), (3, 1), (3, 0), (4, 0)]  # (t, moved by the state)
    for unit, (t, alive) in enumerate(ramps, start=3):
        # the unit's input: a * (count - t + alive * state),
        # where count = 8 * attention on live cells
        model.W_hidden[:3, unit] = torch.tensor([-t, 8.0, alive]) * a
    # silu(a z) / a is max(0, z), nearly
    model.W_class[3:7, 0] = torch.tensor([1.0, -1.0, -1.0, 1.0]) / a
    model.W_class[0, 0] = -0.5
    return model.eval()


def readout_picture(models: dict):
    """Each model's logit against the number of live neighbours (the far cells dead; each model
    read at its own mean weight on a neighbour), for a dead cell and a live one, scaled to its
    largest, with where Life says alive shaded: what the models do with the one number their
    attention gives them. `models`: {label: OffsetAttentionNet}."""
    live = torch.linspace(0, 8, 801)
    # 5.2 inches: a phone's column shows it whole with its labels legible
    fig, axes = plt.subplots(1, 2, figsize=(5.2, 2.9), dpi=DPI, sharey=True, layout="constrained")
    alive_band = {0: (2.5, 3.5), 1: (1.5, 3.5)}
    for state, ax in zip((0, 1), axes):
        ax.axvspan(*alive_band[state], color="tab:green", alpha=0.15, lw=0, label="the rule: alive next")
        for (label, m), style in zip(models.items(), ("-", "--", ":")):
            by_offset = attention_by_offset(m, None)
            per_neighbour = float(by_offset[offset_masks(by_offset)[0]].mean())
            with torch.no_grad():
                logit = m.readout(m.W_state[state].expand(len(live), -1), live * per_neighbour).numpy()
            ax.plot(live, logit / np.abs(logit).max(), style, label=label)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xticks(range(9))
        ax.set_xlabel("live neighbours", fontsize=LABEL_PT)
        ax.set_title("a dead cell" if state == 0 else "a live cell", fontsize=TITLE_PT)
        ax.tick_params(labelsize=LABEL_PT)
    axes[0].set_ylabel("logit (scaled)", fontsize=LABEL_PT)
    fig.legend(*axes[0].get_legend_handles_labels(), fontsize=LABEL_PT, loc="outside lower center", ncols=3,
               frameon=False)
    return fig


# ----------------------------------------------------------------------------- pictures


def _cells(cells, size: int) -> list[tuple[int, int]]:
    """Cells given as (row, column) pairs or as numbers counted row by row -> (row, column)."""
    out = [tuple(divmod(int(c), size)) if np.ndim(c) == 0 else tuple(int(v) for v in c) for c in cells]
    bad = [c for c in out if len(c) != 2 or not (0 <= c[0] < size and 0 <= c[1] < size)]
    if bad or not out:
        raise ValueError(f"cells must be (row, column) inside a {size}x{size} grid, got {list(cells)}")
    return out


def _attention_map(ax, weights: np.ndarray, cell: tuple[int, int], vmax: float, grid: np.ndarray | None):
    """One cell's attention over the grid, the cell outlined in red, live cells as dots."""
    image = ax.imshow(weights, cmap="viridis", vmin=0, vmax=vmax, interpolation="nearest")
    r, c = cell
    ax.add_patch(plt.Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="red", lw=2))
    if grid is not None:
        rows, cols = np.nonzero(grid)
        ax.scatter(cols, rows, s=4, c="white", edgecolors="none", alpha=0.8)
    ax.set_xticks([])
    ax.set_yticks([])
    return image


def cell_attention(pattern, cells, *, grid: np.ndarray | None = None, vmax: float | None = None,
                   columns: int | None = None, size: float = 1.35):
    """Each listed cell's attention laid out on the grid: one panel per cell, the cell
    outlined in red, one colour bar for all. pattern: (cells, cells), one grid's attention
    (row i: cell i's weights over every cell, cells numbered row by row). cells: (row, column)
    pairs or cell numbers. grid: that grid, to mark its live cells as white dots. Returns
    the Figure."""
    p = np.asarray(pattern, dtype=float)
    side = int(round(np.sqrt(p.shape[-1]))) if p.ndim == 2 else 0
    if p.ndim != 2 or p.shape[0] != p.shape[1] or side * side != p.shape[0]:
        raise ValueError(f"pattern must be (cells, cells) of a square grid, got shape {p.shape}")
    chosen = _cells(cells, side)
    if grid is not None:
        grid = check_grids(grid)
        if grid.shape != (side, side):
            raise ValueError(f"grid must be {side}x{side} like the pattern, got shape {grid.shape}")
    vmax = float(p.max()) if vmax is None else vmax
    n_cols = min(columns or len(chosen), len(chosen))
    n_rows = -(-len(chosen) // n_cols)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(size * n_cols + 1.0, size * n_rows + 0.3), squeeze=False,
                             dpi=DPI, layout="constrained")
    image = None
    for ax, cell in zip(axes.flat, chosen):
        image = _attention_map(ax, p[cell[0] * side + cell[1]].reshape(side, side), cell, vmax, grid)
        ax.set_title(f"cell {cell}", fontsize=LABEL_PT)
    for ax in list(axes.flat)[len(chosen):]:
        ax.axis("off")
    colorbar(fig, image, axes, "attention weight", shrink=0.9, aspect=20)
    return fig


def hero(model: SingleAttentionNet, grid: np.ndarray, cell=None, columns: int = 4):
    """The chapter's opening picture: a grid, the model's next generation, the rule's, and
    where one cell (default: the middle one) looks, its attention laid out on the grid with
    the grid's live cells as dots. The model's panel marks in red any cell that differs from
    the rule. columns: 4, one row (7.4 x 2.5 inches), or 2, two rows for a phone (4.4 x 4.7)."""
    if columns not in (2, 4):
        raise ValueError(f"columns must be 4 (one row) or 2 (two rows), got {columns}")

    size = model.config.grid_size
    grid = check_grids(grid)
    if grid.shape != (size, size):
        raise ValueError(f"this model takes {size}x{size} grids, got shape {grid.shape}")
    (cell,) = _cells([(size // 2, size // 2)] if cell is None else [cell], size)
    ours, truth = predict(model, grid[None])[0], life_step(grid)
    pattern = infer(model, grid[None], numpy=True)[1][0, 0, 0]  # (cells, cells)
    weights = pattern[cell[0] * size + cell[1]].reshape(size, size)
    wrong = int((ours != truth).sum())
    fig, axes = plt.subplots(4 // columns, columns, figsize=(7.4, 2.5) if columns == 4 else (4.4, 4.7), dpi=DPI,
                             layout="constrained")
    axes = axes.reshape(-1)
    for ax, g, title in zip(axes, (grid, ours, truth), ("a grid", "the model's next", "the rule's next")):
        ax.imshow(g, cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(title, fontsize=TITLE_PT)
        ax.set_xticks([])
        ax.set_yticks([])
    rows, cols = np.nonzero(ours != truth)
    axes[1].scatter(cols, rows, s=30, marker="s", facecolors="none", edgecolors="red")
    axes[1].set_xlabel(f"{wrong} cells differ from the rule", fontsize=LABEL_PT)
    image = _attention_map(axes[3], weights, cell, float(weights.max()), grid)
    axes[3].set_title(f"where cell {cell} looks", fontsize=TITLE_PT)
    axes[3].set_xlabel(f"its 8 neighbours: {100 * weights[_ring(cell, size)].sum():.1f} %", fontsize=LABEL_PT)
    colorbar(fig, image, axes[3], "attention weight", shrink=0.8, aspect=15)
    return fig


def _ring(cell: tuple[int, int], size: int) -> np.ndarray:
    """(size, size) boolean: the 8 torus neighbours of `cell`."""
    ring = np.zeros((size, size), bool)
    r, c = cell
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            if dr or dc:
                ring[(r + dr) % size, (c + dc) % size] = True
    return ring


# ----------------------------------------------------------------------------- a board to play, in the browser


def live_board(model: SingleAttentionNet, any_model: OffsetAttentionNet | None = None):
    """The board to draw on in the browser, with no kernel: it opens on a glider; click cells
    to flip them (or start again from a glider, a random grid or nothing), step it with `model` and see in red where the model
    and the rule differ, or switch to looking and click a cell to see where it attends. With
    `any_model` (mixer="offset"), the reader may switch to it and to boards of other shapes,
    square or not. `model` needs learned attention (mixer="attention")."""
    c = model.config
    if c.mixer != "attention":
        raise ValueError(f"the live board runs a model with learned attention (mixer='attention'), got {c.mixer!r}")
    data = {"weights": weights(model), "grid_size": c.grid_size, "d_model": c.d_model, "mask_self": c.mask_self,
            "positions": c.positions, "any": None}
    if any_model is not None:
        a = any_model.config
        if a.mixer != "offset":
            raise ValueError(f"any_model is the any-size model (mixer='offset'), got {a.mixer!r}")
        data["any"] = {"weights": weights(any_model), "d_model": a.d_model, "radius": a.radius,
                       "mask_self": a.mask_self}
    return Live("life", "ToyLife", data)
