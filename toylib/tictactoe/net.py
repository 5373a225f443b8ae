"""The model and its loss: the tokens and their relations, `TicTacToeNet`, and
`tictactoe_loss`."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from toylib.attention import Encoder
from toylib.infer import model_device
from toylib.tictactoe.config import TicTacToeConfig
from toylib.tictactoe.dataset import Positions
from toylib.tictactoe.world import CELL_PLACES, EMPTY, LINES, O, to_move
from toylib.train import set_nll


# ----------------------------------------------------------------------------- the model


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
    return ("corner", "edge", "centre").index(CELL_PLACES[t])  # the kind embedding's rows 0, 1, 2


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
TOKEN_KIND = torch.tensor([_kind_of_token(t) for t in range(17)])


def as_seen_by_mover(boards: torch.Tensor) -> torch.Tensor:
    """(batch, 9) boards -> the same cells as the player to move sees them: 0 empty, 1 mine,
    2 theirs. X's and O's positions then look alike, and one strategy serves both."""
    mover = to_move(boards)[:, None]  # (batch, 1)
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
            kind = self.kind(TOKEN_KIND.to(boards.device))  # (17, d_model)
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
            swap = (to_move(boards) == O)[:, None, None]  # (batch, 1, 1)
            logits = torch.where(swap, logits[..., [0, 2, 1]], logits)
        return logits, self.value(x), patterns


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
    device = model_device(model)
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
    # -log of P(any of the optimal boards): logsumexp over the real ones
    return set_nll(board_logp, ~pad, dim=1).mean() + aux
