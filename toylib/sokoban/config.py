"""The Sokoban policy's config: its size, its history, its data and how to train it, in one
frozen dataclass whose defaults reach the chapter's targets.
"""

from __future__ import annotations

import dataclasses

from toylib.train import TrainOptions


@dataclasses.dataclass(frozen=True)
class SokobanConfig:
    """A policy and how to train it. The defaults reach the chapter's targets."""

    d_model: int = 32  # width of every token (the post: 16)
    n_heads: int = 8
    n_layers: int = 3  # transformer blocks over the history (the post: 3)
    channels: int = 16  # width of the convolutional board encoder
    conv_layers: int = 6  # 3x3 convolutions per board, all but the first residual
    region: bool = True  # a sixth plane, where the player can walk (`walkable`); False: the post's 5
    inside: bool = True  # convolve only the squares inside the border wall, which every board has
    pieces: bool = True  # the token also reads the features at the box's and the player's squares
    n_ctx: int = 32  # boards a history holds, the goal board not counted (the post: 32)
    history: bool = True  # False: the baseline, each board sees only itself and the goal
    dropout: float = 0.0
    steps: int = 2_200  # batches (cosine decay over them)
    batch_size: int = 32  # entries per batch (the post: 32)
    lr: float = 6e-3  # peak learning rate (AdamW): 3e-3 learns more slowly, 1e-2 no better
    warmup: int = 100
    weight_decay: float = 0.0
    grad_clip: float | None = 1.0
    eval_every: int = 1_000  # steps between validations
    log_every: int = 100  # steps between records of the training loss, for its curve
    n_solvable: int = 4_000  # training boards that can be solved (the post: 4,000) ...
    n_unsolvable: int = 4_000  # ... and that cannot (the post: 4,000), each under 8 symmetries
    n_held_out: int = 4_000  # held-out boards, half of them solvable (the post: 4,000)
    n_starts: int = 24_000  # start boards alone, half solvable, each under 8 symmetries, for the start loss
    start_batch: int = 64  # start boards per batch, beside the entries: their nsteps class (0: none)
    data_seed: int = 0  # which boards: `dataset.for_config` seeds its generator with it
    seed: int = 0  # initial weights and batch order

    def __post_init__(self):
        if self.d_model < 1 or self.n_heads < 1 or self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a positive multiple of n_heads ({self.n_heads})")
        if min(self.n_layers, self.channels, self.conv_layers, self.n_ctx, self.batch_size) < 1:
            raise ValueError("n_layers, channels, conv_layers, n_ctx and batch_size must be at least 1")
        if self.n_starts < 0 or self.start_batch < 0 or (self.start_batch > 0) != (self.n_starts > 0):
            raise ValueError(f"n_starts ({self.n_starts}) and start_batch ({self.start_batch}) are both 0 (no start "
                             "loss) or both positive")

    def train_options(self) -> TrainOptions:
        return TrainOptions.from_config(self, schedule="cosine", monitor="val_loss", restore_best=True)
