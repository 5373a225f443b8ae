"""Tic-tac-toe: the game, minimax, every reachable position, and a transformer that plays.

Retells "tic-tac-transformer" (S. Mullinix, 2025): a stack of transformer blocks reads the
board (9 cells, three symbols) and writes the optimal next board, one 3-way classification
per cell, trained on minimax's moves. Its measure was whole-board exact match against one
minimax label on a random split; this module measures what matters for a player instead:
whether the move keeps the game's minimax value, on positions whose rotated or mirrored
twins were never trained on, and whether the model ever loses. Its model reads the 9 cells
and the 8 lines as tokens, with an attention bias per relation between them, so that it
answers a rotated or mirrored board exactly alike.

The game follows the conventions of game libraries (OpenSpiel, Gymnasium): an immutable
state with `legal_actions`, `apply_action`, `is_terminal`, `winner`, `returns`, `__str__`.
Cells are numbered 0..8 row by row; a board is a tuple of 9 symbols, EMPTY, X or O.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from toylib import cli
from toylib.attention import Encoder, count_parameters
from toylib.device import pick_device, seed_everything
from toylib.infer import infer
from toylib.targets import Target, format_table, pct
from toylib.train import History, TrainOptions, fit, minibatches, stop_when

EMPTY, X, O = 0, 1, 2
SYMBOLS = ".XO"  # how each symbol prints
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
Board = tuple[int, ...]


# ----------------------------------------------------------------------------- the game


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
        return X if self.board.count(X) == self.board.count(O) else O

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


def _child(board: Board, action: int, player: int) -> Board:
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
    player = X if board.count(X) == board.count(O) else O
    moves = [a for a in range(9) if board[a] == EMPTY]
    return max(-minimax(_child(board, a, player)) for a in moves)


def move_scores(board: Sequence[int]) -> dict[int, int]:
    """{legal action: minimax score of that move for the player making it}."""
    state = TicTacToe(tuple(board))
    p = state.current_player()
    return {a: -minimax(_child(state.board, a, p)) for a in state.legal_actions()}


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


def _symmetries() -> tuple[tuple[int, ...], ...]:
    """The 8 symmetries of the square as permutations of cells: board' [i] = board[perm[i]]."""
    grid = np.arange(9).reshape(3, 3)
    perms = []
    for k in range(4):
        r = np.rot90(grid, k)
        perms += [tuple(r.ravel()), tuple(np.fliplr(r).ravel())]
    return tuple(tuple(int(i) for i in p) for p in perms)


SYMMETRIES = _symmetries()


def transform(board: Sequence[int], perm: Sequence[int]) -> Board:
    return tuple(board[i] for i in perm)


def canonical(board: Sequence[int]) -> Board:
    """The representative of a board's symmetry class: the smallest of its 8 images."""
    return min(transform(board, p) for p in SYMMETRIES)


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
    order = np.random.default_rng(seed).permutation(len(keys))
    parts: dict[str, list[Board]] = {"train": [], "val": [], "test": []}
    # the first classes go to test, then val, the rest to train, so small parts get their share exactly
    quota = {"test": fractions[2] * len(boards), "val": fractions[1] * len(boards)}
    for i in order:
        members = classes[keys[i]]
        name = next((p for p in ("test", "val") if len(parts[p]) + len(members) / 2 <= quota[p]), "train")
        parts[name] += members
    return {k: sorted(v) for k, v in parts.items()}


# ----------------------------------------------------------------------------- the data the model learns from


@dataclasses.dataclass(frozen=True)
class Positions:
    """A set of open positions with everything the loss and the measures need, as tensors.

    boards: (N, 9) symbols; mover: (N,) X or O; label: (N,) the post's single best move;
    optimal: (N, 9) True where a move keeps the minimax value; targets: (N, K, 9) every
    optimal next board, padded by repeating the first (so a logsumexp over K needs no mask
    beyond `n_optimal`); n_optimal: (N,)."""

    boards: torch.Tensor
    mover: torch.Tensor
    label: torch.Tensor
    optimal: torch.Tensor
    targets: torch.Tensor
    n_optimal: torch.Tensor
    outcome: torch.Tensor  # (N, 9): 0 lose, 1 draw, 2 win for a move there; -100 where the cell is taken

    def __len__(self) -> int:
        return len(self.boards)

    @property
    def label_boards(self) -> torch.Tensor:
        """(N, 9) the post's target: the board after the single best move."""
        return self.boards.scatter(1, self.label[:, None], self.mover[:, None])

    @staticmethod
    def concat(*parts: Positions) -> Positions:
        """The positions of `parts`, in order, as one set (targets padded to the widest)."""
        k = max(p.targets.shape[1] for p in parts)

        def pad(t):  # (N, K', 9) -> (N, k, 9), repeating the first target as `of` does
            return torch.cat([t, t[:, :1].expand(-1, k - t.shape[1], -1)], dim=1)

        return Positions(**{f.name: torch.cat([pad(getattr(p, f.name)) if f.name == "targets" else getattr(p, f.name)
                                               for p in parts]) for f in dataclasses.fields(Positions)})

    @staticmethod
    def of(boards: Sequence[Board]) -> Positions:
        if not boards:
            raise ValueError("need at least one position")
        rows = [TicTacToe(b) for b in boards]
        if any(s.is_terminal() for s in rows):
            raise ValueError("positions must be open: a finished game has no move to learn")
        opt = [optimal_moves(s.board) for s in rows]
        k = max(map(len, opt))
        targets = [[_child(s.board, m, s.current_player()) for m in (o + [o[0]] * (k - len(o)))] for s, o in zip(rows, opt)]
        optimal = torch.zeros(len(rows), 9, dtype=torch.bool)
        outcome = torch.full((len(rows), 9), -100)
        for i, (s, o) in enumerate(zip(rows, opt)):
            optimal[i, o] = True
            for a, v in move_scores(s.board).items():
                outcome[i, a] = int(np.sign(v)) + 1
        return Positions(
            boards=torch.tensor([s.board for s in rows]),
            mover=torch.tensor([s.current_player() for s in rows]),
            label=torch.tensor([best_move(s.board) for s in rows]),
            optimal=optimal,
            targets=torch.tensor(targets),
            n_optimal=torch.tensor([len(o) for o in opt]),
            outcome=outcome,
        )


