"""The maze models' configs, one class per model, each holding only what its model reads:
`BaseMazeConfig` (the widths, the loss's padding and how to train, which both models read),
`MazeConfig` (the chapter's looped model) and `PostMazeConfig` (the post's model), and the
presets: `FIRST`, the chapter's first looped model, and `POST`, the post's model and recipe.
The config's class says which model `training.build_model` builds."""

from __future__ import annotations

import dataclasses

from toylib.maze.world import TILE
from toylib.train import TrainOptions


@dataclasses.dataclass(frozen=True)
class BaseMazeConfig:
    """What both maze models read: their widths, the loss, and how to train them. The
    defaults are the chapter's model's; each model's config below changes what its model
    needs (`PostMazeConfig` redeclares the fields whose default differs for the post)."""

    d_model: int = 32  # width of every token
    n_heads: int = 4  # looped: head h reads along DIRECTIONS[h % 4] (see MazeNet)
    d_mlp: int = 64  # width of the feed-forward layers
    n_decoder_layers: int = 1
    pad_as_stop: bool = False  # train padding as STOP, as the post does (False: padding is left out)
    steps: int = 800  # at most this many batches (cosine decay over them); training stops sooner at `stop_at`
    batch_size: int = 64
    lr: float = 3e-3  # peak learning rate (AdamW); at 6e-3 some seeds' validation score collapsed mid-run
    grad_clip: float | None = 1.0  # clip the gradient norm: unclipped, FIRST lost seed 2 at 3e-3 and seed 5 at 6e-3
    weight_decay: float = 0.0
    warmup: int = 100  # steps of linear warm-up
    schedule: str = "cosine"  # "constant" or "cosine" after the warm-up
    eval_every: int = 800  # steps between validations (greedy solving of the validation mazes)
    # stop once this share of the validation mazes is solved by a shortest path (None: train every step). The
    # 5x5 validation mazes are all solved long before the search carries far: stopping there kept weak searches
    stop_at: float | None = None
    n_train: int = 10_000  # training mazes (the post's 10,000)
    data_seed: int = 0  # which mazes: `make_splits(seed=data_seed)` (see `dataset.for_config`)
    seed: int = 0  # initial weights, batch order and encoder iterations

    def __post_init__(self):
        if self.d_model < 1 or self.n_heads < 1 or self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a positive multiple of n_heads ({self.n_heads})")
        if self.n_decoder_layers < 1 or self.d_mlp < 1:
            raise ValueError("n_decoder_layers and d_mlp must be at least 1")
        if self.batch_size < 1 or self.n_train < 1:
            raise ValueError(f"batch_size and n_train must be positive, got {self.batch_size}, {self.n_train}")

    def train_options(self) -> TrainOptions:
        # out of steps, keep the best validated weights: the most mazes solved by a shortest path, then solved at
        # all, then the token accuracy. The loss is recorded every 25 steps between validations, which may come only
        # once, at the end
        return TrainOptions.from_config(self, monitor=("-val_shortest", "-val_solved", "-val_token_acc"),
                                        restore_best=True, log_every=25)


@dataclasses.dataclass(frozen=True)
class MazeConfig(BaseMazeConfig):
    """The chapter's looped model, `MazeNet`, and how to train it. The defaults reach the
    chapter's targets."""

    radius: int = 2  # cross-attention learns a bias per offset up to this many tiles away
    # what makes it search mazes of any size (all off in FIRST, the chapter's first model)
    ways: float = 1.0  # weight of a second loss: every tile's way to the end (`ways_to_end`), read from its state
    # weight of the way loss at every pass before the last: a tile says NO_WAY until the end's news could
    # have reached it, one tile a pass (`wave_targets`), so that no tile commits to a way on a guess
    wave: float = 1.0
    squash: float = 3.0  # after every pass each state number is squash * tanh(x / squash): bounded, so it settles
    window: bool = True  # cross-attention reads only the tiles within `radius` of the walker
    extra_passes: int = 10  # passes past what a maze needs: in training past its farthest tile, solving past its tiles

    def __post_init__(self):
        super().__post_init__()
        if self.radius < 1:
            raise ValueError(f"radius must be at least 1 (the current tile and its neighbours), got {self.radius}")
        if min(self.ways, self.wave, self.squash, self.extra_passes) < 0:
            raise ValueError(f"ways, wave, squash and extra_passes must be >= 0, got {self.ways}, {self.wave}, "
                             f"{self.squash}, {self.extra_passes}")
        if self.wave and not self.ways:
            raise ValueError("wave weighs the way loss at every pass: it needs a way head (ways > 0)")


# The chapter's first looped model (before it was taught to search): unbounded states, one encoder pass per
# tile, a decoder that reads every tile, trained at 6e-3 and stopped by the 5x5 validation mazes. Seed 0 solved
# 93 % of 8x8 mazes with paths of 19 to 40 moves, and 22 % of 16x16 mazes with no loops.
FIRST = MazeConfig(ways=0.0, wave=0.0, squash=0.0, window=False, extra_passes=0, lr=6e-3, steps=1100,
                   eval_every=200, stop_at=0.998)


@dataclasses.dataclass(frozen=True)
class PostMazeConfig(BaseMazeConfig):
    """The post's model, `PostMazeNet`, and its recipe, as the defaults: d=32, 8 heads, 4
    encoder and 10 decoder layers with feed-forward layers 512 wide (570,502 parameters), raw
    numbers in, padding trained as STOP, Adam at 1e-4 in batches of 1,024. 8 steps train it for
    about a quarter of the time the chapter's model trains (16 steps, at twice the cost, showed
    the same: no maze solved, the same token accuracy on validation after 8 steps and after
    16); the post trained 2,000 epochs of 10 steps."""

    n_heads: int = 8
    d_mlp: int = 512
    n_decoder_layers: int = 10
    pad_as_stop: bool = True
    steps: int = 8
    batch_size: int = 1024
    lr: float = 1e-4
    grad_clip: float | None = None
    warmup: int = 0
    schedule: str = "constant"
    eval_every: int = 8
    n_encoder_layers: int = 4  # the post's encoder: this many layers, each run once
    embed: bool = False  # the same inputs through learned embeddings, not as raw numbers

    def __post_init__(self):
        super().__post_init__()
        if self.n_encoder_layers < 1:
            raise ValueError(f"n_encoder_layers must be at least 1, got {self.n_encoder_layers}")
        if not self.embed and self.d_model < TILE * TILE + 2:
            raise ValueError(f"the post's model writes a tile's {TILE * TILE} pixels, its row and its column into "
                             f"the token itself, so d_model must be at least {TILE * TILE + 2}, got {self.d_model}")


POST = PostMazeConfig()  # the post's model and recipe (see PostMazeConfig)
