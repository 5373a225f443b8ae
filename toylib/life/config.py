"""Life's config: what a model is built and trained from (`LifeConfig`), and its presets: the
post's model (`POST`, from `POST_CHANGES`) and the model that takes any grid size
(`ANY_SIZE`)."""

from __future__ import annotations

import dataclasses

from toylib.train import TrainOptions

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
        # out of steps, keep the best validated weights: the most exact, then the most attention on the neighbours
        return TrainOptions.from_config(self, monitor=("-val_exact", "-neighbour_attention"), restore_best=True)


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
