"""A maze model judged: solving greedily with every move checked, and the scores (`score`,
which training validates by as well), solving with a corridor closed in the encoder's
attention alone (`solve_closed`, `reroutes`), decoding without the causal mask, scores by path
length, and the chapter's targets (`measure`)."""

from __future__ import annotations

import contextlib
import dataclasses
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from toylib.attention import MultiHeadAttention
from toylib.decode import greedy_decode
from toylib.infer import infer
from toylib.maze.config import BaseMazeConfig
from toylib.maze.dataset import (PAD, MazeSet, connections, invalid_move, make_mazes, solution_tensor, step_tiles,
                                 ways_to_end)
from toylib.maze.net import MazeModel, MazeNet, Memory
from toylib.maze.world import (DIRECTIONS, START, STEP, STOP, check_pixels, check_solution, exits, from_pixels,
                              shortest_path, to_pixels)
from toylib.targets import Target, format_table, pct, share_target, time_target


# ----------------------------------------------------------------------------- solving, and scores


def _greedy(model: MazeModel, pixels: torch.Tensor, iterations: int | None, memory: Memory | None = None) -> torch.Tensor:
    """Greedy solutions for a batch of mazes: (batch, R*C + 1) long, padded with PAD."""
    # no autograd bookkeeping at all: a solve is thousands of small steps, and it cost a fifth
    # of each; cloned after, so that the caller gets a tensor it may write into
    with torch.inference_mode():
        tokens = _greedy_steps(model, pixels, iterations, memory)
    return tokens.clone()


def _greedy_steps(model: MazeModel, pixels: torch.Tensor, iterations: int | None,
                  memory: Memory | None) -> torch.Tensor:
    if memory is None:
        memory = model.encode(pixels, iterations, keep=False)  # encode once, decode once per step
    exits_ = connections(pixels)
    max_len = memory.shape[0] * memory.shape[1] + 1  # START, a path through every tile at most once, STOP
    start = torch.full((len(pixels), 1), START, device=pixels.device)
    past = None  # the decoder's keys and values so far: each step pays for its new move alone
    here = memory.start  # (batch, 2): the walker's tile before the last move

    def next_move(moves: torch.Tensor) -> torch.Tensor:  # (batch, N_MOVES)
        nonlocal past
        logits, past = model.decode_next(moves, memory, past)
        return logits

    def wrong(moves: torch.Tensor) -> torch.Tensor:  # (batch,): asked once per move appended
        nonlocal here
        last = moves[:, -1]
        out, here = invalid_move(here, last, exits_), step_tiles(here, last, memory.shape)
        return out

    out = greedy_decode(next_move, start, max_len=max_len, stop=STOP, done=wrong)
    tokens = F.pad(out.tokens, (0, max_len - out.tokens.shape[1]))  # (batch, max_len)
    return tokens.masked_fill(torch.arange(max_len, device=pixels.device) >= out.lengths[:, None], PAD)


def solve_greedy(model: MazeModel, mazes, iterations: int | None = None, batch_size: int = 250) -> list[list[int]]:
    """The model's solution of each maze (pixels (n, R*TILE, C*TILE), all of one size, or one
    maze), decoded greedily: START, then the likeliest move after each prefix, until STOP or
    the first move the maze does not allow (kept, so that `check_solution` sees it), or a
    walk as long as the maze has tiles. `iterations`: the looped encoder's (default: tiles)."""
    pixels = np.asarray(mazes)
    one = pixels.ndim == 2
    pixels = np.stack([check_pixels(p) for p in (pixels[None] if one else pixels)])  # (n, R*TILE, C*TILE)
    out = infer(model, pixels, batch_size=batch_size, run=lambda m, x: _greedy(m, x, iterations))
    solutions = [row[row != PAD].tolist() for row in out]
    return solutions[0] if one else solutions


@dataclasses.dataclass(frozen=True)
class Solve:
    """One maze solved alone, timed: what `solve_timed` gives."""

    moves: list[int]  # START, the moves, STOP (as `solve_greedy` gives them)
    passes: int  # the encoder's passes (-1 for an encoder that does not loop)
    encode_s: float  # seconds from pixels to the memory
    decode_s: float  # seconds from the memory to STOP (or the first move into a wall)


