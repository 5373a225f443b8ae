"""The maze world: tiles and their pixels, moves, the ground truth (BFS's shortest paths and a
move-by-move check of any solution), the post's generator, and drawing a maze. The chapter's
map is in `toylib/maze/__init__.py`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch  # only so that `exits` also takes a batch of tensors
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap

from toylib.search import bfs


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


def follow_moves(state: MazeState, moves: list[int]) -> tuple[list[tuple[int, int]], int | None, bool]:
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
    tiles, first_invalid, stopped = follow_moves(state, check_moves(moves))
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


def check_lengths(path_lengths: tuple[int, int]) -> tuple[int, int]:
    """A range of walk lengths (shortest, longest), checked (1 <= shortest <= longest), as ints."""
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
    lo, hi = check_lengths(path_lengths)
    if not 0.0 <= p_arm <= 1.0:
        raise ValueError(f"p_arm is a probability, got {p_arm}")
    start, walk = random_walk(rng, shape, int(rng.integers(lo, hi + 1)))
    arms = rng.random((*shape, 4)) < p_arm  # (R, C, 4)
    arms, end = open_path(arms, start, walk)
    layout = Layout(arms, start, end)
    best = shortest_path(layout)  # never None: the walk joins start and end
    moves = best if len(best) < len(walk) else walk
    return Sample(to_pixels(*layout), [START, *moves, STOP])


def spanning_tree_maze(rng: np.random.Generator, size: int | tuple[int, int] = 8,
                       carve: str = "backtracker", loops: float = 0.0) -> Sample:
    """One maze with no loops (or with `loops`), every draw from `rng`: passages that form a
    spanning tree of the grid, so that every tile is reachable and one path joins any two; then
    a start and an end, two distinct random tiles, and a shortest path between them. Nothing
    here is the post's: other kinds of maze to test on. `carve` is how the tree is drawn:
    - "backtracker": a random depth-first search (from a random tile, step to a random
      unvisited neighbour, opening the passage; back up when there is none): long winding
      corridors, few branch points (at 32x32 the path is often hundreds of moves);
    - "kruskal": Kruskal's algorithm (`kruskal_arms`): many short dead ends.
    `loops`: the share of the walls between tiles left standing by the tree that are knocked
    through afterwards, each by a draw of its own: 0.1 makes about one loop per ten tiles."""
    shape = grid_shape(size)
    if carve not in CARVERS:
        raise ValueError(f"carve must be one of {tuple(CARVERS)}, got {carve!r}")
    if not 0.0 <= loops <= 1.0:
        raise ValueError(f"loops is a share of the walls, from 0 to 1, got {loops}")
    arms = CARVERS[carve](rng, shape)  # (R, C, 4)
    if loops:
        # a wall between two tiles is arm DOWN or RIGHT of the tile above or to its left
        for k, (dr, dc) in ((1, (0, 1)), (2, (1, 0))):
            inner = arms[:shape[0] - dr, :shape[1] - dc]  # tiles with a neighbour that way
            knock = ~inner[..., k] & (rng.random(inner.shape[:2]) < loops)
            inner[..., k] |= knock
            arms[dr:, dc:, (k + 2) % 4] |= knock  # the arm facing it
    start, end = (divmod(int(t), shape[1]) for t in rng.choice(shape[0] * shape[1], 2, replace=False))
    layout = Layout(arms, start, end)
    return Sample(to_pixels(*layout), [START, *shortest_path(layout), STOP])


def backtracker_arms(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """(R, C, 4) arms of a spanning tree carved by a random depth-first search."""
    rows, cols = shape
    arms = np.zeros((*shape, 4), bool)  # (R, C, 4)
    tile = (int(rng.integers(rows)), int(rng.integers(cols)))
    visited, stack = {tile}, [tile]
    while stack:
        r, c = stack[-1]
        options = [(k, (r + dr, c + dc)) for k, (dr, dc) in enumerate(STEP[m] for m in DIRECTIONS)
                   if 0 <= r + dr < rows and 0 <= c + dc < cols and (r + dr, c + dc) not in visited]
        if not options:
            stack.pop()  # a dead end: back up to the last tile with a way on
            continue
        k, nxt = options[int(rng.integers(len(options)))]
        arms[r, c, k] = arms[(*nxt, (k + 2) % 4)] = True  # arm k and the one facing it
        visited.add(nxt)
        stack.append(nxt)
    return arms


def kruskal_arms(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """(R, C, 4) arms of a spanning tree by Kruskal's algorithm: every wall between two tiles,
    in a random order, comes down when the tiles on its two sides are not yet joined (a
    union-find keeps which tiles are)."""
    rows, cols = shape
    arms = np.zeros((*shape, 4), bool)  # (R, C, 4)
    tiles = np.arange(rows * cols).reshape(shape)
    # each wall as (tile, tile beyond it, arm k of the first): RIGHT (k=1), then DOWN (k=2)
    walls = [(a, b, 1) for a, b in zip(tiles[:, :-1].ravel(), tiles[:, 1:].ravel())]
    walls += [(a, b, 2) for a, b in zip(tiles[:-1].ravel(), tiles[1:].ravel())]
    parent = list(range(rows * cols))

    def root(t: int) -> int:
        while parent[t] != t:
            parent[t] = parent[parent[t]]  # halve the path on the way up
            t = parent[t]
        return t

    for i in rng.permutation(len(walls)):
        a, b, k = walls[i]
        ra, rb = root(int(a)), root(int(b))
        if ra != rb:
            parent[ra] = rb
            arms[(*divmod(int(a), cols), k)] = arms[(*divmod(int(b), cols), (k + 2) % 4)] = True
    return arms


CARVERS = {"backtracker": backtracker_arms, "kruskal": kruskal_arms}


# The start is cyan as in the post; the end is red rather than the post's black, which is hard
# to tell from a wall.
MAZE_COLOURS = ListedColormap(["#23262f", "#f2eee3", "#17becf", "#d62728"])


def draw_maze(ax: Axes, maze, moves: Sequence[int] | None = None, dots: bool = True) -> Axes:
    """Draw a maze from its pixels on `ax` and, given `moves` (a leading START optional), the
    path they take through the tile centres, up to where it stops, with a dot on each tile
    unless `dots` is False (a long path reads better as a line); a first invalid move is
    marked with a cross where it hits the wall."""
    state = MazeState.start_of(maze)
    ax.imshow(check_pixels(maze), cmap=MAZE_COLOURS, vmin=0, vmax=3, interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    if moves is None:
        return ax
    moves = check_moves(moves)
    tiles, first_invalid, _ = follow_moves(state, moves)
    rows, cols = (np.array(x) * TILE + CENTRE for x in zip(*tiles))
    # translucent, so that the start and end marks show through; in pieces of under 128
    # points, because Matplotlib simplifies a longer line, dropping corners a zoom would show
    for i in range(0, max(len(cols) - 1, 1), 100):
        ax.plot(cols[i:i + 101], rows[i:i + 101], color="#ff7f0e", lw=2, alpha=0.7,
                marker="o" if dots else None, ms=3, solid_capstyle="round")
    if first_invalid is not None:
        dr, dc = STEP.get(moves[first_invalid], (0, 0))  # START or a move after STOP: at the last tile
        ax.plot(cols[-1] + dc * TILE / 2, rows[-1] + dr * TILE / 2, "x", color="#d62728", ms=10, mew=3)
    return ax
