"""Looking inside a trained model: where each head puts its attention, the move a model makes
beside where the cell it plays looks, a whole game as frames for an animation, and a board to
play against the model in the browser."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

from toylib.infer import infer
from toylib.live import Live, weights
from toylib.plot import DPI, LABEL_PT, attention_grid, colorbar
from toylib.tictactoe.dataset import Positions
from toylib.tictactoe.measure import OUTCOME_WEIGHT, Policy, check_boards_tensor, model_moves, without
from toylib.tictactoe.net import TOKEN_KIND, TOKEN_NAMES, TOKEN_RELATIONS, TicTacToeNet
from toylib.tictactoe.world import EMPTY, LINES, O, SYMBOLS, X, TicTacToe, best_move, board_image, threats, to_move


# ----------------------------------------------------------------------------- what the heads look at


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
    mover = to_move(boards)[:, None]  # (batch, 1)
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


@dataclasses.dataclass(frozen=True)
class HeadRoles:
    """What `attention_profile`'s rows say of the heads, one entry per (layer, head)."""

    layer: np.ndarray  # (heads,) each row's layer
    head: np.ndarray  # (heads,) its head
    share: dict[str, np.ndarray]  # profile name -> (heads,) shares
    uniform: dict[str, float]  # profile name -> the share under uniform attention

    @property
    def first(self) -> np.ndarray:  # (heads,) bool: layer 0
        return self.layer == 0

    @property
    def later(self) -> np.ndarray:
        return self.layer > 0

    @property
    def finds(self) -> np.ndarray:
        """Later heads where a hot cell puts over 4x uniform on the line it would complete."""
        return self.later & (self.share["hot cell: its hot lines"] > 4 * self.uniform["hot cell: its hot lines"])

    @property
    def reads_opponent(self) -> np.ndarray:
        """Heads whose lines read the opponent's marks over the mover's."""
        return self.share["line: its cells, theirs"] > self.share["line: its cells, mine"]

    @property
    def top_opponent(self) -> int:
        """The row of the head whose lines most favour the opponent's marks."""
        mine, theirs = self.share["line: its cells, mine"], self.share["line: its cells, theirs"]
        return int(np.argmax(np.where(self.reads_opponent, theirs - mine, -1)))

    @property
    def empty_reader(self) -> int:
        """The row of the last layer's head whose lines read empty cells most."""
        last = np.flatnonzero(self.layer == self.layer.max())
        return int(last[np.argmax(self.share["line: its cells, empty"][last])])

    @property
    def hero(self) -> int:
        """The row of the head where a hot cell most looks at the line it would complete."""
        return int(np.argmax(self.share["hot cell: its hot lines"]))


def head_roles(profile: list[tuple], names: list[str]) -> HeadRoles:
    """`attention_profile`'s (rows, names) as arrays per head; its last row is uniform's."""
    *rows, uniform = profile
    if not rows or uniform[0] != "uniform":
        raise ValueError("head_roles reads attention_profile's rows, the last one uniform attention's")
    shares = np.array([r[2:] for r in rows], dtype=float)  # (heads, names)
    return HeadRoles(np.array([r[0] for r in rows]), np.array([r[1] for r in rows]),
                     {n: shares[:, k] for k, n in enumerate(names)}, dict(zip(names, uniform[2:])))


def head_claims(roles: HeadRoles) -> dict[str, bool]:
    """The chapter's sentences on what the heads read, each checkable: layer 0's lines gather
    their cells and cells their lines, later layers more so; a later head finds the line a
    hot cell completes; some head reads the opponent's marks; a last-layer head reads empty
    cells, and its cells look at empty and hot cells."""
    s, u, e = roles.share, roles.uniform, roles.empty_reader
    own, lines = s["line: its cells"], s["cell: its lines"]
    return {
        "in layer 0 a line puts over 2x uniform on its own cells":
            bool(own[roles.first].min() > 2 * u["line: its cells"]),
        "in layer 0 a cell puts over the uniform share on its own lines":
            bool(lines[roles.first].min() > u["cell: its lines"]),
        "later layers put more on a cell's lines than layer 0 does":
            bool(lines[roles.later].max() > lines[roles.first].max()),
        "a later head puts over 4x uniform of a hot cell on its line": bool(roles.finds.any()),
        "some head's line reads the opponent's marks over the mover's": bool(roles.reads_opponent.any()),
        "a last-layer head's line reads empty cells over either's marks":
            bool(s["line: its cells, empty"][e] > max(s["line: its cells, mine"][e], s["line: its cells, theirs"][e])),
        "and its cells look at empty and hot cells above uniform":
            bool(s["cell: empty cells"][e] > u["cell: empty cells"] and s["cell: hot cells"][e] > u["cell: hot cells"]),
    }


# ----------------------------------------------------------------------------- pictures


# Every other token named: 17 names at 9 pt do not fit a panel a quarter of the page wide.
TOKEN_TICKS = [name if k % 2 == 0 else "" for k, name in enumerate(TOKEN_NAMES)]


