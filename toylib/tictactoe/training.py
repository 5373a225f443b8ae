"""Training: `train` (one model from a config, watched once an epoch by the scores in
`measure.py`), and the chapter's contract for the command line and the benchmarks (`CHAPTER`,
`main`: `python -m toylib.tictactoe`, `--preset post1` to `post4` for the post's configs)."""

from __future__ import annotations

import dataclasses

import torch

from toylib import cli
from toylib.tictactoe.config import POST_CONFIGS, TicTacToeConfig
from toylib.tictactoe.dataset import Dataset, Positions, for_config
from toylib.tictactoe.measure import measure, score
from toylib.tictactoe.net import TicTacToeNet, tictactoe_loss
from toylib.train import Callback, History, fit, minibatches, prepare, stop_when


# ----------------------------------------------------------------------------- training


def train(config: TicTacToeConfig, data: Dataset | None = None, device: torch.device | str | None = None,
          callback: Callback | None = None, progress: bool = True) -> tuple[TicTacToeNet, History]:
    """Train on the training split (with `train_on_val`, on the validation split too), one
    evaluation per epoch. Without `data`, the data is `for_config(config)`.

    The learning rate is halved when `monitor` stalls (`plateau_patience` epochs).
    With `early_stopping`, training stops after that many epochs without a better `monitor`
    and the best weights are restored (the post's rule, on the validation loss). With
    `stop_at_target`, it stops at the first epoch where every training and validation
    position gets an optimal move as the model plays (`measure.model_moves`); the test split
    is never looked at.
    """
    if data is None:
        data = for_config(config)
    model, device, gen = prepare(config.seed, lambda: TicTacToeNet(config), device)
    learn = Positions.concat(data.train, data.val) if config.train_on_val else data.train  # what the model learns from
    tensors = tuple(getattr(learn, f.name) for f in dataclasses.fields(Positions))
    per_epoch = -(-len(learn) // config.batch_size)

    # scoring every training position each epoch costs about as much as an epoch of training
    # for a small model: only when the stopping rule needs it
    needs_train = config.stop_at_target or "non_optimal" in config.monitor

    # the stopping rule and the plateau judge the moves as the model plays them (the value
    # head decides, the board head breaks its near-ties: measure.model_moves)
    def evaluate(m):
        val_loss = tictactoe_loss(m, data.val, config.loss).item()
        val = score(m, data.val)
        record = {"val_loss": val_loss, "val_optimal": val.optimal, "val_exact_label": val.exact_label}
        if needs_train:
            learnt = score(m, learn)
            record["train_optimal"] = learnt.optimal  # over every position learnt from
            # positions given a non-optimal move, validation and training alike (each counted once)
            record["non_optimal"] = round((1 - learnt.optimal) * len(learn)
                                          + (0 if config.train_on_val else (1 - val.optimal) * len(data.val)))
        return record

    def at_target(r):
        return config.stop_at_target and r["val_optimal"] == 1.0 and r["train_optimal"] == 1.0

    history = fit(model, minibatches(*tensors, batch_size=config.batch_size, generator=gen),
                  lambda m, b: tictactoe_loss(m, Positions(*b)), config.train_options(per_epoch), eval_fn=evaluate,
                  callback=stop_when(at_target, callback), device=device, progress=progress)
    return model, history


# ----------------------------------------------------------------------------- command line


CHAPTER = cli.Chapter(
    "tictactoe", "A transformer learns to play tic-tac-toe; measured on every position and in exhaustive play.",
    TicTacToeConfig, TicTacToeNet, for_config, train, measure,
    options=(cli.Option("--split-seed", "split_seed", "which symmetry classes are held out"),),
    # --preset post2: the post's config 2, trained its way (POST_RECIPE)
    presets={f"post{i}": config for i, (config, _) in enumerate(POST_CONFIGS.values(), start=1)},
)

main = cli.entry_point(CHAPTER)  # python -m toylib.<chapter>, and its console script
