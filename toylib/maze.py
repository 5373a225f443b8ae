"""Mazes of tiles: the world, its shortest paths, and the data a transformer learns to solve them from.

Retells M. Mozafari, "A Mazing Transformer" (2023): a maze is an image of R x C tiles, each
a 5x5 square of pixels with 0 to 4 arms from its centre, and a transformer reads the image
and writes the moves from the start tile to the end tile: START, then UP, RIGHT, DOWN or
LEFT one tile at a time, then STOP. The chapter is book/maze.ipynb.

Ground truth is breadth-first search (`toylib.search.bfs`) over `MazeState`. The generator
follows the post: a random self-avoiding walk, a grid of random tiles laid over it, and the
walk replaced by a shortest path when the random tiles opened a shorter way. Unlike the
original, the train, validation and test mazes are deduplicated, so no maze is in two splits.

Two models read the pixels and write the moves: `PostMazeNet`, the post's encoder-decoder fed
raw numbers, and `MazeNet`, the chapter's, which holds nothing tied to a maze's size (its
encoder runs one layer along the corridors as many times as the maze needs), so that a model
trained on 5x5 mazes can be asked to solve bigger ones. Both are solved greedily with every
move checked against the maze (`solve`, `score`).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from torch import nn

from toylib import cli
from toylib.attention import (Decoder, DecoderBlock, EncoderBlock, EncoderDecoder, MultiHeadAttention,
                              Seq2SeqPatterns)
from toylib.decode import greedy_decode
from toylib.device import pick_device, seed_everything
from toylib.infer import infer
from toylib.search import bfs
from toylib.targets import Target, format_table, pct
from toylib.train import History, TrainOptions, fit, minibatches, stop_when

# ----------------------------------------------------------------------------- tiles

TILE = 5  # a tile is TILE x TILE pixels
CENTRE = TILE // 2
BLOCKED, OPEN, START_MARK, END_MARK = 0, 1, 2, 3  # pixel values

# The moves, as the post numbers them. Only UP, RIGHT, DOWN and LEFT go anywhere (one tile).
STOP, UP, RIGHT, DOWN, LEFT, START = range(6)
MOVE_NAMES = ("STOP", "UP", "RIGHT", "DOWN", "LEFT", "START")
DIRECTIONS = (UP, RIGHT, DOWN, LEFT)  # arm k of a tile points towards DIRECTIONS[k]
STEP = {UP: (-1, 0), RIGHT: (0, 1), DOWN: (1, 0), LEFT: (0, -1)}  # (rows, columns) a move goes

# Where each arm lies in a tile, (rows, column) or (row, columns), in DIRECTIONS order. A tile
# with its up and right arms open, and the start mark (S) at its centre, reads
#     . . # . .
#     . . # . .
#     . . S # #
#     . . . . .
#     . . . . .
# The centre pixel belongs to no arm: it is open when any arm is (a tile without arms is solid
# wall, as in the post's images) and holds the start or end mark whatever the arms.
ARM_PIXELS = (
    (slice(0, CENTRE), CENTRE),
    (CENTRE, slice(CENTRE + 1, TILE)),
    (slice(CENTRE + 1, TILE), CENTRE),
    (CENTRE, slice(0, CENTRE)),
)


class Layout(NamedTuple):
    """A maze as the search sees it: which arms are open, and where it starts and ends."""

    arms: np.ndarray  # (R, C, 4) bool: arms[r, c, k] says tile (r, c)'s arm towards DIRECTIONS[k] is open
    start: tuple[int, int]
    end: tuple[int, int]


def _tile(position, shape: tuple[int, int], what: str) -> tuple[int, int]:
    try:
        r, c = (int(x) for x in position)
    except (TypeError, ValueError):
        raise ValueError(f"the {what} must be a tile (row, column), got {position!r}") from None
    if not (0 <= r < shape[0] and 0 <= c < shape[1]):
        raise ValueError(f"the {what} {(r, c)} is outside the {shape[0]}x{shape[1]} grid of tiles")
    return r, c


def to_pixels(arms, start, end) -> np.ndarray:
    """Draw a maze: open arms (R, C, 4) and the start and end tiles -> pixels (R*TILE, C*TILE) uint8."""
    arms = np.asarray(arms)
    if arms.ndim != 3 or arms.shape[2] != 4 or arms.shape[0] * arms.shape[1] < 2:
        raise ValueError(f"arms must be (rows, columns, 4) with at least 2 tiles, got shape {arms.shape}")
    if not np.isin(arms, (0, 1)).all():
        raise ValueError("arms must be booleans (or 0/1): an arm is open or not")
    shape = arms.shape[:2]
    start, end = _tile(start, shape, "start"), _tile(end, shape, "end")
    if start == end:
        raise ValueError(f"the start and the end must be different tiles, both are {start}")
    arms = arms.astype(bool)
    tiles = np.zeros((*shape, TILE, TILE), np.uint8)  # (R, C, TILE, TILE)
    for k, (rows, cols) in enumerate(ARM_PIXELS):
        tiles[:, :, rows, cols] = arms[:, :, k, None]
    tiles[:, :, CENTRE, CENTRE] = arms.any(-1)
    tiles[(*start, CENTRE, CENTRE)] = START_MARK
    tiles[(*end, CENTRE, CENTRE)] = END_MARK
    return tiles.transpose(0, 2, 1, 3).reshape(shape[0] * TILE, shape[1] * TILE)  # (R, TILE, C, TILE) -> pixels


def check_pixels(maze) -> np.ndarray:
    """Return a maze's pixels as a uint8 array after checking their shape and values (not yet
    that they draw tiles: `from_pixels` does that); raise ValueError saying what is wrong."""
    p = np.asarray(maze)
    if p.ndim != 2:
        raise ValueError(f"a maze is a 2-D array of pixels (rows*{TILE}, columns*{TILE}), got shape {p.shape}")
    if p.size == 0 or p.shape[0] % TILE or p.shape[1] % TILE:
        raise ValueError(f"a maze is made of {TILE}x{TILE}-pixel tiles, so its sides must be multiples of {TILE}; "
                         f"got {p.shape[0]}x{p.shape[1]} pixels")
    if p.dtype.kind not in "biuf" or (p.dtype.kind == "f" and not np.isfinite(p).all()):
        raise ValueError(f"pixels are numbers 0 to 3, got an array of {p.dtype}")
    valid = np.isin(p, (BLOCKED, OPEN, START_MARK, END_MARK))
    if not valid.all():
        bad = np.unique(p[~valid])[:5].tolist()
        raise ValueError(f"pixels are {BLOCKED} (blocked), {OPEN} (open), {START_MARK} (start) or {END_MARK} (end); "
                         f"found {bad}")
    return p.astype(np.uint8)


def _mark(p: np.ndarray, value: int, what: str) -> tuple[int, int]:
    """The tile whose centre holds the start or end mark; there must be exactly one."""
    where = [tuple(int(i) for i in ij) for ij in np.argwhere(p == value)]
    if len(where) != 1:
        tiles = sorted({(i // TILE, j // TILE) for i, j in where})
        raise ValueError(f"a maze has exactly one {what} (pixel {value}), found {len(where)}"
                         + (f", in tiles {tiles}" if where else ""))
    i, j = where[0]
    if (i % TILE, j % TILE) != (CENTRE, CENTRE):
        raise ValueError(f"the {what} mark ({value}) belongs at a tile's centre pixel {(CENTRE, CENTRE)}, "
                         f"found at pixel {(i % TILE, j % TILE)} of tile {(i // TILE, j // TILE)}")
    return i // TILE, j // TILE


def from_pixels(maze) -> Layout:
    """Read a maze's pixels (R*TILE, C*TILE) back into its open arms, start and end. Raises
    ValueError unless the pixels are exactly what `to_pixels` draws for some maze."""
    p = check_pixels(maze)
    shape = (p.shape[0] // TILE, p.shape[1] // TILE)
    if shape[0] * shape[1] < 2:
        raise ValueError("a maze needs at least 2 tiles: the start and the end")
    start, end = _mark(p, START_MARK, "start"), _mark(p, END_MARK, "end")
    tiles = p.reshape(shape[0], TILE, shape[1], TILE).transpose(0, 2, 1, 3)  # (R, C, TILE, TILE)
    arms = np.stack([tiles[:, :, rows, cols].any(-1) for rows, cols in ARM_PIXELS], -1)  # (R, C, 4)
    drawn = to_pixels(arms, start, end)
    if not np.array_equal(drawn, p):
        i, j = (int(x) for x in np.argwhere(drawn != p)[0])
        tile = (i // TILE, j // TILE)
        names = [MOVE_NAMES[m] for k, m in enumerate(DIRECTIONS) if arms[(*tile, k)]] or ["none"]
        raise ValueError(f"tile {tile} is not a drawn tile: its pixel {(i % TILE, j % TILE)} is {p[i, j]} where a "
                         f"tile with arms {', '.join(names)} has {drawn[i, j]}. Both pixels of an arm are open or "
                         "both blocked, the corners are blocked, and the centre is open when any arm is")
    return Layout(arms, start, end)


# ----------------------------------------------------------------------------- moves


def exits(arms: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
    """(..., R, C, 4) bool, as `arms` (a NumPy array, or a batch of tensors): whether each
    move in DIRECTIONS can be made from each tile. Two neighbouring tiles connect when both
    of the arms that face each other are open; an arm that points off the grid leads nowhere."""
    out = torch.zeros_like(arms) if isinstance(arms, torch.Tensor) else np.zeros(arms.shape, bool)
    out[..., 1:, :, 0] = arms[..., 1:, :, 0] & arms[..., :-1, :, 2]  # up: my up arm and the down arm above
    out[..., :, :-1, 1] = arms[..., :, :-1, 1] & arms[..., :, 1:, 3]
    out[..., :-1, :, 2] = arms[..., :-1, :, 2] & arms[..., 1:, :, 0]
    out[..., :, 1:, 3] = arms[..., :, 1:, 3] & arms[..., :, :-1, 1]
    return out


def check_moves(moves) -> list[int]:
    """Return `moves` as a list of ints after checking each is a move id 0..5."""
    a = np.asarray(moves)
    if a.ndim != 1:
        raise ValueError(f"moves are a 1-D sequence of move ids, got shape {a.shape}")
    if a.size and (a.dtype.kind not in "biuf" or not np.array_equal(a, np.round(a))):
        raise ValueError(f"moves are whole numbers 0 to {len(MOVE_NAMES) - 1}, got {a.tolist()[:8]}")
    bad = (a < 0) | (a >= len(MOVE_NAMES))
    if bad.any():
        raise ValueError(f"moves are {', '.join(f'{n}={i}' for i, n in enumerate(MOVE_NAMES))}; "
                         f"found {np.unique(a[bad])[:5].tolist()}")
    return [int(m) for m in a]


def open_path(arms, start, moves: Sequence[int]) -> tuple[np.ndarray, tuple[int, int]]:
    """Open the arms a walk of `moves` (UP, RIGHT, DOWN, LEFT) from `start` goes through, on
    both sides of every step. Returns (a copy of arms with them open, the tile the walk ends on)."""
    arms = np.array(arms, bool)
    tile = _tile(start, arms.shape[:2], "start")
    for i, m in enumerate(check_moves(moves)):
        if m not in STEP:
            raise ValueError(f"a walk goes UP, RIGHT, DOWN or LEFT, move {i} is {MOVE_NAMES[m]}")
        (r, c), (dr, dc) = tile, STEP[m]
        nxt = (r + dr, c + dc)
        if not (0 <= nxt[0] < arms.shape[0] and 0 <= nxt[1] < arms.shape[1]):
            raise ValueError(f"move {i} ({MOVE_NAMES[m]}) leaves the grid from tile {tile}")
        arms[r, c, m - 1] = arms[(*nxt, (m + 1) % 4)] = True  # arm m - 1 and the one facing it
        tile = nxt
    return arms, tile


# ----------------------------------------------------------------------------- ground truth: BFS


@dataclasses.dataclass(frozen=True)
class MazeState:
    """A `toylib.search.State`: the tile the walker stands on. The maze is context, not state,
    so two states are equal, and hash alike, when they stand on the same tile."""

    tile: tuple[int, int]
    end: tuple[int, int] = dataclasses.field(compare=False)
    exits: np.ndarray = dataclasses.field(compare=False, repr=False)  # (R, C, 4) bool, from `exits`

    @classmethod
    def start_of(cls, maze: np.ndarray | Layout) -> MazeState:
        """The walker on the start tile of a maze (its pixels, or a `Layout`)."""
        layout = maze if isinstance(maze, Layout) else from_pixels(maze)
        return cls(layout.start, layout.end, exits(layout.arms))

    def legal_actions(self) -> list[int]:
        """The moves through open arms, in DIRECTIONS order (BFS breaks ties in this order)."""
        r, c = self.tile
        return [m for k, m in enumerate(DIRECTIONS) if self.exits[r, c, k]]

    def apply_action(self, action: int) -> MazeState:
        r, c = self.tile
        if action not in STEP or not self.exits[r, c, action - 1]:
            raise ValueError(f"move {action} is not possible from tile {self.tile}; "
                             f"the moves here are {[MOVE_NAMES[m] for m in self.legal_actions()]}")
        dr, dc = STEP[action]
        return MazeState((r + dr, c + dc), self.end, self.exits)

    def is_goal(self) -> bool:
        return self.tile == self.end


def shortest_path(maze: np.ndarray | Layout) -> list[int] | None:
    """A shortest list of moves (UP, RIGHT, DOWN, LEFT; no START or STOP) from the start tile
    to the end tile, or None when the end cannot be reached. Ties go to the path that tries
    UP, then RIGHT, then DOWN, then LEFT first."""
    path = bfs(MazeState.start_of(maze))
    return None if path is None else list(path.actions)


@dataclasses.dataclass(frozen=True)
class Check:
    """What `check_solution` found, move by move. Decoding stops at the first invalid move,
    so `first_invalid` is where a decoded solution would have been cut."""

    first_invalid: int | None  # index (in the moves as given) of the first move not allowed; None if none
    tiles: tuple[tuple[int, int], ...]  # the tiles stood on, from the start to where the walk stopped
    reached: bool  # the walk stood on the end tile at some point, before any invalid move
    stopped_at_end: bool  # a STOP ended the walk on the end tile, before any invalid move
    shortest: int | None  # BFS's number of moves from start to end; None when the end is unreachable

    @property
    def length(self) -> int:
        """Moves made (UP, RIGHT, DOWN, LEFT) before the walk stopped."""
        return len(self.tiles) - 1

    @property
    def solved(self) -> bool:
        """Every move allowed, and the walk STOPs on the end tile (nothing after the STOP)."""
        return self.first_invalid is None and self.stopped_at_end

    @property
    def optimal(self) -> bool:
        """Solved, by a shortest path."""
        return self.solved and self.length == self.shortest


def _walk(state: MazeState, moves: list[int]) -> tuple[list[tuple[int, int]], int | None, bool]:
    """Follow `moves` from `state`: (tiles stood on, index of the first invalid move, whether a
    STOP ended the walk). START is allowed only as the first move; nothing is allowed after STOP."""
    tiles = [state.tile]
    for i, m in enumerate(moves):
        if m == STOP:
            return tiles, (i + 1 if i + 1 < len(moves) else None), True
        if m == START and i == 0:
            continue
        if m not in state.legal_actions():
            return tiles, i, False
        state = state.apply_action(m)
        tiles.append(state.tile)
    return tiles, None, False


def check_solution(maze, moves) -> Check:
    """Judge a sequence of moves on a maze (pixels): is each move allowed (through connected
    arms, START only first, nothing after STOP), does the walk reach the end and STOP there,
    and how long is it next to a shortest path. A leading START is optional."""
    state = MazeState.start_of(maze)
    tiles, first_invalid, stopped = _walk(state, check_moves(moves))
    path = bfs(state)
    return Check(
        first_invalid=first_invalid,
        tiles=tuple(tiles),
        reached=state.end in tiles,
        stopped_at_end=stopped and tiles[-1] == state.end,
        shortest=None if path is None else len(path),
    )


# ----------------------------------------------------------------------------- the generator


class Sample(NamedTuple):
    """One maze and its stored solution."""

    maze: np.ndarray  # (R*TILE, C*TILE) uint8 pixels
    solution: list[int]  # START, moves..., STOP


def grid_shape(size: int | tuple[int, int]) -> tuple[int, int]:
    """A maze's size, n (n x n tiles) or (rows, columns), as (rows, columns): at least 2 tiles."""
    shape = np.array((size, size) if np.isscalar(size) else size)
    if shape.shape != (2,) or shape.dtype.kind not in "iu" or shape.min() < 1 or shape.prod() < 2:
        raise ValueError(f"a maze is n x n or (rows, columns) tiles, at least 2 of them; got size {size!r}")
    return int(shape[0]), int(shape[1])


