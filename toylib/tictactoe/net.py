"""The model and its training: the config (and the post's four), the tokens and their
relations, `TicTacToeNet`, the loss, the moves and scores that training watches, and
`train`."""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from toylib.attention import Encoder
from toylib.device import pick_device, seed_everything
from toylib.infer import infer, model_device
from toylib.tictactoe.dataset import Dataset, Positions, for_config
from toylib.tictactoe.world import EMPTY, LINES, O, X, to_move
from toylib.train import Callback, History, TrainOptions, fit, minibatches, stop_when


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
        return TrainOptions.from_config(self, steps=self.max_epochs * steps_per_epoch, eval_every=steps_per_epoch,
                                        plateau=(self.plateau_factor, self.plateau_patience),
                                        patience=self.early_stopping, restore_best=True)


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
            swap = (to_move(boards) == O)[:, None, None]  # (batch, 1, 1)
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
    board_logp = board_logp.masked_fill(pad, float("-inf"))  # (batch, K)
    return -torch.logsumexp(board_logp, dim=1).mean() + aux


# ----------------------------------------------------------------------------- the model's moves and scores, which training watches


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
        mover = to_move(b)  # (batch,)
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


def train(config: TicTacToeConfig, data: Dataset | None = None, device: torch.device | str | None = None,
          callback: Callback | None = None, progress: bool = True) -> tuple[TicTacToeNet, History]:
    """Train on the training split (with `train_on_val`, on the validation split too), one
    evaluation per epoch. Without `data`, the data is `for_config(config)`.

    The learning rate is halved when `monitor` stalls (ReduceLROnPlateau, stepped).
    With `early_stopping`, training stops after that many epochs without a better `monitor`
    and the best weights are restored (the post's rule, on the validation loss). With
    `stop_at_target`, it stops at the first epoch where every training and validation
    position gets an optimal move; the test split is never looked at.
    """
    if data is None:
        data = for_config(config)
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
            learnt = score(m, learn)
            record["train_optimal"] = learnt.optimal  # over every position learnt from
            # positions given a non-optimal move, validation and training alike (each
            # counted once); the loss only breaks ties. Early stopping and the restored
            # weights go by this.
            wrong = (1 - learnt.optimal) * len(learn) + (0 if config.train_on_val else (1 - val.optimal) * len(data.val))
            record["shortfall"] = wrong + min(val_loss, 1.0)
        return record

    def at_target(r):
        return config.stop_at_target and r["val_optimal"] == 1.0 and r["train_optimal"] == 1.0

    history = fit(model, minibatches(*tensors, batch_size=config.batch_size, generator=gen),
                  lambda m, b: tictactoe_loss(m, Positions(*b)), config.train_options(per_epoch), eval_fn=evaluate,
                  callback=stop_when(at_target, callback), device=device, progress=progress)
    return model, history
