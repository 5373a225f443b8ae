"""The Sokoban world: a one-box board and its moves, `Play` (a board with its undo history), XSB
text and the policy's planes, the ground truth (BFS's `shortest_solution`, the backward BFS of
`moves_to_goal`, A* with `push_distance`), the 8 symmetries of a board, the post's generator
and the book's second (`walked_board`), and `render_rgb`. No torch.

Retells T. A. Wheeler, "A Transformer Sokoban Policy" (2024); see `toylib.sokoban`.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
from collections.abc import Sequence

import numpy as np

from toylib.grids import N_SYMMETRIES, cell_order, check_symmetry, square_map, turn
from toylib.search import astar, bfs

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
def neighbours(shape: tuple[int, int]) -> tuple[tuple[int, ...], ...]:
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

    def after(self, move: int) -> tuple[int, int] | None:
        """(box, player) after `move`, or None when a wall or the edge stops the player or the box."""
        step = neighbours(self.shape)
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
        return [m for m in MOVES if self.after(m) is not None]

    def apply_action(self, action: int) -> Board:
        after = self.after(action) if action in MOVES else None
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


@dataclasses.dataclass(frozen=True)
class Play:
    """A board in play with its undo history: the moves made from a start board, where UNDO
    takes back the last move still standing (the environment's fifth action; a Board alone has
    no history). Immutable, like a Board: `step` returns the next Play, so that a search can
    branch from one. Training entries, the environment, the policy's walks and the playable
    board all replay their actions through it."""

    board: Board  # the board reached
    earlier: tuple[Board, ...] = ()  # the boards UNDO goes back to, the most recent last

    @property
    def stack(self) -> tuple[Board, ...]:
        """The start, the boards between, and the board reached, last."""
        return (*self.earlier, self.board)

    def legal_actions(self) -> list[int]:
        """The board's legal moves, then UNDO when there is a move to take back."""
        return self.board.legal_actions() + ([UNDO] if self.earlier else [])

    def step(self, action: int) -> Play:
        """The play after `action`: a legal move, or UNDO back to the board before the last move."""
        if action == UNDO:
            if not self.earlier:
                raise ValueError("undo has no move to take back")
            return Play(self.earlier[-1], self.earlier[:-1])
        return Play(self.board.apply_action(action), self.stack)


# ----------------------------------------------------------------------------- reading and writing boards


def _check_shape(shape) -> tuple[int, int] | None:
    if shape is None:
        return None
    if not (len(shape) == 2 and all(isinstance(n, (int, np.integer)) and n > 0 for n in shape)):
        raise ValueError(f"shape is (rows, columns), or None for any size; got {shape!r}")
    return int(shape[0]), int(shape[1])


def walled(board: Board) -> bool:
    """Whether every square on the board's edge is a wall, as on every board the generators
    make: the policy's encoder convolves only the squares inside (`SokobanConfig.inside`)."""
    grid = board.grid
    return bool(grid[0].all() and grid[-1].all() and grid[:, 0].all() and grid[:, -1].all())


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


def shortest_solution(board: Board) -> list[int] | None:
    """A shortest list of moves that puts the box on the goal ([] when it is there), or None
    when no moves can: BFS over the board's (box, player) states, exhaustive."""
    path = bfs(board)
    return None if path is None else list(path.actions)


def moves_to_goal(board: Board) -> dict[tuple[int, int], int]:
    """{(box, player): the fewest moves that put the box on the goal}, for every placement of
    the box and player on `board`'s walls and goal from which that can be done; a placement
    missing from it is dead. One BFS answers for the whole board at once: played backwards
    from every solved placement (the box on the goal, the player on any other floor square),
    each step takes back a move, with or without the push it may have made.

    A breadth-first search over (box, player) pairs, written out here rather than through the
    core's `distances` on state objects: training draws thousands of boards, and this runs
    several times faster. A test holds the two to the same table."""
    step, walls = neighbours(board.shape), board.walls
    depth = {(board.goal, p): 0 for p in range(len(walls)) if not walls[p] and p != board.goal}
    queue = collections.deque(depth)
    while queue:
        box, player = queue.popleft()
        d = depth[(box, player)] + 1
        for move in MOVES:
            before = step[player][OPPOSITE[move]]  # where the player stood before the move
            if before < 0 or walls[before] or before == box:
                continue
            # the move without a push; and, with the box just ahead, the push that brought it here
            for earlier in ((box, before), (player, before)) if step[player][move] == box else ((box, before),):
                if earlier not in depth:
                    depth[earlier] = d
                    queue.append(earlier)
    return depth


def optimal_moves(board: Board, table: dict[tuple[int, int], int] | None = None) -> list[int]:
    """The moves that keep a shortest solution: each leads one move nearer the goal. Empty when
    the board is solved or cannot be solved. `table` is `moves_to_goal(board)`, if at hand."""
    table = moves_to_goal(board) if table is None else table
    left = table.get((board.box, board.player))
    if not left:  # None: dead; 0: solved
        return []
    return [m for m in MOVES if (after := board.after(m)) is not None and table.get(after) == left - 1]


@functools.lru_cache(maxsize=4096)
def _pushes_to_goal(walls: bytes, goal: int, shape: tuple[int, int]) -> dict[int, int]:
    """{square: the fewest pushes that bring the box from it to the goal}, if the player could
    always get behind it. The box alone, taken back from the goal one push at a time: it came to
    a square by a push from the square behind, with room for the player behind that. Written out
    as a breadth-first search over squares, as `moves_to_goal` is: drawing a data set asks it of
    every board it draws (a test holds it to the core's `distances`)."""
    step = neighbours(shape)
    depth = {goal: 0}
    queue = collections.deque([goal])
    while queue:
        square = queue.popleft()
        for move in MOVES:
            box = step[square][OPPOSITE[move]]  # where the box stood before this push
            if box < 0 or walls[box] or box in depth:
                continue
            player = step[box][OPPOSITE[move]]  # and where the player stood to push it
            if player >= 0 and not walls[player]:
                depth[box] = depth[square] + 1
                queue.append(box)
    return depth