@dataclasses.dataclass(frozen=True)
class Dataset:
    """The chapter's data: every open position, split by symmetry class."""

    train: Positions
    val: Positions
    test: Positions
    everything: Positions  # all 4,520 open positions

    @staticmethod
    def build(split_seed: int = 0) -> Dataset:
        boards = open_positions()
        parts = split_by_symmetry(boards, seed=split_seed)
        return Dataset(**{k: Positions.of(v) for k, v in parts.items()}, everything=Positions.of(boards))


# ----------------------------------------------------------------------------- the model


@dataclasses.dataclass(frozen=True)
class TicTacToeConfig:
    """A model and how to train it. The defaults reach the chapter's targets."""

    d_model: int = 32  # the post's small configs: 32 wide
    n_heads: int = 4
    n_layers: int = 4  # "blocks" in the post
    mlp_ratio: int = 4  # the feed-forward layer is mlp_ratio * d_model wide (4 in the post)
    dropout: float = 0.0
    loss: str = "any_optimal"  # "any_optimal": likelihood of the set of optimal next boards; "label": the post's
    relative: bool = True  # see the board as (empty, mine, theirs) of the player to move, not (empty, X, O)
    value_weight: float = 3.0  # weight of the auxiliary loss: the minimax outcome of each legal move
    positions: str = "graph"  # "graph": cell and line tokens, attention biased by relation; "cells": the post's, a vector per cell
    lr: float = 3e-3
    weight_decay: float = 0.3  # strong, for unseen positions; at 0.5 some seeds never fit a hard class (the post: 0.01)
    decay_all: bool = True  # decay biases and LayerNorm gains too (False: nanoGPT's rule; measured, no better)
    batch_size: int = 128
    max_epochs: int = 100
    plateau_factor: float = 0.5  # ReduceLROnPlateau on `monitor`, stepped once an epoch
    plateau_patience: int = 10  # epochs
    monitor: str = "shortfall"  # what early stopping watches: "shortfall" (non-optimal moves), or "val_loss" (the post's)
    early_stopping: int | None = 60  # epochs without a better `monitor`, then the best weights are restored
    stop_at_target: bool = True  # stop once every train and validation position gets an optimal move
    # learn from the validation classes too: the stopping rule above needs no held-out data,
    # and early positions with a deep tactic are few (see the chapter). False: the post's way
    train_on_val: bool = True
    split_seed: int = 0  # which symmetry classes are held out
    seed: int = 0  # initial weights and batch order

    def __post_init__(self):
        if self.loss not in ("any_optimal", "label"):
            raise ValueError(f"loss must be 'any_optimal' or 'label', got {self.loss!r}")
        if self.positions not in ("graph", "cells"):
            raise ValueError(f"positions must be 'graph' or 'cells', got {self.positions!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")

    def train_options(self, steps_per_epoch: int) -> TrainOptions:
        """Evaluated once an epoch: the plateau and early-stopping patiences count epochs."""
        return TrainOptions(steps=self.max_epochs * steps_per_epoch, lr=self.lr, weight_decay=self.weight_decay,
                            decay_all=self.decay_all,
                            plateau=(self.plateau_factor, self.plateau_patience), eval_every=steps_per_epoch,
                            monitor=self.monitor, patience=self.early_stopping, restore_best=True)


# The post's four experiments (its exact-match accuracy beside each), trained its way: one
# minimax label, AdamW at 1e-3, the learning rate halved after 30 epochs without a better
# validation loss, early stopping after 50.
POST_RECIPE = dict(loss="label", relative=False, value_weight=0.0, positions="cells", lr=1e-3, weight_decay=0.01,
                   plateau_patience=30, monitor="val_loss", early_stopping=50, stop_at_target=False, train_on_val=False)