def solve_timed(model: MazeModel, maze) -> Solve:
    """`solve_greedy` of one maze (pixels (R*TILE, C*TILE)), with the encoder's and the
    decoder's seconds apart: what solving costs a reader who draws one maze."""
    seen = {}

    def run(m: MazeModel, x: torch.Tensor) -> torch.Tensor:
        t0 = time.perf_counter()
        with torch.inference_mode():  # as `_greedy`
            memory = m.encode(x, keep=False)
            # reading the count waits for the encoder, wherever it runs
            seen["passes"] = -1 if memory.passes is None else int(memory.passes[0])
        t1 = time.perf_counter()
        row = _greedy(m, x, None, memory)  # ends on the host: it stops at STOP
        seen["encode"], seen["decode"] = t1 - t0, time.perf_counter() - t1
        return row

    row = infer(model, check_pixels(maze)[None], batch_size=1, run=run)[0]
    return Solve(row[row != PAD].tolist(), seen["passes"], seen["encode"], seen["decode"])


def token_accuracy(model: MazeModel, mazes: MazeSet, iterations: int | None = None, batch_size: int = 250,
                   count_padding: bool = False) -> float:
    """Teacher-forced: the share of the solutions' real tokens (moves and STOP, never padding)
    that the model predicts from the true moves before them. count_padding=True scores it
    the post's way: padding counts as a STOP to predict, up to the longest solution."""
    tokens = solution_tensor(mazes.solutions)  # (n, T)
    predicted = infer(model, mazes.mazes, tokens[:, :-1].clamp(min=0), batch_size=batch_size,  # (n, T - 1)
                      run=lambda m, x, t: m.decode(t, m.encode(x, iterations, keep=False))[0].argmax(-1))
    return _accuracy(predicted, tokens, count_padding)


def _accuracy(predicted: torch.Tensor, tokens: torch.Tensor, count_padding: bool = False) -> float:
    """The share of `tokens[:, 1:]` (n, T - 1) that `predicted` gets right (see `token_accuracy`)."""
    targets = tokens[:, 1:]
    if count_padding:
        return float((predicted == targets.clamp(min=0)).float().mean())
    real = targets != PAD
    return float((predicted == targets)[real].float().mean())


