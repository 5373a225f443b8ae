"""The data the model learns from: every open position as tensors (`Positions`), with the
post's label, every optimal move and each move's outcome, split by symmetry class (`Dataset`,
built from a config by `for_config`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import torch

from toylib.tictactoe.config import TicTacToeConfig
from toylib.tictactoe.world import (Board, TicTacToe, best_move, child, move_scores, open_positions, optimal_moves,
                                    split_by_symmetry)


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
        targets = [[child(s.board, m, s.current_player()) for m in (o + [o[0]] * (k - len(o)))] for s, o in zip(rows, opt)]
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


def for_config(config: TicTacToeConfig) -> Dataset:
    """The data a config trains on and is judged on: every open position, the symmetry
    classes split by `config.split_seed` (its only seed here: `config.seed` leaves the data alone)."""
    boards = open_positions()
    parts = split_by_symmetry(boards, seed=config.split_seed)
    return Dataset(**{k: Positions.of(v) for k, v in parts.items()}, everything=Positions.of(boards))