def _check_lengths(path_lengths: tuple[int, int]) -> tuple[int, int]:
    lo, hi = path_lengths
    if not 1 <= lo <= hi:
        raise ValueError(f"path_lengths is a range (shortest, longest) of walk lengths, 1 <= shortest <= longest; "
                         f"got {path_lengths}")
    return int(lo), int(hi)


def random_walk(rng: np.random.Generator, shape: tuple[int, int], max_steps: int) -> tuple[tuple[int, int], list[int]]:
    """A random self-avoiding walk of at most `max_steps` moves on a grid of tiles: (start,
    moves). The start is a random tile; each step goes to a neighbouring tile not yet visited,
    chosen uniformly. When there is none the walk is stuck (it has walled itself in, or run
    into a corner) and ends there, shorter than asked. It never gets stuck on its first step."""
    rows, cols = shape
    tile = (int(rng.integers(rows)), int(rng.integers(cols)))
    start, visited, moves = tile, {tile}, []
    for _ in range(max_steps):
        options = []
        for m in DIRECTIONS:
            nxt = (tile[0] + STEP[m][0], tile[1] + STEP[m][1])
            if 0 <= nxt[0] < rows and 0 <= nxt[1] < cols and nxt not in visited:
                options.append((m, nxt))
        if not options:
            break
        m, tile = options[int(rng.integers(len(options)))]
        moves.append(m)
        visited.add(tile)
    return start, moves