def _solve_and_predict(model: MazeModel, pixels: torch.Tensor, inputs: torch.Tensor,
                       iterations: int | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch's greedy solutions, teacher-forced predictions and encoder passes per maze
    (-1 where the encoder does not loop), from one encoding of it."""
    memory = model.encode(pixels, iterations, keep=False)
    passes = memory.passes if memory.passes is not None else torch.full((len(pixels),), -1)
    return _greedy(model, pixels, iterations, memory), model.decode(inputs, memory)[0].argmax(-1), passes


@dataclasses.dataclass(frozen=True)
class Scores:
    """How a model does on a set of mazes: greedy solving, every move checked, and teacher forcing."""

    n: int
    solved: float  # every move allowed, reaches the end and says STOP there
    shortest: float  # solved by a path as short as BFS's
    token_accuracy: float  # teacher-forced, over real tokens only
    by_length: tuple[tuple[int, int, float, float], ...]  # (shortest-path length, mazes, solved, shortest)
    passes: tuple[int, ...] = ()  # the encoder passes each maze got, in order (a looped encoder only)
    lengths: tuple[int, ...] = ()  # each maze's shortest-path length, in order


def score(model: MazeModel, mazes: MazeSet, iterations: int | None = None, batch_size: int = 250) -> Scores:
    """Solve every maze of `mazes` greedily and judge each solution with `check_solution`;
    and `token_accuracy`. Each batch is encoded once for both (the looped encoder is most of
    the cost): the same numbers as `solve_greedy` and `token_accuracy` give apart."""
    tokens = solution_tensor(mazes.solutions)  # (n, T)
    pixels = np.stack([check_pixels(p) for p in mazes.mazes])  # (n, R*TILE, C*TILE)
    greedy, predicted, passes = infer(model, pixels, tokens[:, :-1].clamp(min=0), batch_size=batch_size,
                                      run=lambda m, x, t: _solve_and_predict(m, x, t, iterations))
    solutions = [row[row != PAD].tolist() for row in greedy]
    checks = [check_solution(m, s) for m, s in zip(mazes.mazes, solutions)]
    length = np.array([c.shortest for c in checks])
    solved = np.array([c.solved for c in checks])
    shortest = np.array([c.optimal for c in checks])
    by_length = tuple((int(k), int((length == k).sum()), float(solved[length == k].mean()),
                       float(shortest[length == k].mean())) for k in np.unique(length))
    return Scores(len(checks), float(solved.mean()), float(shortest.mean()), _accuracy(predicted, tokens), by_length,
                  tuple(passes.tolist()) if bool((passes >= 0).all()) else (), tuple(length.tolist()))


# ----------------------------------------------------------------------------- a corridor closed in the attention alone


def close_corridor(maze, tile: tuple[int, int], move: int) -> np.ndarray:
    """The maze's pixels with the corridor from `tile` one `move` away walled off, both arms
    that meet there closed: the maze a closed corridor makes, to judge a walk on."""
    layout = from_pixels(maze)
    if move not in DIRECTIONS or not exits(layout.arms)[(*tile, DIRECTIONS.index(move))]:
        raise ValueError(f"no open corridor leaves tile {tile} by move {move}")
    arms = layout.arms.copy()
    there = (tile[0] + STEP[move][0], tile[1] + STEP[move][1])
    arms[(*tile, DIRECTIONS.index(move))] = False
    arms[(*there, (DIRECTIONS.index(move) + 2) % 4)] = False  # the arm facing back
    return to_pixels(arms, layout.start, layout.end)


def solve_closed(model: MazeNet, mazes, closed) -> list[list[int]]:
    """The model's greedy walks through `mazes` (pixels (n, R*TILE, C*TILE), one size) when its
    encoder's heads may not read along the corridors that `closed` (the same mazes with
    corridors walled off, `close_corridor`) lacks, while every tile's token is made from the
    unchanged pixels, which still show them open. An intervention: if the search runs on the
    corridors the attention follows, the walks go round what is closed."""
    if not isinstance(model, MazeNet):
        raise ValueError(f"the corridors are the looped encoder's: model must be a MazeNet, got {type(model).__name__}")
    pixels, walls = (np.stack([check_pixels(p) for p in np.asarray(m)]) for m in (mazes, closed))
    if pixels.shape != walls.shape:
        raise ValueError(f"closed must be the same mazes, {pixels.shape}, got {walls.shape}")

    def walks(m: MazeNet, x: torch.Tensor, shut: torch.Tensor) -> torch.Tensor:
        return _greedy(m, x, None, m.encode(x, keep=False, exits_=connections(shut)))

    out = infer(model, pixels, walls, batch_size=250, run=walks)
    return [row[row != PAD].tolist() for row in out]


@dataclasses.dataclass(frozen=True)
class Reroutes:
    """`reroutes`: n mazes, each with one corridor of its shortest path closed in the attention."""

    n: int
    round_by_shortest: int  # walks that reach the end by a shortest path of the maze with it walled off
    through: int  # walks that go through the closed corridor, as the pixels allow
    changed: int  # walks that differ from the model's walk with nothing closed


def reroutes(model: MazeNet, mazes: MazeSet) -> tuple[Reroutes, list[tuple[int, tuple[int, int], int]]]:
    """For each maze of `mazes` whose shortest path has a corridor that can be closed with the
    end still reachable (a loop goes round it), close the first such corridor from the middle
    of the path onwards in the encoder's attention alone (`solve_closed`) and judge the walk on
    the maze with that corridor walled off. Returns the counts and, per maze used, its index in
    `mazes` and the corridor closed: (index, (row, column) of the tile it leaves, the move)."""
    used, shut, corridors = [], [], []
    for i, maze in enumerate(mazes.mazes):
        layout = from_pixels(maze)
        path = shortest_path(layout)
        tiles = [layout.start]
        for move in path:
            tiles.append((tiles[-1][0] + STEP[move][0], tiles[-1][1] + STEP[move][1]))
        for k in range(len(path) // 2, len(path)):
            walled = close_corridor(maze, tiles[k], path[k])
            if shortest_path(from_pixels(walled)) is not None:
                used.append(i)
                shut.append(walled)
                corridors.append((i, tiles[k], path[k]))
                break
    if not used:
        raise ValueError("no maze has a corridor on its shortest path that a loop goes round")
    pixels = np.stack([mazes.mazes[i] for i in used])
    closed_walks = solve_closed(model, pixels, np.stack(shut))
    open_walks = solve_greedy(model, pixels)
    checks = [check_solution(w, walk) for w, walk in zip(shut, closed_walks)]

    def crosses(p, walk, corridor) -> bool:  # the walk, as the pixels allow it, steps through the corridor
        (r, c), move = corridor
        gate = {(r, c), (r + STEP[move][0], c + STEP[move][1])}
        tiles = check_solution(p, walk).tiles
        return any({a, b} == gate for a, b in zip(tiles, tiles[1:]))

    return Reroutes(len(used), sum(c.optimal for c in checks),
                    sum(crosses(p, w, k[1:]) for p, w, k in zip(pixels, closed_walks, corridors)),
                    sum(a != b for a, b in zip(closed_walks, open_walks))), corridors


# ----------------------------------------------------------------------------- decoding, and scores by length


@contextlib.contextmanager
def no_causal_mask(model: nn.Module):
    """Inside the `with`, every causal self-attention of `model` sees the whole sequence, as
    the post's notebook decodes (it trains with the mask and solves without it)."""
    causal = [m for m in model.modules() if isinstance(m, MultiHeadAttention) and m.causal]
    for m in causal:
        m.causal = False
    try:
        yield model
    finally:
        for m in causal:
            m.causal = True


