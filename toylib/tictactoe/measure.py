"""How well a trained model plays: its moves and scores on a set of positions (`model_moves`,
`score`, which training also watches), the model with parts taken out (`without`,
`knockouts`: how it plays, by intervention), whole games (exhaustively, against minimax, at
random), and the chapter's targets and its summary (`measure`)."""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from toylib.attention import count_parameters
from toylib.draws import stream
from toylib.infer import infer
from toylib.targets import Target, format_table, pct, share_target, time_target
from toylib.tictactoe.config import POST_SMALLEST, TicTacToeConfig
from toylib.tictactoe.dataset import Dataset, Positions
from toylib.tictactoe.net import RELATION_NAMES, TOKEN_NAMES, TOKEN_RELATIONS, TicTacToeNet
from toylib.tictactoe.world import (EMPTY, Board, O, TicTacToe, X, canonical, fork_place, kind_of, open_positions,
                                   optimal_moves, to_move)


# ----------------------------------------------------------------------------- the model's moves and scores, which training watches


def check_boards_tensor(boards: torch.Tensor) -> None:
    if boards.dim() != 2 or boards.shape[1] != 9:
        raise ValueError(f"boards must be (batch, 9), got shape {tuple(boards.shape)}")
    if boards.numel() and not ((boards >= 0) & (boards <= 2)).all():
        raise ValueError(f"cells must be EMPTY={EMPTY}, X={X} or O={O}")


OUTCOMES = torch.tensor([-1.0, 0.0, 1.0])  # what a move's outcome (Positions.outcome: lose, draw, win) is worth
# What the expected outcome of a move counts for against the board head's log-odds for it. The
# board head's log-odds between two legal moves stay within about 30 on a trained model, so at
# 1,000 the value head decides, and the board head only breaks ties between moves whose expected
# outcomes lie within a few hundredths of each other (symmetric cells, or two equal wins).
OUTCOME_WEIGHT = 1000.0


@dataclasses.dataclass(frozen=True)
class Moves:
    """What a model does on a set of positions.

    raw: (N, 9) the board it writes, each cell's most likely symbol;
    move: (N,) its move: where the model has learned each move's outcome (value_weight > 0),
        the legal move its value head expects most of, the board head breaking near-ties;
        otherwise the legal move whose next board is most likely (`model_moves`);
    move_prob: (N, 9) the probability the board head gives each legal next board, normalised over legal moves."""

    raw: torch.Tensor
    move: torch.Tensor
    move_prob: torch.Tensor


def model_moves(model: TicTacToeNet, boards: torch.Tensor, batch_size: int = 2048,
                value: bool = True) -> Moves:
    """The model's moves on `boards` (N, 9). value=False: the board head's alone, even where
    the model has a trained value head."""
    check_boards_tensor(boards)
    valued = value and model.config.value_weight > 0  # a value head trained beside the board it writes

    def moves(out, b):  # b: (batch, 9) boards on the model's device
        logp = F.log_softmax(out[0].float(), dim=-1)  # (batch, 9, 3) each cell's next symbol
        mover = to_move(b)  # (batch,)
        # log P(next board = board with a move at cell a) = sum over cells of log p(kept symbol),
        # with cell a's term swapped for log p(mover's symbol): rank moves by that swap
        gain = logp.gather(2, mover[:, None, None].expand(-1, 9, 1)).squeeze(2) - logp[..., EMPTY]  # (batch, 9)
        gain = gain.masked_fill(b != EMPTY, float("-inf"))
        # Both heads learned from the same positions, the value head with a label for every
        # legal move. In the classes held out, the board head sometimes names a move that
        # loses with confidence (a threat instead of a block, the centre instead of a fork)
        # where the value head rates the right move best: so the value head decides.
        worth = (OUTCOME_WEIGHT * torch.softmax(out[1].float(), -1) @ OUTCOMES.to(b.device)
                 if valued else 0.0)  # (batch, 9)
        return logp.argmax(-1), (gain + worth).argmax(1), torch.softmax(gain, dim=1)

    return Moves(*infer(model, boards, batch_size=batch_size, keep=moves))


