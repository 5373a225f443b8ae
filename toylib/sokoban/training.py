"""Training the Sokoban policy: `train` (the entries, with the start loss beside them,
validated by `measure.accuracies`), `train_side_by_side` (two policies at once), and the
command line (`CHAPTER`, `python -m toylib.sokoban`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from toylib import cli
from toylib.device import pick_device
from toylib.sokoban.config import SokobanConfig
from toylib.sokoban.dataset import SokobanSet, for_config
from toylib.sokoban.measure import accuracies, measure
from toylib.sokoban.net import SokobanPolicy, loss_with_starts, sokoban_loss, to_batch
from toylib.train import Callback, History, fit, minibatch_indices, prepare, side_by_side


def _entries(data: SokobanSet, batch_size: int, generator: torch.Generator,
             n_ctx: int | None = None) -> Iterator[tuple[torch.Tensor, ...]]:
    """Endless shuffled batches of entries, epoch after epoch (a short last batch left out),
    each cut to `n_ctx` boards."""
    for index in minibatch_indices(len(data), batch_size, generator, drop_last=True):
        yield to_batch(data, np.sort(index.numpy()), n_ctx)


def train(config: SokobanConfig, data: dict[str, SokobanSet] | None = None,
          device: torch.device | str | None = None, callback: Callback | None = None,
          progress: bool = True) -> tuple[SokobanPolicy, History]:
    """Build a policy from `config` and train it on `data["train"]` (default:
    `dataset.for_config(config)`), and with `config.start_batch` on `data["starts"]` too
    (`loss_with_starts`), validating on `data["val"]` every `eval_every` steps (the
    held-out boards are never looked at). Out of steps, the best validated weights are
    restored."""
    data = for_config(config) if data is None else data
    model, device, gen = prepare(config.seed, lambda: SokobanPolicy(config), device)

    def evaluate(m):
        a = accuracies(m, data["val"])
        return {"val_loss": a.loss, "val_optimal": a.optimal, "val_solvability": a.solvability}

    batches, loss = _entries(data["train"], config.batch_size, gen, config.n_ctx), sokoban_loss
    if config.start_batch:
        if "starts" not in data:
            raise ValueError("config.start_batch asks for start boards: data has no \"starts\" set")
        batches, loss = zip(batches, _entries(data["starts"], config.start_batch, gen, 1)), loss_with_starts
    history = fit(model, batches, loss, config.train_options(),
                  eval_fn=evaluate, callback=callback, device=device, progress=progress)
    return model, history


def _train_quietly(config: SokobanConfig, data: dict[str, SokobanSet], device: str) -> tuple[SokobanPolicy, History]:
    return train(config, data, device=device, progress=False)


def train_side_by_side(
    configs: Sequence[SokobanConfig], data: dict[str, SokobanSet], device: torch.device | str | None = None,
    workers: int | None = None,
) -> list[tuple[SokobanPolicy, History]]:
    """`train` for each config on the same data, without progress bars (the chapter trains the
    transformer and its baseline so). On a CPU the policies train side by side, each in a
    process of its own on one thread (`side_by_side`; `workers` processes at once, by default
    one per CPU core), and each learns exactly what it would learn alone on one thread. On a
    GPU they train there, one after another."""
    device = torch.device(device or pick_device())
    if device.type != "cpu":
        return [_train_quietly(c, data, device) for c in configs]
    return side_by_side(_train_quietly, [(c, data, "cpu") for c in configs], workers)


_OPTIONS = (cli.Option("--steps", "steps", "most training steps"), cli.Option("--lr", "lr", "peak learning rate"),
            cli.Option("--history", "history", "attend over the history (--no-history: the baseline)"),
            cli.Option("--data-seed", "data_seed", "which boards"))
_ABOUT = "A transformer policy learns one-box Sokoban from shortest solutions, and says which boards cannot be solved."
CHAPTER = cli.Chapter("sokoban", _ABOUT, SokobanConfig, SokobanPolicy, for_config, train, measure,
                      options=_OPTIONS)
main = cli.entry_point(CHAPTER)
