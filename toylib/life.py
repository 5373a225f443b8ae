"""Conway's Game of Life, and a one-head transformer that learns to compute it.

Retells and reproduces S. Radcliffe, "Training a Simple Transformer Neural Net on Conway's
Game of Life" (2024): SingleAttentionNet reads a Life grid as one token per cell and
predicts every cell's next state. The chapter is book/life.ipynb.

Ground truth is `life_step` on a torus (the edges wrap around, as in the post). Everything
the model is judged on is generated here from seeded generators.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from toylib import cli
from toylib.attention import attention
from toylib.device import flush_denormals, pick_device, seed_everything
from toylib.infer import infer, model_device
from toylib.targets import Target, pct
from toylib.train import History, TrainOptions, fit, forever, stop_when

# The 8 offsets (row, column) of a cell's neighbours.
NEIGHBOUR_OFFSETS = [(dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if (dr, dc) != (0, 0)]


# ----------------------------------------------------------------------------- the rules


def check_grids(grids, size: int | None = None) -> np.ndarray:
    """Return `grids` as a uint8 array after checking it is one square 0/1 grid (size, size)
    or a batch of them (n, size, size); raise ValueError saying what is wrong otherwise."""
    g = grids.detach().cpu().numpy() if isinstance(grids, torch.Tensor) else np.asarray(grids)
    if g.ndim not in (2, 3):
        raise ValueError(f"a Life grid must be 2-D (size, size) or a batch (n, size, size), got shape {g.shape}")
    if g.shape[-1] != g.shape[-2]:
        raise ValueError(f"a Life grid must be square, got {g.shape[-2]} rows and {g.shape[-1]} columns")
    if g.shape[-1] < 3:
        raise ValueError(f"a Life grid needs at least 3x3 cells so that 8 neighbours are distinct, got {g.shape[-1]}")
    if size is not None and g.shape[-1] != size:
        raise ValueError(f"expected {size}x{size} grids, got {g.shape[-2]}x{g.shape[-1]}")
    if g.size and not np.isin(g, (0, 1)).all():
        bad = np.unique(g[~np.isin(g, (0, 1))])[:5]
        raise ValueError(f"a Life grid holds only 0 (dead) and 1 (alive), found {bad.tolist()}")
    return g.astype(np.uint8)


def neighbour_counts(grids) -> np.ndarray:
    """Live neighbours of every cell, on a torus: same shape as the grid(s)."""
    g = check_grids(grids)
    return sum(np.roll(g, (dr, dc), axis=(-2, -1)) for dr, dc in NEIGHBOUR_OFFSETS).astype(np.uint8)


def life_step(grids) -> np.ndarray:
    """One generation of Life on a torus, for one grid (size, size) or a
    batch of grids (n, size, size).

    A cell is alive next if it has 3 live neighbours, or if it is alive and
    has 2."""
    g = check_grids(grids)
    n = neighbour_counts(g)
    return ((n == 3) | ((g == 1) & (n == 2))).astype(np.uint8)


def life_run(grid, steps: int) -> np.ndarray:
    """The true game: (steps + 1, size, size), starting with `grid` itself."""
    out = [check_grids(grid)]
    for _ in range(steps):
        out.append(life_step(out[-1]))
    return np.stack(out)


# ----------------------------------------------------------------------------- data


def random_grids(n: int, size: int, rng: np.random.Generator, density: tuple[float, float] = (0.05, 0.95)) -> np.ndarray:
    """`n` random grids (n, size, size); each grid draws its own density uniformly from
    `density`, then each cell is alive with that probability. Mixing densities gives the
    model every neighbour count from 0 to 8 and both empty and crowded regions."""
    lo, hi = density
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(f"density must be a range (lo, hi) within [0, 1], got {density}")
    if n < 0 or size < 3:
        raise ValueError(f"need n >= 0 and size >= 3, got n={n}, size={size}")
    p = rng.uniform(lo, hi, size=(n, 1, 1))
    return (rng.random((n, size, size)) < p).astype(np.uint8)


def unseen_grids(n: int, size: int, rng: np.random.Generator, seen: set[bytes]) -> tuple[np.ndarray, int]:
    """`n` random grids (densities 0.05 to 0.95) none of which is in `seen` (hashes of the
    training grids). Returns (grids, how many draws were dropped as seen). Small grids at
    low density repeat often (the empty grid is one of them), so the check matters."""
    kept, dropped, have = [], 0, 0
    while have < n:
        x = random_grids(n - have, size, rng)
        fresh = np.array([key not in seen for key in _grid_keys(x)], bool)
        kept.append(x[fresh])
        dropped += int((~fresh).sum())
        have += int(fresh.sum())
    return np.concatenate(kept), dropped


def _grid_keys(grids: np.ndarray) -> list[bytes]:
    """One short byte string per grid of a batch: its cells packed 8 to a byte."""
    return [row.tobytes() for row in np.packbits(grids.reshape(len(grids), -1), axis=1)]


def grid_hashes(grids: np.ndarray) -> set[bytes]:
    """A set of byte strings, one per grid, to check that test grids never appeared in training."""
    return set(_grid_keys(check_grids(grids)))


def neighbourhood_grids(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """All 512 3x3 neighbourhoods, each centred on every one of the size*size cells.

    The neighbourhoods are tiled into 3x3 blocks, so one grid tests many at once; the tiling
    is shifted to every offset so that each neighbourhood is centred on every cell.
    Returns (grids (m, size, size), grid index, centre row, centre column) for each of the
    512 * size * size (neighbourhood, cell) pairs; the pair's neighbourhood is the 3x3 block
    around that centre in that grid."""
    if size < 3:
        raise ValueError(f"size must be at least 3, got {size}")
    codes = np.arange(512)
    patterns = ((codes[:, None] >> np.arange(9)) & 1).reshape(512, 3, 3).astype(np.uint8)
    per_row = size // 3
    per_grid = per_row * per_row
    grids, where = [], []
    for dr in range(size):
        for dc in range(size):
            for start in range(0, 512, per_grid):
                chunk = patterns[start : start + per_grid]
                g = np.zeros((size, size), np.uint8)
                centres = []
                for j, p in enumerate(chunk):
                    r, c = 3 * (j // per_row), 3 * (j % per_row)
                    g[r : r + 3, c : c + 3] = p
                    centres.append(((r + 1 + dr) % size, (c + 1 + dc) % size))
                grids.append(np.roll(g, (dr, dc), axis=(0, 1)))
                where.extend((len(grids) - 1, r_, c_) for r_, c_ in centres)
    w = np.array(where)
    return np.stack(grids), w[:, 0], w[:, 1], w[:, 2]


# A few famous patterns, as lists of strings ("#" alive). `place` puts one on a grid.
PATTERNS: dict[str, list[str]] = {
    "glider": [".#.", "..#", "###"],
    "blinker": ["###"],
    "toad": [".###", "###."],
    "beacon": ["##..", "##..", "..##", "..##"],
    "block": ["##", "##"],
    "beehive": [".##.", "#..#", ".##."],
    "lightweight spaceship": [".#..#", "#....", "#...#", "####."],
    "r-pentomino": [".##", "##.", ".#."],
    "diehard": ["......#.", "##......", ".#...###"],
}


def place(pattern: str | list[str], size: int, top: int | None = None, left: int | None = None) -> np.ndarray:
    """A (size, size) grid with a pattern (a name from PATTERNS, or rows of "#"/".") placed
    at (top, left); centred when those are not given."""
    rows = PATTERNS[pattern] if isinstance(pattern, str) and pattern in PATTERNS else pattern
    if isinstance(rows, str):
        raise ValueError(f"unknown pattern {pattern!r}; known: {sorted(PATTERNS)}")
    h, w = len(rows), max(len(r) for r in rows)
    if h > size or w > size:
        raise ValueError(f"a {h}x{w} pattern does not fit a {size}x{size} grid")
    top = (size - h) // 2 if top is None else top
    left = (size - w) // 2 if left is None else left
    g = np.zeros((size, size), np.uint8)
    for i, row in enumerate(rows):
        for j, ch in enumerate(row):
            if ch not in "#.":
                raise ValueError(f"pattern rows use '#' (alive) and '.' (dead), found {ch!r}")
            g[(top + i) % size, (left + j) % size] = ch == "#"
    return g


# ----------------------------------------------------------------------------- the model


def neighbour_mask(size: int, include_centre: bool = False) -> torch.Tensor:
    """(cells, cells) boolean: row i is True at cell i's 8 torus neighbours (and at i itself
    with include_centre). Cells are numbered row by row, as the model flattens a grid."""
    idx = np.arange(size * size).reshape(size, size)
    mask = np.zeros((size * size, size * size), dtype=bool)
    offsets = NEIGHBOUR_OFFSETS + ([(0, 0)] if include_centre else [])
    for dr, dc in offsets:
        # the neighbour at offset (dr, dc) of cell (r, c) is (r + dr, c + dc), wrapped
        mask[idx.ravel(), np.roll(idx, (-dr, -dc), axis=(0, 1)).ravel()] = True
    return torch.from_numpy(mask)


MIXERS = ("attention", "pool", "pool_no_centre", "offset")
POSITIONS = ("cells", "rows_cols")


@dataclasses.dataclass(frozen=True)
class LifeConfig:
    grid_size: int = 16  # the post's; the model is built for one grid size: its positions are per row and column (or cell)
    d_model: int = 48  # width of every token (the post's ndim): room for 16 rows, 16 columns and the state
    mixer: str = "attention"  # "attention" (learned), or a fixed 3x3 average: "pool" or "pool_no_centre";
    # "offset": OffsetAttentionNet, scores by offset within `radius`, no positions, any grid size
    positions: str = "rows_cols"  # a learned vector per row plus one per column; "cells": one per cell (the post's)
    radius: int = 2  # "offset" only: how far (in rows and columns) a cell's attention reaches
    mask_self: bool = True  # a cell may not attend to itself: its own state reaches it through the residual
    learn_scale: bool = True  # one learned number scales all attention scores (not in the post)
    scale_init: float = 8.0  # its starting value; 1 would be the post's plain 1/sqrt(d_model)
    qk_init: float = 0.1  # scale of W_Q, W_K at initialisation: small, so attention starts out uniform
    # scale of the dead/alive embedding at initialisation, where the positions' is 1. Small, so that
    # queries and keys first compare positions: started equal (the post's), attention can settle
    # on the live cells wherever they are, a grid's density, which alone gets 80 % of cells right
    # (at 16x16, seeds stayed there for thousands of steps)
    state_init: float = 0.1
    steps: int = 5_000  # at most this many batches; training stops earlier once the targets are met
    batch_size: int = 16  # grids per batch: 4,096 cells, each a prediction to learn from
    lr: float = 0.01  # peak learning rate (AdamW)
    schedule: str = "cosine"  # after warm-up, decaying over `steps`; a constant rate spikes now and then
    warmup: int = 100  # steps of linear learning-rate warm-up
    label_smoothing: float = 0.1  # targets 0.1/0.9: keeps a gradient on noise from non-neighbours
    density: tuple[float, float] = (0.05, 0.95)  # each training grid's density is drawn from this range
    eval_every: int = 200  # steps between validations
    val_grids: int = 1024  # validation grids (a stream of their own, never trained on)
    attention_target: float = 0.992  # stop once this share of attention is on the neighbours (a margin over 99 %)
    seed: int = 0  # seeds the weights and the training data

    def __post_init__(self):
        if self.positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got {self.positions!r}")
        if self.mixer not in MIXERS:
            raise ValueError(f"mixer must be one of {MIXERS}, got {self.mixer!r}")
        if self.grid_size < 3 or self.d_model < 1:
            raise ValueError(f"need grid_size >= 3 and d_model >= 1, got {self.grid_size}, {self.d_model}")
        if self.mixer == "offset" and not 1 <= self.radius <= (self.grid_size - 1) // 2:
            raise ValueError(f"radius must be 1 to {(self.grid_size - 1) // 2} so that the offsets around a cell "
                             f"of a {self.grid_size}x{self.grid_size} training grid are distinct, got {self.radius}")

    @property
    def n_cells(self) -> int:
        return self.grid_size * self.grid_size

    def train_options(self) -> TrainOptions:
        # out of steps, keep the best validated weights: one number ranks them (see train_life)
        return TrainOptions(steps=self.steps, lr=self.lr, schedule=self.schedule, warmup=self.warmup,
                            eval_every=self.eval_every, monitor="val_shortfall", restore_best=True)


class SingleAttentionNet(nn.Module):
    """The post's model: one token per cell, one single-head attention, one SiLU layer,
    one logit per cell. A token is the cell's state plus its position: a learned vector per
    row plus one per column (positions="rows_cols", the chapter's), or one per cell ("cells",
    the post's).

    forward(grids (batch, size, size) of 0/1) ->
        (logits (batch, size, size): > 0 means alive next,
         pattern (batch, layer=1, head=1, query_cell, key_cell))

    With mixer "pool" or "pool_no_centre" the attention pattern is not learned but fixed to
    a 3x3 average around each cell (with or without the cell itself): the post's comparison.
    """

    def __init__(self, config: LifeConfig):
        super().__init__()
        self.config = config
        d, n = config.d_model, config.n_cells
        self.W_state = nn.Parameter(torch.randn(2, d) * config.state_init)  # dead, alive
        if config.positions == "cells":
            self.W_pos = nn.Parameter(torch.randn(n, d))  # one per cell
        else:  # a cell's position is its row's vector plus its column's, each ~ N(0, 1/2): sums ~ N(0, 1) as above
            self.W_row = nn.Parameter(torch.randn(config.grid_size, d) / math.sqrt(2))
            self.W_col = nn.Parameter(torch.randn(config.grid_size, d) / math.sqrt(2))
        self.W_Q = nn.Parameter(torch.randn(d, d) * config.qk_init / math.sqrt(d))
        self.W_K = nn.Parameter(torch.randn(d, d) * config.qk_init / math.sqrt(d))
        self.W_V = nn.Parameter(torch.randn(d, d) / math.sqrt(d))
        self.W_hidden = nn.Parameter(torch.randn(d, d) / math.sqrt(d))
        self.W_class = nn.Parameter(torch.randn(d, 1) / math.sqrt(d))
        # log of a scale on the attention scores, on top of the post's 1/sqrt(d); learned unless learn_scale=False
        self.log_scale = nn.Parameter(torch.tensor(math.log(config.scale_init)), requires_grad=config.learn_scale)
        may_attend = ~torch.eye(n, dtype=torch.bool) if config.mask_self else None  # (cells, cells)
        self.register_buffer("may_attend", may_attend, persistent=False)
        if config.mixer != "attention":
            mask = neighbour_mask(config.grid_size, include_centre=config.mixer == "pool").float()
            self.register_buffer("pool", mask / mask.sum(-1, keepdim=True), persistent=False)  # (cells, cells)
            del self.W_Q, self.W_K, self.log_scale  # a fixed average has nothing to learn

    def positions(self) -> torch.Tensor:
        """(cells, d): each cell's position embedding, cells row by row."""
        if self.config.positions == "cells":
            return self.W_pos
        return (self.W_row[:, None] + self.W_col[None, :]).flatten(0, 1)  # (rows, 1, d) + (1, cols, d)

    def forward(self, grids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        size = self.config.grid_size
        if grids.dim() != 3 or grids.shape[1:] != (size, size):
            raise ValueError(f"this model takes (batch, {size}, {size}) grids, "
                             f"got shape {tuple(grids.shape)}")
        cells = grids.reshape(len(grids), -1).long()  # (batch, cells)
        x = self.W_state[cells] + self.positions()  # (batch, cells, d)
        v = x @ self.W_V  # (batch, cells, d)
        if self.config.mixer == "attention":
            # (batch, cells, d); scaling q scales the scores
            q, k = (x @ self.W_Q) * self.log_scale.exp(), x @ self.W_K
            # (batch, cells, d), (batch, cells, cells)
            z, pattern = attention(q, k, v, self.may_attend)
        else:
            # (batch, cells, cells)
            pattern = self.pool.expand(len(grids), -1, -1)
            z = pattern @ v
        x = x + z  # residual: each cell keeps its own state beside what it read
        x = x + F.silu(x @ self.W_hidden)  # (batch, cells, d)
        logits = (x @ self.W_class).view(-1, size, size)  # (batch, size, size)
        # pattern: (batch, layer=1, head=1, cells, cells)
        return logits, pattern[:, None, None]


class OffsetAttentionNet(nn.Module):
    """Life at any size: SingleAttentionNet without positions, whose attention score from one
    cell to another is a learned number for their offset on the torus (rows and columns
    -radius..radius), the same for every cell of every grid. Nothing in it depends on the grid
    size, so a model trained on small grids runs unchanged on a grid of any size.

    forward(grids (batch, height, width) of 0/1) ->
        (logits (batch, height, width),
         pattern (1, layer=1, head=1, 2 * radius + 1, 2 * radius + 1): the attention over
         offsets, the attending cell in the middle; every cell attends the same way)
    """

    def __init__(self, config: LifeConfig):
        super().__init__()
        self.config = config
        d, width = config.d_model, 2 * config.radius + 1
        self.W_state = nn.Parameter(torch.randn(2, d))  # dead, alive
        self.offset_scores = nn.Parameter(torch.zeros(width, width))  # all equal: attention starts uniform
        self.W_V = nn.Parameter(torch.randn(d, d) / math.sqrt(d))
        self.W_hidden = nn.Parameter(torch.randn(d, d) / math.sqrt(d))
        self.W_class = nn.Parameter(torch.randn(d, 1) / math.sqrt(d))
        may_attend = torch.ones(width, width, dtype=torch.bool)
        may_attend[config.radius, config.radius] = not config.mask_self
        self.register_buffer("may_attend", may_attend, persistent=False)

    def forward(self, grids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r = self.config.radius
        if grids.dim() != 3 or min(grids.shape[1:]) < 2 * r + 1:
            raise ValueError(
                f"this model takes (batch, height, width) grids of at least "
                f"{2 * r + 1}x{2 * r + 1} cells, got {tuple(grids.shape)}")
        x = self.W_state[grids.long()]  # (batch, h, w, d)
        scores = self.offset_scores.masked_fill(~self.may_attend, -math.inf)
        # (2r+1, 2r+1): one softmax over the offsets, shared by every cell
        pattern = scores.flatten().softmax(0).view_as(scores)
        # A value is W_V of a cell's token, one of two (dead, alive), so the
        # weighted sum of values is v_dead + (attention on live cells) *
        # (v_alive - v_dead): the same numbers as summing (batch, h, w, d)
        # values, d times less work. Rolling by -(dr, dc) brings each
        # cell's neighbour at offset (dr, dc) onto it, round the torus.
        alive = grids.to(x.dtype)  # (batch, h, w)
        on_alive = sum(pattern[dr + r, dc + r] * alive.roll((-dr, -dc), (1, 2))
                       for dr in range(-r, r + 1)
                       for dc in range(-r, r + 1))  # (batch, h, w)
        v_dead, v_alive = self.W_state @ self.W_V  # (d,), (d,)
        # residual: each cell keeps its own state beside what it read
        x = x + v_dead + on_alive[..., None] * (v_alive - v_dead)
        x = x + F.silu(x @ self.W_hidden)  # (batch, h, w, d)
        return (x @ self.W_class)[..., 0], pattern[None, None, None]


# OffsetAttentionNet's settings: a token of 8 numbers is enough when nothing encodes position,
# and its 25 offset scores start equal, so a larger step moves them apart sooner. It trains on
# 8x8 grids, 64 a batch (the 10-seed count was measured with exactly these settings).
ANY_SIZE = LifeConfig(mixer="offset", grid_size=8, d_model=8, lr=0.02, batch_size=64, steps=12_000)

# The post's model as the post builds it, over our defaults: a position vector per cell, a cell
# may attend to itself, scores scaled by 1/sqrt(d_model) alone, every weight started at the
# usual scale (embeddings N(0, 1), matrices N(0, 1/d)), and plain 0/1 targets
POST = dict(positions="cells", mask_self=False, learn_scale=False, scale_init=1.0, label_smoothing=0.0,
            state_init=1.0, qk_init=1.0)


def build_model(config: LifeConfig) -> SingleAttentionNet | OffsetAttentionNet:
    """The model a config describes: OffsetAttentionNet for mixer="offset"."""
    return (OffsetAttentionNet if config.mixer == "offset" else SingleAttentionNet)(config)


def _size(model) -> int | None:
    """The grid size a model takes: None (any) for OffsetAttentionNet."""
    return None if isinstance(model, OffsetAttentionNet) else model.config.grid_size


# ----------------------------------------------------------------------------- judging a model


def predict(model: SingleAttentionNet, grids, batch_size: int = 256) -> np.ndarray:
    """The model's next state for a grid or a batch of grids, as 0/1 uint8."""
    g = check_grids(grids, _size(model))
    alive = infer(model, g[None] if g.ndim == 2 else g, batch_size=batch_size,
                  keep=lambda out, _: out[0] > 0, numpy=True)  # (n, size, size)
    alive = alive.astype(np.uint8)
    return alive[0] if g.ndim == 2 else alive


def model_run(model: SingleAttentionNet, grids, steps: int) -> np.ndarray:
    """Roll the model forward on its own outputs: (steps + 1, ...) starting with `grids`."""
    out = [check_grids(grids, _size(model))]
    for _ in range(steps):
        out.append(predict(model, out[-1]))
    return np.stack(out)


def neighbour_attention(model: SingleAttentionNet, grids, batch_size: int = 64, on: str = "neighbours") -> float:
    """Mean share of each cell's attention that lands on its 8 neighbours (or, with
    on="self", on the cell itself), over the grids."""
    if on not in ("neighbours", "self"):
        raise ValueError(f"on must be 'neighbours' or 'self', got {on!r}")
    if isinstance(model, OffsetAttentionNet):  # attends the same way everywhere: read its pattern
        by_offset = attention_by_offset(model, grids, radius=1)
        return float(by_offset[1, 1] if on == "self" else by_offset.sum() - by_offset[1, 1])
    g = check_grids(grids, model.config.grid_size)
    g = g[None] if g.ndim == 2 else g
    size = model.config.grid_size
    mask = neighbour_mask(size) if on == "neighbours" else torch.eye(size * size, dtype=torch.bool)

    def share(out, _):  # per grid: the mean over cells of the attention on `mask`
        pattern = out[1][:, 0, 0]  # (batch, cells, cells)
        return (pattern * mask.to(pattern.device)).sum(-1).mean(-1)  # (batch,)

    return float(infer(model, g, batch_size=batch_size, keep=share).mean())


def attention_by_offset(model: SingleAttentionNet, grids, radius: int = 2, batch_size: int = 100) -> np.ndarray:
    """Mean attention by offset from the attending cell, over every cell of every grid:
    (2 * radius + 1, 2 * radius + 1), the attending cell at the centre, rows and columns
    of offsets -radius..radius. A model that attends only to its 8 neighbours, equally,
    shows 1/8 on the ring around the centre and 0 everywhere else."""
    if isinstance(model, OffsetAttentionNet):  # its pattern is by offset already, the same everywhere
        r = model.config.radius
        if not 0 <= radius <= r:
            raise ValueError(f"radius must be between 0 and the model's {r}")
        pattern = model(torch.zeros(1, 2 * r + 1, 2 * r + 1, device=model_device(model)))[1]
        return pattern[0, 0, 0, r - radius : r + radius + 1, r - radius : r + radius + 1].detach().cpu().numpy()
    g = check_grids(grids, model.config.grid_size)
    size = model.config.grid_size
    if not 0 <= radius <= size // 2 - (size % 2 == 0):
        raise ValueError(f"radius must be between 0 and {size // 2 - (size % 2 == 0)} on a {size}x{size} grid")
    total = infer(model, g[None] if g.ndim == 2 else g, batch_size=batch_size,
                  keep=lambda out, _: out[1][:, 0, 0].sum(0, keepdim=True))  # (batches, cells, cells)
    mean = total.sum(0).numpy() / (1 if g.ndim == 2 else len(g))  # (cells, cells)
    centred = np.zeros((size, size))
    for cell in range(size * size):
        r, c = divmod(cell, size)  # roll cell (r, c) to the middle of the grid
        centred += np.roll(mean[cell].reshape(size, size), (size // 2 - r, size // 2 - c), axis=(0, 1))
    h = size // 2
    return centred[h - radius : h + radius + 1, h - radius : h + radius + 1] / (size * size)


def any_size_check(model, grids: int = 1000, size: int = 256, game_size: int = 128, game_steps: int = 100,
                   seed: int = 4321) -> dict[str, float]:
    """Judge a model that takes any grid size far from the size it trained on: the share of
    `grids` random (size, size) grids (densities 0.05 to 0.95) whose next state is exact,
    and whether one random (game_size, game_size) game run `game_steps` steps on the model's
    own outputs matches the rule at every step (1.0 or 0.0)."""
    rng = np.random.default_rng([seed, 7])
    right = 0
    for start in range(0, grids, 50):  # 50 grids at a time: a 256x256 batch of 8-number tokens is 100 MB
        x = random_grids(min(50, grids - start), size, rng)
        right += int((predict(model, x, batch_size=8) == life_step(x)).reshape(len(x), -1).all(1).sum())
    game = random_grids(1, game_size, rng, (0.25, 0.45))[0]
    same = (model_run(model, game, game_steps) == life_run(game, game_steps)).all()
    return {"exact": right / grids, "game_exact": float(same)}


def any_size_targets(result: dict[str, float], train_seconds: float, grids: int = 1000, size: int = 256,
                     game_size: int = 128, game_steps: int = 100) -> list[Target]:
    """The targets of a model that takes any size, from `any_size_check` (with the same sizes)."""
    return [
        Target(f"exact next state, {grids:,} random {size}x{size} grids", "100 %", pct(result["exact"]),
               result["exact"] == 1),
        Target(f"exact {game_size}x{game_size} game, {game_steps} steps on own outputs", "yes",
               "yes" if result["game_exact"] == 1 else "no", result["game_exact"] == 1),
        Target("training time (any size)", "< 1 min", f"{train_seconds:.0f} s", train_seconds < 60, machine=True),
    ]


def exact_fraction(predicted: np.ndarray, true: np.ndarray) -> float:
    """Share of grids (first axis) predicted exactly, every cell right."""
    return float((predicted == true).reshape(len(true), -1).all(1).mean())


def neighbourhood_accuracy(model: SingleAttentionNet) -> tuple[float, int]:
    """Judge the model on all 512 3x3 neighbourhoods, each centred on every cell.

    Returns (share of the 512 neighbourhoods right at every cell, number of
    (neighbourhood, cell) pairs got wrong)."""
    size = model.config.grid_size
    grids, gi, r, c = neighbourhood_grids(size)
    right = predict(model, grids)[gi, r, c] == life_step(grids)[gi, r, c]
    # read each pair's neighbourhood back from the grid itself, as a code 0..511
    block = np.stack([grids[gi, (r + dr) % size, (c + dc) % size] for dr in (-1, 0, 1) for dc in (-1, 0, 1)], 1)
    code = (block * (1 << np.arange(9))).sum(1)
    all_right = np.ones(512, bool)
    np.logical_and.at(all_right, code, right)
    return float(all_right.mean()), int((~right).sum())


# ----------------------------------------------------------------------------- training


def life_loss(model: SingleAttentionNet, batch: tuple[torch.Tensor, torch.Tensor], label_smoothing: float = 0.0):
    """Binary cross-entropy per cell, and the share of cells right, for one batch."""
    device = next(model.parameters()).device
    grids, targets = (t.to(device) for t in batch)
    logits, _ = model(grids)
    soft = targets.float() * (1 - 2 * label_smoothing) + label_smoothing
    loss = F.binary_cross_entropy_with_logits(logits, soft)
    return loss, {"cell_acc": ((logits > 0) == targets.bool()).float().mean().item()}


def train_life(
    config: LifeConfig = LifeConfig(),
    callback: Callable[[int, nn.Module, History], bool | None] | None = None,
    device: torch.device | str | None = None,
    progress: bool = True,
    stop_at_target: bool = True,
) -> tuple[SingleAttentionNet, History, set[bytes]]:
    """Build a model from `config` and train it on freshly generated grids.

    Every `eval_every` steps it is validated on `val_grids` held-out grids of densities 0.05
    to 0.95 (val_exact: share predicted exactly). With stop_at_target, training stops at the
    first validation with every grid exact and the attention settled on the neighbours; if
    that never happens, the best validated weights are restored at the end.
    Returns (model, history, hashes of every training grid: to prove the test set is unseen).
    """
    rng = seed_everything(config.seed)
    device = device or pick_device()
    model = build_model(config).to(device)
    val_rng = np.random.default_rng([config.seed, 1])  # a stream of its own: never the training stream
    val_x = random_grids(config.val_grids, config.grid_size, val_rng)
    val_y = life_step(val_x)
    seen: set[bytes] = set()

    def make_batch():
        x = random_grids(config.batch_size, config.grid_size, rng, config.density)
        seen.update(grid_hashes(x))
        return torch.from_numpy(x), torch.from_numpy(life_step(x))

    def evaluate(m):
        exact = exact_fraction(predict(m, val_x), val_y)
        attn = neighbour_attention(m, val_x[:256]) if config.mixer in ("attention", "offset") else 1.0
        # one number to keep the best weights by: exactness first, then attention
        return {"val_exact": exact, "neighbour_attention": attn, "val_shortfall": 2 * (1 - exact) + (1 - attn)}

    def at_target(r):
        return stop_at_target and r["val_exact"] == 1.0 and r["neighbour_attention"] >= config.attention_target

    with flush_denormals():  # the attention's tail underflows as it settles: see flush_denormals
        history = fit(model, forever(make_batch), lambda m, b: life_loss(m, b, config.label_smoothing),
                      config.train_options(), eval_fn=evaluate, callback=stop_when(at_target, callback),
                      device=device, progress=progress)
    return model, history, seen


# ----------------------------------------------------------------------------- the chapter's targets


@dataclasses.dataclass(frozen=True)
class Summary:
    """What `summarise` measured of a trained model, on data it never trained on."""

    test_exact: float  # share of held-out random grids whose next state is exactly right
    test_grids: int
    dropped_as_seen: int  # random test draws left out because training had seen them
    games_exact: float  # share of model-run games that match the true game at every step
    games: int
    game_steps: int
    neighbourhoods_right: float  # share of the 512 3x3 neighbourhoods right at every cell
    neighbourhood_errors: int  # (neighbourhood, cell) pairs got wrong, out of 512 * cells
    neighbour_attention: float  # mean share of each cell's attention on its 8 neighbours

    def targets(self, train_seconds: float, grid_size: int, time_limit: float = 180.0) -> list[Target]:
        """The chapter's summary: the targets and what was measured."""
        return [
            Target(f"exact next state, {self.test_grids:,} unseen grids", "100 %", pct(self.test_exact),
                   self.test_exact == 1),
            Target(f"exact games, {self.games} x {self.game_steps} steps on own outputs", "100 %",
                   pct(self.games_exact), self.games_exact == 1),
            Target("3x3 neighbourhoods right at every cell (of 512)", "100 %", pct(self.neighbourhoods_right),
                   self.neighbourhoods_right == 1),
            Target("attention on the 8 neighbours (mean)", ">= 99 %", f"{100 * self.neighbour_attention:.1f} %",
                   bool(self.neighbour_attention >= 0.99)),
            Target("grid size", "16x16 (post)", f"{grid_size}x{grid_size}", True if grid_size == 16 else None),
            Target("training time", f"<= {time_limit / 60:.0f} min", f"{train_seconds:.0f} s",
                   train_seconds <= time_limit, machine=True),
        ]


def summarise(
    model: SingleAttentionNet, seen: set[bytes], test_grids: int = 10_000, games: int = 100, game_steps: int = 100, seed: int = 1234
) -> Summary:
    """Measure a trained model against the chapter's targets, on random grids (densities
    0.05 to 0.95) from `seed`'s own stream, leaving out every grid in `seen` (the hashes of
    the training grids, from `train_life`)."""
    size = model.config.grid_size
    rng = np.random.default_rng([seed, 2])
    x, dropped = unseen_grids(test_grids, size, rng, seen)
    starts, dropped_starts = unseen_grids(games, size, rng, seen)
    truth = life_run(starts, game_steps)  # (steps + 1, games, size, size)
    ours = model_run(model, starts, game_steps)
    games_exact = float((ours == truth).reshape(game_steps + 1, games, -1).all(axis=(0, 2)).mean())
    right, errors = neighbourhood_accuracy(model)
    return Summary(
        test_exact=exact_fraction(predict(model, x), life_step(x)),
        test_grids=test_grids,
        dropped_as_seen=dropped + dropped_starts,
        games_exact=games_exact,
        games=games,
        game_steps=game_steps,
        neighbourhoods_right=right,
        neighbourhood_errors=errors,
        neighbour_attention=(neighbour_attention(model, x[:1000]) if model.config.mixer in ("attention", "offset")
                             else float("nan")),
    )


# ----------------------------------------------------------------------------- for readers with a kernel


def life_widget(model: SingleAttentionNet):
    """A board to draw on (click a cell to flip it) or fill with a famous pattern, stepped by
    the model beside the true rule; returns the widget (the last expression of a cell
    displays it). Needs a running kernel (Jupyter, Colab)."""
    import ipywidgets as w
    from IPython.display import display

    from toylib.plot import animate, show_animation
    from toylib.widgets import BoardGrid

    size = model.config.grid_size
    board = BoardGrid(np.zeros((size, size), np.uint8), style=lambda v: ("", "black" if v else "white"), cell_px=26)
    board.on_click = lambda r, c: board.set_cell(r, c, 1 - board.values[r, c])
    fits = [name for name, rows in PATTERNS.items() if len(rows) <= size and max(map(len, rows)) <= size]
    choose = w.Dropdown(options=["(draw your own)", "random"] + fits, description="pattern")
    steps = w.IntSlider(value=8, min=1, max=40, description="steps")
    go = w.Button(description="step with the model", button_style="primary")
    out = w.Output()

    def on_choose(change):
        if change["new"] == "random":
            board.set(random_grids(1, size, np.random.default_rng(), (0.2, 0.5))[0])
        elif change["new"] in PATTERNS:
            board.set(place(change["new"], size))

    def on_go(_):
        g = board.values.astype(np.uint8)
        ours, truth = model_run(model, g, steps.value), life_run(g, steps.value)
        wrong = (ours != truth).reshape(len(ours), -1).sum(1)  # cells that differ, per step
        anim = animate(np.stack([ours, truth], 1), panel_titles=("the model", "the rule"), cmap="Greys",
                       frame_titles=[f"step {t}: {n} cells differ" for t, n in enumerate(wrong)])
        with out:
            out.clear_output(wait=True)
            display(show_animation(anim))
        board.set(ours[-1])

    choose.observe(on_choose, names="value")
    go.on_click(on_go)
    return w.VBox([w.HBox([choose, steps, go]), board.widget, out])


# ----------------------------------------------------------------------------- command line


def _train(config: LifeConfig, device, progress: bool, args) -> tuple[SingleAttentionNet, History, dict]:
    model, history, seen = train_life(config, device=device, progress=progress)
    return model, history, {"seen": seen}


def _measure(model: SingleAttentionNet | OffsetAttentionNet, config: LifeConfig, seconds: float, info: dict, args) -> list[Target]:
    if "seen" not in info:
        print("(a loaded model does not carry its training grids: the test grids are not checked against them)")
    targets = summarise(model, info.get("seen", set())).targets(seconds, config.grid_size)
    if isinstance(model, OffsetAttentionNet):  # and the sizes it never saw
        targets += any_size_targets(any_size_check(model), seconds)
    return targets


CHAPTER = cli.Chapter(
    "life", "Train a transformer on Conway's Game of Life, and measure it against the chapter's targets.",
    LifeConfig, build_model, _train, _measure,
    options=(
        cli.Option("--size", "grid_size", "grid size"),
        cli.Option("--steps", "steps", "most training steps"),
        cli.Option("--d-model", "d_model", "token width"),
        cli.Option("--mixer", "mixer", "attention, a fixed 3x3 average, or attention by offset (any size)",
                   choices=MIXERS),
        cli.Option("--lr", "lr", "peak learning rate"),
        cli.Option("--batch-size", "batch_size", "grids per batch"),
        cli.Option("--positions", "positions", "a vector per row and one per column, or one per cell (the post's)",
                   choices=POSITIONS),
        cli.Option("--mask-self", "mask_self", "forbid a cell to attend to itself (--no-mask-self: as in the post)"),
    ),
    # --mixer offset starts from ANY_SIZE's settings (8x8 training), which the other options change
    base_config=lambda args: ANY_SIZE if args.mixer == "offset" else LifeConfig(),
)

main = cli.entry_point(CHAPTER)  # python -m toylib.<chapter>, and its console script


if __name__ == "__main__":
    main()
