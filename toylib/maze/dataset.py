"""The maze data: keys to find a maze twice, `MazeSet`, the deduplicated splits (those of a
config: `for_config`) and the mazes beyond them, the tensor views the models read (tiles,
connections, walks, solutions), and every tile's way to the end (`ways_to_end`, BFS in tensors)."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections.abc import Sequence

import numpy as np
import torch

from toylib.draws import budget, distinct, stream
from toylib.maze.config import BaseMazeConfig
from toylib.maze.world import (CENTRE, DIRECTIONS, DOWN, END_MARK, LEFT, MOVE_NAMES, RIGHT, START, START_MARK, STEP,
                               STOP, TILE, UP, Sample,
                               check_lengths, check_pixels, exits, grid_shape, random_maze, spanning_tree_maze)


# ----------------------------------------------------------------------------- data sets


def maze_key(maze) -> bytes:
    """A short hash of a maze's pixels and shape, to find the same maze in two data sets."""
    return _key(check_pixels(maze))


def _key(p: np.ndarray) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    h.update(np.asarray(p.shape, np.int64).tobytes())  # so that 5x10 and 10x5 pixels never share a key
    h.update(np.ascontiguousarray(p, np.uint8).tobytes())
    return h.digest()


@dataclasses.dataclass(frozen=True, eq=False)
class MazeSet:
    """Distinct mazes of one size and their solutions."""

    mazes: np.ndarray  # (n, R*TILE, C*TILE) uint8 pixels
    solutions: tuple[tuple[int, ...], ...]  # for each maze: START, moves..., STOP

    def __len__(self) -> int:
        return len(self.solutions)

    def __getitem__(self, i: int) -> Sample:
        return Sample(self.mazes[i], list(self.solutions[i]))

    def keys(self) -> set[bytes]:
        """`maze_key` of every maze, to keep other data sets apart from this one."""
        return {_key(m) for m in self.mazes}


# how each kind of maze is drawn: the post's generator (`random_maze`), or `spanning_tree_maze`'s
# mazes with no loops (a depth-first search's, or Kruskal's), or a depth-first search's with a
# tenth of the walls left standing knocked through
TREE_KINDS = {"tree": dict(carve="backtracker"), "kruskal": dict(carve="kruskal"),
              "loops": dict(carve="backtracker", loops=0.1)}
KINDS = ("post", *TREE_KINDS)


def _fill(n: int, rng: np.random.Generator, seen: set[bytes], size, path_lengths, p_arm, min_moves: int,
          kind: str = "post") -> MazeSet:
    """`n` fresh mazes of `kind` from `rng`, none already in `seen` (which gains their keys),
    each with a solution of at least `min_moves` moves. Raises RuntimeError when too few turn up."""
    if n < 0:
        raise ValueError(f"the number of mazes must be >= 0, got {n}")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    draw = (lambda: random_maze(rng, size, path_lengths, p_arm)) if kind == "post" else (
        lambda: spanning_tree_maze(rng, size, **TREE_KINDS[kind]))
    fresh = distinct(draw, key=lambda drawn: _key(drawn[0]),
                     seen=seen, max_draws=budget(n), keep=lambda drawn: len(drawn[1]) - 2 >= min_moves,
                     what=f"of {n} new {kind} mazes of size {size} with p_arm={p_arm} and min_moves={min_moves}")
    mazes, solutions = zip(*itertools.islice(fresh, n)) if n else ((), ())
    shape = grid_shape(size)
    return MazeSet(np.array(mazes, np.uint8).reshape(n, shape[0] * TILE, shape[1] * TILE),
                   tuple(tuple(s) for s in solutions))


def make_splits(
    n_train: int = 10_000, n_val: int = 1_000, n_test: int = 1_000, size: int | tuple[int, int] = 5, seed: int = 0,
    path_lengths: tuple[int, int] = (2, 18), p_arm: float = 0.65,
) -> dict[str, MazeSet]:
    """Train, validation and test mazes from one seeded generator, with no maze twice in a split
    or in two splits. The test set is drawn first and the validation set next, so they stay the
    same when only `n_train` changes."""
    rng, seen = stream(seed), set()  # one generator draws the three splits in turn
    test = _fill(n_test, rng, seen, size, path_lengths, p_arm, min_moves=1)
    val = _fill(n_val, rng, seen, size, path_lengths, p_arm, min_moves=1)
    train = _fill(n_train, rng, seen, size, path_lengths, p_arm, min_moves=1)
    return {"train": train, "val": val, "test": test}


def for_config(config: BaseMazeConfig) -> dict[str, MazeSet]:
    """The mazes a model of `config` trains on (`n_train` of them), is validated on and is
    tested on: `make_splits` from the config's `data_seed`. The one place they are built."""
    return make_splits(n_train=config.n_train, seed=config.data_seed)