def length_table(scores: Scores) -> str:
    """The breakdown by shortest-path length, as text."""
    rows = [(k, n, pct(s, 1), pct(o, 1)) for k, n, s, o in scores.by_length]
    return format_table(rows, ("shortest path", "mazes", "solved", "by a shortest path"))


# ----------------------------------------------------------------------------- the chapter's targets

# Mazes the model never trained on, of other sizes, with longer paths, and of a second kind (see `make_mazes`).
BEYOND = {
    "6x6": dict(size=6),
    "7x7": dict(size=7),
    "8x8": dict(size=8),
    "8x8, shortest paths of 19 to 40": dict(size=8, path_lengths=(19, 40), min_moves=19),
    "8x8 with no loops (spanning trees)": dict(size=8, kind="tree"),
}


def beyond_sets(n: int = 500, seed: int = 1) -> dict[str, MazeSet]:
    """`n` mazes of each kind in BEYOND. (None can be a training maze: those are all 5x5.)
    500 of each, not 1,000: solving an 8x8 maze costs about 5 times a 5x5 one, and the
    chapter must run in 4 minutes."""
    return {name: make_mazes(n, seed=seed, **kwargs) for name, kwargs in BEYOND.items()}


# A model that searches (one with a way head, as the chapter's) is held to far mazes as well: long
# paths at 8x8, and 16x16 and 32x32 mazes of both kinds (the biggest with no loops have paths of hundreds of
# moves), each solved by a shortest path at least 99 % of the time. How many of each: 200 at 16x16, 100 at 32x32
# (fewer of the biggest: a 32x32 maze with no loops is the slowest to solve).
FAR = {
    "16x16": dict(n=200, size=16),
    "16x16 with no loops (spanning trees)": dict(n=200, size=16, kind="tree"),
    "32x32": dict(n=100, size=32),
    "32x32 with no loops (spanning trees)": dict(n=100, size=32, kind="tree"),
}
FAR_GOAL = ("8x8, shortest paths of 19 to 40", "8x8 with no loops (spanning trees)", *FAR)  # >= 99 % for a search


def far_sets(seed: int = 1, share: float = 1.0) -> dict[str, MazeSet]:
    """The mazes of FAR, or `share` of each set's number (the chapter solves half as many, to
    keep within its 4 minutes; the benchmark all). None can be a training maze: those are all 5x5."""
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share}")
    return {name: make_mazes(seed=seed, **{**kwargs, "n": max(1, round(share * kwargs["n"]))})
            for name, kwargs in FAR.items()}


# Far past the chapter's sets: mazes of 32x32 to 256x256 tiles of three kinds (see `make_mazes`), each
# size drawn from a seed of its own, the same for every model (benchmarks/maze_large.py, and the chapter's
# one 256x256 maze)
LARGE_KINDS = {"tree": "no loops, depth-first", "kruskal": "no loops, Kruskal's", "loops": "with loops"}


def large_mazes(size: int, n: int, kind: str = "tree") -> MazeSet:
    """`n` mazes of `kind` (one of LARGE_KINDS) at size x size tiles, from seed 20 + size."""
    if kind not in LARGE_KINDS:
        raise ValueError(f"kind must be one of {tuple(LARGE_KINDS)}, got {kind!r}")
    return make_mazes(n, size=size, seed=20 + size, kind=kind)


def score_sets(model: MazeModel, sets: dict[str, MazeSet]) -> tuple[dict[str, Scores], dict[str, float]]:
    """`score` of each set, and the seconds each took to encode, solve and score (the sets of FAR
    in batches of 50: a batch decodes as long as its longest walk)."""
    scores, seconds = {}, {}
    for name, s in sets.items():
        t0 = time.perf_counter()
        scores[name] = score(model, s, batch_size=50 if name in FAR else 250)
        seconds[name] = time.perf_counter() - t0
    return scores, seconds


