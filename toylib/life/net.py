"""The models of Life: the post's SingleAttentionNet (one token per cell, one attention head)
and OffsetAttentionNet (attention by offset, any grid size); their config; what validation
reads of a model (its predictions, its attention on the neighbours); the loss and training."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from toylib.attention import attention
from toylib.device import flush_denormals, pick_device, seed_everything
from toylib.infer import evaluating, infer, model_device
from toylib.life.dataset import LifeData, for_config
from toylib.life.world import NEIGHBOUR_OFFSETS, check_grids
from toylib.train import Callback, History, TrainOptions, fit, stop_when


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
    stop_at_target: bool = True  # stop at the first validation with every grid exact and attention_target met
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
        # out of steps, keep the best validated weights: one number ranks them (see train)
        return TrainOptions.from_config(self, monitor="val_shortfall", restore_best=True)


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

# The post's model as the post builds it, as changes to our defaults (the notebook makes them to
# other configs too): a position vector per cell, a cell may attend to itself, scores scaled by
# 1/sqrt(d_model) alone, every weight started at the usual scale (embeddings N(0, 1), matrices
# N(0, 1/d)), and plain 0/1 targets
POST_CHANGES = dict(positions="cells", mask_self=False, learn_scale=False, scale_init=1.0, label_smoothing=0.0,
                    state_init=1.0, qk_init=1.0)
POST = LifeConfig(**POST_CHANGES)  # the post's config (trained by our loop, on our grids)


LifeNet = SingleAttentionNet | OffsetAttentionNet  # what build_model makes of a LifeConfig


def build_model(config: LifeConfig) -> LifeNet:
    """The model a config describes: OffsetAttentionNet for mixer="offset"."""
    return (OffsetAttentionNet if config.mixer == "offset" else SingleAttentionNet)(config)


def _size(model) -> int | None:
    """The grid size a model takes: None (any) for OffsetAttentionNet."""
    return None if isinstance(model, OffsetAttentionNet) else model.config.grid_size


# ----------------------------------------------------------------------------- what validation reads of a model: its answers, its attention


def predict(model: SingleAttentionNet, grids, batch_size: int = 256) -> np.ndarray:
    """The model's next state for a grid or a batch of grids, as 0/1 uint8."""
    g = check_grids(grids, _size(model))
    alive = infer(model, g[None] if g.ndim == 2 else g, batch_size=batch_size,
                  keep=lambda out, _: out[0] > 0, numpy=True)  # (n, size, size)
    alive = alive.astype(np.uint8)
    return alive[0] if g.ndim == 2 else alive


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
        with evaluating(model) as device:
            pattern = model(torch.zeros(1, 2 * r + 1, 2 * r + 1, device=device))[1]
        return pattern[0, 0, 0, r - radius : r + radius + 1, r - radius : r + radius + 1].cpu().numpy()
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


def exact_fraction(predicted: np.ndarray, true: np.ndarray) -> float:
    """Share of grids (first axis) predicted exactly, every cell right."""
    return float((predicted == true).reshape(len(true), -1).all(1).mean())


# ----------------------------------------------------------------------------- training


def life_loss(model: SingleAttentionNet, batch: tuple[torch.Tensor, torch.Tensor], label_smoothing: float = 0.0):
    """Binary cross-entropy per cell, and the share of cells right, for one batch."""
    device = model_device(model)
    grids, targets = (t.to(device) for t in batch)
    logits, _ = model(grids)
    soft = targets.float() * (1 - 2 * label_smoothing) + label_smoothing
    loss = F.binary_cross_entropy_with_logits(logits, soft)
    return loss, {"cell_acc": ((logits > 0) == targets.bool()).float().mean().detach()}  # read when recorded


def train(config: LifeConfig, data: LifeData | None = None, device: torch.device | str | None = None,
          callback: Callback | None = None, progress: bool = True, *,
          watch: Callback | None = None, watch_every: int | None = None) -> tuple[LifeNet, History]:
    """Build a model from `config` and train it on `data` (by default `for_config(config)`):
    fresh random grids every batch, whose hashes `data.seen` collects, so that the test grids
    can leave out every grid training saw.

    Every `eval_every` steps it is validated on `data.val_x` (val_exact: share predicted
    exactly). With config.stop_at_target, training stops at the first validation with every
    grid exact and the attention settled on the neighbours; if that never happens, the best
    validated weights are restored at the end. Returns (model, history).

    callback(step, model, history) runs after every validation and may stop training.
    watch(step, model, history) (a `toylib.train.Snapshots`, say) looks at the model more often
    than validation does, from step 0 (`fit`'s `watch`, every `watch_every` steps); training is
    the same with or without it.
    """
    data = for_config(config) if data is None else data
    seed_everything(config.seed)  # the weights; the grids come from data's own streams
    device = device or pick_device()
    model = build_model(config).to(device)

    def evaluate(m):
        exact = exact_fraction(predict(m, data.val_x), data.val_y)
        attn = neighbour_attention(m, data.val_x[:256]) if config.mixer in ("attention", "offset") else 1.0
        # one number to keep the best weights by: exactness first, then attention
        return {"val_exact": exact, "neighbour_attention": attn, "val_shortfall": 2 * (1 - exact) + (1 - attn)}

    def at_target(r):
        return config.stop_at_target and r["val_exact"] == 1.0 and r["neighbour_attention"] >= config.attention_target

    with flush_denormals():  # the attention's tail underflows as it settles: see flush_denormals
        history = fit(model, data.batches(), lambda m, b: life_loss(m, b, config.label_smoothing),
                      config.train_options(), eval_fn=evaluate, callback=stop_when(at_target, callback),
                      device=device, progress=progress, watch=watch, watch_every=watch_every)
    return model, history