def push_distance(board: Board) -> float:
    """The fewest pushes that could bring the box to the goal if the player could always get
    behind it; inf when none can. Every push is a move, so it never overestimates the moves
    left: an admissible heuristic for A*."""
    return _pushes_to_goal(board.walls, board.goal, board.shape).get(board.box, math.inf)


def live_squares(board: Board) -> np.ndarray:
    """(rows, cols) bool: the squares from which the box could still be pushed to the goal,
    were the player always able to get behind it (`push_distance` finite there). The rest of
    the floor is dead: a box pushed onto it is lost, whatever the player does after."""
    live = np.zeros(len(board.walls), bool)
    live[list(_pushes_to_goal(board.walls, board.goal, board.shape))] = True
    return live.reshape(board.shape)


def solve_astar(board: Board) -> list[int] | None:
    """As `shortest_solution`, by the core's A* with `push_distance`: as short, after fewer
    states."""
    path = astar(board, push_distance)
    return None if path is None else list(path.actions)


# ----------------------------------------------------------------------------- symmetries
# The 8 symmetries of a grid are the core's (toylib.grids); here is what they do to moves.


@functools.lru_cache(maxsize=None)
def move_map(s: int) -> tuple[int, ...]:
    """For each action, the action it becomes under symmetry s (UNDO stays UNDO). Worked out by
    sending the centre of a 3x3 grid and its neighbours through the symmetry."""
    check_symmetry(s)
    where, _ = square_map((3, 3), s)
    by_offset = {3 * dr + dc: m for m, (dr, dc) in zip(MOVES, STEP)}
    return tuple(by_offset[where[4 + 3 * dr + dc] - where[4]] for dr, dc in STEP) + (UNDO,)


def symmetric(board: Board, s: int) -> Board:
    """Symmetry s (0..7; 0 is the board itself) of a board: apply `move_map(s)` to its moves."""
    move_map(s)  # checks s
    where, shape = square_map(board.shape, s)
    walls = turn(board.grid, s).astype(np.uint8).tobytes()
    return Board(walls, where[board.goal], where[board.box], where[board.player], shape)


def canonical_key(board: Board) -> tuple:
    """The same for a board and its 8 symmetric variants, different for any other board: the
    least of (shape, walls, goal, box, player) over `symmetric(board, s)` for every s, read
    straight from the squares' order under each symmetry (drawing the data keys every board
    it draws, and building the 8 Boards took a fifth of that time)."""
    walls = np.frombuffer(board.walls, np.uint8)
    keys = []
    for s in range(N_SYMMETRIES):
        where, shape = square_map(board.shape, s)
        keys.append((shape, walls[_order(board.shape, s)].tobytes(), where[board.goal], where[board.box],
                     where[board.player]))
    return min(keys)


@functools.lru_cache(maxsize=None)
def _order(shape: tuple[int, int], s: int) -> np.ndarray:
    """`grids.cell_order` as an index array: the image's squares, read from the board's (read-only,
    as every caller shares it)."""
    order = np.array(cell_order(shape, s))
    order.flags.writeable = False
    return order


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


def walked_board(rng: np.random.Generator, size: int = SIZE, floor: tuple[int, int] = (14, 26),
                 keep_heading: float = 0.6) -> Board:
    """A board from the book's second generator, which the policy never trains on: a walker
    starts on a random square inside the border and carves floor step by step, going on the
    way it went with probability `keep_heading` and turning to a random side otherwise, until
    the floor has between floor[0] and floor[1] squares; then the goal, the box (off the goal)
    and the player (off the box) on random floor squares. Its boards are corridors one square
    wide that branch, cross and end blind, with small open patches where the walk turns back
    on itself: no rectangles and no walls speckled inside them, as the post's have."""
    lo, hi = floor
    inner = (size - 2) ** 2
    if not isinstance(size, (int, np.integer)) or size < 4:
        raise ValueError(f"size must be an int >= 4 (a border wall round room for 3 squares), got {size!r}")
    if not 3 <= lo <= hi <= inner:
        raise ValueError(f"floor is a range (fewest, most) of floor squares, 3 <= fewest <= most <= {inner}; "
                         f"got {floor!r}")
    if not 0.0 <= keep_heading <= 1.0:
        raise ValueError(f"keep_heading is a probability, got {keep_heading}")
    walls = np.ones((size, size), bool)
    row, col = (int(x) for x in rng.integers(1, size - 1, 2))
    walls[row, col] = False
    want, heading = int(rng.integers(lo, hi + 1)), int(rng.integers(4))
    while (~walls).sum() < want:
        if rng.random() >= keep_heading:
            heading = int(rng.integers(4))
        dr, dc = STEP[heading]
        if 1 <= row + dr < size - 1 and 1 <= col + dc < size - 1:  # the border stays wall
            row, col = row + dr, col + dc
            walls[row, col] = False
    floor_squares = np.flatnonzero(~walls)
    goal = int(floor_squares[rng.integers(floor_squares.size)])
    rest = floor_squares[floor_squares != goal]
    box = int(rest[rng.integers(rest.size)])
    rest = floor_squares[floor_squares != box]  # the player may stand on the goal
    player = int(rest[rng.integers(rest.size)])
    return Board(walls.astype(np.uint8).tobytes(), goal, box, player, (size, size))


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