POST_CONFIGS = {
    "1: d=32, 4 heads": (TicTacToeConfig(d_model=32, n_heads=4, **POST_RECIPE), 84.459),
    "2: + dropout 0.1": (TicTacToeConfig(d_model=32, n_heads=4, dropout=0.1, **POST_RECIPE), 92.229),
    "3: 8 heads": (TicTacToeConfig(d_model=32, n_heads=8, dropout=0.1, **POST_RECIPE), 94.932),
    "4: d=128, 8 heads": (TicTacToeConfig(d_model=128, n_heads=8, dropout=0.1, **POST_RECIPE), 96.621),
}


# The chapter's model reads 17 tokens: the 9 cells, then the 8 lines (3 rows, 3 columns, 2
# diagonals). A token is told only what survives the board's 8 symmetries: its symbol, and
# its kind (corner, edge or centre cell, or line). How two tokens
# stand to each other (a cell on a line, two lines crossing...) is one of the RELATION_NAMES
# relations, and each head learns a bias for each relation. Rotating or mirroring the board
# therefore rotates or mirrors the model's answer exactly: no position has a twin the model
# could treat differently.
TOKEN_NAMES = [str(c) for c in range(9)] + ["row 0", "row 1", "row 2", "col 0", "col 1", "col 2", "diag", "anti"]
RELATION_NAMES = (
    "cell: itself", "cell: cell on a shared line", "cell: cell on no shared line", "cell: its line", "cell: other line",
    "line: its cell", "line: other cell", "line: itself", "line: crossing line", "line: parallel line",
)  # fmt: skip


def _kind_of_token(t: int) -> int:
    if t >= 9:
        return 3  # a line: which line it is shows in how it stands to the cells and the other lines
    return 2 if t == 4 else 1 if t % 2 else 0  # centre, edge, corner


def _token_relations() -> torch.Tensor:
    """(17, 17) index into RELATION_NAMES of how key token j stands to query token i."""
    n = 9 + len(LINES)
    rel = torch.zeros(n, n, dtype=torch.long)
    for i in range(n):
        for j in range(n):
            if i < 9 and j < 9:
                rel[i, j] = 0 if i == j else 1 if any(i in line and j in line for line in LINES) else 2
            elif i < 9:
                rel[i, j] = 3 if i in LINES[j - 9] else 4
            elif j < 9:
                rel[i, j] = 5 if j in LINES[i - 9] else 6
            else:
                rel[i, j] = 7 if i == j else 8 if set(LINES[i - 9]) & set(LINES[j - 9]) else 9
    return rel


TOKEN_RELATIONS = _token_relations()
POST_SMALLEST = 51_462  # parameters of the post's config 1 (a test counts them)
_TOKEN_KIND = torch.tensor([_kind_of_token(t) for t in range(17)])


def as_seen_by_mover(boards: torch.Tensor) -> torch.Tensor:
    """(batch, 9) boards -> the same cells as the player to move sees them: 0 empty, 1 mine,
    2 theirs. X's and O's positions then look alike, and one strategy serves both."""
    mover = torch.where((boards == X).sum(1) == (boards == O).sum(1), X, O)[:, None]  # (batch, 1)
    return torch.where(boards == EMPTY, 0, torch.where(boards == mover, 1, 2))