def make_mazes(
    n: int, size: int | tuple[int, int] = 5, seed: int = 0, path_lengths: tuple[int, int] = (2, 18),
    p_arm: float = 0.65, min_moves: int = 1, exclude: set[bytes] | frozenset[bytes] = frozenset(),
    kind: str = "post",
) -> MazeSet:
    """`n` distinct mazes for a test beyond the splits: another size (6x6, 8x8), or longer
    walks (`path_lengths=(19, 30)`). Random tiles often open a shortcut past a long walk, so
    `min_moves` keeps only mazes whose solution has at least that many moves: at 8x8 with walks
    of 19 to 40 moves about 1 maze in 25 keeps 19 or more, at 5x5 almost none (and the draw
    gives up with a RuntimeError). Mazes whose key is in `exclude` (say
    `splits["train"].keys()`) are skipped. kind="tree" or "kruskal": mazes with no loops from
    `spanning_tree_maze` instead, "loops": the same with loops (path_lengths and p_arm do not
    apply to these)."""
    lo, hi = check_lengths(path_lengths)
    # a walk of the post's is at most `hi` moves; a path through a tree visits each tile at most once
    longest, what = (hi, "the longest walk") if kind == "post" else (int(np.prod(grid_shape(size))) - 1, "tiles - 1")
    if not 1 <= min_moves <= longest:
        raise ValueError(f"min_moves must be within 1..{longest} ({what}), got {min_moves}")
    return _fill(n, stream(seed), set(exclude), size, path_lengths, p_arm, min_moves, kind)


# ----------------------------------------------------------------------------- the model reads the pixels

PAD = -1  # a padded target: no move at all, left out of the loss and of every accuracy
N_MOVES = len(MOVE_NAMES)
# The pixel at the outer end of each arm, in DIRECTIONS order: open when the arm is (the two
# pixels of an arm are equal in every maze `from_pixels` accepts).
ARM_ENDS = ((0, CENTRE), (CENTRE, TILE - 1), (TILE - 1, CENTRE), (CENTRE, 0))
# (rows, columns) each move id goes, STOP and START staying put
_MOVE_STEPS = torch.tensor([(0, 0), STEP[UP], STEP[RIGHT], STEP[DOWN], STEP[LEFT], (0, 0)])