@dataclasses.dataclass(frozen=True)
class Scores:
    """How a model does on a set of positions (shares between 0 and 1)."""

    exact_label: float  # the board it writes is the post's single label (the post's measure)
    legal: float  # the board it writes is the input with one empty cell taken by the player to move
    raw_optimal: float  # the board it writes is legal and its move keeps the minimax value
    optimal: float  # its move (the most likely legal next board) keeps the minimax value
    n: int


def score(model: TicTacToeNet, pos: Positions, value: bool = True) -> Scores:
    """How `model` does on `pos`; value=False: its moves by the board head alone (`model_moves`)."""
    m = model_moves(model, pos.boards, value=value)  # on the CPU, wherever the model and `pos` are
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


# ----------------------------------------------------------------------------- how it works: parts taken out
# The chapter's "How it works": the model with one part taken out at a time, played on every open
# position (an intervention, not a picture), and what the counts say.

KINDS = ("win", "block", "fork", "quiet")  # world.kind_of's kinds of position, in the tables' order
# The chapter's account of how the model plays: a line reads its three cells, then a cell reads its lines.
ACCOUNT = ("cell: its line", "line: its cell")


def without(model: TicTacToeNet, heads: Sequence[tuple[int, int]] = (),
            cuts: Sequence[tuple[int, int]] = ()) -> TicTacToeNet:
    """A copy of a "graph" `model` with parts taken out, an intervention: each (layer, head) in
    `heads` adds nothing (its slice of the attention's output projection is zeroed), and each
    (layer, relation) in `cuts` is closed: no head of that layer attends along that relation
    (an index into RELATION_NAMES; its bias becomes -inf). Cuts that leave a token of some
    layer with nothing to attend to are refused."""
    if model.config.positions != "graph":
        raise ValueError("without() takes parts out of a positions='graph' model")
    n_layers, n_heads = model.config.n_layers, model.config.n_heads
    heads, cuts = [tuple(map(int, h)) for h in heads], [tuple(map(int, c)) for c in cuts]
    if any(not (0 <= l < n_layers and 0 <= h < n_heads) for l, h in heads):
        raise ValueError(f"heads are (layer, head) pairs within {n_layers} layers of {n_heads} heads, got {heads}")
    if any(not (0 <= l < n_layers and 0 <= r < len(RELATION_NAMES)) for l, r in cuts):
        raise ValueError(f"cuts are (layer, relation) pairs within {n_layers} layers and "
                         f"{len(RELATION_NAMES)} relations, got {cuts}")
    for layer in range(n_layers):
        closed = {r for l, r in cuts if l == layer}
        if any(set(TOKEN_RELATIONS[t].tolist()) <= closed for t in range(len(TOKEN_NAMES))):
            raise ValueError(f"layer {layer}'s cuts {sorted(closed)} leave some token nothing to attend to")
    out = copy.deepcopy(model)
    d_head = model.config.d_model // n_heads
    with torch.no_grad():
        for layer, head in heads:
            out.blocks.blocks[layer].attn.W_O.weight[:, head * d_head:(head + 1) * d_head] = 0
        for layer, relation in cuts:
            out.relation_bias[layer, :, relation] = float("-inf")
    return out


def lost_by_kind(model: TicTacToeNet, pos: Positions, kinds: Sequence[str],
                 weights: Sequence[int] | None = None) -> np.ndarray:
    """(len(KINDS),) how many of the positions `pos` (position i of kind `kinds[i]`, counted
    `weights[i]` times, once by default) get a move that is not optimal, per kind."""
    weights = np.ones(len(pos), int) if weights is None else np.asarray(weights)
    if len(kinds) != len(pos) or len(weights) != len(pos) or set(kinds) - set(KINDS):
        raise ValueError(f"give one kind of {KINDS} and one weight per position: {len(kinds)} kinds, "
                         f"{len(weights)} weights for {len(pos)} positions")
    move = model_moves(model, pos.boards).move  # (N,)
    wrong = (~pos.optimal.cpu()[torch.arange(len(pos)), move]).numpy()  # (N,)
    kind = np.array([KINDS.index(k) for k in kinds])
    return np.bincount(kind[wrong], weights=weights[wrong], minlength=len(KINDS)).astype(int)


