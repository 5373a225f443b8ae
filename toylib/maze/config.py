"""The maze models' config, `MazeConfig` (what the model is and how it trains), and its presets:
`FIRST`, the chapter's first looped model, and `POST`, the post's model and recipe."""

from __future__ import annotations

import dataclasses

from toylib.maze.world import TILE
from toylib.train import TrainOptions

MODELS = ("looped", "post")


@dataclasses.dataclass(frozen=True)
class MazeConfig:
    """A maze model and how to train it. The defaults reach the chapter's targets."""

    model: str = "looped"  # "looped": the chapter's MazeNet; "post": PostMazeNet, the post's model
    d_model: int = 32  # width of every token
    n_heads: int = 4  # looped: head h reads along DIRECTIONS[h % 4] (see MazeNet)
    d_mlp: int = 64  # width of the feed-forward layers
    n_encoder_layers: int = 4  # post only: the looped encoder runs one layer as often as the maze needs
    n_decoder_layers: int = 1
    radius: int = 2  # looped: cross-attention learns a bias per offset up to this many tiles away
    # looped: what makes it search mazes of any size (all off in FIRST, the chapter's first model)
    ways: float = 1.0  # weight of a second loss: every tile's way to the end (`ways_to_end`), read from its state
    # weight of the way loss at every pass before the last: a tile says NO_WAY until the end's news could
    # have reached it, one tile a pass (`wave_targets`), so that no tile commits to a way on a guess
    wave: float = 1.0
    squash: float = 3.0  # after every pass each state number is squash * tanh(x / squash): bounded, so it settles
    window: bool = True  # cross-attention reads only the tiles within `radius` of the walker
    extra_passes: int = 10  # passes past what a maze needs: in training past its farthest tile, solving past its tiles
    pad_as_stop: bool = False  # train padding as STOP, as the post does (False: padding is left out)
    embed: bool = False  # post only: the same inputs through learned embeddings, not as raw numbers
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
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.d_model < 1 or self.n_heads < 1 or self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a positive multiple of n_heads ({self.n_heads})")
        if self.embed and self.model != "post":
            raise ValueError("embed chooses how the post's model reads its inputs; the looped model always embeds them")
        if self.model == "post" and not self.embed and self.d_model < TILE * TILE + 2:
            raise ValueError(f"the post's model writes a tile's {TILE * TILE} pixels, its row and its column into "
                             f"the token itself, so d_model must be at least {TILE * TILE + 2}, got {self.d_model}")
        if self.n_encoder_layers < 1 or self.n_decoder_layers < 1 or self.d_mlp < 1:
            raise ValueError("n_encoder_layers, n_decoder_layers and d_mlp must be at least 1")
        if self.radius < 1:
            raise ValueError(f"radius must be at least 1 (the current tile and its neighbours), got {self.radius}")
        if self.model == "post" and (self.ways or self.wave or self.squash or self.window or self.extra_passes):
            raise ValueError("ways, wave, squash, window and extra_passes change the looped model; the post's has "
                             "none: set ways=0, wave=0, squash=0, window=False and extra_passes=0, as POST does")
        if min(self.ways, self.wave, self.squash, self.extra_passes) < 0:
            raise ValueError(f"ways, wave, squash and extra_passes must be >= 0, got {self.ways}, {self.wave}, "
                             f"{self.squash}, {self.extra_passes}")
        if self.wave and not self.ways:
            raise ValueError("wave weighs the way loss at every pass: it needs a way head (ways > 0)")
        if self.batch_size < 1 or self.n_train < 1:
            raise ValueError(f"batch_size and n_train must be positive, got {self.batch_size}, {self.n_train}")

    def train_options(self) -> TrainOptions:
        # out of steps, keep the best validated weights (see `training.train`); the loss is recorded every 25 steps
        # between validations, which may come only once, at the end
        return TrainOptions.from_config(self, monitor="val_shortfall", restore_best=True, log_every=25)



# The chapter's first looped model (before it was taught to search): unbounded states, one encoder pass per
# tile, a decoder that reads every tile, trained at 6e-3 and stopped by the 5x5 validation mazes. Seed 0 solved
# 93 % of 8x8 mazes with paths of 19 to 40 moves, and 22 % of 16x16 mazes with no loops.
FIRST = MazeConfig(ways=0.0, wave=0.0, squash=0.0, window=False, extra_passes=0, lr=6e-3, steps=1100,
                   eval_every=200, stop_at=0.998)


# The post's model and recipe: d=32, 8 heads, 4 encoder and 10 decoder layers with
# feed-forward layers 512 wide (570,502 parameters), raw numbers in, padding trained as STOP,
# Adam at 1e-4 in batches of 1,024. 8 steps train it for about a quarter of the time the
# chapter's model trains (16 steps, at twice the cost, showed the same: no maze solved, the same
# token accuracy on validation after 8 steps and after 16); the post trained 2,000 epochs of
# 10 steps.
POST = MazeConfig(model="post", d_model=32, n_heads=8, d_mlp=512, n_encoder_layers=4, n_decoder_layers=10,
                  ways=0.0, wave=0.0, squash=0.0, window=False, extra_passes=0,  # the looped model's search: none here
                  pad_as_stop=True, lr=1e-4, grad_clip=None, batch_size=1024, warmup=0, schedule="constant",
                  steps=8, eval_every=8, stop_at=None)