def tile_view(pixels: torch.Tensor) -> torch.Tensor:
    """Pixels (batch, R*TILE, C*TILE) -> tiles (batch, R, C, TILE, TILE)."""
    b, h, w = pixels.shape
    if h % TILE or w % TILE:
        raise ValueError(f"mazes are (batch, rows*{TILE}, columns*{TILE}) pixels, got shape {tuple(pixels.shape)}")
    return pixels.view(b, h // TILE, TILE, w // TILE, TILE).transpose(2, 3)


def connections(pixels: torch.Tensor) -> torch.Tensor:
    """`exits` for a batch of mazes, read from their pixels: (batch, R, C, 4) bool, whether
    each move in DIRECTIONS can be made from each tile."""
    tiles = tile_view(pixels)
    return exits(torch.stack([tiles[..., i, j] > 0 for i, j in ARM_ENDS], -1))  # arms (batch, R, C, 4)


def tile_grid(shape: tuple[int, int], device: torch.device | str | None = None) -> torch.Tensor:
    """(R*C, 2) long: the (row, column) of every tile, row by row (the order of the tokens)."""
    rows, cols = torch.meshgrid(torch.arange(shape[0], device=device), torch.arange(shape[1], device=device),
                                indexing="ij")
    return torch.stack((rows, cols), -1).view(-1, 2)


def start_tiles(pixels: torch.Tensor) -> torch.Tensor:
    """(batch, 2) long: the (row, column) of each maze's start tile."""
    flat = (pixels == START_MARK).flatten(1).float().argmax(1)  # (batch,) index of the start pixel
    return torch.stack([flat // pixels.shape[2] // TILE, flat % pixels.shape[2] // TILE], 1)


def walk_tiles(moves: torch.Tensor, start: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """(batch, T, 2) long: the tile the walker stands on after each token of `moves`
    (batch, T), from `start` (batch, 2). STOP, START and padding stay put; a move off the
    grid is held at its edge (decoding stops at such a move anyway)."""
    steps = _MOVE_STEPS.to(moves.device)[moves.clamp(min=0)]  # (batch, T, 2)
    tiles = start[:, None] + steps.cumsum(1)  # (batch, T, 2)
    return torch.minimum(tiles.clamp(min=0), torch.tensor(shape, device=moves.device) - 1)


def step_tiles(here: torch.Tensor, move: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """(batch, 2) long: the walker's tile after `move` (batch,) from `here` (batch, 2), as
    `walk_tiles` steps it: STOP, START and padding stay put, a move off the grid stays at the
    edge. One step of a walk, for a decoder that carries the walker from move to move."""
    there = here + _MOVE_STEPS.to(move.device)[move.clamp(min=0)]  # (batch, 2)
    return torch.minimum(there.clamp(min=0), there.new_tensor(shape) - 1)


def invalid_last_move(moves: torch.Tensor, start: torch.Tensor, exits_: torch.Tensor) -> torch.Tensor:
    """(batch,) bool: whether the last token of each row of `moves` (batch, T >= 2) is a move
    the maze does not allow from the tile before it: into a wall, off the grid, or a second
    START. (STOP is always allowed: whether it stops at the end is for `check_solution`.)"""
    return invalid_move(walk_tiles(moves[:, :-1], start, exits_.shape[1:3])[:, -1], moves[:, -1], exits_)


def invalid_move(here: torch.Tensor, move: torch.Tensor, exits_: torch.Tensor) -> torch.Tensor:
    """(batch,) bool: whether `move` (batch,) from the tile `here` (batch, 2) is one the maze
    does not allow (`invalid_last_move`), the walker's tile known."""
    rows = torch.arange(len(move), device=move.device)
    through = exits_[rows, here[:, 0], here[:, 1], (move - 1).clamp(0, 3)]  # (batch,) the arm the move would take
    return (move == START) | ((move >= UP) & (move <= LEFT) & ~through)


NO_WAY = N_MOVES  # `ways_to_end`'s class of a tile from which the end cannot be reached


def ways_to_end(pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Breadth-first search from the end of each maze to every tile, in tensors: (ways (batch,
    tiles, N_MOVES + 1) bool, distance (batch, tiles) float). ways[b, i, m] says that move m
    (UP, RIGHT, DOWN or LEFT) from tile i starts a shortest path to the end; STOP is the way
    on the end tile, and NO_WAY on a tile the end cannot be reached from. distance is the
    number of moves of those shortest paths, inf where there is none. Tiles row by row.

    A tile's distance is one more than its nearest connected neighbour's: one sweep per
    ring of tiles, until nothing changes (at most one sweep per tile)."""
    exits_ = connections(pixels)  # (batch, R, C, 4)
    b, rows, cols, _ = exits_.shape
    end = (tile_view(pixels) == END_MARK).flatten(3).any(-1)  # (batch, R, C)
    far = float(rows * cols)  # more moves than any path has: "not reached (yet)"
    distance = torch.where(end, 0.0, far)  # (batch, R, C)

    def through_exits(d: torch.Tensor) -> torch.Tensor:  # (batch, R, C, 4): the neighbour's distance, or far
        padded = torch.nn.functional.pad(d, (1, 1, 1, 1), value=far)
        along = [padded[:, 1 + STEP[m][0]: 1 + STEP[m][0] + rows, 1 + STEP[m][1]: 1 + STEP[m][1] + cols]
                 for m in DIRECTIONS]
        return torch.where(exits_, torch.stack(along, -1), far)

    for _ in range(rows * cols):
        nearer = torch.minimum(distance, through_exits(distance).amin(-1) + 1).clamp(max=far)
        if _unchanged_on_cpu(nearer, distance):
            break
        distance = nearer
    reached = distance < far  # (batch, R, C)
    moves = (through_exits(distance) == (distance - 1)[..., None]) & reached[..., None]  # (batch, R, C, 4)
    ways = torch.zeros(b, rows, cols, N_MOVES + 1, dtype=torch.bool, device=pixels.device)
    ways[..., list(DIRECTIONS)] = moves
    ways[..., STOP] = end
    ways[..., NO_WAY] = ~reached
    return ways.flatten(1, 2), torch.where(reached, distance, torch.inf).flatten(1)


def _unchanged_on_cpu(new: torch.Tensor, old: torch.Tensor) -> bool:
    """Whether a sweep of `ways_to_end` changed nothing, asked on the CPU only: elsewhere the
    answer would wait for the device, so the search runs all its sweeps there (a sweep after
    the last change changes nothing, so the result is the same)."""
    return new.device.type == "cpu" and torch.equal(new, old)


def solution_tensor(solutions: Sequence[Sequence[int]]) -> torch.Tensor:
    """Solutions (START, moves..., STOP) of different lengths -> (n, longest) long, padded with PAD."""
    out = torch.full((len(solutions), max(map(len, solutions))), PAD, dtype=torch.long)
    for i, s in enumerate(solutions):
        out[i, : len(s)] = torch.tensor(s)
    return out
