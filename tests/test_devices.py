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
    from toylib.tictactoe import dataset, look, measure, net, world
    from toylib.tictactoe.config import TicTacToeConfig

    data = dataset.for_config(TicTacToeConfig())
    model = net.TicTacToeNet(TicTacToeConfig()).to(DEVICE)
    boards = data.test.boards[:50]
    moves = measure.model_moves(model, boards)
    scores = measure.score(model, data.test)
    profile, names = look.attention_profile(model, boards)
    frames, titles = look.game_frames(model, side=world.X)
    assert on_cpu(moves) and 0 <= scores.optimal <= 1 and len(profile) == 17 and len(frames) == len(titles)


def test_life():
    from toylib.life import dataset as life_dataset
    from toylib.life import measure as life_measure
    from toylib.life import net as life_net
    from toylib.life import training as life_training
    from toylib.life.config import LifeConfig

    config = LifeConfig(grid_size=6, d_model=8)
    model = life_net.SingleAttentionNet(config).to(DEVICE)
    grids = life_dataset.random_grids(4, 6, np.random.default_rng(0))
    assert life_measure.predict(model, grids).shape == (4, 6, 6)
    assert life_measure.model_run(model, grids[0], 2).shape == (3, 6, 6)
    assert 0 <= life_measure.neighbour_attention(model, grids) <= 1
    assert life_measure.attention_by_offset(model, grids).shape == (5, 5)
    # trained where the model lives, on batches made on the CPU
    config = LifeConfig(grid_size=6, d_model=8, steps=4, eval_every=2, val_grids=8)
    trained, history = life_training.train(config, life_dataset.for_config(config), device=DEVICE, progress=False)
    assert history.steps == 4 and life_measure.predict(trained, grids).shape == (4, 6, 6)


def test_sequences():
    from toylib.sequences import dataset as seq_dataset
    from toylib.sequences import look as seq_look
    from toylib.sequences import measure as seq_measure
    from toylib.sequences import net as seq_net
    from toylib.sequences.config import SeqConfig

    model = seq_net.SeqTransformer(SeqConfig(task="reverse", length=8)).to(DEVICE)
    x, _ = seq_dataset.draw_sequences(model.config, 20, np.random.default_rng(0), "test")
    probs, patterns = seq_measure.run_model(model, x)
    assert isinstance(probs, np.ndarray) and on_cpu(patterns)
    assert 0 <= seq_measure.attention_on_source(model, x) <= 1
    assert 0 <= seq_measure.evaluate(model, n=20)["exact"] <= 1
    targets = seq_measure.measure(model, model.config, seq_dataset.for_config(model.config), 1.0)
    assert targets[0].measure == "exact match, reverse, length 8, 10,000 held-out sequences"
    splits = seq_look.weight_splits(model)
    assert all(isinstance(a, np.ndarray) for part in splits.values() for a in part.values())


def test_maze():
    from toylib.maze import dataset as maze_data, look as maze_look, measure as maze_measure, net as maze_net
    from toylib.maze.config import MazeConfig

    model = maze_net.MazeNet(MazeConfig(n_heads=4, n_decoder_layers=2)).to(DEVICE)
    mazes = maze_data.make_mazes(4, seed=2)
    assert len(maze_measure.solve_greedy(model, mazes.mazes)) == 4
    assert 0 <= maze_measure.token_accuracy(model, mazes) <= 1
    assert 0 <= maze_measure.score(model, mazes).solved <= 1
    looks = maze_look.where_heads_look(model, mazes)
    frames, titles = maze_look.solve_frames(model, mazes.mazes[0])
    assert on_cpu(looks) and isinstance(frames, np.ndarray) and len(frames) == len(titles)


def test_sokoban():
    from toylib.sokoban import dataset, look, measure, net
    from toylib.sokoban.config import SokobanConfig

    data = dataset.for_config(SokobanConfig(n_solvable=10, n_unsolvable=10, n_held_out=16, n_starts=10), n_val=0)
    model = net.SokobanPolicy(SokobanConfig()).to(DEVICE)
    boards, optimal = measure.solvable_boards(data["held_out"], limit=3)
    acc = measure.accuracies(model, data["held_out"])
    assert 0 <= acc.solvability <= 1
    assert 0 <= measure.solves(model, boards, optimal).rate <= 1
    assert 0 <= measure.solves(model, boards, optimal, width=2).rate <= 1
    frames = look.solve_frames(model, boards[0])
    along = look.nsteps_along(model, boards[0])
    assert on_cpu(frames, along)
