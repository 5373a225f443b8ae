"""Every chapter's notebook-level functions with the model on another device than its data,
as on Colab, where the models train on a GPU and the data is made on the CPU: each must run
there, hand back CPU tensors or arrays (a notebook calling .numpy() on a CUDA tensor raises),
and give what the same call gives with the model on the CPU. With a GPU (CUDA or Apple's MPS)
the other device is the GPU, whose kernels round differently: the numbers must agree to
rounding, and a discrete answer (a move, a walk) may flip on a near-tie in a few items. Without
one, as in the test command on a CPU machine, the other device is the CPU itself, reached by
the same device-moving code, and every number must be the same to the last bit.
TOYLIB_TEST_DEVICE names the device to try. The notebooks' own lines are checked everywhere by
tests/test_notebooks.py (no .numpy() without .cpu())."""

import copy
import dataclasses
import math
import os

import numpy as np
import torch


def other_device() -> str:
    if os.environ.get("TOYLIB_TEST_DEVICE"):
        return os.environ["TOYLIB_TEST_DEVICE"]
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


DEVICE = other_device()
EXACT = torch.device(DEVICE).type == "cpu"  # the same arithmetic: the same bits


def walk(x):
    """Every tensor, array, number and string in `x` (nested in tuples, lists, dicts, dataclasses), in order."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from walk(k)
            yield from walk(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from walk(v)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            yield from walk(getattr(x, f.name))
    else:
        yield x


def on_cpu(*results) -> bool:
    """Every tensor in `results` is on the CPU."""
    return all(t.device.type == "cpu" for t in walk(results) if isinstance(t, torch.Tensor))


def numbers(result) -> list:
    """`result` flattened to Python numbers and strings, in order."""
    out = []
    for x in walk(result):
        if isinstance(x, torch.Tensor):
            x = x.detach().cpu().numpy()
        if isinstance(x, np.ndarray):
            out += x.astype(np.float64).ravel().tolist() if x.dtype != object else list(x.ravel())
        elif isinstance(x, (bool, int, float, np.number)):
            out.append(float(x))
        else:
            out.append(x)
    return out


def assert_agree(got, want, what: str) -> None:
    """`got` (the model on DEVICE) against `want` (the same call, the model on the CPU)."""
    a, b = numbers(got), numbers(want)
    assert len(a) == len(b), f"{what}: {len(a)} numbers on {DEVICE}, {len(b)} on the CPU"
    if EXACT:
        same = [x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y)) for x, y in zip(a, b)]
        assert all(same), f"{what}: {same.count(False)} of {len(a)} differ"
        return
    off = sum(not (x == y or (isinstance(x, float) and abs(x - y) <= 1e-3 * (1 + abs(y)))) for x, y in zip(a, b))
    assert off <= 0.05 * len(a), f"{what}: {off} of {len(a)} differ beyond rounding on {DEVICE}"


def both(model, call):
    """`call(model)` with the model on DEVICE, and the same with a copy of it on the CPU."""
    cpu = copy.deepcopy(model).cpu()
    return call(model.to(DEVICE)), call(cpu)


def test_tictactoe():
    from toylib.tictactoe import dataset, look, measure, net, world
    from toylib.tictactoe.config import TicTacToeConfig

    data = dataset.for_config(TicTacToeConfig())
    torch.manual_seed(0)
    model = net.TicTacToeNet(TicTacToeConfig())
    boards = data.test.boards[:50]
    moves, want = both(model, lambda m: measure.model_moves(m, boards))
    assert on_cpu(moves)
    assert_agree(moves, want, "model_moves")
    assert_agree(*both(model, lambda m: measure.score(m, data.test)), "score")
    assert_agree(*both(model, lambda m: look.attention_profile(m, boards)), "attention_profile")
    (frames, titles), want = both(model, lambda m: look.game_frames(m, side=world.X))
    assert len(frames) == len(titles)
    assert_agree((frames, titles), want, "game_frames")


def test_life():
    from toylib.life import dataset as life_dataset
    from toylib.life import measure as life_measure
    from toylib.life import net as life_net
    from toylib.life import training as life_training
    from toylib.life.config import LifeConfig

    config = LifeConfig(grid_size=6, d_model=8)
    torch.manual_seed(0)
    model = life_net.SingleAttentionNet(config)
    grids = life_dataset.random_grids(4, 6, np.random.default_rng(0))
    predicted, want = both(model, lambda m: life_measure.predict(m, grids))
    assert predicted.shape == (4, 6, 6) and on_cpu(predicted)
    assert_agree(predicted, want, "predict")
    assert_agree(*both(model, lambda m: life_measure.model_run(m, grids[0], 2)), "model_run")
    assert_agree(*both(model, lambda m: life_measure.neighbour_attention(m, grids)), "neighbour_attention")
    assert_agree(*both(model, lambda m: life_measure.attention_by_offset(m, grids)), "attention_by_offset")
    # trained where the model lives, on batches made on the CPU: the same training as on the CPU
    config = LifeConfig(grid_size=6, d_model=8, steps=4, eval_every=2, val_grids=8)
    runs = [life_training.train(config, life_dataset.for_config(config), device=d, progress=False)
            for d in (DEVICE, "cpu")]
    assert [h.steps for _, h in runs] == [4, 4]
    assert_agree(*(life_measure.predict(m, grids) for m, _ in runs), "predict after training")
    assert_agree(*(h.column("val_exact") for _, h in runs), "validation")


def test_sequences():
    from toylib.sequences import dataset as seq_dataset
    from toylib.sequences import look as seq_look
    from toylib.sequences import measure as seq_measure
    from toylib.sequences import net as seq_net
    from toylib.sequences.config import SeqConfig

    torch.manual_seed(0)
    model = seq_net.SeqTransformer(SeqConfig(task="reverse", length=8))
    x, _ = seq_dataset.draw_sequences(model.config, 20, np.random.default_rng(0), "test")
    (probs, patterns), want = both(model, lambda m: seq_measure.run_model(m, x))
    assert isinstance(probs, np.ndarray) and on_cpu(patterns)
    assert_agree((probs, patterns), want, "run_model")
    assert_agree(*both(model, lambda m: seq_measure.attention_on_source(m, x)), "attention_on_source")
    assert_agree(*both(model, lambda m: seq_measure.evaluate(m, n=20)), "evaluate")
    data = seq_dataset.for_config(model.config)
    targets, want = both(model, lambda m: seq_measure.measure(m, m.config, data, 1.0))
    assert targets[0].measure == "exact match, reverse, length 8, 10,000 held-out sequences"
    assert_agree([(t.measured, t.met) for t in targets], [(t.measured, t.met) for t in want], "measure")
    splits = seq_look.weight_splits(model)
    assert all(isinstance(a, np.ndarray) for part in splits.values() for a in part.values())


def test_maze():
    from toylib.maze import dataset as maze_data, look as maze_look, measure as maze_measure, net as maze_net
    from toylib.maze.config import MazeConfig

    torch.manual_seed(0)
    model = maze_net.MazeNet(MazeConfig(n_heads=4, n_decoder_layers=2))
    mazes = maze_data.make_mazes(4, seed=2)
    walks, want = both(model, lambda m: maze_measure.solve_greedy(m, mazes.mazes))
    assert len(walks) == 4
    assert_agree(walks, want, "solve_greedy")
    assert_agree(*both(model, lambda m: maze_measure.token_accuracy(m, mazes)), "token_accuracy")
    assert_agree(*both(model, lambda m: maze_measure.score(m, mazes)), "score")
    looks, want = both(model, lambda m: maze_look.where_heads_look(m, mazes))
    assert on_cpu(looks)
    assert_agree(looks, want, "where_heads_look")
    (frames, titles), want = both(model, lambda m: maze_look.solve_frames(m, mazes.mazes[0]))
    assert isinstance(frames, np.ndarray) and len(frames) == len(titles)
    assert_agree((frames, titles), want, "solve_frames")


def test_sokoban():
    from toylib.sokoban import dataset, look, measure, net
    from toylib.sokoban.config import SokobanConfig

    data = dataset.for_config(SokobanConfig(n_solvable=10, n_unsolvable=10, n_held_out=16, n_starts=10), n_val=0)
    torch.manual_seed(0)
    model = net.SokobanPolicy(SokobanConfig())
    boards, optimal = measure.solvable_boards(data["held_out"], limit=3)
    assert_agree(*both(model, lambda m: measure.accuracies(m, data["held_out"])), "accuracies")
    assert_agree(*both(model, lambda m: measure.solves(m, boards, optimal)), "solves, greedy")
    assert_agree(*both(model, lambda m: measure.solves(m, boards, optimal, width=2)), "solves, beam 2")
    frames, want = both(model, lambda m: look.solve_frames(m, boards[0]))
    along, want_along = both(model, lambda m: look.nsteps_along(m, boards[0]))
    assert on_cpu(frames, along)
    assert_agree(frames, want, "solve_frames")
    assert_agree(along, want_along, "nsteps_along")
