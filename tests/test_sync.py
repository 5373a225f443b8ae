"""A training step reads nothing back from the device. On a GPU every `.item()`, `float(t)`,
`bool(t)`, `.tolist()`, `.numpy()`, `torch.equal`, `nonzero` or boolean-mask index waits for
the device to finish, and rules out running steps ahead of Python (or as one CUDA graph). No GPU
is needed to see them: these tests count such reads on the CPU, made from the chapters' code
while each chapter's loss runs inside `fit` (the model's forward pass and the loss: what a step
computes besides the backward pass and the optimiser, which read nothing), and in `fit` itself
between its records. A function named `*_on_cpu` reads only what is on the CPU, where a read
costs nothing; its reads are not counted. What a loss finds from a batch's values (the maze
encoder's passes, the columns of padding only, breadth-first search's sweeps) it finds on the
CPU, where the loader gives the batch, before the batch goes to the device."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import pytest
import torch

from toylib import train as core_train

READS = ("item", "tolist", "numpy", "nonzero", "__bool__", "__float__", "__int__", "__index__")


class Reads:
    """Counts reads of tensor values made by toylib's code (not by torch's own internals)
    while `on` is true: `where` lists them as 'name at file:line'."""

    def __init__(self):
        self.on = False
        self.where: list[str] = []

    def note(self, name: str, depth: int = 2) -> None:
        if not self.on:
            return
        frame = sys._getframe(depth)
        module = frame.f_globals.get("__name__", "")
        # a function named *_on_cpu reads only where the tensor is on the CPU, which costs nothing
        if frame.f_code.co_name.endswith("_on_cpu"):
            return
        if module.startswith("toylib") or module.startswith("test"):
            self.where.append(f"{name} at {frame.f_code.co_filename.split('/')[-1]}:{frame.f_lineno}")


@contextlib.contextmanager
def counting() -> Iterator[Reads]:
    reads = Reads()
    saved = {name: getattr(torch.Tensor, name) for name in (*READS, "__getitem__", "__setitem__")}
    saved_equal = torch.equal

    def wrap(name, original):
        def read(self, *args, **kwargs):
            reads.note(name)
            return original(self, *args, **kwargs)
        return read

    def by_mask(index) -> bool:
        parts = index if isinstance(index, tuple) else (index,)
        return any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts)

    def getitem(self, index):
        if by_mask(index):
            reads.note("a boolean-mask index")
        return saved["__getitem__"](self, index)

    def setitem(self, index, value):
        if by_mask(index):
            reads.note("a boolean-mask index")
        return saved["__setitem__"](self, index, value)

    def equal(a, b):
        reads.note("torch.equal")
        return saved_equal(a, b)

    try:
        for name in READS:
            setattr(torch.Tensor, name, wrap(name, saved[name]))
        torch.Tensor.__getitem__, torch.Tensor.__setitem__ = getitem, setitem
        torch.equal = equal
        yield reads
    finally:
        for name, original in saved.items():
            setattr(torch.Tensor, name, original)
        torch.equal = saved_equal


def reads_in_steps(monkeypatch, module, run) -> list[str]:
    """The reads made inside the loss functions that `module` (a chapter's room that calls
    `fit`) hands to `fit` while `run()` trains."""
    with counting() as reads:
        def fit(model, batches, loss_fn, options, **kwargs):
            def counted(m, batch):
                reads.on = True
                try:
                    return loss_fn(m, batch)
                finally:
                    reads.on = False
            return core_train.fit(model, batches, counted, options, **kwargs)

        monkeypatch.setattr(module, "fit", fit)
        run()
    return reads.where


def test_fit_reads_only_when_it_records():
    """`fit` itself: three records in 30 steps, so three reads of the summed loss and of each
    metric, not one a step."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x, y = torch.randn(64, 3), torch.randn(64, 1)
    losses = []  # each step's loss, kept as a tensor (reading it here would count)

    def loss_fn(m, batch):
        loss = torch.nn.functional.mse_loss(m(batch[0]), batch[1])
        losses.append(loss.detach())
        return loss, {"half": loss.detach() / 2}

    batches = core_train.minibatches(x, y, batch_size=16, generator=torch.Generator().manual_seed(0))
    with counting() as reads:
        reads.on = True
        history = core_train.fit(model, batches, loss_fn, core_train.TrainOptions(steps=30, eval_every=10),
                                 progress=False)
    item_reads = [w for w in reads.where if w.startswith(("__float__", "item"))]
    assert len(item_reads) == 3 * 2, reads.where  # the loss and the metric at each of 3 records
    # a record holds the metric of the step it was made at, and the mean loss of the steps since the last
    for record in history.records:
        step = record["step"]
        assert record["half"] == pytest.approx(float(losses[step - 1]) / 2)
        assert record["loss"] == pytest.approx(float(torch.stack(losses[step - 10: step]).mean()))


