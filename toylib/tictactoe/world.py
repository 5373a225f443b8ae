"""The game of tic-tac-toe and its ground truth: the rules, minimax, every reachable
position, the board's 8 symmetries and a split that keeps twins together, kinds of position,
and a board drawn as an array. No torch: the models live in `net.py`."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from toylib.draws import stream
from toylib.grids import N_SYMMETRIES, cell_order

EMPTY, X, O = 0, 1, 2
SYMBOLS = ".XO"  # how each symbol prints
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
Board = tuple[int, ...]


# ----------------------------------------------------------------------------- the game


def to_move(boards: Sequence[int] | Any) -> Any:
    """Whose turn it is: X when X and O have as many marks (X moves first), else O.

    One board (a tuple or list of 9 symbols) -> X or O. Boards as an array or tensor
    (..., 9) -> (...,) of X and O, of the same kind and on the same device (no torch here)."""
    if isinstance(boards, (tuple, list)):
        return X if boards.count(X) == boards.count(O) else O
    even = (boards == X).sum(-1) == (boards == O).sum(-1)  # (...,) True: X to move
    return O + (X - O) * even


def line_winner(board: Sequence[int]) -> int:
    """X or O if that player has three in a line, else EMPTY (no check that the board is legal)."""
    for a, b, c in LINES:
        if board[a] != EMPTY and board[a] == board[b] == board[c]:
            return board[a]
    return EMPTY


def check_board(cells: Iterable[int]) -> Board:
    """Return `cells` as a board tuple, or raise ValueError if no game of tic-tac-toe
    (X first, turns alternating, no move after a win) can reach it."""
    try:
        board = tuple(int(c) for c in cells)
    except (TypeError, ValueError) as e:
        raise ValueError(f"a board is 9 symbols from {{EMPTY={EMPTY}, X={X}, O={O}}}: {e}") from None
    if len(board) != 9:
        raise ValueError(f"a board has 9 cells, got {len(board)}")
    bad = sorted({c for c in board if c not in (EMPTY, X, O)})
    if bad:
        raise ValueError(f"cells must be EMPTY={EMPTY}, X={X} or O={O}; got {bad}")
    nx, no = board.count(X), board.count(O)
    if nx not in (no, no + 1):
        raise ValueError(f"X moves first and turns alternate, so X has as many marks as O or one more; got {nx} X and {no} O")
    x_won = any(board[a] == board[b] == board[c] == X for a, b, c in LINES)
    o_won = any(board[a] == board[b] == board[c] == O for a, b, c in LINES)
    if x_won and o_won:
        raise ValueError("both players have three in a line: play stops at the first win")
    if x_won and nx != no + 1:
        raise ValueError("X has won, so X made the last move, but O has moved as often as X")
    if o_won and nx != no:
        raise ValueError("O has won, so O made the last move, but X has moved once more than O")
    return board


@dataclasses.dataclass(frozen=True)
class TicTacToe:
    """One position. Immutable: `apply_action` returns the next position."""

    board: Board = (EMPTY,) * 9

    def __post_init__(self):
        object.__setattr__(self, "board", check_board(self.board))

    def current_player(self) -> int:
        """Whose turn it is (X when the counts are equal), also for a finished game."""
        return to_move(self.board)

    def winner(self) -> int:
        return line_winner(self.board)

    def is_terminal(self) -> bool:
        return self.winner() != EMPTY or EMPTY not in self.board

    def legal_actions(self) -> list[int]:
        """Empty cells, in order; none once the game is over."""
        return [] if self.is_terminal() else [i for i, c in enumerate(self.board) if c == EMPTY]

    def apply_action(self, action: int) -> TicTacToe:
        if action not in self.legal_actions():
            why = "the game is over" if self.is_terminal() else f"legal actions are {self.legal_actions()}"
            raise ValueError(f"action {action} is not legal here: {why}")
        return TicTacToe(tuple(self.current_player() if i == action else c for i, c in enumerate(self.board)))

    def returns(self) -> tuple[int, int]:
        """(X's return, O's return): +1 for a win, -1 for a loss, 0 for a draw or an unfinished game."""
        w = self.winner()
        return (0, 0) if w == EMPTY else ((1, -1) if w == X else (-1, 1))

    def __str__(self) -> str:
        return "\n".join(" ".join(SYMBOLS[c] for c in self.board[r : r + 3]) for r in (0, 3, 6))


def parse_board(text: str) -> Board:
    """'XO. .X. ..O' (spaces and newlines ignored; '.', '_' or '-' for an empty cell) -> board."""
    chars = [c for c in text.upper() if not c.isspace()]
    bad = sorted({c for c in chars if c not in "XO._-"})
    if bad:
        raise ValueError(f"a board is written with X, O and '.', got {bad}")
    return check_board([X if c == "X" else O if c == "O" else EMPTY for c in chars])


# ----------------------------------------------------------------------------- ground truth: minimax


def child(board: Board, action: int, player: int) -> Board:
    """The board after `player` puts its symbol on cell `action`."""
    return board[:action] + (player,) + board[action + 1 :]


@functools.lru_cache(maxsize=None)
def minimax(board: Board) -> int:
    """The minimax score of a legal board for the player to move, with the
    post's tie-break.

    A finished game scores 0 for a draw; a loss scores -(1 + empty cells
    left), so that a win taken sooner (more cells left) scores higher for
    the winner and a loss put off longer scores higher for the loser.
    sign(score) is the game's value: +1 the player to move can force a
    win, 0 a draw, -1 a loss.
    """
    if line_winner(board) != EMPTY:
        return -(1 + board.count(EMPTY))  # the previous player just won
    if EMPTY not in board:
        return 0
    player = to_move(board)
    moves = [a for a in range(9) if board[a] == EMPTY]
    return max(-minimax(child(board, a, player)) for a in moves)


def move_scores(board: Sequence[int]) -> dict[int, int]:
    """{legal action: minimax score of that move for the player making it}."""
    state = TicTacToe(tuple(board))
    p = state.current_player()
    return {a: -minimax(child(state.board, a, p)) for a in state.legal_actions()}


def best_move(board: Sequence[int]) -> int:
    """The post's label: the move with the best score (the fastest win, else the slowest
    loss); among equal scores, the lowest cell."""
    scores = move_scores(board)
    if not scores:
        raise ValueError("the game is over: there is no move to make")
    return max(scores, key=lambda a: (scores[a], -a))


def optimal_moves(board: Sequence[int]) -> list[int]:
    """Every move that keeps the position's minimax value (win, draw or loss), however fast."""
    scores = move_scores(board)
    if not scores:
        raise ValueError("the game is over: there is no move to make")
    value = np.sign(max(scores.values()))
    return [a for a, s in scores.items() if np.sign(s) == value]