class TicTacToeNet(nn.Module):
    """Board in, next board out: run blocks of self-attention (no causal mask, as in the
    post's code) and classify every cell as empty, X or O.

    positions="cells" is the post's model: 9 tokens, each cell's symbol plus one learned
    vector for where it is. positions="graph" is the chapter's: 17 tokens, cells and lines,
    and a learned attention bias per relation (see TOKEN_RELATIONS).

    forward(boards (batch, 9)) -> (logits (batch, 9, 3), values (batch, 9, 3),
                                   patterns (batch, layer, head, tokens, tokens))
    """

    def __init__(self, config: TicTacToeConfig = TicTacToeConfig()):
        super().__init__()
        self.config = config
        d = config.d_model
        self.symbol = nn.Embedding(3, d)
        if config.positions == "graph":
            self.kind = nn.Embedding(4, d)  # corner, edge, centre, line
            bias = torch.zeros(config.n_layers, config.n_heads, len(RELATION_NAMES))
            # start by reading along lines: a cell looks at its own lines, a line at its own
            # cells (e^3 = 20 times the weight of any other token); training moves it from there
            bias[:, :, RELATION_NAMES.index("cell: its line")] = 3.0
            bias[:, :, RELATION_NAMES.index("line: its cell")] = 3.0
            self.relation_bias = nn.Parameter(bias)  # (layer, head, relation)
        else:
            # at the symbol embedding's scale, as nn.Embedding starts: at GPT-2's 0.02 the
            # positions drown under the symbols and the model cannot tell the cells apart
            self.cell = nn.Parameter(torch.randn(9, d))
        self.blocks = Encoder(config.n_layers, d, config.n_heads, config.mlp_ratio * d, config.dropout)
        self.drop = nn.Dropout(config.dropout)
        self.unembed = nn.Linear(d, 3)
        self.value = nn.Linear(d, 3)  # per cell: lose / draw / win if the player to move plays there

    def forward(self, boards: torch.Tensor) -> tuple[torch.Tensor, ...]:
        tokens = as_seen_by_mover(boards) if self.config.relative else boards
        if self.config.positions == "graph":
            kind = self.kind(_TOKEN_KIND.to(boards.device))  # (17, d_model)
            cells = self.symbol(tokens) + kind[:9]  # (batch, 9, d_model)
            lines = kind[9:].expand(len(boards), -1, -1)  # (batch, 8, d_model)
            x = self.drop(torch.cat([cells, lines], dim=1))  # (batch, 17, d)
            rel = TOKEN_RELATIONS.to(boards.device)  # (17, 17)
            bias = self.relation_bias[:, :, rel]  # (layer, head, 17, 17)
            # each layer's bias is added to its attention scores; patterns:
            # (batch, layer, head, 17, 17)
            x, patterns = self.blocks(x, [b[None] for b in bias])
            x = x[:, :9]  # (batch, 9, d_model): the cells answer
        else:
            x = self.drop(self.symbol(tokens) + self.cell)  # (batch, 9, d)
            # patterns: (batch, layer, head, 9, 9)
            x, patterns = self.blocks(x)
        # (batch, 9, 3), over the same symbols as the input tokens
        logits = self.unembed(x)
        if self.config.relative:
            # back to (empty, X, O): for O to move, "mine" is O, "theirs" X
            mover = torch.where((boards == X).sum(1) == (boards == O).sum(1),
                                X, O)  # (batch,)
            swap = (mover == O)[:, None, None]  # (batch, 1, 1)
            logits = torch.where(swap, logits[..., [0, 2, 1]], logits)
        return logits, self.value(x), patterns


def check_boards_tensor(boards: torch.Tensor) -> None:
    if boards.dim() != 2 or boards.shape[1] != 9:
        raise ValueError(f"boards must be (batch, 9), got shape {tuple(boards.shape)}")
    if boards.numel() and not ((boards >= 0) & (boards <= 2)).all():
        raise ValueError(f"cells must be EMPTY={EMPTY}, X={X} or O={O}")


def tictactoe_loss(model: TicTacToeNet, batch: Positions | tuple,
                   kind: str | None = None) -> torch.Tensor:
    """Cross-entropy over the 9 cells of the next board.

    "label" (the post's): the target is the one board after `best_move`.
    "any_optimal": the target is the set of optimal next boards; the loss is
    -log P(the model's board is one of them), P of a board being the
    product of its cells' probabilities. The model is then free to prefer
    any optimal move, instead of being pushed toward one arbitrary choice
    among equals.
    """
    pos = batch if isinstance(batch, Positions) else Positions(*batch)
    kind = kind or model.config.loss
    device = next(model.parameters()).device
    logits, values, _ = model(pos.boards.to(device))
    aux = 0.0
    if model.config.value_weight:
        outcome = pos.outcome.to(device).reshape(-1)  # -100: a taken cell
        aux = model.config.value_weight * F.cross_entropy(
            values.reshape(-1, 3), outcome, ignore_index=-100)
    logp = F.log_softmax(logits, dim=-1)  # (batch, 9, 3)
    if kind == "label":
        label = pos.label_boards.to(device).reshape(-1)  # (batch * 9,)
        return F.nll_loss(logp.reshape(-1, 3), label) + aux
    targets = pos.targets.to(device)  # (batch, K, 9)
    k = targets.shape[1]
    # log P of each optimal next board: the sum of its cells' log P
    per_cell = logp[:, None].expand(-1, k, -1, -1)  # (batch, K, 9, 3)
    board_logp = per_cell.gather(3, targets[..., None]).squeeze(3).sum(2)
    # (batch, K): True where a target only repeats the first, as padding
    pad = (torch.arange(k, device=device)[None]
           >= pos.n_optimal.to(device)[:, None])
    board_logp = board_logp.masked_fill(pad, float("-inf"))  # (batch, K)
    return -torch.logsumexp(board_logp, dim=1).mean() + aux


@dataclasses.dataclass(frozen=True)
class Moves:
    """What a model does on a set of positions.

    raw: (N, 9) the board it writes, each cell's most likely symbol;
    move: (N,) its move, the legal move whose next board is most likely;
    move_prob: (N, 9) the probability the model gives each legal next board, normalised over legal moves."""

    raw: torch.Tensor
    move: torch.Tensor
    move_prob: torch.Tensor