def test_fit_keeps_the_loss_it_records():
    """The recorded loss is the mean of the steps' losses, as Python's sum of their values."""
    model = torch.nn.Linear(3, 1)
    x, y = torch.randn(64, 3), torch.randn(64, 1)
    seen = []

    def loss_fn(m, batch):
        loss = torch.nn.functional.mse_loss(m(batch[0]), batch[1])
        seen.append(float(loss.detach()))
        return loss

    batches = core_train.minibatches(x, y, batch_size=16, generator=torch.Generator().manual_seed(0))
    history = core_train.fit(model, batches, loss_fn, core_train.TrainOptions(steps=12, eval_every=4), progress=False)
    assert [r["loss"] for r in history.records] == [sum(seen[i:i + 4]) / 4 for i in (0, 4, 8)]


def test_life_step_reads_nothing(monkeypatch):
    from toylib.life import training
    from toylib.life.config import LifeConfig

    config = LifeConfig(grid_size=8, d_model=24, steps=3, eval_every=3, val_grids=8, warmup=1)
    assert reads_in_steps(monkeypatch, training, lambda: training.train(config, device="cpu", progress=False)) == []


def test_sequences_step_reads_nothing(monkeypatch):
    from toylib.sequences import training
    from toylib.sequences.config import SeqConfig

    config = SeqConfig(steps=3, eval_every=3, val_size=20, batch=8)
    assert reads_in_steps(monkeypatch, training, lambda: training.train(config, device="cpu", progress=False)) == []


def test_tictactoe_step_reads_nothing(monkeypatch):
    from toylib.tictactoe import training
    from toylib.tictactoe.config import TicTacToeConfig

    config = TicTacToeConfig(d_model=16, n_layers=1, max_epochs=1, early_stopping=None, stop_at_target=False,
                             monitor="val_loss")
    assert reads_in_steps(monkeypatch, training, lambda: training.train(config, device="cpu", progress=False)) == []


def test_maze_step_reads_nothing(monkeypatch):
    from toylib.maze import training
    from toylib.maze.config import MazeConfig

    config = MazeConfig(seed=1, steps=2, eval_every=2, n_train=40, d_model=8, n_heads=4, d_mlp=8, stop_at=None)
    assert reads_in_steps(monkeypatch, training, lambda: training.train(config, device="cpu", progress=False)) == []


def test_sokoban_step_reads_nothing(monkeypatch):
    from toylib.sokoban import dataset, training
    from toylib.sokoban.config import SokobanConfig

    config = SokobanConfig(d_model=16, n_heads=2, n_layers=2, channels=8, conv_layers=2, steps=2, eval_every=2,
                           n_solvable=40, n_unsolvable=40, n_held_out=20, n_starts=40, start_batch=8,
                           batch_size=8)
    data = dataset.for_config(config)
    assert reads_in_steps(monkeypatch, training,
                          lambda: training.train(config, data, device="cpu", progress=False)) == []