def game_value(board: Sequence[int]) -> int:
    """+1, 0 or -1: what the player to move gets with perfect play from here."""
    return int(np.sign(minimax(check_board(board))))


# ----------------------------------------------------------------------------- every position, split by symmetry


def all_positions() -> list[Board]:
    """Every board reachable from the empty board by legal play (5,478), finished ones included, sorted."""
    seen, frontier = {TicTacToe().board}, [TicTacToe()]
    while frontier:
        state = frontier.pop()
        for a in state.legal_actions():
            nxt = state.apply_action(a)
            if nxt.board not in seen:
                seen.add(nxt.board)
                frontier.append(nxt)
    return sorted(seen)


def open_positions() -> list[Board]:
    """Every reachable board where the game is not over (4,520), sorted."""
    return [b for b in all_positions() if not TicTacToe(b).is_terminal()]


# The square's 8 symmetries (toylib.grids) as reorderings of the 9 cells.
SYMMETRIES = tuple(cell_order((3, 3), s) for s in range(N_SYMMETRIES))


def permute(board: Sequence[int], perm: Sequence[int]) -> Board:
    """The board seen through a symmetry: cell i of the result is cell perm[i] of `board`."""
    return tuple(board[i] for i in perm)


def canonical(board: Sequence[int]) -> Board:
    """The representative of a board's symmetry class: the smallest of its 8 images."""
    return min(permute(board, p) for p in SYMMETRIES)