def random_maze(
    rng: np.random.Generator,
    size: int | tuple[int, int] = 5,
    path_lengths: tuple[int, int] = (2, 18),
    p_arm: float = 0.65,
) -> Sample:
    """One maze as the post makes it, every draw from `rng`: a walk length
    L from `path_lengths` (inclusive), a random self-avoiding walk of at
    most L moves, then random tiles over the whole grid, each arm open with
    probability `p_arm`, and the walk's arms opened on top. The solution is
    the walk, or a shortest path when one is shorter.

    The walk's tiles draw random arms too (as in the original code): were
    they to keep only the arms the walk uses, the solution would be a
    corridor without side branches, and following it would need no search.
    """
    shape = grid_shape(size)
    lo, hi = _check_lengths(path_lengths)
    if not 0.0 <= p_arm <= 1.0:
        raise ValueError(f"p_arm is a probability, got {p_arm}")
    start, walk = random_walk(rng, shape, int(rng.integers(lo, hi + 1)))
    arms = rng.random((*shape, 4)) < p_arm  # (R, C, 4)
    arms, end = open_path(arms, start, walk)
    layout = Layout(arms, start, end)
    best = shortest_path(layout)  # never None: the walk joins start and end
    moves = best if len(best) < len(walk) else walk
    return Sample(to_pixels(*layout), [START, *moves, STOP])


# The start is cyan as in the post; the end is red rather than the post's black, which is hard
# to tell from a wall.
MAZE_COLOURS = ListedColormap(["#23262f", "#f2eee3", "#17becf", "#d62728"])


