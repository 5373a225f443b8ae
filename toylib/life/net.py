"""The models of Life: the post's SingleAttentionNet (one token per cell, one attention head)
and OffsetAttentionNet (attention by offset, any grid size), what builds one from a config,
and the loss."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from toylib.attention import attention
from toylib.infer import model_device
from toylib.life.config import LifeConfig
from toylib.life.world import NEIGHBOUR_OFFSETS


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
        # On a torus narrower than the reach, offsets alias: on a 3x3 torus,
        # two rows down is one row up, and the rolls below read that cell
        # under both offsets, which is what the torus means. From 3x3 up no
        # offset lands on the cell itself or merges two of its neighbours.
        if grids.dim() != 3 or min(grids.shape[1:]) < 3:
            raise ValueError(
                f"this model takes (batch, height, width) grids of at least "
                f"3x3 cells, got {tuple(grids.shape)}")
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
        return self.readout(x, on_alive), pattern[None, None, None]

    def readout(self, x: torch.Tensor, on_alive: torch.Tensor) -> torch.Tensor:
        """A cell's logit from its state's token `x` (..., d) and the attention it put on
        live cells `on_alive` (...): all the model knows of a cell's surroundings is that one
        number (measure.window_margins runs every value it can take)."""
        v_dead, v_alive = self.W_state @ self.W_V  # (d,), (d,)
        # residual: each cell keeps its own state beside what it read
        x = x + v_dead + on_alive[..., None] * (v_alive - v_dead)
        x = x + F.silu(x @ self.W_hidden)  # (..., d)
        return (x @ self.W_class)[..., 0]


LifeNet = SingleAttentionNet | OffsetAttentionNet  # what build_model makes of a LifeConfig


def build_model(config: LifeConfig) -> LifeNet:
    """The model a config describes: OffsetAttentionNet for mixer="offset"."""
    return (OffsetAttentionNet if config.mixer == "offset" else SingleAttentionNet)(config)


# ----------------------------------------------------------------------------- the loss


def life_loss(model: SingleAttentionNet, batch: tuple[torch.Tensor, torch.Tensor], label_smoothing: float = 0.0):
    """Binary cross-entropy per cell, and the share of cells right, for one batch."""
    device = model_device(model)
    grids, targets = (t.to(device) for t in batch)
    logits, _ = model(grids)
    soft = targets.float() * (1 - 2 * label_smoothing) + label_smoothing
    loss = F.binary_cross_entropy_with_logits(logits, soft)
    return loss, {"cell_acc": ((logits > 0) == targets.bool()).float().mean().detach()}  # read when recorded