@dataclasses.dataclass(frozen=True)
class Knockouts:
    """Open positions that lose their optimal move when one part of a model is taken out,
    counted per kind of position (KINDS).

    of_kind: (kind,) the positions of each kind; intact: (kind,) those the whole model gets
    wrong; heads: (layer, head, kind) with that head taken out; cuts: (layer, relation, kind)
    with that relation closed in that layer; everywhere: (relation, kind) closed in every layer;
    account: (kind,) with every relation closed but the two of ACCOUNT, in every layer."""

    of_kind: np.ndarray
    intact: np.ndarray
    heads: np.ndarray
    cuts: np.ndarray
    everywhere: np.ndarray
    account: np.ndarray

    def lost(self, part: str) -> np.ndarray:
        """One of the tables summed over the kinds: "heads" (layer, head), "cuts" (layer,
        relation) or "everywhere" (relation,)."""
        if part not in ("heads", "cuts", "everywhere"):
            raise ValueError(f"part is 'heads', 'cuts' or 'everywhere', got {part!r}")
        return getattr(self, part).sum(-1)


def knockouts(model: TicTacToeNet) -> Knockouts:
    """Take out each head, and close each relation in each layer and in every layer, one part
    at a time, and count the open positions whose move stops being optimal, per kind, over all
    4,520. The model answers a turned or mirrored board with the turned or mirrored answer,
    with or without the part (no part names a row, a column or a corner as such), so each
    symmetry class is played once, on its canonical board, and counted as many times as it has
    positions: 627 boards a pass instead of 4,520 (tests/test_tictactoe.py checks the two
    counts agree)."""
    every = open_positions()
    size = Counter(canonical(b) for b in every)  # {canonical board: positions in its class}
    boards = sorted(size)
    pos, kinds, weights = Positions.of(boards), [kind_of(b) for b in boards], [size[b] for b in boards]
    n_layers, n_heads, n_rel = model.config.n_layers, model.config.n_heads, len(RELATION_NAMES)
    lost = lambda **parts: lost_by_kind(without(model, **parts), pos, kinds, weights)  # noqa: E731
    return Knockouts(
        of_kind=np.bincount([KINDS.index(k) for k in kinds], weights=weights, minlength=len(KINDS)).astype(int),
        intact=lost_by_kind(model, pos, kinds, weights),
        heads=np.array([[lost(heads=[(l, h)]) for h in range(n_heads)] for l in range(n_layers)]),
        cuts=np.array([[lost(cuts=[(l, r)]) for r in range(n_rel)] for l in range(n_layers)]),
        everywhere=np.array([lost(cuts=[(l, r) for l in range(n_layers)]) for r in range(n_rel)]),
        account=lost(cuts=[(l, r) for l in range(n_layers) for r in range(n_rel) if RELATION_NAMES[r] not in ACCOUNT]),
    )


def mechanism_targets(k: Knockouts) -> list[Target]:
    """The account, as rows a seed can fail (the command line prints them, the benchmark counts
    them): closing a cell's view of its lines, in every layer, costs more positions than closing
    any other relation; and the lines read their cells first: the layer where closing "line:
    its cell" costs the most comes before the one where closing "cell: its line" does."""
    cell, line = (RELATION_NAMES.index(name) for name in ACCOUNT)
    total, by_layer = k.lost("everywhere"), k.lost("cuts")  # (relation,), (layer, relation)
    rival = int(np.delete(total, cell).max())
    first, then = int(by_layer[:, line].argmax()), int(by_layer[:, cell].argmax())
    return [
        Target("how it works: positions lost, cells blind to their lines", "more than for any other relation",
               f"{total[cell]:,} (next: {rival:,})", bool(total[cell] > rival)),
        Target("how it works: the layer where it costs most to blind lines to their cells / cells to their lines",
               "the lines' first", f"layer {first} / layer {then}", first < then),
    ]