def draw_maze(ax: Axes, maze, moves: Sequence[int] | None = None) -> Axes:
    """Draw a maze from its pixels on `ax` and, given `moves` (a leading START optional), the
    path they take through the tile centres, up to where it stops; a first invalid move is
    marked with a cross where it hits the wall."""
    state = MazeState.start_of(maze)
    ax.imshow(check_pixels(maze), cmap=MAZE_COLOURS, vmin=0, vmax=3, interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    if moves is None:
        return ax
    moves = check_moves(moves)
    tiles, first_invalid, _ = _walk(state, moves)
    rows, cols = (np.array(x) * TILE + CENTRE for x in zip(*tiles))
    # translucent, so that the start and end marks show through
    ax.plot(cols, rows, color="#ff7f0e", lw=2, alpha=0.7, marker="o", ms=3, solid_capstyle="round")
    if first_invalid is not None:
        dr, dc = STEP.get(moves[first_invalid], (0, 0))  # START or a move after STOP: at the last tile
        ax.plot(cols[-1] + dc * TILE / 2, rows[-1] + dr * TILE / 2, "x", color="#d62728", ms=10, mew=3)
    return ax


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


def _fill(n: int, rng: np.random.Generator, seen: set[bytes], size, path_lengths, p_arm, min_moves: int) -> MazeSet:
    """`n` fresh mazes from `rng`, none already in `seen` (which gains their keys), each with a
    solution of at least `min_moves` moves. Raises RuntimeError when too few turn up."""
    if n < 0:
        raise ValueError(f"the number of mazes must be >= 0, got {n}")
    mazes, solutions, draws = [], [], 0
    max_draws = 100 * n + 1_000
    while len(mazes) < n:
        if draws == max_draws:
            raise RuntimeError(f"found only {len(mazes)} of {n} new mazes in {draws} draws: there are too few "
                               f"distinct mazes of size {size} with p_arm={p_arm}, or min_moves={min_moves} is rare")
        draws += 1
        maze, solution = random_maze(rng, size, path_lengths, p_arm)
        key = _key(maze)
        if len(solution) - 2 < min_moves or key in seen:
            continue
        seen.add(key)
        mazes.append(maze)
        solutions.append(tuple(solution))
    shape = grid_shape(size)
    return MazeSet(np.array(mazes, np.uint8).reshape(n, shape[0] * TILE, shape[1] * TILE), tuple(solutions))


def make_splits(
    n_train: int = 10_000, n_val: int = 1_000, n_test: int = 1_000, size: int | tuple[int, int] = 5, seed: int = 0,
    path_lengths: tuple[int, int] = (2, 18), p_arm: float = 0.65,
) -> dict[str, MazeSet]:
    """Train, validation and test mazes from one seeded generator, with no maze twice in a split
    or in two splits. The test set is drawn first and the validation set next, so they stay the
    same when only `n_train` changes."""
    rng, seen = np.random.default_rng(seed), set()
    test = _fill(n_test, rng, seen, size, path_lengths, p_arm, min_moves=1)
    val = _fill(n_val, rng, seen, size, path_lengths, p_arm, min_moves=1)
    train = _fill(n_train, rng, seen, size, path_lengths, p_arm, min_moves=1)
    return {"train": train, "val": val, "test": test}


def make_mazes(
    n: int, size: int | tuple[int, int] = 5, seed: int = 0, path_lengths: tuple[int, int] = (2, 18),
    p_arm: float = 0.65, min_moves: int = 1, exclude: set[bytes] | frozenset[bytes] = frozenset(),
) -> MazeSet:
    """`n` distinct mazes for a test beyond the splits: another size (6x6, 8x8), or longer
    walks (`path_lengths=(19, 30)`). Random tiles often open a shortcut past a long walk, so
    `min_moves` keeps only mazes whose solution has at least that many moves: at 8x8 with walks
    of 19 to 40 moves about 1 maze in 25 keeps 19 or more, at 5x5 almost none (and the draw
    gives up with a RuntimeError). Mazes whose key is in `exclude` (say
    `splits["train"].keys()`) are skipped."""
    lo, hi = _check_lengths(path_lengths)
    if not 1 <= min_moves <= hi:
        raise ValueError(f"min_moves must be within 1..{hi} (the longest walk), got {min_moves}")
    return _fill(n, np.random.default_rng(seed), set(exclude), size, path_lengths, p_arm, min_moves)


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


def invalid_last_move(moves: torch.Tensor, start: torch.Tensor, exits_: torch.Tensor) -> torch.Tensor:
    """(batch,) bool: whether the last token of each row of `moves` (batch, T >= 2) is a move
    the maze does not allow from the tile before it: into a wall, off the grid, or a second
    START. (STOP is always allowed: whether it stops at the end is for `check_solution`.)"""
    r, c = walk_tiles(moves[:, :-1], start, exits_.shape[1:3])[:, -1].unbind(-1)  # (batch,), (batch,)
    last = moves[:, -1]
    rows = torch.arange(len(moves), device=moves.device)
    through = exits_[rows, r, c, (last - 1).clamp(0, 3)]  # (batch,) the arm the move would take
    return (last == START) | ((last >= UP) & (last <= LEFT) & ~through)


def solution_tensor(solutions: Sequence[Sequence[int]]) -> torch.Tensor:
    """Solutions (START, moves..., STOP) of different lengths -> (n, longest) long, padded with PAD."""
    out = torch.full((len(solutions), max(map(len, solutions))), PAD, dtype=torch.long)
    for i, s in enumerate(solutions):
        out[i, : len(s)] = torch.tensor(s)
    return out


# ----------------------------------------------------------------------------- config


MODELS = ("looped", "post")


@dataclasses.dataclass(frozen=True)
class MazeConfig:
    """A maze model and how to train it. The defaults reach the chapter's targets."""

    model: str = "looped"  # "looped": the chapter's MazeNet; "post": PostMazeNet, the post's model
    d_model: int = 32  # width of every token
    n_heads: int = 4  # looped: head h reads along DIRECTIONS[h % 4] (see MazeNet)
    d_mlp: int = 64  # width of the feed-forward layers
    n_encoder_layers: int = 4  # post only: the looped encoder runs one layer as often as the maze needs
    n_decoder_layers: int = 1
    radius: int = 2  # looped: cross-attention learns a bias per offset up to this many tiles away
    pad_as_stop: bool = False  # train padding as STOP, as the post does (False: padding is left out)
    embed: bool = False  # post only: the same inputs through learned embeddings, not as raw numbers
    steps: int = 1100  # at most this many batches (cosine decay over them); training stops sooner at `stop_at`
    batch_size: int = 64
    lr: float = 6e-3  # peak learning rate (AdamW)
    # clip the gradient norm: at 3e-3 unclipped seed 2 of 10 started too slowly, at 6e-3 unclipped seed 5 ran off
    grad_clip: float | None = 1.0
    weight_decay: float = 0.0
    warmup: int = 100  # steps of linear warm-up
    schedule: str = "cosine"  # "constant" or "cosine" after the warm-up
    eval_every: int = 200  # steps between validations (greedy solving of the validation mazes)
    stop_at: float | None = 0.998  # stop once this share of the validation mazes is solved by a shortest path
    n_train: int = 10_000  # training mazes (the post's 10,000)
    data_seed: int = 0  # which mazes: `make_splits(seed=data_seed)`
    seed: int = 0  # initial weights, batch order and encoder iterations

    def __post_init__(self):
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.d_model < 1 or self.n_heads < 1 or self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a positive multiple of n_heads ({self.n_heads})")
        if self.embed and self.model != "post":
            raise ValueError("embed chooses how the post's model reads its inputs; the looped model always embeds them")
        if self.model == "post" and not self.embed and self.d_model < TILE * TILE + 2:
            raise ValueError(f"the post's model writes a tile's {TILE * TILE} pixels, its row and its column into "
                             f"the token itself, so d_model must be at least {TILE * TILE + 2}, got {self.d_model}")
        if self.n_encoder_layers < 1 or self.n_decoder_layers < 1 or self.d_mlp < 1:
            raise ValueError("n_encoder_layers, n_decoder_layers and d_mlp must be at least 1")
        if self.radius < 1:
            raise ValueError(f"radius must be at least 1 (the current tile and its neighbours), got {self.radius}")
        if self.batch_size < 1 or self.n_train < 1:
            raise ValueError(f"batch_size and n_train must be positive, got {self.batch_size}, {self.n_train}")

    def train_options(self) -> TrainOptions:
        # out of steps, keep the best validated weights (see train_maze)
        return TrainOptions(steps=self.steps, lr=self.lr, weight_decay=self.weight_decay, schedule=self.schedule,
                            grad_clip=self.grad_clip, warmup=self.warmup, eval_every=self.eval_every, monitor="val_shortfall",
                            restore_best=True)


# ----------------------------------------------------------------------------- the models


class Memory(NamedTuple):
    """What an encoder made of a batch of mazes: the decoder reads it at every step."""

    states: torch.Tensor  # (batch, tiles, d_model): one per tile, row by row
    patterns: torch.Tensor | None  # (batch, layer, head, tiles, tiles): the encoder's attention; None if not kept
    start: torch.Tensor  # (batch, 2) long: the start tile
    shape: tuple[int, int]  # (R, C): the maze's size in tiles


class MazeModel(nn.Module):
    """What every maze model does: encode a batch of mazes once, then decode any number of
    times against that memory (once per step when solving).

    forward(pixels (batch, R*TILE, C*TILE), moves (batch, T)) ->
        (logits (batch, T, N_MOVES): the move after each token, Seq2SeqPatterns)
    """

    config: MazeConfig

    def encode(self, pixels: torch.Tensor, iterations: int | None = None, keep: bool = True) -> Memory:
        raise NotImplementedError

    def decode(self, moves: torch.Tensor, memory: Memory) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def forward(self, pixels: torch.Tensor, moves: torch.Tensor,
                iterations: int | None = None) -> tuple[torch.Tensor, Seq2SeqPatterns]:
        memory = self.encode(pixels, iterations)
        logits, self_patterns, cross_patterns = self.decode(moves, memory)  # (batch, T, N_MOVES), ...
        return logits, Seq2SeqPatterns(memory.patterns, self_patterns, cross_patterns)


class MazeNet(MazeModel):
    """The chapter's model, the same for a maze of any size: it holds nothing per row,
    column or step.

    Encoder: a token per tile, from its pixels (one-hot), and one EncoderBlock run
    `iterations` times (by default once per tile, more than any shortest path is long). Head
    h may attend to the tile itself and to its neighbour along DIRECTIONS[h % 4], when the
    two tiles connect: the maze's corridors are the attention mask. Each iteration moves
    information one tile along the corridors, so a tile can learn which way the end lies
    from neighbours that already know: a breadth-first search from the end, one ring of
    tiles per iteration. Patterns are (batch, iteration, head, tile, tile).

    Decoder: a token per move so far, the move alone; where the walker stands enters only
    through cross-attention, whose score to each tile gets a learned bias (per head) for the
    offset from the walker's tile, offsets past `radius` sharing the bias at the edge.
    """

    def __init__(self, config: MazeConfig = MazeConfig()):
        super().__init__()
        self.config = c = config
        self.tile_embed = nn.Linear(TILE * TILE * 4, c.d_model)  # a tile's pixels, one-hot
        self.step = EncoderBlock(c.d_model, c.n_heads, c.d_mlp)  # the encoder's one layer, looped
        self.look = nn.Parameter(torch.zeros(c.n_heads, 2))  # bias of each head on (the tile, its neighbour)
        self.ln_memory = nn.LayerNorm(c.d_model)
        self.move_embed = nn.Embedding(N_MOVES, c.d_model)
        self.decoder = Decoder(c.n_decoder_layers, c.d_model, c.n_heads, c.d_mlp)
        width = 2 * c.radius + 1
        # a bias per head and offset (rows, columns) from the walker's tile. At first every head reads mostly
        # the walker's own tile (e^3 = 20 times any other), where the encoder writes which way to go: from
        # zero, finding that tile took the decoder hundreds of steps
        offset_bias = torch.zeros(c.n_heads, width, width)
        offset_bias[:, c.radius, c.radius] = 3.0
        self.offset_bias = nn.Parameter(offset_bias)
        self.unembed = nn.Linear(c.d_model, N_MOVES)

    def encoder_bias(self, exits_: torch.Tensor) -> torch.Tensor:
        """(batch, head, tiles, tiles): the attention bias of every iteration, -inf where a
        head may not look. exits_ (batch, R, C, 4) from `connections`."""
        b, rows, cols, _ = exits_.shape
        n = rows * cols
        tiles = torch.arange(n, device=exits_.device)
        # (4, n, n): key j is query i's neighbour along DIRECTIONS[k]; off the grid exits_ is False anyway
        step = torch.tensor([STEP[m][0] * cols + STEP[m][1] for m in DIRECTIONS], device=exits_.device)
        neighbour = F.one_hot((tiles + step[:, None]).clamp(0, n - 1), n).bool()
        along = exits_.view(b, n, 4).transpose(1, 2)[..., None] & neighbour  # (batch, 4, n, n)
        along = along[:, torch.arange(self.config.n_heads, device=exits_.device) % 4]  # (batch, head, n, n)
        itself = torch.eye(n, dtype=torch.bool, device=exits_.device)
        look = self.look[None, :, None, None]  # (1, head, 1, 1, 2)
        return torch.where(itself, look[..., 0], torch.where(along, look[..., 1], -math.inf))

    def encode(self, pixels: torch.Tensor, iterations: int | None = None,
               keep: bool = True) -> Memory:
        tiles = tile_view(pixels)  # (batch, R, C, TILE, TILE)
        b, rows, cols = tiles.shape[:3]
        one_hot = F.one_hot(tiles.long(), 4).flatten(3).float()
        tile = self.tile_embed(one_hot).flatten(1, 2)  # (batch, tiles, d)
        # (batch, head, tiles, tiles): where each head may look, and its bias
        bias = self.encoder_bias(connections(pixels))
        x, patterns = torch.zeros_like(tile), []
        for _ in range(iterations or rows * cols):
            # every iteration sees the tile afresh beside what it has learned
            # so far ("recall"): many updates never dilute the tile's pixels
            x, pattern = self.step(x + tile, bias)  # (batch, tiles, d), pattern
            x = x - tile  # (batch, head, tiles, tiles) is the pattern's shape
            if keep:
                patterns.append(pattern)
        kept = torch.stack(patterns, 1) if keep else None
        start = start_tiles(pixels)
        return Memory(self.ln_memory(x), kept, start, (rows, cols))

    def cross_bias(self, moves: torch.Tensor, memory: Memory) -> torch.Tensor:
        """(batch, head, T, tiles): the learned bias for the offset from the
        walker's tile after each move to every tile, clipped to `radius`."""
        r = self.config.radius
        here = walk_tiles(moves, memory.start, memory.shape)  # (batch, T, 2)
        grid = tile_grid(memory.shape, moves.device)  # (tiles, 2)
        # (batch, T, tiles, 2): each tile's offset, shifted to 0..2r
        offset = (grid - here[:, :, None]).clamp(-r, r) + r
        # (batch, T, tiles): the offset's place in the flattened window
        index = offset[..., 0] * (2 * r + 1) + offset[..., 1]
        bias = self.offset_bias.flatten(1)[:, index]  # (head, batch, T, tiles)
        return bias.transpose(0, 1)

    def decode(self, moves: torch.Tensor, memory: Memory) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = self.move_embed(moves.clamp(min=0))  # (batch, T, d)
        # (batch, T, d), (batch, layer, head, T, T), (batch, layer, head, T, tiles)
        x, self_patterns, cross_patterns = self.decoder(x, memory.states, self.cross_bias(moves, memory))
        return self.unembed(x), self_patterns, cross_patterns


# The embedded post model (`embed=True`) has a vector for each row and column up to this many,
# and for each step of a walk through every tile of such a maze: the chapter's mazes go up to
# 8x8. Bigger mazes are refused, since their rows and steps would have no vector at all.
EMBED_SIDE = 8


class PostMazeNet(MazeModel):
    """The post's model, on the core's blocks: an encoder of `n_encoder_layers` layers over the
    tiles and a decoder of `n_decoder_layers` over the moves, both fed raw numbers with no
    embedding. A tile's token is its 25 pixel values, then its row and its column, then
    zeros; a move's token is the move id, the number of moves so far (1 for START), and the
    row and column it leads to, then zeros. (The post uses torch's nn.Transformer, whose
    blocks normalise after each residual addition; the core's normalise before.)

    With `embed=True` the same inputs go in through learned embeddings instead, summed: a
    tile's pixels one-hot through a linear map, its row and its column each through an
    `nn.Embedding`; the move, the step and the row and column reached, each through its own.
    Mazes are then limited to EMBED_SIDE tiles a side.
    """

    def __init__(self, config: MazeConfig):
        super().__init__()
        self.config = c = config
        self.transformer = EncoderDecoder(c.n_encoder_layers, c.n_decoder_layers, c.d_model, c.n_heads, c.d_mlp)
        self.unembed = nn.Linear(c.d_model, N_MOVES)
        if c.embed:  # made last, so that the blocks start from the same weights as the raw model's of the same seed
            self.pixel_embed = nn.Linear(TILE * TILE * 4, c.d_model)  # a tile's pixels, one-hot
            self.row_embed, self.col_embed = nn.Embedding(EMBED_SIDE, c.d_model), nn.Embedding(EMBED_SIDE, c.d_model)
            self.move_embed = nn.Embedding(N_MOVES, c.d_model)
            self.step_embed = nn.Embedding(EMBED_SIDE * EMBED_SIDE, c.d_model)  # steps 1 .. R*C of a walk
            self.reached_row_embed = nn.Embedding(EMBED_SIDE, c.d_model)
            self.reached_col_embed = nn.Embedding(EMBED_SIDE, c.d_model)

    def tile_tokens(self, pixels: torch.Tensor) -> torch.Tensor:
        """The encoder's input: (batch, R*C, d_model), a token per tile, row by row."""
        tiles = tile_view(pixels)  # (batch, R, C, TILE, TILE)
        b, rows, cols = tiles.shape[:3]
        grid = tile_grid((rows, cols), pixels.device)  # (tiles, 2)
        if self.config.embed:
            if max(rows, cols) > EMBED_SIDE:
                raise ValueError(f"the embedded post model has rows and columns up to {EMBED_SIDE} tiles, "
                                 f"got a {rows}x{cols} maze")
            one_hot = F.one_hot(tiles.long(), 4).flatten(3).flatten(1, 2).float()  # (batch, tiles, TILE*TILE*4)
            return self.pixel_embed(one_hot) + self.row_embed(grid[:, 0]) + self.col_embed(grid[:, 1])
        x = torch.zeros(b, rows * cols, self.config.d_model, device=pixels.device)  # (batch, tiles, d)
        x[..., : TILE * TILE] = tiles.flatten(3).flatten(1, 2).float()
        x[..., TILE * TILE : TILE * TILE + 2] = grid.to(x)
        return x

    def move_tokens(self, moves: torch.Tensor, memory: Memory) -> torch.Tensor:
        """The decoder's input: (batch, T, d_model), a token per move so far."""
        b, t = moves.shape
        reached = walk_tiles(moves, memory.start, memory.shape)  # (batch, T, 2)
        if self.config.embed:
            if t > EMBED_SIDE * EMBED_SIDE:
                raise ValueError(f"the embedded post model has steps up to {EMBED_SIDE * EMBED_SIDE}, got {t}")
            steps = torch.arange(t, device=moves.device)  # (T,): step 1 .. T, from 0
            return (self.move_embed(moves.clamp(min=0)) + self.step_embed(steps)
                    + self.reached_row_embed(reached[..., 0]) + self.reached_col_embed(reached[..., 1]))
        x = torch.zeros(b, t, self.config.d_model, device=moves.device)  # (batch, T, d)
        x[..., 0] = moves.clamp(min=0)
        x[..., 1] = torch.arange(1, t + 1, device=moves.device)
        x[..., 2:4] = reached.to(x)
        return x

    def encode(self, pixels: torch.Tensor, iterations: int | None = None, keep: bool = True) -> Memory:
        rows, cols = (s // TILE for s in pixels.shape[1:])
        # (batch, tiles, d), (batch, layer, head, tiles, tiles)
        states, patterns = self.transformer.encode(self.tile_tokens(pixels))
        return Memory(states, patterns if keep else None, start_tiles(pixels), (rows, cols))

    def decode(self, moves: torch.Tensor, memory: Memory) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # (batch, T, d), (batch, layer, head, T, T), (batch, layer, head, T, tiles)
        x, self_patterns, cross_patterns = self.transformer.decode(self.move_tokens(moves, memory), memory.states)
        return self.unembed(x), self_patterns, cross_patterns


# The post's model and recipe: d=32, 8 heads, 4 encoder and 10 decoder layers with
# feed-forward layers 512 wide (570,502 parameters), raw numbers in, padding trained as STOP,
# Adam at 1e-4 in batches of 1,024. A step takes about 5.5 s on one CPU thread, so 16 steps
# train it for about as long as the chapter's model trains (65 to 110 s); the post trained 2,000
# epochs of 10 steps, about 45 hours.
POST_CONFIG = MazeConfig(model="post", d_model=32, n_heads=8, d_mlp=512, n_encoder_layers=4, n_decoder_layers=10,
                         pad_as_stop=True, lr=1e-4, grad_clip=None, batch_size=1024, warmup=0, schedule="constant",
                         steps=16, eval_every=8, stop_at=None)


def build_model(config: MazeConfig) -> MazeModel:
    """The model a config describes."""
    return (PostMazeNet if config.model == "post" else MazeNet)(config)


# ----------------------------------------------------------------------------- loss and training


def maze_loss(model: MazeModel, batch: tuple[torch.Tensor, torch.Tensor],
              iterations: int | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """Cross-entropy of each next move with teacher forcing, and the share of them right.
    batch: pixels (batch, R*TILE, C*TILE) and solutions (batch, T) padded with PAD. Padding
    is left out of both, unless the config trains it as STOP (as the post does)."""
    device = next(model.parameters()).device
    pixels, tokens = (t.to(device) for t in batch)
    tokens = tokens[:, : int((tokens != PAD).sum(1).max())]  # (batch, T): no column of padding only
    inputs, targets = tokens[:, :-1].clamp(min=0), tokens[:, 1:]  # padding reads as STOP, after the real STOP
    if model.config.pad_as_stop:
        targets = targets.clamp(min=0)
    logits, _ = model(pixels, inputs, iterations)  # (batch, T - 1, N_MOVES)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=PAD)
    real = targets != PAD
    return loss, {"token_acc": (logits.argmax(-1) == targets)[real].float().mean().item()}


def train_maze(
    config: MazeConfig = MazeConfig(),
    splits: dict[str, MazeSet] | None = None,
    device: torch.device | str | None = None,
    callback: Callable[[int, nn.Module, History], bool | None] | None = None,
    progress: bool = True,
) -> tuple[MazeModel, History]:
    """Build a model from `config` and train it on `splits["train"]` (default: `make_splits`
    with the config's n_train and data_seed), validating on `splits["val"]` every
    `eval_every` steps by solving every validation maze greedily. Training stops once
    `stop_at` of them are solved by a shortest path; if that never happens, the best
    validated weights are restored. The test split is never looked at.

    The looped encoder runs a random number of iterations per batch, from the longest path
    in the batch (fewer could not carry the end's news to the start) to the number of tiles
    (what solving uses): so that a settled answer stays settled, however long it runs on."""
    splits = splits or make_splits(n_train=config.n_train, seed=config.data_seed)
    seed_everything(config.seed)
    device = device or pick_device()
    model = build_model(config).to(device)
    gen = torch.Generator().manual_seed(config.seed)
    train = splits["train"]
    pixels, tokens = torch.from_numpy(train.mazes), solution_tensor(train.solutions)
    rows, cols = (s // TILE for s in train.mazes.shape[1:])

    def loss_fn(m, batch):
        iterations = None
        if config.model == "looped":
            longest = int((batch[1] != PAD).sum(1).max()) - 2  # moves in the batch's longest solution
            iterations = int(torch.randint(longest, rows * cols + 1, (), generator=gen))
        return maze_loss(m, batch, iterations)

    def evaluate(m):
        s = score(m, splits["val"])
        # one number to keep the best weights by: mazes not solved by a shortest path, then the token accuracy
        shortfall = (1 - s.shortest) + (1 - s.solved) + 0.01 * (1 - s.token_accuracy)
        return {"val_solved": s.solved, "val_shortest": s.shortest, "val_token_acc": s.token_accuracy,
                "val_shortfall": shortfall}

    def at_target(r):
        return config.stop_at is not None and r["val_shortest"] >= config.stop_at

    history = fit(model, minibatches(pixels, tokens, batch_size=config.batch_size, generator=gen), loss_fn,
                  config.train_options(), eval_fn=evaluate, callback=stop_when(at_target, callback), device=device,
                  progress=progress)
    return model, history


# ----------------------------------------------------------------------------- solving, and judging a model


class _Run(nn.Module):
    """`fn(model, *batch)` as a module, so that `infer` batches it on the model's device."""

    def __init__(self, model: MazeModel, fn: Callable[..., torch.Tensor]):
        super().__init__()
        self.model, self.fn = model, fn

    def forward(self, *batch: torch.Tensor) -> torch.Tensor:
        return self.fn(self.model, *batch)


def _greedy(model: MazeModel, pixels: torch.Tensor, iterations: int | None) -> torch.Tensor:
    """Greedy solutions for a batch of mazes: (batch, R*C + 1) long, padded with PAD."""
    memory = model.encode(pixels, iterations, keep=False)  # encode once, decode once per step
    exits_ = connections(pixels)
    max_len = memory.shape[0] * memory.shape[1] + 1  # START, a path through every tile at most once, STOP
    start = torch.full((len(pixels), 1), START, device=pixels.device)
    out = greedy_decode(lambda t: model.decode(t, memory)[0][:, -1], start, max_len=max_len, stop=STOP,
                        done=lambda t: invalid_last_move(t, memory.start, exits_))
    tokens = F.pad(out.tokens, (0, max_len - out.tokens.shape[1]))  # (batch, max_len)
    return tokens.masked_fill(torch.arange(max_len, device=pixels.device) >= out.lengths[:, None], PAD)


def solve(model: MazeModel, mazes, iterations: int | None = None, batch_size: int = 250) -> list[list[int]]:
    """The model's solution of each maze (pixels (n, R*TILE, C*TILE), all of one size, or one
    maze), decoded greedily: START, then the likeliest move after each prefix, until STOP or
    the first move the maze does not allow (kept, so that `check_solution` sees it), or a
    walk as long as the maze has tiles. `iterations`: the looped encoder's (default: tiles)."""
    pixels = np.asarray(mazes)
    one = pixels.ndim == 2
    pixels = np.stack([check_pixels(p) for p in (pixels[None] if one else pixels)])  # (n, R*TILE, C*TILE)
    out = infer(_Run(model, lambda m, x: _greedy(m, x, iterations)), pixels, batch_size=batch_size)
    solutions = [row[row != PAD].tolist() for row in out]
    return solutions[0] if one else solutions


def token_accuracy(model: MazeModel, mazes: MazeSet, iterations: int | None = None, batch_size: int = 250,
                   count_padding: bool = False) -> float:
    """Teacher-forced: the share of the solutions' real tokens (moves and STOP, never padding)
    that the model predicts from the true moves before them. count_padding=True scores it
    the post's way: padding counts as a STOP to predict, up to the longest solution."""
    tokens = solution_tensor(mazes.solutions)  # (n, T)
    predicted = infer(_Run(model, lambda m, x, t: m.decode(t, m.encode(x, iterations, keep=False))[0].argmax(-1)),
                      mazes.mazes, tokens[:, :-1].clamp(min=0), batch_size=batch_size)  # (n, T - 1)
    targets = tokens[:, 1:]
    if count_padding:
        return float((predicted == targets.clamp(min=0)).float().mean())
    real = targets != PAD
    return float((predicted == targets)[real].float().mean())


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


@dataclasses.dataclass(frozen=True)
class Scores:
    """How a model does on a set of mazes: greedy solving, every move checked, and teacher forcing."""

    n: int
    solved: float  # every move allowed, reaches the end and says STOP there
    shortest: float  # solved by a path as short as BFS's
    token_accuracy: float  # teacher-forced, over real tokens only
    by_length: tuple[tuple[int, int, float, float], ...]  # (shortest-path length, mazes, solved, shortest)


def score(model: MazeModel, mazes: MazeSet, iterations: int | None = None, batch_size: int = 250) -> Scores:
    """Solve every maze of `mazes` greedily and judge each solution with `check_solution`."""
    checks = [check_solution(m, s) for m, s in zip(mazes.mazes, solve(model, mazes.mazes, iterations, batch_size))]
    length = np.array([c.shortest for c in checks])
    solved = np.array([c.solved for c in checks])
    shortest = np.array([c.optimal for c in checks])
    by_length = tuple((int(k), int((length == k).sum()), float(solved[length == k].mean()),
                       float(shortest[length == k].mean())) for k in np.unique(length))
    return Scores(len(checks), float(solved.mean()), float(shortest.mean()),
                  token_accuracy(model, mazes, iterations, batch_size), by_length)


def length_table(scores: Scores) -> str:
    """The breakdown by shortest-path length, as text."""
    rows = [(k, n, pct(s, 1), pct(o, 1)) for k, n, s, o in scores.by_length]
    return format_table(rows, ("shortest path", "mazes", "solved", "by a shortest path"))


# ----------------------------------------------------------------------------- look inside

PLACES = ("the walker's tile", "the next tile", "beside the next tile", "elsewhere")


def _strongest_tiles(model: MazeModel, pixels: torch.Tensor, moves: torch.Tensor) -> torch.Tensor:
    """(batch, head, T): the tile each head of the last decoder layer attends to most, at each step."""
    _, _, cross = model.decode(moves, model.encode(pixels, keep=False))  # cross (batch, layer, head, T, tiles)
    return cross[:, -1].argmax(-1)


def where_heads_look(model: MazeModel, mazes: MazeSet, batch_size: int = 250) -> dict:
    """Teacher-forced along each stored solution: at every step that chooses a move (not the
    final STOP), where each cross-attention head of the last decoder layer puts its largest
    weight, as shares of steps over PLACES ("beside": a neighbour of the next tile other than
    the walker's own). Returns {"places": (head, 4) array, "near_next": (head,) share on the
    next tile or a neighbour of it (the walker's tile included), "any_head": the share of steps
    where at least one head does, "steps": how many steps were counted}."""
    tokens = solution_tensor(mazes.solutions)  # (n, T + 1)
    inputs = tokens[:, :-1].clamp(min=0)  # (n, T): START and the moves, padding read as STOP
    strongest = infer(_Run(model, _strongest_tiles), mazes.mazes, inputs, batch_size=batch_size)  # (n, head, T)
    rows, cols = (s // TILE for s in mazes.mazes.shape[1:])
    start = start_tiles(torch.from_numpy(mazes.mazes))  # (n, 2)
    here = walk_tiles(inputs, start, (rows, cols))  # (n, T, 2): where the walker stands after each token
    nxt = torch.roll(here, -1, dims=1)  # (n, T, 2): where the next move takes it
    moves = (tokens[:, 1:] != PAD) & (tokens[:, 1:] != STOP)  # (n, T): steps whose answer is a move
    looked = torch.stack((strongest // cols, strongest % cols), -1)  # (n, head, T, 2)
    dist_here = (looked - here[:, None]).abs().sum(-1)  # (n, head, T)
    dist_next = (looked - nxt[:, None]).abs().sum(-1)
    place = torch.full_like(dist_here, 3)
    place[dist_next == 1] = 2
    place[dist_next == 0] = 1
    place[dist_here == 0] = 0
    chosen = place.transpose(1, 2)[moves]  # (steps, head)
    shares = np.stack([(chosen == k).float().mean(0).numpy() for k in range(len(PLACES))], 1)  # (head, 4)
    near = chosen <= 2  # on the next tile or beside it; the walker's tile is beside it
    return {"places": shares, "near_next": near.float().mean(0).numpy(),
            "any_head": float(near.any(1).float().mean()), "steps": len(chosen)}


def without_cross_heads(model: MazeModel, heads: Sequence[int]) -> MazeModel:
    """A copy of `model` whose decoder cross-attention heads `heads` add nothing: their slice
    of the output projection is zeroed, in every decoder layer. An ablation."""
    n = model.config.n_heads
    heads = [int(h) for h in heads]
    if not heads or any(not 0 <= h < n for h in heads):
        raise ValueError(f"heads must be a non-empty list of heads in 0..{n - 1}, got {heads}")
    ablated = copy.deepcopy(model)
    d_head = model.config.d_model // n
    with torch.no_grad():
        for m in ablated.modules():
            if isinstance(m, DecoderBlock):
                for h in heads:
                    m.cross_attn.W_O.weight[:, h * d_head : (h + 1) * d_head] = 0
    return ablated


def solve_frames(model: MazeModel, maze) -> tuple[np.ndarray, list[str]]:
    """Frames for `toylib.plot.animate` of the model solving one maze greedily: per step, the
    maze with the walk so far (the walker's tile bright), then one panel per cross-attention
    head of the last decoder layer, its weight on each tile drawn over the maze's corridors.
    Returns (frames (steps, 1 + heads, H, W) in [0, 1], titles)."""
    pixels = check_pixels(maze)
    from_pixels(pixels)  # a maze, or a clear error
    moves = solve(model, pixels)  # START, ..., STOP or an invalid move
    tokens = torch.tensor([moves[:-1]])  # (1, T): the prefixes that chose each move
    x = torch.from_numpy(pixels[None])
    _, patterns = infer(model, x, tokens)
    cross = patterns.cross[0, -1].numpy()  # (head, T, tiles)
    rows, cols = (s // TILE for s in pixels.shape)
    open_ = (pixels > 0).astype(float)
    block = np.ones((TILE, TILE))
    tiles = _walk(MazeState.start_of(pixels), moves)[0]
    frames, titles = [], []
    for t, move in enumerate(moves[1:]):
        board = 0.3 * open_
        for r, c in tiles[: t + 1]:
            board[r * TILE + CENTRE, c * TILE + CENTRE] = 0.7
        r, c = tiles[min(t, len(tiles) - 1)]
        board[r * TILE : (r + 1) * TILE, c * TILE : (c + 1) * TILE] += 0.3 * open_[r * TILE : (r + 1) * TILE,
                                                                                   c * TILE : (c + 1) * TILE]
        heads = [0.15 * open_ + 0.85 * np.kron(a[t].reshape(rows, cols), block) for a in cross]
        frames.append(np.stack([np.clip(board, 0, 1), *heads]))
        titles.append(f"step {t + 1}: on tile {(r, c)}, the model says {MOVE_NAMES[move]}")
    return np.stack(frames), titles


# ----------------------------------------------------------------------------- a maze to edit

# What a cell of the editing board holds: a tile cell (even row and column) or the passage
# between two tiles (one odd coordinate); the model's path is drawn over both.
WALL, FLOOR, START_CELL, END_CELL, PATH, CORNER = range(6)
_CELL_STYLE = {WALL: ("", "#23262f"), FLOOR: ("", "#f2eee3"), START_CELL: ("S", "#17becf"),
               END_CELL: ("E", "#d62728"), PATH: ("", "#ff7f0e"), CORNER: ("", "#23262f")}


def edit_cells(layout: Layout) -> np.ndarray:
    """(2R - 1, 2C - 1) cells for the editing board: tiles at even (row, column), each FLOOR
    when it has an open arm (WALL when it has none), START_CELL or END_CELL; between two
    tiles, FLOOR when they connect; CORNER where four tiles meet."""
    rows, cols = layout.arms.shape[:2]
    cells = np.full((2 * rows - 1, 2 * cols - 1), CORNER)
    ex = exits(layout.arms)
    cells[::2, ::2] = np.where(layout.arms.any(-1), FLOOR, WALL)
    cells[1::2, ::2] = np.where(ex[1:, :, 0], FLOOR, WALL)  # between (r, c) and (r + 1, c)
    cells[::2, 1::2] = np.where(ex[:, 1:, 3], FLOOR, WALL)  # between (r, c) and (r, c + 1)
    cells[2 * layout.start[0], 2 * layout.start[1]] = START_CELL
    cells[2 * layout.end[0], 2 * layout.end[1]] = END_CELL
    return cells


def from_edit_cells(cells: np.ndarray) -> Layout:
    """The maze an editing board shows: an arm is open where its passage is (arms pointing
    off the grid stay shut), so two tiles connect exactly where the board says."""
    cells = np.asarray(cells)
    if cells.ndim != 2 or cells.shape[0] % 2 == 0 or cells.shape[1] % 2 == 0:
        raise ValueError(f"an editing board is (2R - 1, 2C - 1) cells, got shape {cells.shape}")
    rows, cols = (cells.shape[0] + 1) // 2, (cells.shape[1] + 1) // 2
    down = cells[1::2, ::2] != WALL  # (R - 1, C): passages between (r, c) and (r + 1, c)
    right = cells[::2, 1::2] != WALL  # (R, C - 1)
    arms = np.zeros((rows, cols, 4), bool)
    arms[1:, :, 0] = arms[:-1, :, 2] = down
    arms[:, :-1, 1] = arms[:, 1:, 3] = right
    marks = {what: [tuple(int(x) // 2 for x in ij) for ij in np.argwhere(cells == v)]
             for what, v in (("start", START_CELL), ("end", END_CELL))}
    for what, where in marks.items():
        if len(where) != 1:
            raise ValueError(f"an editing board has exactly one {what}, found {len(where)}")
    return Layout(arms, marks["start"][0], marks["end"][0])


def maze_widget(model: MazeModel, maze=None, seed: int = 0):
    """A maze to edit, solved by the model after every change. Click a passage between two
    tiles to open or shut it; choose "move the start" or "move the end" and click a tile.
    The model's path is drawn in orange, and the line below says whether it is a shortest
    path (by BFS). Needs a running kernel (Jupyter, Colab)."""
    import ipywidgets as w

    from toylib.widgets import BoardGrid

    rng = np.random.default_rng(seed)
    layout = from_pixels(maze if maze is not None else random_maze(rng).maze)
    board = BoardGrid(edit_cells(layout), style=lambda v: _CELL_STYLE[v], cell_px=26)
    mode = w.ToggleButtons(options=["open or shut a passage", "move the start", "move the end"])
    new = w.Button(description="another maze")
    status = w.HTML()
    state = {"layout": layout}

    def show():
        lay = state["layout"]
        cells, pixels = edit_cells(lay), to_pixels(*lay)
        check = check_solution(pixels, solve(model, pixels))
        for (r0, c0), (r1, c1) in zip(check.tiles, check.tiles[1:]):
            cells[r0 + r1, c0 + c1] = PATH  # the passage between two tiles of the walk
            if (r1, c1) != lay.end:
                cells[2 * r1, 2 * c1] = PATH
        board.set(cells)
        board.enable(cells != CORNER)
        best = "no path at all" if check.shortest is None else f"a shortest path has {check.shortest} moves"
        verdict = "solved by a shortest path" if check.optimal else "solved" if check.solved else "not solved"
        status.value = f"the model: {verdict} in {check.length} moves; {best}"

    def clicked(r, c):
        cells = edit_cells(state["layout"])
        if mode.value == "open or shut a passage":
            if r % 2 == c % 2:
                return  # a tile or a corner: nothing to open
            cells[r, c] = WALL if cells[r, c] == FLOOR else FLOOR
        elif r % 2 == 0 and c % 2 == 0 and cells[r, c] not in (START_CELL, END_CELL):
            mark = START_CELL if mode.value == "move the start" else END_CELL
            cells[cells == mark] = FLOOR
            cells[r, c] = mark
        else:
            return
        state["layout"] = from_edit_cells(cells)
        show()

    def another(_):
        state["layout"] = from_pixels(random_maze(rng).maze)
        show()

    board.on_click = clicked
    new.on_click(another)
    show()
    return w.VBox([w.HBox([mode, new]), board.widget, status])


# ----------------------------------------------------------------------------- the chapter's targets

# Mazes the model never trained on, of other sizes and with longer paths (see `make_mazes`).
BEYOND = {
    "6x6": dict(size=6),
    "7x7": dict(size=7),
    "8x8": dict(size=8),
    "8x8, shortest paths of 19 to 40": dict(size=8, path_lengths=(19, 40), min_moves=19),
}


def beyond_sets(n: int = 500, seed: int = 1) -> dict[str, MazeSet]:
    """`n` mazes of each kind in BEYOND. (None can be a training maze: those are all 5x5.)
    500 of each, not 1,000: solving an 8x8 maze costs about 5 times a 5x5 one, and the
    chapter must run in 4 minutes."""
    return {name: make_mazes(n, seed=seed, **kwargs) for name, kwargs in BEYOND.items()}


def maze_targets(test: Scores, train_seconds: float, beyond: dict[str, Scores] | None = None,
                 time_limit: float = 120.0) -> list[Target]:
    """The chapter's summary: the targets on the test mazes, the mazes beyond them, and what was measured."""
    targets = [
        Target(f"solved, {test.n:,} test mazes (greedy, every move checked)", ">= 99.5 %", pct(test.solved),
               test.solved >= 0.995),
        Target("solved by a shortest path", ">= 99 %", pct(test.shortest), test.shortest >= 0.99),
        Target("token accuracy (teacher-forced, real tokens only)", "-", pct(test.token_accuracy), None),
    ]
    for name, s in (beyond or {}).items():
        goal = name == "7x7"  # the goal; the others are reported as measured
        targets.append(Target(f"solved, {s.n:,} mazes {name} (trained on 5x5)", ">= 95 %" if goal else "-",
                              f"{pct(s.solved)} ({pct(s.shortest)} shortest)", s.solved >= 0.95 if goal else None))
    targets.append(Target("training time", f"<= {time_limit / 60:.0f} min", f"{train_seconds:.0f} s",
                          train_seconds <= time_limit, machine=True))
    return targets


# ----------------------------------------------------------------------------- command line


def _train(config: MazeConfig, device, progress: bool, args) -> tuple[MazeModel, History, dict]:
    splits = make_splits(n_train=config.n_train, seed=config.data_seed)
    model, history = train_maze(config, splits, device, progress=progress)
    return model, history, {"splits": splits}


def _measure(model: MazeModel, config: MazeConfig, seconds: float, info: dict, args) -> list[Target]:
    splits = info.get("splits") or make_splits(n_train=config.n_train, seed=config.data_seed)
    test = score(model, splits["test"])
    beyond = {name: score(model, s) for name, s in beyond_sets().items()}
    if args is not None:
        print(length_table(test))
    return maze_targets(test, seconds, beyond)


def _extra_arguments(p) -> None:
    p.add_argument("--post", action="store_true", help="train the post's model, its way, instead")


_OPTIONS = (cli.Option("--steps", "steps", "most training steps"), cli.Option("--data-seed", "data_seed", "which mazes"))
_ABOUT = "A transformer learns to walk mazes by a shortest path, and is tested on bigger mazes than it trained on."
CHAPTER = cli.Chapter("maze", _ABOUT, MazeConfig, build_model, _train, _measure, options=_OPTIONS,
                      extra_arguments=_extra_arguments,
                      base_config=lambda args: POST_CONFIG if args.post else MazeConfig())

main = cli.entry_point(CHAPTER)  # python -m toylib.<chapter>, and its console script


if __name__ == "__main__":
    main()