def position_attention(model: TicTacToeNet, board: Sequence[int], title: str, columns: int = 4,
                       size: float = 1.75) -> Figure:
    """Every layer's and head's attention pattern on one position, `columns` panels a row, on
    one colour scale with its colour bar. The 17 tokens are the 9 cells, then the 3 rows, the
    3 columns, the diagonal and the anti-diagonal; a white line in each panel parts the cells
    from the lines, and every other token is named."""
    boards = torch.tensor([tuple(board)])  # (1, 9)
    check_boards_tensor(boards)
    patterns = infer(model, boards)[2][0].float()  # (layer, head, 17, 17)
    fig = attention_grid(patterns, title=title, size=size, labels=TOKEN_TICKS, columns=columns)
    for ax in fig.axes:
        if ax.images and ax.get_label() != "<colorbar>":
            ax.axhline(8.5, color="white", lw=0.8)
            ax.axvline(8.5, color="white", lw=0.8)
    return fig


def _draw_board(ax, board: Sequence[int], shade: np.ndarray, cmap: str, vmax: float, marks: str = "black"):
    """One board on `ax`: each cell filled by `shade` (9 values on a 0..vmax scale), its X or O
    written on top; returns the image (for a colour bar)."""
    image = ax.imshow(np.asarray(shade, float).reshape(3, 3), cmap=cmap, vmin=0, vmax=vmax)
    for c, v in enumerate(board):
        if v != EMPTY:
            ax.text(c % 3, c // 3, SYMBOLS[v], ha="center", va="center", fontsize=20, color=marks, weight="bold")
    for k in (0.5, 1.5):  # the grid
        ax.axhline(k, color="0.4", lw=1)
        ax.axvline(k, color="0.4", lw=1)
    ax.set_xticks([])
    ax.set_yticks([])
    return image


def move_and_attention(model: TicTacToeNet, boards: Sequence[Sequence[int]], titles: Sequence[str],
                       layer: int, head: int, width: float = 7.0, stacked: bool = False) -> Figure:
    """The model at work on a few positions, one column each. Top: the board, each empty cell
    shaded by the probability the model gives a move there, the cell it plays outlined in red.
    Bottom: where that cell looks in `layer`'s `head`: each cell shaded by its attention weight,
    and each line (row, column, diagonal) drawn across the board in the colour of its weight
    (the fainter, the more transparent).
    Both rows have colour bars; the attention's scale runs from 0 to its largest weight drawn.
    stacked: one row per position instead (the two pictures side by side, the colour bars
    below), for a narrow page; `width` is then the figure's width."""
    b = torch.tensor([tuple(x) for x in boards])  # (n, 9)
    check_boards_tensor(b)
    if len(b) == 0 or len(titles) != len(b):
        raise ValueError(f"give one title per board, at least one board; got {len(titles)} titles for {len(b)} boards")
    if any(TicTacToe(tuple(x)).is_terminal() for x in b.tolist()):
        raise ValueError("every board needs a move to make: a finished game has none")
    n_layers, n_heads = model.config.n_layers, model.config.n_heads
    if not (0 <= layer < n_layers and 0 <= head < n_heads):
        raise ValueError(f"layer {layer}, head {head} is not in this model's {n_layers} layers of {n_heads} heads")
    moves = model_moves(model, b)
    move = moves.move.tolist()  # (n,)
    pattern = infer(model, b)[2][:, layer, head].float()  # (n, 17, 17)
    looks = pattern[torch.arange(len(b)), moves.move]  # (n, 17): the played cell's attention on every token
    vmax = float(looks.max())
    cmap = plt.get_cmap("viridis")
    n = len(b)
    if stacked:
        side = min((width - 0.6) / 2, 1.8)
        fig, axes = plt.subplots(n, 2, figsize=(width, n * (side + 0.45) + 1.3), squeeze=False, dpi=DPI,
                                 layout="constrained")
        axes = axes.T  # (2, n) as below: the moves, then the attention
    else:
        side = min((width - 1.2) / n, 1.45)  # a board's side in inches, beside the colour bars
        fig, axes = plt.subplots(2, n, figsize=(width, 2 * side + 0.9), squeeze=False, dpi=DPI, layout="constrained")
    for k in range(n):
        top, bottom = axes[0, k], axes[1, k]
        probs = _draw_board(top, b[k].tolist(), moves.move_prob[k].numpy(), "Greens", 1.0)
        r, c = divmod(move[k], 3)
        top.add_patch(plt.Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="red", lw=3))
        top.set_title(f"{titles[k]}:\nplays cell {move[k]}", fontsize=LABEL_PT)
        weights = _draw_board(bottom, b[k].tolist(), looks[k, :9].numpy(), "viridis", vmax, marks="white")
        for j, line in enumerate(LINES):  # a line token's weight, drawn along the line
            (r0, c0), (r1, c1) = divmod(line[0], 3), divmod(line[-1], 3)
            w = float(looks[k, 9 + j]) / vmax
            # faint lines fade out, instead of crossing the board in the background's colour
            bottom.plot([c0, c1], [r0, r1], color=cmap(w), alpha=w, lw=6, solid_capstyle="round")
        bottom.add_patch(plt.Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="red", lw=3))
        bottom.set_title(f"where cell {move[k]} looks", fontsize=LABEL_PT)
    place = {"location": "bottom", "aspect": 12} if stacked else {"aspect": 15}
    for image, row, label in ((probs, axes[0], "move probability"),
                              (weights, axes[1], f"attention weight,\nlayer {layer} head {head}")):
        colorbar(fig, image, row.tolist(), label, shrink=0.9, **place)
    return fig