def model_moves(model: TicTacToeNet, boards: torch.Tensor, batch_size: int = 2048) -> Moves:
    check_boards_tensor(boards)

    def moves(out, b):  # b: (batch, 9) boards on the model's device
        logp = F.log_softmax(out[0].float(), dim=-1)  # (batch, 9, 3) each cell's next symbol
        mover = torch.where((b == X).sum(1) == (b == O).sum(1), X, O)  # (batch,)
        # log P(next board = board with a move at cell a) = sum over cells of log p(kept symbol),
        # with cell a's term swapped for log p(mover's symbol): rank moves by that swap
        gain = logp.gather(2, mover[:, None, None].expand(-1, 9, 1)).squeeze(2) - logp[..., EMPTY]  # (batch, 9)
        gain = gain.masked_fill(b != EMPTY, float("-inf"))
        return logp.argmax(-1), gain.argmax(1), torch.softmax(gain, dim=1)

    return Moves(*infer(model, boards, batch_size=batch_size, keep=moves))


@dataclasses.dataclass(frozen=True)
class Scores:
    """How a model does on a set of positions (shares between 0 and 1)."""

    exact_label: float  # the board it writes is the post's single label (the post's measure)
    legal: float  # the board it writes is the input with one empty cell taken by the player to move
    raw_optimal: float  # the board it writes is legal and its move keeps the minimax value
    optimal: float  # its move (the most likely legal next board) keeps the minimax value
    n: int


def score(model: TicTacToeNet, pos: Positions) -> Scores:
    m = model_moves(model, pos.boards)  # on the CPU, wherever the model and `pos` are
    pos = Positions(*(getattr(pos, f.name).cpu() for f in dataclasses.fields(Positions)))
    changed = m.raw != pos.boards  # (N, 9)
    one_change = changed.sum(1) == 1
    where = changed.float().argmax(1)  # the changed cell, when there is exactly one
    rows = torch.arange(len(pos))
    legal = one_change & (pos.boards[rows, where] == EMPTY) & (m.raw[rows, where] == pos.mover)
    return Scores(
        exact_label=(m.raw == pos.label_boards).all(1).float().mean().item(),
        legal=legal.float().mean().item(),
        raw_optimal=(legal & pos.optimal[rows, where]).float().mean().item(),
        optimal=pos.optimal[rows, m.move].float().mean().item(),
        n=len(pos),
    )


