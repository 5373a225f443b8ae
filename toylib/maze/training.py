"""Training a maze model: `build_model` (the model a config describes), `train` (which
validates by `measure.score`), and the command line (`python -m toylib.maze`, `--preset post`,
`--preset first`)."""

from __future__ import annotations

import math

import torch

from toylib import cli
from toylib.maze.config import FIRST, POST, BaseMazeConfig, MazeConfig, PostMazeConfig
from toylib.maze.dataset import PAD, MazeSet, for_config, solution_tensor, ways_to_end
from toylib.maze.measure import measure, score
from toylib.maze.net import MazeModel, MazeNet, maze_loss
from toylib.maze.post import PostMazeNet
from toylib.maze.world import TILE
from toylib.train import Callback, History, fit, minibatches, prepare, stop_when


# ----------------------------------------------------------------------------- the model a config describes


def build_model(config: BaseMazeConfig) -> MazeModel:
    """The model a config describes: its class says which (`MazeNet` for a `MazeConfig`,
    `PostMazeNet` for a `PostMazeConfig`)."""
    if isinstance(config, PostMazeConfig):
        return PostMazeNet(config)
    if isinstance(config, MazeConfig):
        return MazeNet(config)
    raise ValueError(f"config must be a MazeConfig or a PostMazeConfig, got {type(config).__name__}")


# ----------------------------------------------------------------------------- training


def most_passes(config: MazeConfig, rows: int, cols: int) -> int:
    """The most encoder passes training ever runs on a rows x cols maze: one per tile (what
    solving gives itself), then `extra_passes` more."""
    return rows * cols + config.extra_passes


def _passes_on_cpu(batch: tuple[torch.Tensor, torch.Tensor], config: MazeConfig, most: int,
                   gen: torch.Generator) -> tuple[int, tuple[torch.Tensor, torch.Tensor] | None]:
    """How many passes the looped encoder runs on a training batch (as the loader gives it, on
    the CPU), drawn with `gen`, and with `config.ways` the batch's `ways_to_end`, which that
    count needs and the loss reuses (None without). From the longest solution's moves, or with
    ways one past the farthest tile the end reaches (every tile is judged, so it must hear of
    the end first), up to `most` (`most_passes`: extra_passes past the tiles; capped past the
    farthest tile instead, see Results, it failed)."""
    pixels, tokens = batch
    longest = int((tokens != PAD).sum(1).max()) - 2  # moves in the batch's longest solution
    ways = None
    if config.ways:
        ways = ways_to_end(pixels)
        distance = ways[1]  # (batch, tiles)
        longest = int(distance[distance < math.inf].max()) + 1
    return int(torch.randint(longest, most + 1, (), generator=gen)), ways


def train(config: BaseMazeConfig, data: dict[str, MazeSet] | None = None, device: torch.device | str | None = None,
          callback: Callback | None = None, progress: bool = True) -> tuple[MazeModel, History]:
    """Build a model from `config` and train it on `data["train"]` (default: the config's
    splits, `for_config(config)`), validating on `data["val"]` every
    `eval_every` steps by solving every validation maze greedily. Training stops once
    `stop_at` of them are solved by a shortest path; if that never happens, the best
    validated weights are restored. The test split is never looked at.

    The looped encoder runs a random number of iterations per batch, from the longest path
    in the batch (fewer could not carry the end's news to the start) to the number of tiles
    (what solving uses), plus `extra_passes`: so that a settled answer stays settled, however
    long it runs on. With `ways`, every tile is judged, so the count starts one past the
    farthest tile that can reach the end."""
    data = data if data is not None else for_config(config)
    model, device, gen = prepare(config.seed, lambda: build_model(config), device)
    mazes = data["train"]
    pixels, tokens = torch.from_numpy(mazes.mazes), solution_tensor(mazes.solutions)
    rows, cols = (s // TILE for s in mazes.mazes.shape[1:])

    def loss_fn(m, batch):
        if not isinstance(config, MazeConfig):  # the post's encoder runs once: no passes to draw
            return maze_loss(m, batch)
        return maze_loss(m, batch, *_passes_on_cpu(batch, config, most_passes(config, rows, cols), gen))

    def evaluate(m):
        s = score(m, data["val"])
        return {"val_solved": s.solved, "val_shortest": s.shortest, "val_token_acc": s.token_accuracy}

    def at_target(r):
        return config.stop_at is not None and r["val_shortest"] >= config.stop_at

    history = fit(model, minibatches(pixels, tokens, batch_size=config.batch_size, generator=gen), loss_fn,
                  config.train_options(), eval_fn=evaluate, callback=stop_when(at_target, callback), device=device,
                  progress=progress)
    return model, history


# ----------------------------------------------------------------------------- command line

_OPTIONS = (cli.Option("--steps", "steps", "most training steps"), cli.Option("--data-seed", "data_seed", "which mazes"))
_ABOUT = "A transformer learns to walk mazes by a shortest path, and is tested on bigger mazes than it trained on."
# --preset post: the post's model, trained its way; --preset first: the chapter's first looped model, before
# it was taught to search
CHAPTER = cli.Chapter("maze", _ABOUT, MazeConfig, build_model, for_config, train, measure, options=_OPTIONS,
                      presets={"post": POST, "first": FIRST})

main = cli.entry_point(CHAPTER)  # python -m toylib.<chapter>, and its console script