def mechanism_claims(k: Knockouts) -> dict[str, bool]:
    """The "How it works" section's sentences: the whole model plays every open position
    optimally, the two rows of `mechanism_targets`, and blind to their lines the cells lose
    over half the fork positions."""
    cell, fork = RELATION_NAMES.index(ACCOUNT[0]), KINDS.index("fork")
    return {"the whole model plays every open position optimally": int(k.intact.sum()) == 0,
            **{t.measure: bool(t.met) for t in mechanism_targets(k)},
            "cells blind to their lines lose over half the fork positions":
                bool(2 * k.everywhere[cell, fork] > k.of_kind[fork])}


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
    rng = stream(seed)
    results: Counter = Counter()
    for _ in range(games):
        state = TicTacToe()
        while not state.is_terminal():
            moves = state.legal_actions()
            state = state.apply_action(policy[state.board] if state.current_player() == side else int(rng.choice(moves)))
        r = state.returns()[0 if side == X else 1]
        results["win" if r > 0 else "loss" if r < 0 else "draw"] += 1
    return results


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
            share_target(f"optimal move, {self.test.n} held-out test positions", self.test.optimal),
            share_target(f"optimal move, all {self.everything.n:,} open positions", self.everything.optimal),
            Target("exhaustive play as X, every reply", "0 lost", games(self.exhaustive_x), self.exhaustive_x["loss"] == 0),
            Target("exhaustive play as O, every reply", "0 lost", games(self.exhaustive_o), self.exhaustive_o["loss"] == 0),
            Target("parameters", f"<= {max_parameters:,} (the post's smallest)", f"{self.parameters:,}",
                   self.parameters <= max_parameters),
            time_target(train_seconds, time_limit),
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


def measure(model: TicTacToeNet, config: TicTacToeConfig, data: Dataset, train_seconds: float,
            details: bool = True) -> list[Target]:
    """The chapter's targets for a trained model, and for the chapter's model (positions="graph")
    how it works (`mechanism_targets`). With `details`, also plays the random games and prints
    the scores that have no target; the benchmark (details=False) skips both."""
    summary = summarise(model.cpu(), data, random_games=1000 if details else 0)
    if details:
        print(format_table(summary.detail_rows(), ("measure", "test positions", "all positions")))
    works = mechanism_targets(knockouts(model)) if model.config.positions == "graph" else []
    return summary.targets(train_seconds) + works


def optimal_gap(scores: dict[str, Scores]) -> float:
    """How far the second and third of the post's configurations (dropout, 8 heads) move the
    share of optimal moves from the first's."""
    first, second, third = list(scores.values())[:3]
    return max(abs(second.optimal - first.optimal), abs(third.optimal - first.optimal))


def post_claims(scores: dict[str, Scores], largest_lost: int) -> dict[str, bool]:
    """The sentences under the table of the post's configurations (`scores`: each one's
    `score` on the test classes, in the post's order, smallest first and largest last; `largest_lost`: the games the
    largest loses in exhaustive play, as X and as O): the measures disagree (a board that is
    not the one label can carry an optimal move); even the largest gives games away; dropout
    and 8 heads (the second and third) stay within 5 points of the first on optimal moves."""
    if len(scores) < 3:
        raise ValueError(f"post_claims compares the post's configurations, got {list(scores)}")
    largest = list(scores.values())[-1]
    return {
        "each config's optimal move beats its exact label": all(s.optimal > s.exact_label for s in scores.values()),
        "the largest config misses some unseen positions and loses games": largest.optimal < 1 and largest_lost > 0,
        "dropout and 8 heads move optimal moves by under 5 points": optimal_gap(scores) < 0.05,
    }


def fork_places(data: Dataset) -> dict[str, Counter]:
    """For each split ("train", "val", "test"), how many of its positions are forks with
    their forks on each place (`world.fork_place`: corner, edge, centre or mixed)."""
    return {name: Counter(p for b in getattr(data, name).boards.tolist() if (p := fork_place(b)))
            for name in ("train", "val", "test")}


def fork_claims(places: dict[str, Counter], missed: Board, missed_split: str) -> dict[str, bool]:
    """The sentences on why a seed can miss the fork class `missed` (from split `missed_split`):
    `fork_places`' counts show forks on edges rare in what the model learns from, and the
    test split's forks, the class among them, all on edges."""
    learnt = places["train"] + places["val"]
    return {
        "in what the model learns from, forks on edges alone are under a third of those on corners alone":
            learnt["edge"] < learnt["corner"] / 3,
        "the missed fork class is on an edge, in the test split":
            fork_place(missed) == "edge" and missed_split == "test",
        "every fork position of the test split is on an edge": places["test"]["edge"] == places["test"].total(),
    }
