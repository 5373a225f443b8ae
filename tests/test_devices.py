"""Every chapter's notebook-level functions with the model on another device than its data,
as on Colab, where the models train on a GPU and the data is made on the CPU: each must run
there and hand back CPU tensors or arrays (a notebook calling .numpy() on a CUDA tensor
raises). Runs where there is a GPU (CUDA or Apple's MPS); TOYLIB_TEST_DEVICE=cpu runs the
same calls on the CPU, to check the calls themselves on a machine without one. The notebooks'
own lines are checked everywhere by tests/test_notebooks.py (no .numpy() without .cpu())."""

import os

import numpy as np
import pytest
import torch

from toylib import life, maze, sequences, sokoban, tictactoe


def other_device() -> str | None:
    if os.environ.get("TOYLIB_TEST_DEVICE"):
        return os.environ["TOYLIB_TEST_DEVICE"]
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return None


DEVICE = other_device()
pytestmark = pytest.mark.skipif(DEVICE is None, reason="no GPU here (TOYLIB_TEST_DEVICE=cpu runs these calls on the CPU)")


def on_cpu(*results) -> bool:
    """Every tensor in `results` (nested in tuples, lists, dicts, dataclasses) is on the CPU."""
    def walk(x):
        if isinstance(x, torch.Tensor):
            yield x
        elif isinstance(x, dict):
            for v in x.values():
                yield from walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                yield from walk(v)
        elif hasattr(x, "__dataclass_fields__"):
            for name in x.__dataclass_fields__:
                yield from walk(getattr(x, name))
    return all(t.device.type == "cpu" for r in results for t in walk(r))


def test_tictactoe():
    data = tictactoe.Dataset.build()
    model = tictactoe.TicTacToeNet(tictactoe.TicTacToeConfig()).to(DEVICE)
    boards = data.test.boards[:50]
    moves = tictactoe.model_moves(model, boards)
    scores = tictactoe.score(model, data.test)
    profile, names = tictactoe.attention_profile(model, boards)
    frames, titles = tictactoe.game_frames(model, side=tictactoe.X)
    assert on_cpu(moves) and 0 <= scores.optimal <= 1 and len(profile) == 17 and len(frames) == len(titles)


def test_life():
    config = life.LifeConfig(grid_size=6, d_model=8)
    model = life.SingleAttentionNet(config).to(DEVICE)
    grids = life.random_grids(4, 6, np.random.default_rng(0))
    assert life.predict(model, grids).shape == (4, 6, 6)
    assert life.model_run(model, grids[0], 2).shape == (3, 6, 6)
    assert 0 <= life.neighbour_attention(model, grids) <= 1
    assert life.attention_by_offset(model, grids).shape == (5, 5)


def test_sequences():
    model = sequences.SeqTransformer(sequences.SeqConfig(task="reverse", length=8)).to(DEVICE)
    x, _ = sequences.make_data(model.config, 20, np.random.default_rng(0), "test")
    probs, patterns = sequences.run_model(model, x)
    assert isinstance(probs, np.ndarray) and on_cpu(patterns)
    assert 0 <= sequences.attention_on_source(model, x) <= 1
    assert 0 <= sequences.evaluate(model, n=20)["exact"] <= 1
    splits = sequences.weight_splits(model)
    assert all(isinstance(a, np.ndarray) for part in splits.values() for a in part.values())


def test_maze():
    model = maze.MazeNet(maze.MazeConfig(n_heads=4, n_decoder_layers=2)).to(DEVICE)
    mazes = maze.make_mazes(4, seed=2)
    assert len(maze.solve(model, mazes.mazes)) == 4
    assert 0 <= maze.token_accuracy(model, mazes) <= 1
    assert 0 <= maze.score(model, mazes).solved <= 1
    looks = maze.where_heads_look(model, mazes)
    frames, titles = maze.solve_frames(model, mazes.mazes[0])
    assert on_cpu(looks) and isinstance(frames, np.ndarray) and len(frames) == len(titles)


def test_sokoban():
    from toylib.sokoban import dataset, look, measure, net

    data = dataset.make_data(10, 10, 16, seed=0, n_val=0)
    model = net.SokobanPolicy(net.SokobanConfig()).to(DEVICE)
    boards, optimal = measure.solvable_boards(data["held_out"], limit=3)
    acc = net.accuracies(model, data["held_out"])
    assert 0 <= acc.solvability <= 1
    assert 0 <= measure.solves(model, boards, optimal).rate <= 1
    assert 0 <= measure.solves(model, boards, optimal, width=2).rate <= 1
    frames = look.solve_frames(model, boards[0])
    along = look.nsteps_along(model, boards[0])
    assert on_cpu(frames, along)