def maze_targets(test: Scores, train_seconds: float, beyond: dict[str, Scores] | None = None,
                 time_limit: float = 120.0, search: bool = False) -> list[Target]:
    """The chapter's summary: the targets on the test mazes, the mazes beyond them, and what was
    measured. With `search` (a model with a way head), the mazes of FAR_GOAL must each be
    solved, and by a shortest path, at least 99 % of the time."""
    targets = [
        share_target(f"solved, {test.n:,} test mazes (greedy, every move checked)", test.solved, 0.995),
        share_target("solved by a shortest path", test.shortest, 0.99),
        Target("token accuracy (teacher-forced, real tokens only)", "-", pct(test.token_accuracy), None),
    ]
    for name, s in (beyond or {}).items():
        measure = f"solved, {s.n:,} mazes {name} (trained on 5x5)"
        if search and name in FAR_GOAL:
            solved, shortest = share_target(measure, s.solved, 0.99), share_target(measure, s.shortest, 0.99)
            targets.append(Target(measure, f"{solved.goal}, both", f"{solved.measured} ({shortest.measured} shortest)",
                                  solved.met and shortest.met))
        elif name == "7x7":  # the chapter's goal; the others are reported as measured
            solved = share_target(measure, s.solved, 0.95)
            targets.append(dataclasses.replace(solved, measured=f"{solved.measured} ({pct(s.shortest)} shortest)"))
        else:
            targets.append(Target(measure, "-", f"{pct(s.solved)} ({pct(s.shortest)} shortest)", None))
    targets.append(time_target(train_seconds, time_limit))
    return targets


def measure(model: MazeModel, config: BaseMazeConfig, data: dict[str, MazeSet], train_seconds: float,
            details: bool = True) -> list[Target]:
    """The chapter's targets for a model trained on `data` (its config's splits): its scores on
    the test mazes and on the mazes beyond them. With `details`, also print the test mazes by
    shortest-path length. A model with a way head (the chapter's) is also scored on FAR."""
    test = score(model, data["test"])
    search = getattr(model, "way_head", None) is not None
    beyond = score_sets(model, {**beyond_sets(), **(far_sets() if search else {})})[0]
    if details:
        print(length_table(test))
    return maze_targets(test, train_seconds, beyond, search=search)



# ----------------------------------------------------------------------------- the prose's claims
TREE, BIG_TREE = "8x8 with no loops (spanning trees)", "32x32 with no loops (spanning trees)"


def path_lengths(sets: dict[str, MazeSet]) -> tuple[dict[str, float], dict[str, int]]:
    """Each set's mean and longest shortest path, in moves."""
    moves = {name: [len(s) - 2 for s in m.solutions] for name, m in sets.items()}
    return {n: float(np.mean(v)) for n, v in moves.items()}, {n: max(v) for n, v in moves.items()}


def row_claims(beyond: dict[str, Scores], sets: dict[str, MazeSet]) -> dict[str, bool]:
    """What the chapter says of the scorecard's lower rows: the post's kind of maze up to 8x8
    solved by a shortest path 99 % of the time or more; the mazes with no loops have longer
    paths than the post's of a size, over 100 moves at 32x32."""
    mean, longest = path_lengths(sets)
    return {
        "6x6, 7x7, 8x8: >= 99 % solved by a shortest path": all(beyond[n].shortest >= 0.99 for n in ("6x6", "7x7", "8x8")),
        "no loops: longer shortest paths than the post's mazes of a size":
            mean[TREE] > mean["8x8"] and mean[BIG_TREE] > mean["32x32"],
        "the 32x32 mazes with no loops have paths of over 100 moves": longest[BIG_TREE] > 100,
    }


def farthest_tiles(mazes: MazeSet) -> np.ndarray:
    """Each maze's farthest tile from the end that can reach it, in moves: (n,)."""
    distance = ways_to_end(torch.from_numpy(mazes.mazes))[1]  # (n, tiles)
    return distance.masked_fill(distance.isinf(), 0).amax(1).cpu().numpy()


def pass_claims(scores: dict[str, Scores], sets: dict[str, MazeSet], names) -> dict[str, bool]:
    """"Every maze ran at least as many passes as its farthest tile is far" (the loop stops
    once the answer holds, never before the end's news can reach every tile), on the sets
    `names` (their `score_sets` scores and mazes)."""
    return {"every maze ran at least as many passes as its farthest tile is far":
            all(bool((np.asarray(scores[n].passes) >= farthest_tiles(sets[n])).all()) for n in names)}