def split_by_symmetry(
    boards: Sequence[Board], fractions: tuple[float, float, float] = (0.8, 0.1, 0.1), seed: int = 0
) -> dict[str, list[Board]]:
    """Split boards into train / val / test so that each symmetry class lies wholly in one
    part: no test board has a rotated or mirrored twin in training. Classes are shuffled
    with a seeded generator and dealt out until each part holds its share of boards."""
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-9:
        raise ValueError(f"fractions must be three non-negative shares summing to 1, got {fractions}")
    classes: dict[Board, list[Board]] = {}
    for b in boards:
        classes.setdefault(canonical(b), []).append(b)
    keys = sorted(classes)
    order = stream(seed).permutation(len(keys))
    parts: dict[str, list[Board]] = {"train": [], "val": [], "test": []}
    # the first classes go to test, then val, the rest to train, so small parts get their share exactly
    quota = {"test": fractions[2] * len(boards), "val": fractions[1] * len(boards)}
    for i in order:
        members = classes[keys[i]]
        name = next((p for p in ("test", "val") if len(parts[p]) + len(members) / 2 <= quota[p]), "train")
        parts[name] += members
    return {k: sorted(v) for k, v in parts.items()}


# ----------------------------------------------------------------------------- kinds of position


def threats(board: Sequence[int], player: int) -> list[int]:
    """Empty cells where `player` would complete a line."""
    return sorted({c for line in LINES for c in line if board[c] == EMPTY and sum(board[i] == player for i in line) == 2})


def kind_of(board: Sequence[int]) -> str:
    """"win": the player to move can win now; "block": it cannot, and must stop the
    opponent's line; "fork": an optimal move makes two threats at once (`fork_moves`); else "quiet"."""
    board = TicTacToe(tuple(board)).board  # checked: a legal position
    me = to_move(board)
    if threats(board, me):
        return "win"
    if threats(board, O if me == X else X):
        return "block"
    return "fork" if fork_moves(board) else "quiet"


# each cell's place on the board: a corner is on 3 lines, an edge on 2, the centre on 4
CELL_PLACES = ("corner", "edge", "corner", "edge", "centre", "edge", "corner", "edge", "corner")


def fork_moves(board: Sequence[int]) -> list[int]:
    """The optimal moves that make two threats at once for the player to move."""
    state = TicTacToe(tuple(board))  # checked: a legal position
    me = state.current_player()
    return [a for a in optimal_moves(state.board) if len(threats(child(state.board, a, me), me)) >= 2]


def fork_place(board: Sequence[int]) -> str | None:
    """Where a fork position's forks are (`kind_of` is "fork"): "corner", "edge" or "centre"
    when every optimal move that makes two threats is on that kind of cell (`CELL_PLACES`),
    "mixed" when they are on more than one; None for any other kind of position."""
    if kind_of(board) != "fork":
        return None
    places = {CELL_PLACES[a] for a in fork_moves(board)}
    return places.pop() if len(places) == 1 else "mixed"


# ----------------------------------------------------------------------------- pictures


def board_image(board: Sequence[int], cell: int = 15) -> np.ndarray:
    """A board drawn as a (3*cell, 3*cell) array for `toylib.plot.animate`: 0 background,
    1 the strokes of an X, 2 the ring of an O, 3 the grid lines."""
    u = (np.arange(cell) + 0.5) / cell - 0.5  # cell coordinates in [-0.5, 0.5]
    yy, xx = np.meshgrid(u, u, indexing="ij")
    glyph = {
        X: ((np.abs(yy - xx) < 0.09) | (np.abs(yy + xx) < 0.09)) & (np.abs(yy) < 0.33) & (np.abs(xx) < 0.33),
        O: np.abs(np.hypot(yy, xx) - 0.28) < 0.06,
    }
    img = np.zeros((3 * cell, 3 * cell))
    for i, c in enumerate(check_board(board)):
        r, k = divmod(i, 3)
        if c != EMPTY:
            img[r * cell : (r + 1) * cell, k * cell : (k + 1) * cell][glyph[c]] = c
    img[cell :: cell, :] = 3
    img[:, cell :: cell] = 3
    return img
