"""Training a Life model: `train` (the book's loop, `toylib.train.fit`, validated on held-out
grids, stopped at the targets) and the chapter's command line (`CHAPTER`, `main`)."""

from __future__ import annotations

import torch

from toylib import cli
from toylib.device import flush_denormals
from toylib.life.config import ANY_SIZE, MIXERS, POSITIONS, POST, LifeConfig
from toylib.life.dataset import LifeData, for_config
from toylib.life.measure import exact_fraction, measure, neighbour_attention, predict
from toylib.life.net import LifeNet, build_model, life_loss
from toylib.train import Callback, History, fit, prepare, stop_when


# ----------------------------------------------------------------------------- training


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
    # the weights; the grids come from data's own streams
    model, device, _ = prepare(config.seed, lambda: build_model(config), device)

    def evaluate(m):
        exact = exact_fraction(predict(m, data.val_x), data.val_y)
        attn = neighbour_attention(m, data.val_x[:256]) if config.mixer in ("attention", "offset") else 1.0
        return {"val_exact": exact, "neighbour_attention": attn}

    def at_target(r):
        return config.stop_at_target and r["val_exact"] == 1.0 and r["neighbour_attention"] >= config.attention_target

    with flush_denormals():  # the attention's tail underflows as it settles: see flush_denormals
        history = fit(model, data.batches(), lambda m, b: life_loss(m, b, config.label_smoothing),
                      config.train_options(), eval_fn=evaluate, callback=stop_when(at_target, callback),
                      device=device, progress=progress, watch=watch, watch_every=watch_every)
    return model, history


# ----------------------------------------------------------------------------- what the command line and the benchmark run


CHAPTER = cli.Chapter(
    "life", "Train a transformer on Conway's Game of Life, and measure it against the chapter's targets.",
    LifeConfig, build_model, for_config, train, measure,
    options=(
        cli.Option("--size", "grid_size", "grid size"),
        cli.Option("--steps", "steps", "most training steps"),
        cli.Option("--d-model", "d_model", "token width"),
        cli.Option("--mixer", "mixer", "attention, a fixed 3x3 average, or attention by offset (any size; "
                   "--preset any_size: its settings)", choices=MIXERS),
        cli.Option("--lr", "lr", "peak learning rate"),
        cli.Option("--batch-size", "batch_size", "grids per batch"),
        cli.Option("--positions", "positions", "a vector per row and one per column, or one per cell (the post's)",
                   choices=POSITIONS),
        cli.Option("--mask-self", "mask_self", "forbid a cell to attend to itself (--no-mask-self: as in the post)"),
    ),
    # any_size: OffsetAttentionNet's settings (8x8 training); post: the post's model
    presets={"post": POST, "any_size": ANY_SIZE},
)

main = cli.entry_point(CHAPTER)  # python -m toylib.<chapter>, and its console script
