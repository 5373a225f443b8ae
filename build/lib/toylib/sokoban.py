"""Sokoban with one box: the world, its ground truth, the data, and a transformer policy
that plays it.

Retells T. A. Wheeler, "A Transformer Sokoban Policy" and "Transformers - How and Why They
Work" (2024). A board is an 8x8 grid of walls and floor with one goal, one box and the player.
The player moves up, down, left or right, pushing the box when it stands in the way, and may
undo a move; the board is solved when the box stands on the goal. The policy reads each board
as 5 channels (wall, floor, goal, player, box), one token per board, and a causal transformer
over the goal and the boards so far learns from shortest solutions which move to make and how
many moves are left ("nsteps"), or that no moves can solve the board at all.

Ground truth is `toylib.search`. With one box a board's states are (box square, player square)
pairs, about a thousand, so breadth-first search answers exhaustively, never with a time-out,
whether a board can be solved and in how few moves. Run backwards from the solved states, one
BFS gives every state's distance to the goal, and so the set of moves that keep a shortest
solution. A* with a push-distance heuristic, the post's solver, is the core's `astar`. Solving
with the policy goes through the core's `greedy_decode` and `beam_search` (see `Walks`).

Unlike the original, every board comes from one seeded generator, solutions are shortest in
moves (the post's A* minimised pushes), the nsteps target counts the moves *left* (the post's
first code gave the whole solution's length at every step), no held-out board has a rotated or
mirrored twin among the training boards, training stops on validation boards of its own, and
the policy learns every optimal move of a board, not the one its solver happened to take.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from matplotlib import animation
from matplotlib.axes import Axes
from torch import nn

from toylib import cli
from toylib.attention import Encoder
from toylib.decode import beam_search, greedy_decode
from toylib.device import pick_device, seed_everything
from toylib.search import astar, bfs, distances
from toylib.targets import Target, format_table, pct
from toylib.train import History, TrainOptions, fit, side_by_side

# ----------------------------------------------------------------------------- the board

SIZE = 8  # the policy's boards are SIZE x SIZE
UP, DOWN, LEFT, RIGHT, UNDO = range(5)
MOVES = (UP, DOWN, LEFT, RIGHT)  # UNDO is an action of the environment, not a move on a board
ACTION_NAMES = ("up", "down", "left", "right", "undo")
STEP = ((-1, 0), (1, 0), (0, -1), (0, 1))  # (rows, columns) each move goes
OPPOSITE = (DOWN, UP, RIGHT, LEFT)
CHANNELS = ("wall", "floor", "goal", "player", "box")  # the policy's input planes, in this order

# XSB, the plain-text format of Sokoban levels. '-' and '_' are other files' spellings of floor.
WALL, PLAYER, PLAYER_ON_GOAL, BOX, BOX_ON_GOAL, GOAL, FLOOR = "#@+$*. "
XSB_CHARS = "#@+$*. -_"


@functools.lru_cache(maxsize=None)
def _neighbours(shape: tuple[int, int]) -> tuple[tuple[int, ...], ...]:
    """For each square, the square each move in MOVES leads to, or -1 past the edge. Squares
    are numbered row * columns + column."""
    rows, cols = shape
    return tuple(
        tuple((r + dr) * cols + c + dc if 0 <= r + dr < rows and 0 <= c + dc < cols else -1 for dr, dc in STEP)
        for r in range(rows)
        for c in range(cols)
    )


@dataclasses.dataclass(frozen=True)
class Board:
    """One position, immutable and hashable: a `toylib.search.State` whose actions are MOVES.

    Squares are numbered row * columns + column. `walls` has one byte per square, row by row,
    1 for a wall and 0 for floor (bytes, so that a board hashes). A move into a wall, past the
    edge, or that would push the box into a wall or past the edge, is not legal; with one box
    there is never a second box to push against. Build boards with `from_xsb`, `from_channels`
    or `random_board`; the constructor checks what it is given.
    """

    walls: bytes = dataclasses.field(repr=False)
    goal: int
    box: int
    player: int
    shape: tuple[int, int] = (SIZE, SIZE)

    def __post_init__(self):
        shape = self.shape
        if not (isinstance(shape, tuple) and len(shape) == 2 and all(isinstance(n, int) and n > 0 for n in shape)):
            raise ValueError(f"shape is (rows, columns), two positive ints, got {shape!r}")
        n = shape[0] * shape[1]
        if not isinstance(self.walls, bytes) or len(self.walls) != n or self.walls.translate(None, b"\x00\x01"):
            raise ValueError(f"walls are {n} bytes, one per square of a {shape[0]}x{shape[1]} board, each 0 or 1")
        for name in ("goal", "box", "player"):
            square = getattr(self, name)
            if not isinstance(square, (int, np.integer)) or not 0 <= square < n:
                raise ValueError(f"the {name} is a square 0..{n - 1}, got {square!r}")
            object.__setattr__(self, name, int(square))  # a numpy int would hash alike, but print oddly
            if self.walls[square]:
                raise ValueError(f"the {name} is on a wall, at (row, column) {divmod(square, shape[1])}")
        if self.box == self.player:
            raise ValueError(f"the box and the player are on the same square {divmod(self.box, shape[1])}")

    def _moved(self, box: int, player: int) -> Board:
        """This board with the box and player elsewhere. Skips `__post_init__`: a legal move keeps
        a board valid, and BFS makes thousands of boards."""
        board = object.__new__(Board)
        board.__dict__.update(walls=self.walls, goal=self.goal, box=box, player=player, shape=self.shape)
        return board

    def _after(self, move: int) -> tuple[int, int] | None:
        """(box, player) after `move`, or None when a wall or the edge stops the player or the box."""
        step = _neighbours(self.shape)
        player = step[self.player][move]
        if player < 0 or self.walls[player]:
            return None
        box = self.box
        if player == box:  # a push: the box goes one square on, unless blocked
            box = step[box][move]
            if box < 0 or self.walls[box]:
                return None
        return box, player

    def legal_actions(self) -> list[int]:
        """The moves that change the board, in MOVES order (BFS breaks ties in this order)."""
        return [m for m in MOVES if self._after(m) is not None]

    def apply_action(self, action: int) -> Board:
        after = self._after(action) if action in MOVES else None
        if after is None:
            raise ValueError(f"{ACTION_NAMES[action] if action in MOVES else repr(action)} is not a legal move "
                             f"here; the legal moves are {[ACTION_NAMES[m] for m in self.legal_actions()]}")
        return self._moved(*after)

    def is_goal(self) -> bool:
        return self.box == self.goal

    @property
    def grid(self) -> np.ndarray:
        """The walls as a (rows, columns) bool array."""
        return np.frombuffer(self.walls, np.uint8).reshape(self.shape).astype(bool)

    def __str__(self) -> str:
        return to_xsb(self)


# ----------------------------------------------------------------------------- reading and writing boards


def _check_shape(shape) -> tuple[int, int] | None:
    if shape is None:
        return None
    if not (len(shape) == 2 and all(isinstance(n, (int, np.integer)) and n > 0 for n in shape)):
        raise ValueError(f"shape is (rows, columns), or None for any size; got {shape!r}")
    return int(shape[0]), int(shape[1])


def from_xsb(text: str, shape: tuple[int, int] | None = (SIZE, SIZE)) -> Board:
    """Read a level in XSB: '#' wall, '@' player, '+' player on the goal, '$' box, '*' box on the
    goal, '.' goal, ' ' (or '-', '_') floor, one line per row. Blank lines before and after are
    ignored, and short lines end in floor (XSB files often trim trailing spaces); squares
    outside the level's walls are floor that the player cannot reach. The board must have
    `shape` (the policy's 8x8 by default; None for any size), exactly one player, one box and
    one goal."""
    if not isinstance(text, str):
        raise ValueError(f"an XSB level is a string, got {type(text).__name__}")
    want = _check_shape(shape)
    lines = [line.rstrip("\r") for line in text.split("\n")]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise ValueError("the XSB text has no board in it")
    unknown = sorted(set("".join(lines)) - set(XSB_CHARS))
    if unknown:
        raise ValueError(f"unknown character(s) {unknown} in the XSB text; a level is written with {XSB_CHARS!r}")
    rows, cols = len(lines), max(len(line) for line in lines)
    if want is not None and (rows, cols) != want:
        raise ValueError(f"the board must be {want[0]}x{want[1]}, got {rows}x{cols} (rows x columns)")
    cells = "".join(line.ljust(cols) for line in lines)

    def where(chars: str, name: str) -> int:
        found = [i for i, ch in enumerate(cells) if ch in chars]
        if len(found) != 1:
            at = [divmod(i, cols) for i in found]
            raise ValueError(f"a board has exactly one {name} ({' or '.join(map(repr, chars))}), found {len(found)}"
                             + (f" at (row, column) {at}" if found else ""))
        return found[0]

    player = where(PLAYER + PLAYER_ON_GOAL, "player")
    box = where(BOX + BOX_ON_GOAL, "box")
    goal = where(GOAL + PLAYER_ON_GOAL + BOX_ON_GOAL, "goal")
    return Board(bytes(ch == WALL for ch in cells), goal, box, player, (rows, cols))


def to_xsb(board: Board) -> str:
    """The board in XSB, one line per row (no trailing newline): `from_xsb` reads it back."""
    cells = [WALL if wall else FLOOR for wall in board.walls]
    cells[board.goal] = GOAL
    cells[board.box] = BOX_ON_GOAL if board.box == board.goal else BOX
    cells[board.player] = PLAYER_ON_GOAL if board.player == board.goal else PLAYER
    cols = board.shape[1]
    return "\n".join("".join(cells[i : i + cols]) for i in range(0, len(cells), cols))


def encode(walls, goal, box, player) -> np.ndarray:
    """Boards as the policy reads them: (..., 5, rows, cols) uint8 planes, in CHANNELS order.

    walls (..., rows, cols) bool; goal, box, player (...) squares, broadcast against each
    other and against walls' leading dimensions. A square of -1 marks nothing: the goal board
    has no player, and padding has neither box nor player."""
    walls = np.asarray(walls, bool)
    squares = np.arange(walls.shape[-2] * walls.shape[-1]).reshape(walls.shape[-2:])  # (rows, cols)

    def on(square) -> np.ndarray:
        return squares == np.asarray(square)[..., None, None]  # (..., rows, cols)

    planes = np.broadcast_arrays(walls, ~walls, on(goal), on(player), on(box))
    return np.stack(planes, axis=-3).astype(np.uint8)  # (..., 5, rows, cols)


def to_channels(board: Board) -> np.ndarray:
    """(5, rows, cols) uint8: the board's wall, floor, goal, player and box planes."""
    return encode(board.grid, board.goal, board.box, board.player)


def from_channels(channels) -> Board:
    """Read a board back from its planes (5, rows, cols) of 0/1, in CHANNELS order. Unlike XSB,
    planes can say impossible things (a box on a wall), so this checks each of them."""
    a = np.asarray(channels)
    if a.ndim != 3 or a.shape[0] != len(CHANNELS) or a.shape[1] * a.shape[2] == 0:
        raise ValueError(f"channels are (5, rows, cols) planes {CHANNELS}, got shape {a.shape}")
    if a.dtype.kind not in "biuf" or not np.isin(a, (0, 1)).all():
        raise ValueError("channels hold 0 or 1 only")
    wall, floor, goal, player, box = a.astype(bool)
    if (wall == floor).any():
        r, c = np.argwhere(wall == floor)[0]
        raise ValueError(f"every square is either wall or floor; square ({r}, {c}) is "
                         f"{'both' if wall[r, c] else 'neither'}")
    squares = {}
    for name, plane in (("goal", goal), ("player", player), ("box", box)):
        if plane.sum() != 1:
            raise ValueError(f"a board has exactly one {name}, found {int(plane.sum())}")
        squares[name] = int(np.flatnonzero(plane)[0])
        if wall.flat[squares[name]]:
            raise ValueError(f"the {name} is on a wall, at (row, column) {divmod(squares[name], wall.shape[1])}")
    if squares["player"] == squares["box"]:
        raise ValueError("the player and the box are on the same square")
    return Board(wall.astype(np.uint8).tobytes(), squares["goal"], squares["box"], squares["player"], wall.shape)


# ----------------------------------------------------------------------------- ground truth


def solve(board: Board) -> list[int] | None:
    """A shortest list of moves that puts the box on the goal ([] when it is there), or None
    when no moves can: BFS over the board's (box, player) states, exhaustive."""
    path = bfs(board)
    return None if path is None else list(path.actions)


@dataclasses.dataclass(frozen=True)
class _Backward:
    """A state of the game played backwards: each action takes back a move, so the states that
    `distances` reaches from the solved ones are those that can be solved, at their distance."""

    box: int
    player: int
    board: Board = dataclasses.field(compare=False, repr=False)  # only its walls and shape are read

    def legal_actions(self) -> list[tuple[int, bool]]:
        """(move, pushed): a move that can have led here, and whether it pushed the box."""
        step, walls, found = _neighbours(self.board.shape), self.board.walls, []
        for move in MOVES:
            before = step[self.player][OPPOSITE[move]]  # where the player stood before the move
            if before < 0 or walls[before] or before == self.box:
                continue
            found.append((move, False))
            if step[self.player][move] == self.box:  # the box is just ahead: the move may have pushed it
                found.append((move, True))
        return found

    def apply_action(self, action: tuple[int, bool]) -> _Backward:
        move, pushed = action
        before = _neighbours(self.board.shape)[self.player][OPPOSITE[move]]
        return _Backward(self.player if pushed else self.box, before, self.board)

    def is_goal(self) -> bool:
        return False


class _Solved:
    """The backward search's start: one action away from every solved state (the box on the
    goal, the player on any other floor square), so that one BFS starts from all of them."""

    def __init__(self, board: Board):
        self.states = [_Backward(board.goal, p, board) for p in range(len(board.walls))
                       if not board.walls[p] and p != board.goal]

    def legal_actions(self) -> range:
        return range(len(self.states))

    def apply_action(self, i: int) -> _Backward:
        return self.states[i]

    def is_goal(self) -> bool:
        return False


def moves_to_goal(board: Board) -> dict[tuple[int, int], int]:
    """{(box, player): the fewest moves that put the box on the goal}, for every placement of
    the box and player on `board`'s walls and goal from which that can be done; a placement
    missing from it is dead. One backward BFS answers for the whole board at once."""
    depth = distances(_Solved(board))
    return {(s.box, s.player): d - 1 for s, d in depth.items() if d > 0}  # d - 1: the start is one step before


def optimal_moves(board: Board, table: dict[tuple[int, int], int] | None = None) -> list[int]:
    """The moves that keep a shortest solution: each leads one move nearer the goal. Empty when
    the board is solved or cannot be solved. `table` is `moves_to_goal(board)`, if at hand."""
    table = moves_to_goal(board) if table is None else table
    left = table.get((board.box, board.player))
    if not left:  # None: dead; 0: solved
        return []
    return [m for m in MOVES if (after := board._after(m)) is not None and table.get(after) == left - 1]


@dataclasses.dataclass(frozen=True)
class _BoxBack:
    """The box alone, taken back from the goal one push at a time: it came to `square` by a push
    from the square behind, with room for the player behind that. The player's own walk is
    ignored, so the number of pushes found never exceeds the moves a real solution needs."""

    square: int
    walls: bytes = dataclasses.field(compare=False, repr=False)
    shape: tuple[int, int] = dataclasses.field(compare=False, repr=False)

    def _behind(self, move: int) -> tuple[int, int]:
        step = _neighbours(self.shape)
        box = step[self.square][OPPOSITE[move]]
        return box, (step[box][OPPOSITE[move]] if box >= 0 else -1)

    def legal_actions(self) -> list[int]:
        return [m for m in MOVES if all(s >= 0 and not self.walls[s] for s in self._behind(m))]

    def apply_action(self, move: int) -> _BoxBack:
        return _BoxBack(self._behind(move)[0], self.walls, self.shape)

    def is_goal(self) -> bool:
        return False


@functools.lru_cache(maxsize=4096)
def _pushes_to_goal(walls: bytes, goal: int, shape: tuple[int, int]) -> dict[int, int]:
    return {s.square: d for s, d in distances(_BoxBack(goal, walls, shape)).items()}


def push_distance(board: Board) -> float:
    """The fewest pushes that could bring the box to the goal if the player could always get
    behind it; inf when none can. Every push is a move, so it never overestimates the moves
    left: an admissible heuristic for A*."""
    return _pushes_to_goal(board.walls, board.goal, board.shape).get(board.box, math.inf)


def solve_astar(board: Board) -> list[int] | None:
    """As `solve`, by the core's A* with `push_distance`: as short, after fewer states."""
    path = astar(board, push_distance)
    return None if path is None else list(path.actions)


# ----------------------------------------------------------------------------- symmetries

N_SYMMETRIES = 8  # 4 quarter turns, each with and without a transpose


def _turn(grid: np.ndarray, s: int) -> np.ndarray:
    """Symmetry s of a grid, or of a stack of grids on its last two axes: transposed when s >= 4,
    then turned a quarter counter-clockwise s % 4 times."""
    if s >= 4:
        grid = np.swapaxes(grid, -1, -2)
    return np.rot90(grid, s % 4, axes=(-2, -1))


@functools.lru_cache(maxsize=None)
def _square_map(shape: tuple[int, int], s: int) -> tuple[tuple[int, ...], tuple[int, int]]:
    """(where symmetry s takes each square of a board of `shape`, the shape it becomes)."""
    came_from = _turn(np.arange(shape[0] * shape[1]).reshape(shape), s)  # [r, c]: the square that lands on (r, c)
    where = np.empty(came_from.size, int)
    where[came_from.ravel()] = np.arange(came_from.size)
    return tuple(int(x) for x in where), came_from.shape


@functools.lru_cache(maxsize=None)
def move_map(s: int) -> tuple[int, ...]:
    """For each action, the action it becomes under symmetry s (UNDO stays UNDO). Worked out by
    sending the centre of a 3x3 grid and its neighbours through the symmetry."""
    if not isinstance(s, (int, np.integer)) or not 0 <= s < N_SYMMETRIES:
        raise ValueError(f"a symmetry is 0..{N_SYMMETRIES - 1}, got {s!r}")
    where, _ = _square_map((3, 3), s)
    by_offset = {3 * dr + dc: m for m, (dr, dc) in zip(MOVES, STEP)}
    return tuple(by_offset[where[4 + 3 * dr + dc] - where[4]] for dr, dc in STEP) + (UNDO,)


def transform(board: Board, s: int) -> Board:
    """Symmetry s (0..7; 0 is the board itself) of a board: apply `move_map(s)` to its moves."""
    move_map(s)  # checks s
    where, shape = _square_map(board.shape, s)
    walls = _turn(board.grid, s).astype(np.uint8).tobytes()
    return Board(walls, where[board.goal], where[board.box], where[board.player], shape)


def canonical_key(board: Board) -> tuple:
    """The same for a board and its 8 symmetric variants, different for any other board."""
    variants = (transform(board, s) for s in range(N_SYMMETRIES))
    return min((b.shape, b.walls, b.goal, b.box, b.player) for b in variants)


# ----------------------------------------------------------------------------- the generator


def random_rooms(rng: np.random.Generator, size: int = SIZE,
                 room_areas: Sequence[int] = (10, 2)) -> list[tuple[int, int, int, int]]:
    """The post's rooms: for each minimum area, a rectangle (top, bottom, left, right, inclusive)
    with corners drawn inside the border wall until its area is at least that."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy Generator (np.random.default_rng(seed)), got {type(rng).__name__}")
    if not isinstance(size, (int, np.integer)) or size < 4:
        raise ValueError(f"size must be an int >= 4 (a border wall round room for 3 squares), got {size!r}")
    inner = (size - 2) ** 2
    if len(room_areas) == 0 or not all(isinstance(a, (int, np.integer)) and 1 <= a <= inner for a in room_areas) \
            or max(room_areas) < 3:
        raise ValueError(f"room_areas are minimum areas 1..{inner} (inside the border of a {size}x{size} board), at "
                         f"least one of them 3 or more for the goal, box and player; got {room_areas!r}")
    rooms = []
    for area in room_areas:
        while True:
            top, bottom = sorted(int(x) for x in rng.integers(1, size - 1, 2))
            left, right = sorted(int(x) for x in rng.integers(1, size - 1, 2))
            if (bottom - top + 1) * (right - left + 1) >= area:
                break
        rooms.append((top, bottom, left, right))
    return rooms


def random_board(
    rng: np.random.Generator,
    size: int = SIZE,
    room_areas: Sequence[int] = (10, 2),
    n_walls: tuple[int, int] = (0, 5),
) -> Board:
    """One board as the post makes it, every draw from `rng`: all walls,
    then `random_rooms` carved as floor; the goal, the box (off the goal)
    and the player (off the box) on random floor squares; then between
    n_walls[0] and n_walls[1] walls speckled on the other floor. The
    defaults are the original's. Most boards it makes cannot be solved."""
    lo, hi = n_walls
    if not 0 <= lo <= hi:
        raise ValueError("n_walls is a range (fewest, most) of walls to "
                         f"speckle, 0 <= fewest <= most; got {n_walls!r}")
    walls = np.ones((size, size), bool)
    for top, bottom, left, right in random_rooms(rng, size, room_areas):
        walls[top : bottom + 1, left : right + 1] = False
    floor = np.flatnonzero(~walls)

    def pick(squares: np.ndarray) -> int:
        # rng.integers, not rng.choice: a board is drawn 25,000 times
        return int(squares[rng.integers(squares.size)])

    goal = pick(floor)
    box = pick(floor[floor != goal])
    player = pick(floor[floor != box])  # the player may stand on the goal
    free = floor[(floor != goal) & (floor != box) & (floor != player)]
    n_speckles = rng.integers(lo, hi + 1)
    walls.flat[rng.permutation(free)[:n_speckles]] = True
    return Board(walls.astype(np.uint8).tobytes(), goal, box, player,
                 (size, size))


# ----------------------------------------------------------------------------- training entries

UNSOLVABLE = 0  # the nsteps class of a board that no moves can solve
N_NSTEPS = 7  # nsteps classes: UNSOLVABLE, then 1..6 for moves left


def nsteps_class(moves_left: int | None) -> int:
    """The post's nsteps target: clamp(round(ln(n + 1)), 0, 5) + 1 for n moves left, so 0 -> 1,
    1..3 -> 2, 4..11 -> 3, 12..32 -> 4, 33..89 -> 5, 90 or more -> 6; None (no solution) -> UNSOLVABLE."""
    if moves_left is None:
        return UNSOLVABLE
    if not isinstance(moves_left, (int, np.integer)) or moves_left < 0:
        raise ValueError(f"moves_left is a number of moves >= 0, or None for no solution; got {moves_left!r}")
    return min(max(round(math.log(moves_left + 1)), 0), 5) + 1


@dataclasses.dataclass(frozen=True)
class Entry:
    """One training sequence: the boards a solution passes through, start first, and what the
    policy learns at each. An unsolvable board is an entry of that board alone."""

    boards: tuple[Board, ...]
    actions: tuple[int, ...]  # the action taken from each board; -1 from the last
    policy_mask: tuple[bool, ...]  # learn this action? False for a bad move and where there is none
    nsteps: tuple[int, ...]  # nsteps class of each board: the fewest moves left, UNDO counting as one
    optimal: tuple[tuple[int, ...], ...]  # the actions (UNDO too) that keep a shortest way to the goal
    shortest: int | None  # the fewest moves that solve the start board; None when none can


def make_entry(board: Board, table: dict[tuple[int, int], int] | None = None,
               rng: np.random.Generator | None = None, p_detour: float = 0.0) -> Entry:
    """The entry of a board: its shortest solution (at each board, the first optimal move in
    MOVES order) or, when it has none, the board alone with the UNSOLVABLE class and no action
    to learn. With probability `p_detour` (drawn from `rng`) the solution makes one bad move,
    a legal move off every shortest solution at a random step, then UNDO: the bad move is
    masked out of the policy's loss, so the policy learns to undo without learning the
    mistake. `table` is `moves_to_goal(board)`, if at hand."""
    if not 0.0 <= p_detour <= 1.0:
        raise ValueError(f"p_detour is a probability, got {p_detour}")
    table = moves_to_goal(board) if table is None else table
    if (board.box, board.player) not in table:
        return Entry((board,), (-1,), (False,), (UNSOLVABLE,), ((),), None)
    path, actions = [board], []
    while not path[-1].is_goal():
        actions.append(optimal_moves(path[-1], table)[0])
        path.append(path[-1].apply_action(actions[-1]))
    bad = None
    if p_detour > 0:
        if rng is None:
            raise ValueError("a detour is drawn at random: pass rng along with p_detour")
        options = [(k, m) for k, b in enumerate(path[:-1])  # every (step, bad move) alike
                   for m in b.legal_actions() if m not in optimal_moves(b, table)]
        if options and rng.random() < p_detour:
            bad = options[int(rng.integers(len(options)))]
            actions[bad[0] : bad[0]] = [bad[1], UNDO]
    return _replay(board, actions, table, bad[0] if bad else None)


def _replay(board: Board, actions: list[int], table: dict[tuple[int, int], int], masked: int | None) -> Entry:
    """Play `actions` from `board`, keeping the history that UNDO goes back through, and label
    each board. A board's value is its fewest moves left when UNDO counts as a move: its BFS
    distance, or one more than the board UNDO returns to, whichever is less."""
    history = [(board, table.get((board.box, board.player), math.inf))]  # (board, value)
    boards, nsteps, optimal = [], [], []
    for action in [*actions, None]:
        here, value = history[-1]
        boards.append(here)
        nsteps.append(nsteps_class(value))
        best = [m for m in MOVES if (after := here._after(m)) is not None and table.get(after) == value - 1]
        if len(history) > 1 and history[-2][1] == value - 1:
            best.append(UNDO)
        optimal.append(tuple(best))
        if action == UNDO:
            history.pop()
        elif action is not None:
            after = here.apply_action(action)
            history.append((after, min(table.get((after.box, after.player), math.inf), value + 1)))
    mask = tuple(k != masked for k in range(len(actions))) + (False,)
    return Entry(tuple(boards), (*actions, -1), mask, tuple(nsteps), tuple(optimal), history[0][1])


# ----------------------------------------------------------------------------- data sets


@dataclasses.dataclass(frozen=True, eq=False)
class SokobanSet:
    """Entries as padded arrays: N entries of at most T boards. A board is its entry's walls and
    goal with the box and player of its step, so that 64,000 entries stay small; `inputs`
    turns them into the policy's planes a batch at a time."""

    walls: np.ndarray  # (N, rows, cols) bool
    goal: np.ndarray  # (N,) goal square
    box: np.ndarray  # (N, T) box square at each step; -1 past the entry's end
    player: np.ndarray  # (N, T) player square; -1 past the end
    actions: np.ndarray  # (N, T) action taken from each board (MOVES or UNDO); -1 from the last and past the end
    policy_mask: np.ndarray  # (N, T) bool: learn this action (False for a bad move, the last board, padding)
    nsteps: np.ndarray  # (N, T) nsteps class of each board; -1 past the end
    optimal: np.ndarray  # (N, T, 5) bool: the actions that keep a shortest way to the goal
    lengths: np.ndarray  # (N,) boards in each entry
    solution_length: np.ndarray  # (N,) fewest moves from the start board; -1 when it cannot be solved
    source: np.ndarray  # (N,) which generated board the entry comes from (its symmetric variants share it)
    symmetry: np.ndarray  # (N,) the symmetry 0..7 applied to that board

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def solvable(self) -> np.ndarray:
        return self.solution_length >= 0

    def board(self, i: int, t: int = 0) -> Board:
        """Entry i's board at step t (0: the start)."""
        if not 0 <= t < self.lengths[i]:
            raise ValueError(f"entry {i} has {self.lengths[i]} boards, there is no step {t}")
        walls = self.walls[i]
        return Board(walls.astype(np.uint8).tobytes(), int(self.goal[i]), int(self.box[i, t]),
                     int(self.player[i, t]), walls.shape)

    def inputs(self, index) -> tuple[np.ndarray, np.ndarray]:
        """The policy's input for entries `index`: (goal boards (B, 5, rows, cols), boards
        (B, T, 5, rows, cols)), uint8. The goal board has the box on the goal and no player."""
        walls, goal = self.walls[index], self.goal[index]
        return (encode(walls, goal, goal, -1),
                encode(walls[..., None, :, :], goal[..., None], self.box[index], self.player[index]))


def to_set(entries: Sequence[Entry], source: Sequence[int] | None = None) -> SokobanSet:
    """Pack entries (all of one board shape) into a SokobanSet, padded to the longest."""
    n, t = len(entries), max((len(e.boards) for e in entries), default=1)
    box, player = np.full((n, t), -1, np.int16), np.full((n, t), -1, np.int16)  # squares; int8 holds only 11x11
    actions, nsteps = np.full((n, t), -1, np.int8), np.full((n, t), -1, np.int8)
    mask, optimal = np.zeros((n, t), bool), np.zeros((n, t, len(ACTION_NAMES)), bool)
    for i, e in enumerate(entries):
        k = len(e.boards)
        box[i, :k], player[i, :k] = [b.box for b in e.boards], [b.player for b in e.boards]
        actions[i, :k], mask[i, :k], nsteps[i, :k] = e.actions, e.policy_mask, e.nsteps
        for j, best in enumerate(e.optimal):
            optimal[i, j, list(best)] = True
    starts = [e.boards[0] for e in entries]
    return SokobanSet(
        walls=np.array([b.grid for b in starts], bool).reshape(n, *(starts[0].shape if starts else (SIZE, SIZE))),
        goal=np.array([b.goal for b in starts], np.int16), box=box, player=player, actions=actions,
        policy_mask=mask, nsteps=nsteps, optimal=optimal, lengths=np.array([len(e.boards) for e in entries], np.int64),
        solution_length=np.array([-1 if e.shortest is None else e.shortest for e in entries], np.int64),
        source=np.arange(n) if source is None else np.asarray(source), symmetry=np.zeros(n, np.int64))


def augment(data: SokobanSet) -> SokobanSet:
    """Every entry under all 8 symmetries (the post's 8x), the moves remapped to match."""
    if data.symmetry.any():
        raise ValueError("these entries are already augmented")
    parts = []
    for s in range(N_SYMMETRIES):
        where = np.array(_square_map(data.walls.shape[1:], s)[0] + (-1,))  # where[-1] == -1 keeps padding
        moves = np.array(move_map(s) + (-1,))  # moves[-1] == -1 keeps "no action"
        optimal = np.empty_like(data.optimal)
        optimal[..., list(move_map(s))] = data.optimal
        parts.append(dataclasses.replace(
            data, walls=_turn(data.walls, s), goal=where[data.goal].astype(np.int16),
            box=where[data.box].astype(np.int16), player=where[data.player].astype(np.int16),
            actions=moves[data.actions].astype(np.int8), optimal=optimal, symmetry=np.full(len(data), s)))
    return SokobanSet(**{f.name: np.concatenate([getattr(p, f.name) for p in parts])
                         for f in dataclasses.fields(SokobanSet)})


def draw_boards(n_solvable: int, n_unsolvable: int, rng: np.random.Generator, seen: set | None = None,
                **generator) -> list[tuple[Board, dict[tuple[int, int], int] | None]]:
    """Draw boards from `random_board(rng, **generator)` until there are `n_solvable` that can be
    solved and `n_unsolvable` that cannot, in the order drawn, each with its `moves_to_goal`
    table (None when it cannot be solved). A board whose `canonical_key` is in `seen` is
    skipped, and those kept join `seen`: no board twice, nor a rotated or mirrored twin."""
    if n_solvable < 0 or n_unsolvable < 0:
        raise ValueError(f"the numbers of boards must be >= 0, got {n_solvable} and {n_unsolvable}")
    seen = set() if seen is None else seen
    want, kept, draws = [n_unsolvable, n_solvable], [], 0
    while want[0] or want[1]:
        draws += 1
        if draws > 100 * (n_solvable + n_unsolvable) + 1_000:
            raise RuntimeError(f"still {want[1]} solvable and {want[0]} unsolvable boards short after {draws} draws: "
                               f"the generator settings {generator} rarely make the boards asked for")
        board = random_board(rng, **generator)
        # Nine dead boards in ten show it at once: their box could not reach the goal even if the
        # player could always get behind it. Backward BFS answers for the rest, exhaustively.
        table = moves_to_goal(board) if push_distance(board) < math.inf else {}
        solvable = (board.box, board.player) in table
        if not want[solvable]:
            continue
        key = canonical_key(board)
        if key in seen:
            continue
        seen.add(key)
        want[solvable] -= 1
        kept.append((board, table if solvable else None))
    return kept


def make_data(n_solvable: int = 4_000, n_unsolvable: int = 4_000, n_held_out: int = 4_000, seed: int = 0,
              p_detour: float = 0.5, n_val: int = 1_000, **generator) -> dict[str, SokobanSet]:
    """The post's data, from one seeded generator: "train", `n_solvable` + `n_unsolvable`
    boards with their entries (`p_detour` of the solvable ones making one bad move and
    undoing it) under all 8 symmetries; "held_out", `n_held_out` boards, half of them
    solvable, one entry each without detours or symmetries; and "val", `n_val` more boards
    like the held-out ones, for choosing when to stop training. No board, nor a rotated or
    mirrored twin of one, is in two of them. The held-out boards are drawn first, then the
    validation boards, so they stay the same when only the training sizes change."""
    if not 0.0 <= p_detour <= 1.0:  # checked before the boards are drawn, not after
        raise ValueError(f"p_detour is a probability, got {p_detour}")
    rng, seen = np.random.default_rng(seed), set()
    held_out = draw_boards((n_held_out + 1) // 2, n_held_out // 2, rng, seen, **generator)
    val = draw_boards((n_val + 1) // 2, n_val // 2, rng, seen, **generator)
    train = draw_boards(n_solvable, n_unsolvable, rng, seen, **generator)
    return {
        "train": augment(to_set([make_entry(b, t or {}, rng, p_detour if t else 0.0) for b, t in train])),
        "val": to_set([make_entry(b, t or {}) for b, t in val]),
        "held_out": to_set([make_entry(b, t or {}) for b, t in held_out]),
    }


# ----------------------------------------------------------------------------- the environment

_RGB = {"wall": (35, 38, 47), "floor": (242, 238, 227), "goal": (214, 39, 40), "box": (140, 86, 75),
        "box_on_goal": (44, 160, 44), "player": (31, 119, 180)}


def render_rgb(board: Board, px: int = 16) -> np.ndarray:
    """An image of the board, (rows*px, cols*px, 3) uint8: walls dark, the goal a red frame, the
    box brown (green on the goal), the player a blue square."""
    rows, cols = board.shape
    tiles = np.zeros((rows * cols, px, px, 3), np.uint8)  # one px x px tile per square
    tiles[:] = _RGB["floor"]
    tiles[np.frombuffer(board.walls, np.uint8).astype(bool)] = _RGB["wall"]
    a, b = max(px // 8, 1), px - max(px // 8, 1)  # the frame's outer edge; the box fills inside it
    tiles[board.goal, a:b, a:b] = _RGB["goal"]
    tiles[board.goal, 2 * a : px - 2 * a, 2 * a : px - 2 * a] = _RGB["floor"]
    tiles[board.box, 2 * a : px - 2 * a, 2 * a : px - 2 * a] = _RGB["box_on_goal" if board.is_goal() else "box"]
    tiles[board.player, px // 4 : px - px // 4, px // 4 : px - px // 4] = _RGB["player"]
    return tiles.reshape(rows, cols, px, px, 3).transpose(0, 2, 1, 3, 4).reshape(rows * px, cols * px, 3)


class SokobanEnv(gym.Env):
    """Sokoban with Gymnasium's API. Observations are a board's 5 planes (5, 8, 8) uint8;
    actions are UP, DOWN, LEFT, RIGHT and UNDO. A move that is not legal leaves the board as it
    is, and UNDO goes back one move (nothing at the start). The reward is 1 on the step that
    solves the board, 0 otherwise (the post's R); an episode is truncated after `max_steps`.

    `reset` plays `options["board"]` if given (a Board or XSB text), else the `board` given to
    the constructor, else a random board that can be solved, drawn from the environment's
    seeded generator.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(self, board: Board | str | None = None, render_mode: str | None = None, max_steps: int = 100):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode is one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        if not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
        self.level = None if board is None else self._board(board)
        self.render_mode, self.max_steps = render_mode, max_steps
        self.observation_space = gym.spaces.Box(0, 1, (len(CHANNELS), SIZE, SIZE), np.uint8)
        self.action_space = gym.spaces.Discrete(len(ACTION_NAMES))
        self.history: list[Board] = []
        self.steps = 0

    @staticmethod
    def _board(board: Board | str) -> Board:
        board = from_xsb(board) if isinstance(board, str) else board
        if not isinstance(board, Board) or board.shape != (SIZE, SIZE):
            raise ValueError(f"the environment plays {SIZE}x{SIZE} Boards (or their XSB text), got {board!r}")
        return board

    @property
    def board(self) -> Board:
        return self.history[-1]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        board = (options or {}).get("board", self.level)
        if board is None:
            while solve(board := random_board(self.np_random)) is None:
                pass
        self.history, self.steps = [self._board(board)], 0
        return to_channels(self.board), {}

    def step(self, action):
        if not self.history:
            raise RuntimeError("call reset before step")
        if not self.action_space.contains(action):
            raise ValueError(f"actions are 0..{len(ACTION_NAMES) - 1} ({', '.join(ACTION_NAMES)}), got {action!r}")
        action, moved = int(action), False
        if action == UNDO:
            moved = len(self.history) > 1
            if moved:
                self.history.pop()
        elif action in self.board.legal_actions():
            self.history.append(self.board.apply_action(action))
            moved = True
        self.steps += 1
        solved = self.board.is_goal()
        truncated = not solved and self.steps >= self.max_steps
        return to_channels(self.board), float(solved), solved, truncated, {"moved": moved}

    def render(self):
        if self.render_mode == "ansi":
            return to_xsb(self.board) + "\n"
        if self.render_mode == "rgb_array":
            return render_rgb(self.board)
        return None


# ----------------------------------------------------------------------------- the policy


@dataclasses.dataclass(frozen=True)
class SokobanConfig:
    """A policy and how to train it. The defaults reach the chapter's targets."""

    d_model: int = 64  # width of every token
    n_heads: int = 8
    n_layers: int = 3  # transformer blocks over the history (the post: 3)
    channels: int = 32  # width of the convolutional board encoder
    conv_layers: int = 6  # 3x3 convolutions per board, all but the first residual
    n_ctx: int = 32  # boards a history holds, the goal board not counted (the post: 32)
    history: bool = True  # False: the baseline, each board sees only itself and the goal
    dropout: float = 0.0
    steps: int = 2_500  # batches (cosine decay over them): about 3 min on one CPU thread
    batch_size: int = 32  # entries per batch (the post: 32)
    lr: float = 6e-3  # peak learning rate (AdamW): 3e-3 learns more slowly, 1e-2 no better
    warmup: int = 100
    weight_decay: float = 0.0
    grad_clip: float | None = 1.0
    eval_every: int = 1_000  # steps between validations
    log_every: int = 100  # steps between records of the training loss, for its curve
    n_solvable: int = 4_000  # training boards that can be solved (the post: 4,000) ...
    n_unsolvable: int = 4_000  # ... and that cannot (the post: 4,000), each under 8 symmetries
    n_held_out: int = 4_000  # held-out boards, half of them solvable (the post: 4,000)
    data_seed: int = 0  # which boards: `make_data(seed=data_seed)`
    seed: int = 0  # initial weights and batch order

    def __post_init__(self):
        if self.d_model < 1 or self.n_heads < 1 or self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a positive multiple of n_heads ({self.n_heads})")
        if min(self.n_layers, self.channels, self.conv_layers, self.n_ctx, self.batch_size) < 1:
            raise ValueError("n_layers, channels, conv_layers, n_ctx and batch_size must be at least 1")

    def train_options(self) -> TrainOptions:
        return TrainOptions(steps=self.steps, lr=self.lr, weight_decay=self.weight_decay, schedule="cosine",
                            warmup=self.warmup, grad_clip=self.grad_clip, eval_every=self.eval_every,
                            log_every=self.log_every, monitor="val_loss", restore_best=True)


class BoardEncoder(nn.Module):
    """A board's 5 planes to one token: a 3x3 convolution, then `layers - 1` more that each add
    their output to their input (residual, so that a stack deep enough to see across the board
    still trains), then each channel's maximum and mean over the squares, and a linear map of
    those to the token.

    Pooling over the squares, rather than mapping the whole feature map, makes the token the
    same wherever on the board a pattern sits, so what the encoder learns in one place holds in
    every place: after six layers each square's features already describe what lies within six
    squares of it (the box, the player, the walls beside them), which is what the moves depend
    on. The maximum says whether a feature fires anywhere (a box stuck in a corner), the mean
    how much of the board it covers. Against a linear map of the whole feature map (this
    encoder's earlier form) it picks more shortest-solution moves, with fewer parameters."""

    def __init__(self, channels: int, layers: int, d_model: int):
        super().__init__()
        self.first = nn.Conv2d(len(CHANNELS), channels, 3, padding=1)
        self.convs = nn.ModuleList(nn.Conv2d(channels, channels, 3, padding=1) for _ in range(layers - 1))
        self.out = nn.Linear(2 * channels, d_model)

    def forward(self, planes: torch.Tensor) -> torch.Tensor:
        x = F.gelu(self.first(planes.float()))  # (n, channels, rows, cols)
        for conv in self.convs:
            x = x + F.gelu(conv(x))  # each layer reaches one square further
        pooled = torch.cat([x.amax((2, 3)), x.mean((2, 3))], 1)  # (n, 2 * channels)
        return self.out(pooled)  # (n, d_model)


class SokobanPolicy(nn.Module):
    """The goal board and the boards so far as tokens, a causal transformer over them, and
    two heads at every board: the next action (MOVES and UNDO) and the nsteps class.

    tokens(planes (n, 5, rows, cols)) -> (n, d_model): a board's token; solving caches them.
    attend(goal (B, d), boards (B, T, d)) -> (action logits (B, T, 5), nsteps logits
        (B, T, N_NSTEPS), patterns (B, layer, head, T + 1, T + 1)); position 0 is the goal.
    forward(goal planes (B, 5, rows, cols), board planes (B, T, 5, rows, cols), lengths=None)
        does both; with `lengths` (B,) only real boards go through the encoder.
    With config.history False (the baseline) each board attends only to the goal and itself.
    """

    def __init__(self, config: SokobanConfig = SokobanConfig()):
        super().__init__()
        self.config = c = config
        self.encoder = BoardEncoder(c.channels, c.conv_layers, c.d_model)
        self.position = nn.Embedding(c.n_ctx + 1, c.d_model)  # 0: the goal, then the boards in order
        self.blocks = Encoder(c.n_layers, c.d_model, c.n_heads, 4 * c.d_model, c.dropout, causal=True)
        self.action_head = nn.Linear(c.d_model, len(ACTION_NAMES))
        self.nsteps_head = nn.Linear(c.d_model, N_NSTEPS)

    def tokens(self, planes: torch.Tensor) -> torch.Tensor:
        return self.encoder(planes)  # (n, d_model)

    def attend(
        self, goal: torch.Tensor, boards: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, t, _ = boards.shape
        if t > self.config.n_ctx:
            raise ValueError(f"the policy holds {self.config.n_ctx} boards, "
                             f"got a history of {t}")
        x = torch.cat([goal[:, None], boards], 1)  # (B, T + 1, d)
        x = x + self.position.weight[: t + 1]
        mask = None
        if not self.config.history:
            # the goal (column 0) and the board itself; the blocks add the
            # causal mask
            mask = torch.eye(t + 1, dtype=torch.bool, device=x.device)
            mask[:, 0] = True
        # (B, T + 1, d), (B, layer, head, T + 1, T + 1)
        x, patterns = self.blocks(x, mask)
        x = x[:, 1:]  # (B, T, d): the boards
        return self.action_head(x), self.nsteps_head(x), patterns

    def forward(self, goal: torch.Tensor, boards: torch.Tensor,
                lengths: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, t = boards.shape[:2]
        if lengths is None:
            tokens = self.tokens(boards.flatten(0, 1)).view(b, t, -1)  # (B, T, d)
        else:  # padding never reaches a real board (attention is causal): skip its convolutions
            real = torch.arange(t, device=boards.device) < lengths[:, None]  # (B, T)
            tokens = boards.new_zeros(b, t, self.config.d_model, dtype=torch.float32)
            tokens[real] = self.tokens(boards[real])
        return self.attend(self.tokens(goal), tokens)


def _batch(data: SokobanSet, index: np.ndarray, n_ctx: int | None = None) -> tuple[torch.Tensor, ...]:
    """Entries `index` as tensors, cut to their longest: goal planes (B, 5, R, C), board
    planes (B, T, 5, R, C), lengths (B,), actions, policy mask, nsteps (B, T), optimal (B, T, 5).
    With `n_ctx`, an entry longer than a policy's history keeps its first `n_ctx` boards: the
    labels of those boards do not depend on the rest, and a policy never reads further."""
    lengths = data.lengths[index] if n_ctx is None else np.minimum(data.lengths[index], n_ctx)  # (B,)
    t = int(lengths.max())
    goal, boards = data.inputs(index)
    return (torch.from_numpy(goal), torch.from_numpy(boards[:, :t]), torch.from_numpy(lengths),
            torch.from_numpy(data.actions[index, :t]).long(), torch.from_numpy(data.policy_mask[index, :t]),
            torch.from_numpy(data.nsteps[index, :t]).long(), torch.from_numpy(data.optimal[index, :t]))


def sokoban_loss(
    model: SokobanPolicy, batch: tuple[torch.Tensor, ...]
) -> tuple[torch.Tensor, dict[str, float]]:
    """The policy's loss: -log of the probability it gives to the optimal
    actions together (any shortest solution is right), where the mask lets
    the action be learned, plus the cross-entropy of the nsteps class at
    every real board."""
    device = next(model.parameters()).device
    goal, boards, lengths, actions, mask, nsteps, optimal = (
        x.to(device) for x in batch)
    # (B, T, 5), (B, T, N_NSTEPS)
    action_logits, nsteps_logits, _ = model(goal, boards, lengths)
    learn = mask & optimal.any(-1)  # (B, T)
    logp = torch.log_softmax(action_logits[learn], -1)  # (n, 5)
    best = logp.masked_fill(~optimal[learn], -math.inf)  # (n, 5)
    policy_loss = -torch.logsumexp(best, -1).mean()
    real = nsteps >= 0
    nsteps_loss = F.cross_entropy(nsteps_logits[real], nsteps[real])
    return policy_loss + nsteps_loss, {"policy_loss": policy_loss.item(),
                                       "nsteps_loss": nsteps_loss.item()}


def _entries(data: SokobanSet, batch_size: int, generator: torch.Generator,
             n_ctx: int | None = None) -> Iterator[tuple[torch.Tensor, ...]]:
    """Endless shuffled batches of entries, epoch after epoch, each cut to `n_ctx` boards."""
    while True:
        order = torch.randperm(len(data), generator=generator).numpy()
        for i in range(0, len(order) - batch_size + 1, batch_size):
            yield _batch(data, np.sort(order[i : i + batch_size]), n_ctx)


@dataclasses.dataclass(frozen=True)
class Accuracies:
    """What teacher forcing on held-out entries measures (the post's supervised metrics, and ours)."""

    solvability: float  # the start board's nsteps says "unsolvable" exactly when it is
    policy_top1: float  # the most likely action is the entry's action (the post's one label)
    policy_top2: float  # the entry's action is among the two most likely
    optimal: float  # the most likely action keeps a shortest solution (any of them)
    nsteps_top1: float  # the most likely nsteps class is right, at every board
    nsteps_top2: float
    loss: float  # the training loss on these entries


def accuracies(model: SokobanPolicy, data: SokobanSet, batch_size: int = 500) -> Accuracies:
    """Teacher-forced measures of `model` on every entry of `data`, each cut to the boards the
    policy's history holds (`config.n_ctx`)."""
    was_training, sums, counts, losses = model.training, {}, {}, []
    model.eval()
    device = next(model.parameters()).device

    def add(name, hits):
        sums[name] = sums.get(name, 0) + int(hits.sum())
        counts[name] = counts.get(name, 0) + hits.numel()

    with torch.no_grad():
        for i in range(0, len(data), batch_size):
            batch = _batch(data, np.arange(i, min(i + batch_size, len(data))), model.config.n_ctx)
            losses.append((sokoban_loss(model, batch)[0].item(), len(batch[0])))
            goal, boards, lengths, actions, mask, nsteps, optimal = (x.to(device) for x in batch)
            action_logits, nsteps_logits = model(goal, boards, lengths)[:2]
            top2 = action_logits.topk(2, -1).indices  # (B, T, 2)
            learn = mask & optimal.any(-1)
            add("policy_top1", (top2[..., 0] == actions)[learn])
            add("policy_top2", (top2 == actions[..., None]).any(-1)[learn])
            add("optimal", optimal.gather(-1, top2[..., :1]).squeeze(-1)[learn])
            n2 = nsteps_logits.topk(2, -1).indices
            real = nsteps >= 0
            add("nsteps_top1", (n2[..., 0] == nsteps)[real])
            add("nsteps_top2", (n2 == nsteps[..., None]).any(-1)[real])
            add("solvability", (n2[:, 0, 0] == UNSOLVABLE) == (nsteps[:, 0] == UNSOLVABLE))
    model.train(was_training)
    loss = sum(l * n for l, n in losses) / sum(n for _, n in losses)
    return Accuracies(**{k: sums[k] / counts[k] for k in sums}, loss=loss)


def train_sokoban(
    config: SokobanConfig = SokobanConfig(),
    data: dict[str, SokobanSet] | None = None,
    device: torch.device | str | None = None,
    callback: Callable[[int, nn.Module, History], bool | None] | None = None,
    progress: bool = True,
) -> tuple[SokobanPolicy, History]:
    """Build a policy from `config` and train it on `data["train"]` (default: `make_data` with
    the config's sizes and data_seed), validating on `data["val"]` every `eval_every` steps
    (the held-out boards are never looked at). Out of steps, the best validated weights are
    restored."""
    data = data or make_data(config.n_solvable, config.n_unsolvable, config.n_held_out, seed=config.data_seed)
    seed_everything(config.seed)
    device = device or pick_device()
    model = SokobanPolicy(config).to(device)
    gen = torch.Generator().manual_seed(config.seed)

    def evaluate(m):
        a = accuracies(m, data["val"])
        return {"val_loss": a.loss, "val_optimal": a.optimal, "val_solvability": a.solvability}

    batches = _entries(data["train"], config.batch_size, gen, config.n_ctx)
    history = fit(model, batches, sokoban_loss, config.train_options(),
                  eval_fn=evaluate, callback=callback, device=device, progress=progress)
    return model, history


def _train_quietly(config: SokobanConfig, data: dict[str, SokobanSet], device: str) -> tuple[SokobanPolicy, History]:
    return train_sokoban(config, data, device=device, progress=False)


def train_sokobans(
    configs: Sequence[SokobanConfig], data: dict[str, SokobanSet], device: torch.device | str | None = None,
    workers: int | None = None,
) -> list[tuple[SokobanPolicy, History]]:
    """`train_sokoban` for each config on the same data, without progress bars. On a CPU the
    policies train side by side, each in a process of its own on one thread (`side_by_side`;
    `workers` processes at once, by default one per CPU core), and each learns exactly what it
    would learn alone on one thread. On a GPU they train there, one after another."""
    device = torch.device(device or pick_device())
    if device.type != "cpu":
        return [_train_quietly(c, data, device) for c in configs]
    return side_by_side(_train_quietly, [(c, data, "cpu") for c in configs], workers)


# ----------------------------------------------------------------------------- solving with the policy

START = len(ACTION_NAMES)  # the token that begins every action sequence the decoders grow


class Walks:
    """Action sequences from start boards, as the core's decoders (`greedy_decode`,
    `beam_search`) grow them: a row of tokens is START and then actions. Row i starts from
    `starts[i]`, or every row from the one start. Boards are replayed once per sequence and
    cached, and so are the policy's tokens of the boards a sequence has seen, so that a step
    encodes only each row's new board, all rows in one batch.

    The hooks: `next_logp` (the policy's action scores after the boards so far), `legal`
    (the moves a board allows, and UNDO once there is a move to take back), `done` (the box
    is on the goal) and `key` (the board a sequence has reached, for merging beams). A row
    that greedy decoding has ended is padded with START, which leaves its board as it is."""

    def __init__(self, model: SokobanPolicy, starts: Sequence[Board]):
        if not starts:
            raise ValueError("no boards to solve")
        if any(not isinstance(b, Board) or b.shape != (SIZE, SIZE) for b in starts):
            raise ValueError(f"the policy reads {SIZE}x{SIZE} Boards")
        self.model, self.starts = model, list(starts)
        self.device = next(model.parameters()).device
        walls = np.stack([b.grid for b in self.starts])
        goal = np.array([b.goal for b in self.starts])
        self.goal = self._tokens(encode(walls, goal, goal, -1))  # (N, d)
        self.stacks: dict[tuple, tuple[Board, ...]] = {}  # (start, actions) -> the undo stack, current board last
        self.history: dict[tuple, torch.Tensor] = {}  # (start, actions) -> tokens of the boards seen (t, d)

    def _tokens(self, planes: np.ndarray) -> torch.Tensor:
        with torch.no_grad():
            return self.model.tokens(torch.from_numpy(planes).to(self.device))  # (n, d)

    def _keys(self, tokens: torch.Tensor) -> list[tuple]:
        one = len(self.starts) == 1
        return [(0 if one else i, tuple(row[1:])) for i, row in enumerate(tokens.tolist())]

    def stack(self, key: tuple) -> tuple[Board, ...]:
        """The undo stack that the actions `key[1]` leave on board `key[0]`: replayed once."""
        if key not in self.stacks:
            start, actions = key
            if not actions:
                self.stacks[key] = (self.starts[start],)
            else:
                before, move = self.stack((start, actions[:-1])), actions[-1]
                if move == START:
                    self.stacks[key] = before
                elif move == UNDO:
                    self.stacks[key] = before[:-1]
                else:
                    self.stacks[key] = (*before, before[-1].apply_action(move))
        return self.stacks[key]

    def boards(self, tokens: torch.Tensor) -> list[Board]:
        """The board each row has reached."""
        return [self.stack(k)[-1] for k in self._keys(tokens)]

    def next_logp(self, tokens: torch.Tensor) -> torch.Tensor:
        keys = self._keys(tokens)
        live = [i for i, (_, a) in enumerate(keys) if not a or a[-1] != START]  # ended rows are not asked
        new = [k for k in dict.fromkeys(keys[i] for i in live) if k not in self.history]
        if new:
            here = [self.stack(k)[-1] for k in new]
            planes = encode(np.stack([b.grid for b in here]), [b.goal for b in here], [b.box for b in here],
                            [b.player for b in here])
            for (start, actions), token in zip(new, self._tokens(planes)):
                before = self.history[(start, actions[:-1])] if actions else token[:0]
                self.history[(start, actions)] = torch.cat([before, token[None]])  # (t, d)
        scores = torch.zeros(len(keys), START + 1, device=self.device)
        if live:
            history = torch.stack([self.history[keys[i]] for i in live])  # (n, t, d)
            goal = self.goal[[keys[i][0] for i in live]]  # (n, d)
            with torch.no_grad():
                scores[live, :START] = self.model.attend(goal, history)[0][:, -1]
        scores[:, START] = -math.inf  # START is never next
        return scores

    def legal(self, tokens: torch.Tensor) -> torch.Tensor:
        allowed = torch.zeros(len(tokens), START + 1, dtype=torch.bool)
        for i, k in enumerate(self._keys(tokens)):
            stack = self.stack(k)
            allowed[i, stack[-1].legal_actions()] = True
            allowed[i, UNDO] = len(stack) > 1
        return allowed.to(tokens.device)

    def done(self, tokens: torch.Tensor) -> torch.Tensor:
        return torch.tensor([b.is_goal() for b in self.boards(tokens)], device=tokens.device)

    def key(self, tokens: torch.Tensor) -> tuple[int, int]:
        board = self.boards(tokens[None])[0]
        return board.box, board.player


def _moves(tokens: torch.Tensor, length: int) -> list[int]:
    return [int(a) for a in tokens[1:length]]


def solve_greedy(model: SokobanPolicy, boards: Sequence[Board], batch_size: int = 500) -> list[list[int] | None]:
    """Play each board with the policy's most likely legal action until the box is on the
    goal or the history is full: the actions, or None when the board was not solved."""
    found = []
    for i in range(0, len(boards), batch_size):
        walks = Walks(model, boards[i : i + batch_size])
        start = torch.full((len(walks.starts), 1), START, device=walks.device)
        out = greedy_decode(walks.next_logp, start, max_len=model.config.n_ctx, legal=walks.legal, done=walks.done,
                            pad=START)
        ends = walks.boards(out.tokens)
        found += [_moves(t, n) if b.is_goal() and f else None
                  for t, n, b, f in zip(out.tokens, out.lengths.tolist(), ends, out.finished.tolist())]
    return found


def solve_beam(model: SokobanPolicy, board: Board, width: int = 32) -> list[int] | None:
    """Beam search of `width` over legal actions, ranked by the running sum of the policy's
    log-likelihood, merging beams that reach the same board, until a beam solves the board
    (the best of those that do, on that step) or the history is full."""
    if board.is_goal():
        return []
    walks = Walks(model, [board])
    beams = beam_search(walks.next_logp, torch.tensor([START], device=walks.device), width=width,
                        max_len=model.config.n_ctx, legal=walks.legal, done=walks.done, key=walks.key, first=True)
    best = beams[0]
    return _moves(best.tokens, len(best.tokens)) if best.finished else None


# ----------------------------------------------------------------------------- the chapter's measures and targets


@dataclasses.dataclass(frozen=True, eq=False)
class Solves:
    """How a policy did on boards that can be solved: one row per board."""

    method: str  # "greedy" or "beam 32"
    lengths: np.ndarray  # (n,) moves of the solution found (an UNDO counts as one), -1 where none was
    optimal: np.ndarray  # (n,) BFS's fewest moves

    @property
    def rate(self) -> float:
        return float((self.lengths >= 0).mean())

    @property
    def mean_length(self) -> float:
        """Mean length of the solutions found."""
        return float(self.lengths[self.lengths >= 0].mean())

    @property
    def optimal_length(self) -> float:
        """BFS's mean length on the same boards (those the policy solved)."""
        return float(self.optimal[self.lengths >= 0].mean())


BEAM_BOARDS = 500  # held-out boards solved by beam search: a search of width 32 takes about 40 ms a board


def solvable_boards(data: SokobanSet, limit: int | None = None) -> tuple[list[Board], np.ndarray]:
    """The start boards of `data` that can be solved (the first `limit` of them), and their
    fewest moves."""
    index = np.flatnonzero(data.solvable)[:limit]
    return [data.board(int(i)) for i in index], data.solution_length[index]


def solves(model: SokobanPolicy, boards: Sequence[Board], optimal: np.ndarray, width: int | None = None) -> Solves:
    """Solve every board greedily (width None) or by beam search of `width`."""
    if width is None:
        found = solve_greedy(model, boards)
    else:
        found = [solve_beam(model, b, width) for b in boards]
    lengths = np.array([-1 if f is None else len(f) for f in found])
    return Solves("greedy" if width is None else f"beam {width}", lengths, np.asarray(optimal))


# The post's table: (transformer, baseline), on its 4,000 validation boards.
POST = {
    "solvability accuracy": (0.977, 0.977),
    "top-1 policy accuracy": (0.867, 0.831),
    "top-2 policy accuracy": (0.982, 0.969),
    "top-1 nsteps accuracy": (0.900, 0.898),
    "top-2 nsteps accuracy": (0.990, 0.990),
    "solve rate (beam 32)": (0.921, 0.879),
    "mean solution length": (6.983, 6.597),
}


def post_rows(acc: Accuracies, beam: Solves) -> list[float]:
    """Our numbers for the rows of POST, in its order."""
    return [acc.solvability, acc.policy_top1, acc.policy_top2, acc.nsteps_top1, acc.nsteps_top2, beam.rate,
            beam.mean_length]


def post_table(ours: tuple[Accuracies, Solves], baseline: tuple[Accuracies, Solves]) -> str:
    """The post's table with ours beside it: transformer and baseline, the post's and ours."""
    rows = [(name, f"{p[0]:.3f}", f"{o:.3f}", f"{p[1]:.3f}", f"{b:.3f}")
            for (name, p), o, b in zip(POST.items(), post_rows(*ours), post_rows(*baseline))]
    return format_table(rows, ("measure", "post", "ours", "post, baseline", "ours, baseline"))


def sokoban_targets(acc: Accuracies, greedy: Solves, beam: Solves, seconds: float | None = None,
                    time_limit: float = 240.0) -> list[Target]:
    """The chapter's summary for the transformer policy: its targets on the held-out boards,
    and (a machine row) the time that data and the training of both models took."""
    over = beam.mean_length / beam.optimal_length - 1
    targets = [
        Target(f"solve rate, beam 32, {len(beam.lengths):,} held-out boards", ">= 99 %", pct(beam.rate),
               beam.rate >= 0.99),
        Target(f"solve rate, greedy, {len(greedy.lengths):,} held-out boards", ">= 95 %", pct(greedy.rate),
               greedy.rate >= 0.95),
        Target("solvability accuracy, start boards", ">= 99 %", pct(acc.solvability), acc.solvability >= 0.99),
        Target("optimal move (any shortest solution)", ">= 98 %", pct(acc.optimal), acc.optimal >= 0.98),
        Target("mean length, beam 32, over BFS's", "<= +2 %",
               f"{beam.mean_length:.3f} / {beam.optimal_length:.3f} ({100 * over:+.2f} %)", over <= 0.02),
        Target("top-1 policy accuracy (the post's one label)", "-", pct(acc.policy_top1), None),
    ]
    if seconds is not None:
        targets.append(Target("data and both models' training", f"<= {time_limit / 60:.0f} min", f"{seconds:.0f} s",
                              seconds <= time_limit, machine=True))
    return targets


def _train(config: SokobanConfig, device, progress: bool, args) -> tuple[SokobanPolicy, History, dict]:
    data = make_data(config.n_solvable, config.n_unsolvable, config.n_held_out, seed=config.data_seed)
    model, history = train_sokoban(config, data, device=device, progress=progress)
    return model, history, {"data": data}


def _measure(model: SokobanPolicy, config: SokobanConfig, seconds: float, info: dict, args) -> list[Target]:
    # the time target covers the data and both models, as the chapter trains them: not this one model alone
    data = info.get("data") or make_data(config.n_solvable, config.n_unsolvable, config.n_held_out,
                                         seed=config.data_seed)
    boards, optimal = solvable_boards(data["held_out"])
    n = getattr(args, "beam_boards", BEAM_BOARDS)
    beam = solves(model, boards[:n], optimal[:n], width=32)
    return sokoban_targets(accuracies(model, data["held_out"]), solves(model, boards, optimal), beam)


def _extra_arguments(p) -> None:
    p.add_argument("--beam-boards", type=int, default=BEAM_BOARDS,
                   help="solve this many held-out boards by beam search (default %(default)s)")


_OPTIONS = (cli.Option("--steps", "steps", "most training steps"), cli.Option("--lr", "lr", "peak learning rate"),
            cli.Option("--history", "history", "attend over the history (--no-history: the baseline)"),
            cli.Option("--data-seed", "data_seed", "which boards"))
_ABOUT = "A transformer policy learns one-box Sokoban from shortest solutions, and says which boards cannot be solved."
CHAPTER = cli.Chapter("sokoban", _ABOUT, SokobanConfig, SokobanPolicy, _train, _measure, options=_OPTIONS,
                      extra_arguments=_extra_arguments)
main = cli.entry_point(CHAPTER)


# ----------------------------------------------------------------------------- looking inside

# Each nsteps class in words: UNSOLVABLE, then the moves left that `nsteps_class` puts in it.
NSTEPS_WORDS = ("unsolvable", "solved", "1..3", "4..11", "12..32", "33..89", "90+")


def _as_board(board: Board | str) -> Board:
    """A Board of the policy's size, from a Board or its XSB text."""
    if isinstance(board, str):
        board = from_xsb(board)
    if not isinstance(board, Board):
        raise ValueError(f"a board is a Board or its XSB text, got {type(board).__name__}")
    if board.shape != (SIZE, SIZE):
        raise ValueError(f"the policy reads {SIZE}x{SIZE} boards, got {board.shape[0]}x{board.shape[1]}")
    return board


def _visit(board: Board, actions: Sequence[int]) -> list[Board]:
    """The boards that `actions` pass through from `board`, start first: the history the
    policy reads. UNDO goes back one move, to the board before it, which joins the history
    again (as in `Walks` and in training)."""
    stack, visited = [board], [board]
    for k, action in enumerate(actions):
        if action == UNDO:
            if len(stack) == 1:
                raise ValueError(f"action {k} is undo, with no move to take back")
            stack.pop()
        else:
            try:
                stack.append(stack[-1].apply_action(action))
            except ValueError as e:
                raise ValueError(f"action {k}: {e}") from None
        visited.append(stack[-1])
    return visited


@contextlib.contextmanager
def _evaluating(model: SokobanPolicy) -> Iterator[None]:
    """The model in eval mode and without gradients, put back as it was afterwards."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def _read(model: SokobanPolicy, boards: Sequence[Board]) -> tuple[torch.Tensor, ...]:
    """One teacher-forced pass over a history (start first): (action logits (T, 5), nsteps
    logits (T, N_NSTEPS), patterns (layer, head, T + 1, T + 1)), on the CPU. Attention is
    causal, so row t is what the policy makes of board t having seen boards 0..t only."""
    if not boards or len(boards) > model.config.n_ctx:
        raise ValueError(f"the policy reads 1 to {model.config.n_ctx} boards, got {len(boards)}")
    device = next(model.parameters()).device
    walls = np.stack([b.grid for b in boards])  # (T, rows, cols)
    planes = encode(walls, [b.goal for b in boards], [b.box for b in boards],
                    [b.player for b in boards])  # (T, 5, rows, cols)
    goal = encode(walls[0], boards[0].goal, boards[0].goal, -1)  # (5, rows, cols): no player
    with _evaluating(model):
        action, nsteps, patterns = model(torch.from_numpy(goal[None]).to(device),
                                         torch.from_numpy(planes[None]).to(device))[:3]
    return action[0].cpu(), nsteps[0].cpu(), patterns[0].cpu()


def _greedy_walk(model: SokobanPolicy, board: Board) -> list[int]:
    """The actions `solve_greedy` plays from `board`, kept whether or not they solve it."""
    if board.is_goal():
        return []
    with _evaluating(model):
        walks = Walks(model, [board])
        start = torch.full((1, 1), START, device=walks.device)
        out = greedy_decode(walks.next_logp, start, max_len=model.config.n_ctx, legal=walks.legal,
                            done=walks.done, pad=START)
    return [int(a) for a in out.tokens[0, 1 : int(out.lengths[0])]]


class SolveFrames(NamedTuple):
    """A solve by the policy, one frame per board of its history (T boards)."""

    boards: list[Board]  # (T,) the boards visited, start first
    actions: list[int]  # (T - 1,) the action taken from each board but the last
    images: np.ndarray  # (T, rows * px, cols * px, 3) uint8: `render_rgb` of each board
    attention: np.ndarray  # (T, heads, width): board t's pattern over [goal, board 0..t], 0 beyond
    nsteps: np.ndarray  # (T,) the nsteps class the policy gives each board
    titles: list[str]  # (T,) step, the nsteps class in words, the action taken
    solved: bool  # the last board has the box on the goal


def solve_frames(model: SokobanPolicy, board: Board | str, actions: Sequence[int] | None = None,
                 layer: int = -1, width: int | None = None, px: int = 16) -> SolveFrames:
    """What an animation of the policy solving `board` needs: each board of the solve, and
    where that board's token looks in `layer`, head by head, over the goal and the boards so
    far. The actions are the policy's greedy play (`solve_greedy`'s, kept even when it fails)
    unless `actions` are given (a `solve_beam` result, or BFS's `solve`), and the patterns
    come from one teacher-forced pass over the boards, which is what the policy saw at each
    step (its attention is causal).

    The last layer by default: its output is all the action and nsteps heads read, and its
    heads are kept apart because they look at different boards (a mean over heads or layers
    would blur a head that looks at the goal into one that looks at the board before).
    Each pattern row is padded with zeros to `width` keys (default T + 1, this solve's), so
    that every frame has one shape; a longer width lines up solves of different lengths."""
    board = _as_board(board)
    actions = _greedy_walk(model, board) if actions is None else [int(a) for a in actions]
    boards = _visit(board, actions)
    t = len(boards)
    width = t + 1 if width is None else width
    if not isinstance(width, (int, np.integer)) or width < t + 1:
        raise ValueError(f"width must hold the goal and all {t} boards, at least {t + 1}; got {width!r}")
    n_layers = model.config.n_layers
    if not isinstance(layer, (int, np.integer)) or not -n_layers <= layer < n_layers:
        raise ValueError(f"layer is -{n_layers}..{n_layers - 1}, got {layer!r}")
    _, nsteps_logits, patterns = _read(model, boards)  # (T, N_NSTEPS), (layer, head, T + 1, T + 1)
    attention = np.zeros((t, model.config.n_heads, width), np.float32)
    attention[:, :, : t + 1] = patterns[layer, :, 1:].transpose(0, 1).numpy()  # (T, head, T + 1): board queries
    nsteps = nsteps_logits.argmax(-1).numpy()  # (T,)
    titles = []
    for k, here in enumerate(boards):
        then = (f"then {ACTION_NAMES[actions[k]]}" if k < len(actions)
                else "solved" if here.is_goal() else "not solved")
        titles.append(f"step {k}: nsteps {NSTEPS_WORDS[nsteps[k]]}; {then}")
    images = np.stack([render_rgb(b, px) for b in boards])  # (T, rows * px, cols * px, 3)
    return SolveFrames(boards, actions, images, attention, nsteps, titles, boards[-1].is_goal())


def animate_solve(frames: SolveFrames, size: float = 2.4, dpi: int = 70,
                  interval: int = 600) -> animation.FuncAnimation:
    """The board beside its attention, one frame per step: heads down, keys across (the goal,
    then boards 0, 1, ...), the keys the board cannot see yet left blank and its own key
    outlined. Show it with `toylib.plot.show_animation`. (`toylib.plot.animate` draws 2-D
    arrays with one colour map; a board is an RGB image, hence this helper.)"""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    t, heads, width = frames.attention.shape
    shown = np.where(np.arange(width) <= np.arange(t)[:, None, None] + 1, frames.attention, np.nan)
    fig, (ax_board, ax_att) = plt.subplots(1, 2, figsize=(size * 2.8, size + 0.5), dpi=dpi,
                                           gridspec_kw={"width_ratios": [1, 1.8]})
    board = ax_board.imshow(frames.images[0], interpolation="nearest")
    ax_board.set_axis_off()
    att = ax_att.imshow(shown[0], cmap="magma", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    every = max(1, width // 8)
    ticks = [0, *range(1 + every, width, every)]  # board 0 (key 1) unlabelled: "goal" needs the room
    ax_att.set_xticks(ticks, ["goal" if k == 0 else str(k - 1) for k in ticks], fontsize=7)
    ax_att.set_yticks(range(heads), [f"head {h}" for h in range(heads)], fontsize=7)
    ax_att.set_xlabel("key: the goal, then board 0, 1, ...", fontsize=7)
    own = ax_att.add_patch(Rectangle((0.5, -0.5), 1, heads, fill=False, ec="#17becf", lw=1.5))
    title = fig.suptitle(frames.titles[0], fontsize=9)
    fig.tight_layout()

    def draw(k: int):
        board.set_data(frames.images[k])
        att.set_data(shown[k])
        own.set_x(k + 0.5)  # board k is key k + 1
        title.set_text(frames.titles[k])
        return board, att, own

    anim = animation.FuncAnimation(fig, draw, frames=t, interval=interval, blit=False)
    plt.close(fig)  # the animation keeps the figure; a stray static copy would show otherwise
    return anim


class NstepsAlong(NamedTuple):
    """The policy's nsteps head at each board of a history (T boards), beside the truth."""

    boards: list[Board]  # (T,) the boards visited, start first
    actions: list[int]  # (T - 1,)
    probs: np.ndarray  # (T, N_NSTEPS) the policy's probability of each nsteps class
    moves_left: np.ndarray  # (T,) BFS's fewest moves from each board on its own; -1: none can solve it
    truth: np.ndarray  # (T,) nsteps_class of moves_left: UNSOLVABLE where the board is dead
    target: np.ndarray  # (T,) training's label: UNDO is a move, so a dead board after a bad push is not UNSOLVABLE


def nsteps_along(model: SokobanPolicy, board: Board | str, actions: Sequence[int] | None = None) -> NstepsAlong:
    """The nsteps class probabilities the policy gives each board it is shown, teacher-forced
    along `actions` from `board` (default: BFS's shortest solution; no moves when the board
    cannot be solved), beside two answers. `truth` is the board's own: BFS from it alone,
    UNSOLVABLE when it is dead. `target` is the label training used: with UNDO a move, a
    board reached by a bad push is one undo more than the board before it, so only a board
    dead from the start is labelled UNSOLVABLE. The two differ exactly after such a push."""
    board = _as_board(board)
    if actions is None:
        actions = solve(board) or []
    actions = [int(a) for a in actions]
    boards = _visit(board, actions)
    table = moves_to_goal(board)  # one table serves every board: they share walls and goal
    left = np.array([table.get((b.box, b.player), -1) for b in boards])  # (T,)
    truth = np.array([nsteps_class(int(n) if n >= 0 else None) for n in left])
    if left[0] >= 0:
        target = np.array(_replay(board, actions, table, None).nsteps)
    else:  # every board reached from a dead one is dead too
        target = np.full(len(boards), UNSOLVABLE)
    _, nsteps_logits, _ = _read(model, boards)  # (T, N_NSTEPS)
    probs = torch.softmax(nsteps_logits, -1).numpy()
    return NstepsAlong(boards, actions, probs, left, truth, target)


def first_deadlock(board: Board | str, actions: Sequence[int] | None = None) -> tuple[int, int] | None:
    """(step, move): the first board along `actions` (default: BFS's solution) that can still
    be solved, and is not yet, where a legal push leaves it dead, and that push; None if
    there is none.
    Only a push can kill a board: the player can always walk back."""
    board = _as_board(board)
    actions = (solve(board) or []) if actions is None else list(actions)
    table = moves_to_goal(board)
    for k, here in enumerate(_visit(board, actions)):
        if here.is_goal() or (here.box, here.player) not in table:
            continue
        for move in here.legal_actions():
            after = here.apply_action(move)
            if after.box != here.box and (after.box, after.player) not in table:
                return k, move
    return None


def draw_nsteps(ax: Axes, along: NstepsAlong, title: str | None = None) -> Axes:
    """The nsteps probabilities as a heat map, classes down and steps across, with the truth
    of each board (circles) and, where training taught otherwise, its target (crosses)."""
    t = len(along.boards)
    ax.imshow(along.probs.T, cmap="Blues", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    steps = np.arange(t)
    ax.scatter(steps, along.truth, s=40, facecolors="none", edgecolors="#d62728", lw=1.5, label="truth")
    other = along.target != along.truth
    if other.any():
        ax.scatter(steps[other], along.target[other], s=40, marker="x", c="#ff7f0e",
                   label="training's target")
    ax.set_yticks(range(N_NSTEPS), NSTEPS_WORDS, fontsize=7)
    ax.set_xticks(steps[:: max(1, t // 10)])
    ax.tick_params(axis="x", labelsize=7)
    ax.set_xlabel("step", fontsize=8)
    if title:
        ax.set_title(title, fontsize=9)
    return ax


# ----------------------------------------------------------------------------- a level to play

_CELLS = (FLOOR, WALL, GOAL, BOX, BOX_ON_GOAL, PLAYER, PLAYER_ON_GOAL)  # a grid cell holds its XSB glyph's index
_COLOURS = dict(zip(_CELLS, ("floor", "wall", "goal", "box", "box_on_goal", "player", "player")))


def _cells(board: Board) -> np.ndarray:
    """(rows, cols) ints for the grid: each square's XSB glyph, as its index in _CELLS."""
    return np.array([[_CELLS.index(ch) for ch in line] for line in to_xsb(board).split("\n")])


def _cell_style(value: int) -> tuple[str, str]:
    return _CELLS[value], "#%02x%02x%02x" % _RGB[_COLOURS[_CELLS[value]]]


def _random_level(rng: np.random.Generator) -> Board:
    """A random board that can be solved (push_distance throws most dead ones out at once)."""
    while True:
        board = random_board(rng)
        if push_distance(board) < float("inf") and solve(board) is not None:
            return board


def _moves_left_words(n: int | None, can_undo: bool) -> str:
    if n is None:
        return "no solution from this board" + (" (undo!)" if can_undo else "")
    return "solved" if n == 0 else f"{n} moves left"


def sokoban_widget(model: SokobanPolicy, board: Board | str | None = None, seed: int = 0):
    """A level to play (default: a random solvable one, drawn with `seed`). The arrow buttons
    (or a click on a square next to the player) move, "undo" takes a move back, "model's
    move" plays the policy's most likely legal action, "new level" draws another. Below the
    board: the policy's suggestion with its probability (of all five actions) and its
    nsteps estimate, and BFS's fewest moves left for comparison. The policy reads the boards
    visited, undone ones too, as in training; when its history is full, play starts again
    from the board reached.
    Needs a running kernel (Jupyter, Colab)."""
    import ipywidgets as w

    from toylib.widgets import BoardGrid

    rng = np.random.default_rng(seed)
    level = _random_level(rng) if board is None else _as_board(board)
    grid = BoardGrid(_cells(level), style=_cell_style, cell_px=30)
    buttons = {a: w.Button(description=ACTION_NAMES[a], layout=w.Layout(width="70px")) for a in (*MOVES, UNDO)}
    suggest, new = w.Button(description="model's move"), w.Button(description="new level")
    status = w.HTML()
    state: dict = {}

    def reset(start: Board, note: str = "") -> None:
        state.update(stack=[start], history=[start], note=note)
        if note == "":  # a new level: a new table and a new count
            state.update(table=moves_to_goal(start), moves=0, shortest=len(solve(start) or []))
        show()

    def show() -> None:
        stack, history = state["stack"], state["history"]
        here = stack[-1]
        grid.set(_cells(here))
        legal = [] if here.is_goal() else here.legal_actions()
        legal += [UNDO] if len(stack) > 1 else []
        for a, button in buttons.items():
            button.disabled = a not in legal
        action_logits, nsteps_logits, _ = _read(model, history)
        logits = action_logits[-1]  # (5,): after the boards so far
        allowed = torch.zeros(len(ACTION_NAMES), dtype=torch.bool)
        allowed[legal] = True
        best = int(logits.masked_fill(~allowed, -torch.inf).argmax()) if legal else None
        state["best"] = best
        suggest.disabled = best is None or here.is_goal()
        p = torch.softmax(logits, -1)
        words = NSTEPS_WORDS[int(nsteps_logits[-1].argmax())]
        estimate = f"{words} moves left" if words[0].isdigit() else words
        bfs = _moves_left_words(state["table"].get((here.box, here.player)), len(stack) > 1)
        if here.is_goal():
            line = f"<b>solved</b> in {state['moves']} moves (the fewest: {state['shortest']})"
        elif best is None:
            line = "no legal move"
        else:
            line = f"the model suggests <b>{ACTION_NAMES[best]}</b> (p = {float(p[best]):.2f})"
        status.value = (f"{line}; its nsteps estimate: <b>{estimate}</b>. "
                        f"Breadth-first search: <b>{bfs}</b>.{state['note']}")

    def play(action: int | None) -> None:
        stack, here = state["stack"], state["stack"][-1]
        if action == UNDO and len(stack) > 1:
            stack.pop()
        elif action in MOVES and not here.is_goal() and action in here.legal_actions():
            stack.append(here.apply_action(action))
        else:
            return
        state["moves"] += 1
        if len(state["history"]) == model.config.n_ctx:
            reset(stack[-1], f" (The model's history of {model.config.n_ctx} boards was full: "
                             "play goes on from this board as a new start.)")
            return
        state["history"].append(stack[-1])
        state["note"] = ""
        show()

    def clicked(row: int, col: int) -> None:
        r, c = divmod(state["stack"][-1].player, SIZE)
        for move, (dr, dc) in zip(MOVES, STEP):
            if (r + dr, c + dc) == (row, col):
                play(move)

    grid.on_click = clicked
    for a, button in buttons.items():
        button.on_click(lambda _, a=a: play(a))
    suggest.on_click(lambda _: play(state["best"]))
    new.on_click(lambda _: reset(_random_level(rng)))
    reset(level)
    controls = w.VBox([w.HBox([buttons[UP], buttons[DOWN]]), w.HBox([buttons[LEFT], buttons[RIGHT]]),
                       buttons[UNDO], suggest, new])
    return w.VBox([w.HBox([grid.widget, controls]), status])


if __name__ == "__main__":
    main()
