"""The Sokoban data: training entries (a shortest solution, with or without a detour and
its undo, and the nsteps class of every board), `SokobanSet` that packs them into arrays,
`augment` under the 8 symmetries, and `for_config`, which draws disjoint training,
validation and held-out boards from one seeded generator.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from toylib.draws import budget, distinct, stream
from toylib.grids import N_SYMMETRIES, square_map, turn
from toylib.sokoban.config import SokobanConfig
from toylib.sokoban.world import (
    ACTION_NAMES,
    MOVES,
    SIZE,
    UNDO,
    Board,
    Play,
    canonical_key,
    encode,
    move_map,
    moves_to_goal,
    optimal_moves,
    push_distance,
    random_board,
    walked_board,
)

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
    return replay(board, actions, table, bad[0] if bad else None)


def start_entry(board: Board, table: dict[tuple[int, int], int] | None = None) -> Entry:
    """The entry of a start board alone: its nsteps class (from `table`, its `moves_to_goal`,
    when at hand) and nothing else to learn, for the start loss (`net.start_loss`)."""
    table = moves_to_goal(board) if table is None else table
    shortest = table.get((board.box, board.player))
    return Entry((board,), (-1,), (False,), (nsteps_class(shortest),), ((),), shortest)


def _values(play: Play, table: dict[tuple[int, int], int]) -> list[float]:
    """The value of each board of `play`'s undo stack, start first: its fewest moves left when
    UNDO counts as a move, that is its BFS distance, or one more than the board UNDO returns
    to, whichever is less (math.inf for a dead start)."""
    values = []
    for board in play.stack:
        left = table.get((board.box, board.player), math.inf)
        values.append(min(left, values[-1] + 1) if values else left)
    return values


def replay(board: Board, actions: list[int], table: dict[tuple[int, int], int], masked: int | None) -> Entry:
    """Play `actions` from `board` (a `Play`, so that UNDO goes back through the history), and
    label each board with the nsteps class of its value (`_values`) and the actions that lead
    one move nearer the goal, UNDO among them when the board it returns to is nearer."""
    play = Play(board)
    boards, nsteps, optimal = [], [], []
    for action in [*actions, None]:
        values = _values(play, table)
        here, value = play.board, values[-1]
        boards.append(here)
        nsteps.append(nsteps_class(value))
        best = [m for m in MOVES if (after := here.after(m)) is not None and table.get(after) == value - 1]
        if len(values) > 1 and values[-2] == value - 1:
            best.append(UNDO)
        optimal.append(tuple(best))
        if action is not None:
            play = play.step(action)
    mask = tuple(k != masked for k in range(len(actions))) + (False,)
    shortest = table.get((board.box, board.player), math.inf)
    return Entry(tuple(boards), (*actions, -1), mask, tuple(nsteps), tuple(optimal), shortest)


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
        where = np.array(square_map(data.walls.shape[1:], s)[0] + (-1,))  # where[-1] == -1 keeps padding
        moves = np.array(move_map(s) + (-1,))  # moves[-1] == -1 keeps "no action"
        optimal = np.empty_like(data.optimal)
        optimal[..., list(move_map(s))] = data.optimal
        parts.append(dataclasses.replace(
            data, walls=turn(data.walls, s), goal=where[data.goal].astype(np.int16),
            box=where[data.box].astype(np.int16), player=where[data.player].astype(np.int16),
            actions=moves[data.actions].astype(np.int8), optimal=optimal, symmetry=np.full(len(data), s)))
    return SokobanSet(**{f.name: np.concatenate([getattr(p, f.name) for p in parts])
                         for f in dataclasses.fields(SokobanSet)})


def draw_boards(n_solvable: int, n_unsolvable: int, rng: np.random.Generator, seen: set | None = None,
                make: Callable[..., Board] = random_board,
                **generator) -> list[tuple[Board, dict | None]]:
    """Draw boards from `make(rng, **generator)` (the post's generator, or `walked_board`) until
    there are `n_solvable` that can be solved and `n_unsolvable` that cannot, in the order
    drawn, each with its `moves_to_goal` table (None when it cannot be solved). A board whose
    `canonical_key` is in `seen` is skipped, and those kept join `seen`: no board twice, nor a
    rotated or mirrored twin."""
    if n_solvable < 0 or n_unsolvable < 0:
        raise ValueError(f"the numbers of boards must be >= 0, got {n_solvable} and {n_unsolvable}")
    want = [n_unsolvable, n_solvable]  # still wanted: [unsolvable, solvable]

    def draw() -> tuple[Board, dict, bool]:
        board = make(rng, **generator)
        # Nine dead boards in ten show it at once: their box could not reach the goal even if the
        # player could always get behind it. Backward BFS answers for the rest, exhaustively.
        table = moves_to_goal(board) if push_distance(board) < math.inf else {}
        return board, table, (board.box, board.player) in table

    fresh = distinct(draw, key=lambda drawn: canonical_key(drawn[0]), seen=set() if seen is None else seen,
                     max_draws=budget(n_solvable + n_unsolvable), keep=lambda drawn: want[drawn[2]] > 0,
                     what=f"of {n_solvable} solvable and {n_unsolvable} unsolvable new boards "
                          f"({make.__name__}, settings {generator})")
    kept = []
    while want[0] or want[1]:
        board, table, solvable = next(fresh)
        want[solvable] -= 1
        kept.append((board, table if solvable else None))
    return kept


P_DETOUR = 0.5  # the share of solvable training boards whose entry makes one bad move and undoes it
N_VAL = 1_000  # validation boards, half of them solvable, for choosing when to stop training


def for_config(config: SokobanConfig, n_val: int = N_VAL) -> dict[str, SokobanSet]:
    """The post's data, from one generator seeded with `config.data_seed`: "train",
    `config.n_solvable` + `config.n_unsolvable` boards with their entries (P_DETOUR of the
    solvable ones making one bad move and undoing it) under all 8 symmetries; "held_out",
    `config.n_held_out` boards, half of them solvable, one entry each without detours or
    symmetries; "val", `n_val` more boards like the held-out ones (N_VAL, not a config
    field, so that the config the chapter prints stays the post's), for choosing when to stop
    training; and "starts", `config.n_starts` more boards, half of them solvable, each an
    entry of its start board alone (`start_entry`) under all 8 symmetries, for the start
    loss. No board, nor a rotated or mirrored twin of one, is in two of them. The held-out
    boards are drawn first, then the validation boards, then the training boards, so each
    stays the same when only the sizes after it change."""
    rng, seen = stream(config.data_seed), set()  # one generator draws the three sets in turn
    held_out = draw_boards((config.n_held_out + 1) // 2, config.n_held_out // 2, rng, seen)
    val = draw_boards((n_val + 1) // 2, n_val // 2, rng, seen)
    train = draw_boards(config.n_solvable, config.n_unsolvable, rng, seen)
    starts = draw_boards((config.n_starts + 1) // 2, config.n_starts // 2, rng, seen)
    return {
        "train": augment(to_set([make_entry(b, t or {}, rng, P_DETOUR if t else 0.0) for b, t in train])),
        "starts": augment(to_set([start_entry(b, t or {}) for b, t in starts])),
        "val": to_set([make_entry(b, t or {}) for b, t in val]),
        "held_out": to_set([make_entry(b, t or {}) for b, t in held_out]),
    }


def start_keys(data: dict[str, SokobanSet]) -> set:
    """The `canonical_key` of every start board in `data` (each board once, not its 8
    symmetric variants)."""
    return {canonical_key(d.board(int(i))) for d in data.values() for i in np.flatnonzero(d.symmetry == 0)}


def other_boards(n: int, data_seed: int, seen: set | None = None) -> SokobanSet:
    """`n` boards from the book's second generator (`world.walked_board`), which no policy
    trains on, half of them solvable, one entry each as the held-out boards have: for judging
    a policy on board shapes its generator never made. They come from the "test" stream of
    `data_seed` (`toylib.draws.stream`), not from the generator of `for_config`; a board whose
    `canonical_key` is in `seen` (`start_keys` of the data) is skipped."""
    drawn = draw_boards((n + 1) // 2, n // 2, stream(data_seed, "test"), set() if seen is None else set(seen),
                        make=walked_board)
    return to_set([make_entry(b, t or {}) for b, t in drawn])
