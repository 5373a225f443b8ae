"""The config: `TicTacToeConfig` (a model and how to train it), the post's four configs
(`POST_CONFIGS`, trained its way: `POST_RECIPE`) and the parameter count of its smallest."""

from __future__ import annotations

import dataclasses

from toylib.train import TrainOptions


@dataclasses.dataclass(frozen=True)
class TicTacToeConfig:
    """A model and how to train it. The defaults reach the chapter's targets."""

    d_model: int = 32  # the post's small configs: 32 wide
    n_heads: int = 4
    n_layers: int = 4  # "blocks" in the post
    mlp_ratio: int = 4  # the feed-forward layer is mlp_ratio * d_model wide (4 in the post)
    dropout: float = 0.0
    loss: str = "any_optimal"  # "any_optimal": likelihood of the set of optimal next boards; "label": the post's
    relative: bool = True  # see the board as (empty, mine, theirs) of the player to move, not (empty, X, O)
    value_weight: float = 3.0  # weight of the auxiliary loss: the minimax outcome of each legal move (> 0: that
    # head also weighs in on the move, `measure.model_moves`)
    positions: str = "graph"  # "graph": cell and line tokens, attention biased by relation; "cells": the post's, a vector per cell
    lr: float = 3e-3
    weight_decay: float = 0.3  # strong, for unseen positions; at 0.5 some seeds never fit a hard class (the post: 0.01)
    decay_all: bool = True  # decay biases and LayerNorm gains too (False: nanoGPT's rule; measured, no better)
    batch_size: int = 128
    max_epochs: int = 100
    plateau_factor: float = 0.5  # the learning rate times this after `plateau_patience` epochs without a better `monitor`
    plateau_patience: int = 10  # epochs
    # what the plateau, early stopping and the restored weights rank epochs by (`toylib.train.rank`): the positions
    # given a non-optimal move, then the validation loss; or "val_loss" alone (the post's)
    monitor: str | tuple[str, ...] = ("non_optimal", "val_loss")
    early_stopping: int | None = 60  # epochs without a better `monitor`, then the best weights are restored
    stop_at_target: bool = True  # stop once every train and validation position gets an optimal move
    # learn from the validation classes too: the stopping rule above needs no held-out data,
    # and early positions with a deep tactic are few (see the chapter). False: the post's way
    train_on_val: bool = True
    split_seed: int = 0  # which symmetry classes are held out
    seed: int = 0  # initial weights and batch order

    def __post_init__(self):
        if self.loss not in ("any_optimal", "label"):
            raise ValueError(f"loss must be 'any_optimal' or 'label', got {self.loss!r}")
        if self.positions not in ("graph", "cells"):
            raise ValueError(f"positions must be 'graph' or 'cells', got {self.positions!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")

    def train_options(self, steps_per_epoch: int) -> TrainOptions:
        """Evaluated once an epoch: the plateau and early-stopping patiences count epochs."""
        return TrainOptions.from_config(self, steps=self.max_epochs * steps_per_epoch, eval_every=steps_per_epoch,
                                        plateau=(self.plateau_factor, self.plateau_patience),
                                        patience=self.early_stopping, restore_best=True)


# The post's four experiments (its exact-match accuracy beside each), trained its way: one
# minimax label, AdamW at 1e-3, the learning rate halved after 30 epochs without a better
# validation loss, early stopping after 50.
POST_RECIPE = dict(loss="label", relative=False, value_weight=0.0, positions="cells", lr=1e-3, weight_decay=0.01,
                   plateau_patience=30, monitor="val_loss", early_stopping=50, stop_at_target=False, train_on_val=False)
POST_CONFIGS = {
    "1: d=32, 4 heads": (TicTacToeConfig(d_model=32, n_heads=4, **POST_RECIPE), 84.459),
    "2: + dropout 0.1": (TicTacToeConfig(d_model=32, n_heads=4, dropout=0.1, **POST_RECIPE), 92.229),
    "3: 8 heads": (TicTacToeConfig(d_model=32, n_heads=8, dropout=0.1, **POST_RECIPE), 94.932),
    "4: d=128, 8 heads": (TicTacToeConfig(d_model=128, n_heads=8, dropout=0.1, **POST_RECIPE), 96.621),
}
POST_SMALLEST = 51_462  # parameters of the post's config 1 (a test counts them)