def knockout_boards(model: TicTacToeNet, boards: Sequence[Sequence[int]], titles: Sequence[str],
                    parts: dict[str, dict], width: float = 4.4) -> Figure:
    """The same positions played by `model` and by copies of it with parts taken out: one row
    per position, one column per model (`parts`: {column title: without()'s keyword
    arguments}; {} is the whole model). Each board's empty cells are shaded by the
    probability of a move there; the cell played is outlined, in red if the move is optimal,
    dashed black if it is not (the title says "wrong"). 4.4 inches wide, three boards fit a
    phone's column whole."""
    b = torch.tensor([tuple(x) for x in boards])  # (n, 9)
    check_boards_tensor(b)
    if len(b) == 0 or len(titles) != len(b) or not parts:
        raise ValueError(f"give at least one board, one title per board and one model: {len(b)} boards, "
                         f"{len(titles)} titles, {len(parts)} models")
    if any(TicTacToe(tuple(x)).is_terminal() for x in b.tolist()):
        raise ValueError("every board needs a move to make: a finished game has none")
    optimal = Positions.of([tuple(x) for x in b.tolist()]).optimal  # (n, 9)
    n, m = len(b), len(parts)
    side = min((width - 0.3) / m, 1.6)
    fig, axes = plt.subplots(n, m, figsize=(width, n * (side + 0.6) + 0.4), squeeze=False, dpi=DPI,
                             layout="constrained")
    for j, (name, kwargs) in enumerate(parts.items()):
        played = model_moves(without(model, **kwargs) if kwargs else model, b)
        for k in range(n):
            ax, move = axes[k, j], int(played.move[k])
            _draw_board(ax, b[k].tolist(), played.move_prob[k].numpy(), "Greens", 1.0)
            good = bool(optimal[k, move])
            r, c = divmod(move, 3)
            ax.add_patch(plt.Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="red" if good else "black",
                                       lw=3, linestyle="-" if good else "--"))
            ax.set_title((f"{name}\n" if k == 0 else "") + f"{titles[k]}: plays {move}\n"
                         + ("optimal" if good else "wrong"), fontsize=LABEL_PT)
    return fig


def game_frames(model: TicTacToeNet, side: int = X, opponent: Policy | None = None, cell: int = 15,
                hold: int = 0) -> tuple[np.ndarray, list[str]]:
    """A whole game, the model playing `side` against `opponent` (minimax's `best_move` by
    default), as frames for `toylib.plot.animate`: (moves + 1 + hold, 2, 3*cell, 3*cell), the
    board beside the probability the model gives each cell at its own turns; and titles.
    hold: how many times the final position is repeated, so that a looping animation rests
    on the result before it starts again."""
    if hold < 0:
        raise ValueError(f"hold counts extra frames of the final position, got {hold}")
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
            titles.extend([f"{SYMBOLS[w]} wins" if w else "draw"] * (1 + hold))
            frames.extend([frames[-1]] * hold)
            break
        mover = state.current_player()
        move = int(m.move[0]) if mover == side else opponent(state.board)
        who = "model" if mover == side else "minimax" if opponent is best_move else "opponent"
        titles.append(f"{SYMBOLS[mover]} ({who}) to move: plays cell {move}")
        state = state.apply_action(move)
    return np.stack(frames), titles


# ----------------------------------------------------------------------------- a board to play, in the browser


def live_board(model: TicTacToeNet):
    """The board to play against `model` in the browser, with no kernel: you pick a side, the
    model answers each move, and beside the board it shows, for the position it last played,
    each open cell's chance, its value head's guess and minimax's verdict, and where the cell
    it chose looked in each layer. Needs the chapter's model (positions="graph", relative=True)."""
    c = model.config
    if c.positions != "graph" or not c.relative:
        raise ValueError("the live board runs the chapter's model: positions='graph', relative=True")
    return Live("tictactoe", "ToyTicTacToe", {
        "weights": weights(model), "d_model": c.d_model, "n_heads": c.n_heads, "n_layers": c.n_layers,
        "relations": TOKEN_RELATIONS, "kinds": TOKEN_KIND, "outcome_weight": OUTCOME_WEIGHT if c.value_weight > 0 else 0.0})