def train_tictactoe(
    config: TicTacToeConfig = TicTacToeConfig(),
    data: Dataset | None = None,
    callback: Callable[[int, nn.Module, History], bool | None] | None = None,
    device: torch.device | str | None = None,
    progress: bool = True,
) -> tuple[TicTacToeNet, History]:
    """Train on the training split (with `train_on_val`, on the validation split too), one
    evaluation per epoch.

    The learning rate is halved when `monitor` stalls (ReduceLROnPlateau, stepped).
    With `early_stopping`, training stops after that many epochs without a better `monitor`
    and the best weights are restored (the post's rule, on the validation loss). With
    `stop_at_target`, it stops at the first epoch where every training and validation
    position gets an optimal move; the test split is never looked at.
    """
    data = data or Dataset.build(config.split_seed)
    seed_everything(config.seed)
    device = device or pick_device()
    model = TicTacToeNet(config).to(device)
    gen = torch.Generator().manual_seed(config.seed)
    learn = Positions.concat(data.train, data.val) if config.train_on_val else data.train  # what the model learns from
    tensors = tuple(getattr(learn, f.name) for f in dataclasses.fields(Positions))
    per_epoch = -(-len(learn) // config.batch_size)

    # scoring every training position each epoch costs about as much as an epoch of training
    # for a small model: only when the stopping rule needs it
    needs_train = config.stop_at_target or config.monitor == "shortfall"

    def evaluate(m):
        val_loss = tictactoe_loss(m, data.val, config.loss).item()
        val = score(m, data.val)
        record = {"val_loss": val_loss, "val_optimal": val.optimal, "val_exact_label": val.exact_label}
        if needs_train:
            train = score(m, learn)
            record["train_optimal"] = train.optimal  # over every position learnt from
            # positions given a non-optimal move, validation and training alike (each
            # counted once); the loss only breaks ties. Early stopping and the restored
            # weights go by this.
            wrong = (1 - train.optimal) * len(learn) + (0 if config.train_on_val else (1 - val.optimal) * len(data.val))
            record["shortfall"] = wrong + min(val_loss, 1.0)
        return record

    def at_target(r):
        return config.stop_at_target and r["val_optimal"] == 1.0 and r["train_optimal"] == 1.0

    history = fit(model, minibatches(*tensors, batch_size=config.batch_size, generator=gen),
                  lambda m, b: tictactoe_loss(m, Positions(*b)), config.train_options(per_epoch), eval_fn=evaluate,
                  callback=stop_when(at_target, callback), device=device, progress=progress)
    return model, history


# ----------------------------------------------------------------------------- playing whole games


Policy = Callable[[Board], int]


def model_policy(model: TicTacToeNet) -> dict[Board, int]:
    """The model's move in every open position, computed once: {board: cell}."""
    boards = open_positions()
    moves = model_moves(model, torch.tensor(boards)).move.tolist()
    return dict(zip(boards, moves))


def _results(board: Board, side: int, policy: dict[Board, int], replies: Callable[[Board], list[int]]) -> Counter:
    """Outcomes, for `side`, of every game from `board` where `side` follows `policy` and
    the other player tries every move that `replies` allows."""
    state = TicTacToe(board)
    if state.is_terminal():
        r = state.returns()[0 if side == X else 1]
        return Counter({"win" if r > 0 else "loss" if r < 0 else "draw": 1})
    moves = [policy[board]] if state.current_player() == side else replies(board)
    total: Counter = Counter()
    for a in moves:
        total += _results(state.apply_action(a).board, side, policy, replies)
    return total


def play_exhaustively(policy: dict[Board, int], side: int, opponent: str = "any") -> Counter:
    """Every game the policy can meet as `side` (X or O): the opponent tries every legal
    move ("any"), or every move that keeps its minimax value ("minimax"). Counts games
    by their outcome for the policy: win, draw, loss."""
    if side not in (X, O):
        raise ValueError(f"side must be X={X} or O={O}, got {side}")
    replies = {"any": lambda b: TicTacToe(b).legal_actions(), "minimax": optimal_moves}.get(opponent)
    if replies is None:
        raise ValueError(f"opponent must be 'any' or 'minimax', got {opponent!r}")
    return _results(TicTacToe().board, side, policy, replies)


def play_random(policy: dict[Board, int], side: int, games: int, seed: int = 0) -> Counter:
    """`games` games against a player who picks uniformly among legal moves."""
    rng = np.random.default_rng(seed)
    results: Counter = Counter()
    for _ in range(games):
        state = TicTacToe()
        while not state.is_terminal():
            moves = state.legal_actions()
            state = state.apply_action(policy[state.board] if state.current_player() == side else int(rng.choice(moves)))
        r = state.returns()[0 if side == X else 1]
        results["win" if r > 0 else "loss" if r < 0 else "draw"] += 1
    return results


# ----------------------------------------------------------------------------- kinds of position, and what the heads look at


def threats(board: Sequence[int], player: int) -> list[int]:
    """Empty cells where `player` would complete a line."""
    return sorted({c for line in LINES for c in line if board[c] == EMPTY and sum(board[i] == player for i in line) == 2})


def kind_of(board: Sequence[int]) -> str:
    """"win": the player to move can win now; "block": it cannot, and must stop the
    opponent's line; "fork": an optimal move makes two threats at once; else "quiet"."""
    state = TicTacToe(tuple(board))
    me = state.current_player()
    them = O if me == X else X
    if threats(board, me):
        return "win"
    if threats(board, them):
        return "block"
    if any(len(threats(_child(state.board, a, me), me)) >= 2 for a in optimal_moves(board)):
        return "fork"
    return "quiet"


def attention_profile(model: TicTacToeNet, boards: torch.Tensor) -> tuple[list[tuple], list[str]]:
    """Where each head of a "graph" model puts its attention, averaged over `boards`.

    Returns rows (layer, head, shares...) and the share names, which start "cell:" for the
    attention of a cell (the mean over the 9 cells) and "line:" for a line's (over the 8).
    A cell's attention goes to itself, the cells on its lines, the other cells, its own lines
    and the other lines (these five sum to 1); the cell's attention on empty cells, and on
    "hot" cells (empty cells where either player would complete a line), cuts across them.
    "hot cell: its hot lines" is the attention of a hot cell on the line(s) it would complete,
    averaged over the hot cells only. A
    line's attention goes to its own 3 cells, the other cells and the lines (summing to 1);
    its own cells are then split by what they hold: the mover's, the opponent's, empty.
    A last row gives each share under uniform attention, for comparison."""
    check_boards_tensor(boards)
    if model.config.positions != "graph":
        raise ValueError("attention_profile reads the relations of a positions='graph' model")
    p = infer(model, boards, keep=lambda out, _: out[2].float())  # (batch, layer, head, 17, 17), on the CPU
    boards = boards.cpu()  # the masks below are built on the CPU, beside the pattern
    rel = TOKEN_RELATIONS[None]  # (1, 17, 17)
    mover = torch.where((boards == X).sum(1) == (boards == O).sum(1), X, O)[:, None]  # (batch, 1)
    hot = torch.tensor([[c in threats(b, X) or c in threats(b, O) for c in range(9)] for b in boards.tolist()])
    # (batch, 17, 17): key j is a hot line through query cell i, one that the move at i would complete
    hot_line = torch.zeros(len(boards), 17, 17, dtype=torch.bool)
    for n, b in enumerate(boards.tolist()):
        for j, line in enumerate(LINES):
            if sorted(b[c] for c in line) in ([EMPTY, X, X], [EMPTY, O, O]):
                hot_line[n, next(c for c in line if b[c] == EMPTY), 9 + j] = True
    hot_query = hot_line.any(-1)  # (batch, 17): the query is a hot cell
    held = {"mine": boards == mover, "theirs": (boards != EMPTY) & (boards != mover), "empty": boards == EMPTY}  # (batch, 9)
    key = lambda cells: F.pad(cells, (0, 8))[:, None, :]  # noqa: E731  (batch, 9) -> (batch, 1, 17): key j is such a cell
    cell_q = (torch.arange(17) < 9)[None, :, None]  # (1, 17, 1): the query is a cell
    masks = {
        "cell: itself": rel == 0, "cell: cells on its lines": rel == 1, "cell: other cells": rel == 2,
        "cell: its lines": rel == 3, "cell: other lines": rel == 4,
        "cell: empty cells": cell_q & key(held["empty"]), "cell: hot cells": cell_q & key(hot),
        "hot cell: its hot lines": hot_line,
        "line: its cells": rel == 5, "line: other cells": rel == 6, "line: lines": rel >= 7,
        **{f"line: its cells, {k}": (rel == 5) & key(v) for k, v in held.items()},
    }  # fmt: skip

    def share(a, name):  # a: (batch, 17, 17); the mean over boards and queries of the attention on such keys
        if name.startswith("hot cell"):  # over the hot cells only
            return (a * masks[name]).sum(-1)[hot_query].mean().item()
        return (a * masks[name]).sum((-1, -2)).mean().item() / (9 if name.startswith("cell") else 8)

    rows = [(layer, head, *[share(p[:, layer, head], n) for n in masks]) for layer in range(p.shape[1]) for head in range(p.shape[2])]
    uniform = torch.full((len(boards), 17, 17), 1 / 17)
    rows.append(("uniform", "", *[share(uniform, n) for n in masks]))
    return rows, list(masks)


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


def game_frames(model: TicTacToeNet, side: int = X, opponent: Policy | None = None, cell: int = 15) -> tuple[np.ndarray, list[str]]:
    """A whole game, the model playing `side` against `opponent` (minimax's `best_move` by
    default), as frames for `toylib.plot.animate`: (moves + 1, 2, 3*cell, 3*cell), the
    board beside the probability the model gives each cell at its own turns; and titles."""
    opponent = opponent or best_move
    state, frames, titles = TicTacToe(), [], []
    blank = np.zeros((3 * cell, 3 * cell))
    while True:
        probs = blank
        if not state.is_terminal() and state.current_player() == side:
            m = model_moves(model, torch.tensor([state.board]))
            probs = np.kron(m.move_prob[0].numpy().reshape(3, 3), np.ones((cell, cell))) * 3  # same 0..3 scale as the board
        frames.append(np.stack([board_image(state.board, cell), probs]))
        if state.is_terminal():
            w = state.winner()
            titles.append(f"{SYMBOLS[w]} wins" if w else "draw")
            break
        mover = state.current_player()
        move = int(m.move[0]) if mover == side else opponent(state.board)
        who = "model" if mover == side else "minimax" if opponent is best_move else "opponent"
        titles.append(f"{SYMBOLS[mover]} ({who}) to move: plays cell {move}")
        state = state.apply_action(move)
    return np.stack(frames), titles


# ----------------------------------------------------------------------------- the chapter's targets


@dataclasses.dataclass(frozen=True)
class Summary:
    """What `summarise` measured of a trained model."""

    test: Scores  # held-out symmetry classes
    everything: Scores  # all 4,520 open positions
    exhaustive_x: Counter  # every game as X against every reply
    exhaustive_o: Counter
    minimax_x: Counter  # every game against every optimal reply
    minimax_o: Counter
    random_x: Counter  # games against a uniformly random player
    random_o: Counter
    parameters: int

    def targets(self, train_seconds: float, max_parameters: int = POST_SMALLEST, time_limit: float = 120.0) -> list[Target]:
        """The chapter's summary: the targets and what was measured."""
        games = lambda c: f"{c['loss']} lost of {sum(c.values()):,} ({c['win']:,} won)"  # noqa: E731
        return [
            Target(f"optimal move, {self.test.n} held-out test positions", "100 %", pct(self.test.optimal),
                   self.test.optimal == 1),
            Target(f"optimal move, all {self.everything.n:,} open positions", "100 %", pct(self.everything.optimal),
                   self.everything.optimal == 1),
            Target("exhaustive play as X, every reply", "0 lost", games(self.exhaustive_x), self.exhaustive_x["loss"] == 0),
            Target("exhaustive play as O, every reply", "0 lost", games(self.exhaustive_o), self.exhaustive_o["loss"] == 0),
            Target("parameters", f"<= {max_parameters:,} (the post's smallest)", f"{self.parameters:,}",
                   self.parameters <= max_parameters),
            Target("training time", f"< {time_limit / 60:.0f} min", f"{train_seconds:.0f} s", train_seconds < time_limit,
                   machine=True),
        ]

    def detail_rows(self) -> list[tuple[str, str, str]]:
        """(measure, test positions, all positions) for the scores without a target, and the other games."""
        games = lambda c: f"won {c['win']:,}, drawn {c['draw']:,}, lost {c['loss']:,}"  # noqa: E731
        return [
            ("exact label (the post's measure)", pct(self.test.exact_label), pct(self.everything.exact_label)),
            ("written board is a legal move", pct(self.test.legal), pct(self.everything.legal)),
            ("written board is legal and optimal", pct(self.test.raw_optimal), pct(self.everything.raw_optimal)),
            ("move (likeliest legal board) optimal", pct(self.test.optimal), pct(self.everything.optimal)),
            ("as X against minimax, every optimal reply", games(self.minimax_x), ""),
            ("as O against minimax, every optimal reply", games(self.minimax_o), ""),
            (f"as X against random play, {sum(self.random_x.values()):,} games", games(self.random_x), ""),
            (f"as O against random play, {sum(self.random_o.values()):,} games", games(self.random_o), ""),
        ]


def summarise(model: TicTacToeNet, data: Dataset, random_games: int = 1000, seed: int = 0) -> Summary:
    policy = model_policy(model)
    return Summary(
        test=score(model, data.test),
        everything=score(model, data.everything),
        exhaustive_x=play_exhaustively(policy, X),
        exhaustive_o=play_exhaustively(policy, O),
        minimax_x=play_exhaustively(policy, X, "minimax"),
        minimax_o=play_exhaustively(policy, O, "minimax"),
        random_x=play_random(policy, X, random_games, seed),
        random_o=play_random(policy, O, random_games, seed + 1),
        parameters=count_parameters(model),
    )


# ----------------------------------------------------------------------------- for readers with a kernel


def play_widget(model: TicTacToeNet):
    """A clickable board: you play one side, the model the other. Returns the widget (the
    last expression of a cell displays it). Needs a running kernel (Jupyter, Colab)."""
    import ipywidgets as w

    from toylib.widgets import BoardGrid

    policy = model_policy(model)
    board = BoardGrid(np.zeros((3, 3), int), style=lambda v: (SYMBOLS[v] if v else " ", None), cell_px=60)
    side = w.ToggleButtons(options=[("you play X", X), ("you play O", O)], value=X)
    new = w.Button(description="new game")
    status = w.HTML()
    game = {"state": TicTacToe()}

    def refresh():
        s = game["state"]
        cells = np.array(s.board).reshape(3, 3)
        board.set(cells)
        your_turn = not s.is_terminal() and s.current_player() == side.value
        board.enable((cells == EMPTY) & your_turn)
        if s.is_terminal():
            winner = s.winner()
            who = "you" if winner == side.value else "the model"
            status.value = "<b>draw</b>" if not winner else f"<b>{SYMBOLS[winner]} wins</b> ({who})"
        else:
            status.value = "your move" if your_turn else "the model is thinking"

    def model_turn():
        s = game["state"]
        if not s.is_terminal() and s.current_player() != side.value:
            game["state"] = s.apply_action(policy[s.board])
        refresh()

    def click(row: int, col: int):
        game["state"] = game["state"].apply_action(3 * row + col)
        model_turn()

    def restart(_=None):
        game["state"] = TicTacToe()
        model_turn()

    board.on_click = click
    new.on_click(restart)
    side.observe(lambda change: restart(), names="value")
    restart()
    return w.VBox([w.HBox([side, new]), board.widget, status])


# ----------------------------------------------------------------------------- command line


def _train(config: TicTacToeConfig, device, progress: bool, args) -> tuple[TicTacToeNet, History, dict]:
    data = Dataset.build(config.split_seed)
    model, history = train_tictactoe(config, data, device=device, progress=progress)
    return model, history, {"data": data}


def _measure(model: TicTacToeNet, config: TicTacToeConfig, seconds: float, info: dict, args) -> list[Target]:
    # benchmarks (args=None) skip the random games and the detail table: they have no target
    summary = summarise(model.cpu(), info.get("data") or Dataset.build(config.split_seed),
                        random_games=0 if args is None else 1000)
    if args is not None:
        print(format_table(summary.detail_rows(), ("measure", "test positions", "all positions")))
    return summary.targets(seconds)


def _extra_arguments(p) -> None:
    p.add_argument("--post", type=int, choices=range(1, len(POST_CONFIGS) + 1),
                   help="train the post's config 1, 2, 3 or 4, its way, instead")


def _base_config(args) -> TicTacToeConfig:
    return list(POST_CONFIGS.values())[args.post - 1][0] if args.post else TicTacToeConfig()


CHAPTER = cli.Chapter(
    "tictactoe", "A transformer learns to play tic-tac-toe; measured on every position and in exhaustive play.",
    TicTacToeConfig, TicTacToeNet, _train, _measure,
    options=(cli.Option("--split-seed", "split_seed", "which symmetry classes are held out"),),
    extra_arguments=_extra_arguments,
    base_config=_base_config,
)

main = cli.entry_point(CHAPTER)  # python -m toylib.<chapter>, and its console script


if __name__ == "__main__":
    main()
