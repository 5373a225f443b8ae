"""The Sokoban policy at work: solving boards greedily and by beam search (`Walks` feeds the
core's decoders), the teacher-forced `accuracies`, `Solves`, the post's table beside ours, the
chapter's targets, and `measure`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import torch

from toylib.attention import KeysValues
from toylib.decode import beam_search, beam_search_batch, greedy_decode
from toylib.infer import evaluating, model_device
from toylib.sokoban import dataset
from toylib.sokoban.config import SokobanConfig
from toylib.sokoban.dataset import UNSOLVABLE, SokobanSet
from toylib.sokoban.net import SokobanPolicy, loss_from_logits, to_batch
from toylib.sokoban.world import (ACTION_NAMES, CHANNELS, SIZE, UNDO, Board, Play, encode, moves_to_goal, neighbours,
                                  push_distance, walled)
from toylib.targets import Table, Target, count_target, format_table, pct, share_target, time_target, with_floor

# ----------------------------------------------------------------------------- solving with the policy

START = len(ACTION_NAMES)  # the token that begins every action sequence the decoders grow


def _check_starts(starts: Sequence[Board]) -> None:
    if not starts:
        raise ValueError("no boards to solve")
    if any(not isinstance(b, Board) or b.shape != (SIZE, SIZE) for b in starts):
        raise ValueError(f"the policy reads {SIZE}x{SIZE} Boards")
    if not all(walled(b) for b in starts):
        raise ValueError("the policy reads boards walled all round: a board has floor on its edge")


class Walks:
    """Action sequences from start boards, as the core's decoders (`greedy_decode`,
    `beam_search`) grow them: a row of tokens is START and then actions. Row i starts from
    `starts[i]`, or every row from the one start. Each sequence is replayed once, as a `Play`
    one action on from its prefix's, and cached, and so are the policy's tokens of the boards
    a sequence has seen, so that a step encodes only each row's new board, all rows in one
    batch.

    The hooks: `next_logp` (the policy's action scores after the boards so far), `legal`
    (the moves a board allows, and UNDO once there is a move to take back), `done` (the box
    is on the goal) and `key` (the board a sequence has reached, for merging beams). A row
    that greedy decoding has ended is padded with START, which leaves its board as it is."""

    def __init__(self, model: SokobanPolicy, starts: Sequence[Board]):
        _check_starts(starts)
        self.model, self.starts = model, list(starts)
        self.device = model_device(model)
        walls = np.stack([b.grid for b in self.starts])
        goal = np.array([b.goal for b in self.starts])
        self.goal = self._tokens(encode(walls, goal, goal, -1))  # (N, d)
        self.plays: dict[tuple, Play] = {}  # (start, actions) -> the board reached and its undo history
        self.history: dict[tuple, torch.Tensor] = {}  # (start, actions) -> tokens of the boards seen (t, d)

    def _tokens(self, planes: np.ndarray) -> torch.Tensor:
        with torch.no_grad():
            return self.model.tokens(torch.from_numpy(planes).to(self.device))  # (n, d)

    def _keys(self, tokens: torch.Tensor) -> list[tuple]:
        one = len(self.starts) == 1
        return [(0 if one else i, tuple(row[1:])) for i, row in enumerate(tokens.tolist())]

    def play(self, key: tuple) -> Play:
        """Where the actions `key[1]` leave start `key[0]` (START, padding, leaves it as it is):
        replayed once."""
        if key not in self.plays:
            start, actions = key
            if not actions:
                self.plays[key] = Play(self.starts[start])
            else:
                before, action = self.play((start, actions[:-1])), actions[-1]
                self.plays[key] = before if action == START else before.step(action)
        return self.plays[key]

    def boards(self, tokens: torch.Tensor) -> list[Board]:
        """The board each row has reached."""
        return [self.play(k).board for k in self._keys(tokens)]

    def next_logp(self, tokens: torch.Tensor) -> torch.Tensor:
        keys = self._keys(tokens)
        live = [i for i, (_, a) in enumerate(keys) if not a or a[-1] != START]  # ended rows are not asked
        new = [k for k in dict.fromkeys(keys[i] for i in live) if k not in self.history]
        if new:
            here = [self.play(k).board for k in new]
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
            allowed[i, self.play(k).legal_actions()] = True  # the moves, and UNDO once there is one to take back
        return allowed.to(tokens.device)

    def done(self, tokens: torch.Tensor) -> torch.Tensor:
        return torch.tensor([b.is_goal() for b in self.boards(tokens)], device=tokens.device)

    def key(self, tokens: torch.Tensor) -> tuple[int, int]:
        board = self.boards(tokens[None])[0]
        return board.box, board.player


class Frontier:
    """The searches from many start boards at once, as tensors: a `toylib.decode.Walk`, for
    `beam_search_batch`. Row i is one action sequence from start `origin[i]`; it keeps the
    sequence's undo stack as (box, player) squares (`Play`'s boards, without the objects) and
    the policy's keys and values of every board it has seen (`SokobanPolicy.attend_more`), so
    that a step encodes only the new boards and attends from them alone, every row in one
    pass. `solve_beams` drives it; `Walks` is the same world for one board at a time, through
    hooks."""

    # rows the policy reads at once: its convolutions cost less a board in small batches than
    # in large ones, as a small batch's feature maps stay in the CPU's caches from one layer
    # to the next
    ROWS_PER_CALL = 256

    def __init__(self, model: SokobanPolicy, starts: Sequence[Board]):
        _check_starts(starts)
        self.model, self.device = model, model_device(model)
        self.squares = SIZE * SIZE
        self.walls = torch.from_numpy(np.stack([b.grid.reshape(-1) for b in starts])).to(self.device)  # (N, squares)
        self.goal = torch.tensor([b.goal for b in starts], device=self.device)  # (N,)
        self.step_to = torch.tensor(neighbours((SIZE, SIZE)), device=self.device)  # (squares, 4): -1 past the edge
        n = len(starts)
        self.origin = torch.arange(n, device=self.device)  # (rows,)
        self.stack = torch.zeros(n, model.config.n_ctx + 1, 2, dtype=torch.long, device=self.device)  # (rows, t, 2)
        self.stack[:, 0, 0] = torch.tensor([b.box for b in starts])
        self.stack[:, 0, 1] = torch.tensor([b.player for b in starts])
        self.depth = torch.zeros(n, dtype=torch.long, device=self.device)  # (rows,): the board reached is stack[depth]
        goal_tokens = self._tokens(self.goal, self.goal, torch.full_like(self.goal, -1), self.walls)  # (N, d)
        starts = self._tokens(self.goal, *self._here(), self.walls)  # (N, d)
        self.logits, self.past = self._attend(starts, None, goal_tokens)  # (rows, 5); keys and values per layer
        self._unread = False  # True once rows have moved and their new boards wait to be read
        self._next = None  # (boxes, players, legal), each (rows, 5): where each action leads; made once a step

    def _here(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The box and the player of each row's board, (rows,) each."""
        now = self.stack[torch.arange(len(self.depth), device=self.device), self.depth]  # (rows, 2)
        return now[:, 0], now[:, 1]

    def _tokens(self, goal, box, player, walls) -> torch.Tensor:
        """The policy's tokens (n, d) of n boards, from their squares (n,) and walls (n, squares),
        planes as `world.encode` lays them out."""
        square = torch.arange(self.squares, device=self.device)
        planes = torch.stack([walls, ~walls, square == goal[:, None], square == player[:, None],
                              square == box[:, None]], 1)  # (n, 5, squares)
        planes = planes.view(len(goal), len(CHANNELS), SIZE, SIZE).to(torch.uint8)
        return torch.cat([self.model.tokens(planes[i : i + self.ROWS_PER_CALL])
                          for i in range(0, len(planes), self.ROWS_PER_CALL)])  # (n, d)

    def _attend(self, tokens, past, goal=None) -> tuple[torch.Tensor, list]:
        """The action logits (rows, 5) at each row's newest board (tokens (rows, d)), after the
        boards before it (`past`, or the goal (rows, d) for a first board), and the keys and
        values with it appended."""
        logits, cache = [], []
        for i in range(0, len(tokens), self.ROWS_PER_CALL):
            rows = slice(i, i + self.ROWS_PER_CALL)
            out = self.model.attend_more(tokens[rows, None], None if past is None else [kv.take(rows) for kv in past],
                                         None if goal is None else goal[rows])
            logits.append(out[0][:, -1])
            cache.append(out[2])
        return torch.cat(logits), [KeysValues(torch.cat([c[l].k for c in cache]), torch.cat([c[l].v for c in cache]))
                                   for l in range(len(cache[0]))]

    def _moves(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self._next is None:
            box, player = self._here()  # (rows,)
            walls = self.walls[self.origin]  # (rows, squares)
            to = self.step_to[player]  # (rows, 4)
            blocked = (to < 0) | walls.gather(1, to.clamp(min=0))
            push = to == box[:, None]
            box_to = torch.where(push, self.step_to[box], box[:, None])  # (rows, 4)
            blocked |= push & ((box_to < 0) | walls.gather(1, box_to.clamp(min=0)))
            rows = torch.arange(len(box), device=self.device)
            before = self.stack[rows, (self.depth - 1).clamp(min=0)]  # (rows, 2): where UNDO goes back to
            self._next = (torch.cat([box_to, before[:, :1]], 1), torch.cat([to, before[:, 1:]], 1),
                          torch.cat([~blocked, self.depth[:, None] > 0], 1))  # (rows, 5) each
        return self._next

    def next_logp(self) -> torch.Tensor:
        self._read()
        scores = torch.full((len(self.origin), START + 1), -math.inf, device=self.device)  # START is never next
        scores[:, :START] = self.logits
        return scores

    def legal(self) -> torch.Tensor:
        legal = self._moves()[2]  # the moves, and UNDO once there is one to take back
        return torch.cat([legal, torch.zeros_like(legal[:, :1])], 1)  # (rows, START + 1)

    def keys(self) -> torch.Tensor:
        boxes, players, legal = self._moves()
        keys = torch.where(legal, boxes * self.squares + players, 0)
        return torch.cat([keys, torch.zeros_like(keys[:, :1])], 1)  # (rows, START + 1)

    def here(self) -> torch.Tensor:
        box, player = self._here()
        return box * self.squares + player

    def advance(self, parent: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
        boxes, players, _ = self._moves()
        box, player = boxes[parent, token], players[parent, token]  # (rows',)
        self.origin, self.stack = self.origin[parent], self.stack[parent]
        self.depth = torch.where(token == UNDO, self.depth[parent] - 1, self.depth[parent] + 1)
        rows = torch.arange(len(parent), device=self.device)
        self.stack[rows, self.depth] = torch.stack([box, player], 1)  # a move pushes; UNDO finds it there already
        # the new boards wait for `next_logp`: a row that the search drops first (a board
        # solved by another beam) is never encoded
        self.past, self._unread = [kv.take(parent) for kv in self.past], True
        self._next = None
        return box == self.goal[self.origin]

    def keep(self, index: torch.Tensor) -> None:
        self.origin, self.stack, self.depth = self.origin[index], self.stack[index], self.depth[index]
        self.past = [kv.take(index) for kv in self.past]
        if not self._unread:
            self.logits = self.logits[index]
        if self._next is not None:
            self._next = tuple(t[index] for t in self._next)

    def _read(self) -> None:
        """Read the boards the rows have just reached: their logits, and their keys and values
        appended to the rows' histories."""
        if self._unread:
            new = self._tokens(self.goal[self.origin], *self._here(), self.walls[self.origin])  # (rows, d)
            self.logits, self.past = self._attend(new, self.past)
            self._unread = False


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


def solve_beams(model: SokobanPolicy, boards: Sequence[Board], width: int = 32,
                batch_size: int = 500) -> list[list[int] | None]:
    """`solve_beam` for every board, `batch_size` boards searching together (`Frontier`, the
    core's `beam_search_batch`): the same search and the same solutions, with one forward pass
    of the policy per step for every beam of every board, each reading only its newest board:
    several times the boards a second of the loop over `solve_beam` (`benchmarks/beam.py`
    measures it). At width 32 the board encoder's convolutions take most of the time left."""
    if not boards:
        raise ValueError("no boards to solve")
    found = []
    for i in range(0, len(boards), batch_size):
        chunk = boards[i : i + batch_size]
        with torch.no_grad():
            frontier = Frontier(model, chunk)
            starts = torch.full((len(chunk), 1), START, device=frontier.device)
            beams = beam_search_batch(frontier, starts, width=width, max_len=model.config.n_ctx, merge=True,
                                      first=True)
        for board, found_beams in zip(chunk, beams):
            best = found_beams[0]
            found.append([] if board.is_goal() else _moves(best.tokens, len(best.tokens)) if best.finished else None)
    return found


# ----------------------------------------------------------------------------- the chapter's measures and targets


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
    sums, counts, losses = {}, {}, []

    def add(name, hits):
        sums[name] = sums.get(name, 0) + int(hits.sum())
        counts[name] = counts.get(name, 0) + hits.numel()

    with evaluating(model) as device:
        for i in range(0, len(data), batch_size):
            batch = to_batch(data, np.arange(i, min(i + batch_size, len(data))), model.config.n_ctx)
            goal, boards, lengths, actions, mask, nsteps, optimal = (x.to(device) for x in batch)
            action_logits, nsteps_logits = model(goal, boards, lengths)[:2]
            loss = loss_from_logits(action_logits, nsteps_logits, mask, nsteps, optimal)[0]  # the same forward pass
            losses.append((loss.item(), len(goal)))
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
    loss = sum(l * n for l, n in losses) / sum(n for _, n in losses)
    return Accuracies(**{k: sums[k] / counts[k] for k in sums}, loss=loss)


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


BEAM_BOARDS = 500  # held-out boards solved by beam search, which costs far more a board than greedy play


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
        found = solve_beams(model, boards, width)
    lengths = np.array([-1 if f is None else len(f) for f in found])
    return Solves("greedy" if width is None else f"beam {width}", lengths, np.asarray(optimal))


# The post's table: (transformer, baseline), on its 4,000 validation boards.
POST_TABLE = {
    "solvability accuracy": (0.977, 0.977),
    "top-1 policy accuracy": (0.867, 0.831),
    "top-2 policy accuracy": (0.982, 0.969),
    "top-1 nsteps accuracy": (0.900, 0.898),
    "top-2 nsteps accuracy": (0.990, 0.990),
    "solve rate (beam 32)": (0.921, 0.879),
    "mean solution length": (6.983, 6.597),
}


# The floors check asserts where the goal is not yet met on every seed: (share, why)
FLOORS = {
    "greedy": (POST_TABLE["solve rate (beam 32)"][0], "the post's solve rate with beam search of width 32"),
    "solvability": (POST_TABLE["solvability accuracy"][0], "the post's solvability accuracy"),
    "optimal": (POST_TABLE["top-1 policy accuracy"][0], "the post's top-1 accuracy, on its one label"),
    # the post judged no board of another generator: the floor is nine verdicts in ten
    "other solvability": (0.9, "nine in ten: the post judged no board of another generator"),
}


def post_rows(acc: Accuracies, beam: Solves) -> list[float]:
    """Our numbers for the rows of POST_TABLE, in its order."""
    return [acc.solvability, acc.policy_top1, acc.policy_top2, acc.nsteps_top1, acc.nsteps_top2, beam.rate,
            beam.mean_length]


def post_table(ours: tuple[Accuracies, Solves], baseline: tuple[Accuracies, Solves]) -> Table:
    """The post's table with ours beside it: transformer and baseline, the post's and ours."""
    rows = [(name, f"{p[0]:.3f}", f"{o:.3f}", f"{p[1]:.3f}", f"{b:.3f}")
            for (name, p), o, b in zip(POST_TABLE.items(), post_rows(*ours), post_rows(*baseline))]
    return format_table(rows, ("measure", "post", "ours", "post, baseline", "ours, baseline"))


def sokoban_targets(acc: Accuracies, greedy: Solves, beam: Solves, seconds: float | None = None,
                    time_limit: float = 240.0, other: tuple[Accuracies, Solves] | None = None) -> list[Target]:
    """The chapter's summary for the transformer policy: its targets on the held-out boards,
    on boards of the second generator (`other`: their accuracies and beam search, when
    measured), and (a machine row) the time that data and the training of both models took."""
    solved = beam.lengths >= 0
    shortest = bool((beam.lengths[solved] == beam.optimal[solved]).all())
    ours = post_rows(acc, beam)[:-1]  # the post's mean length is on boards of its own: not compared
    ahead = sum(o > p for o, (p, _) in zip(ours, POST_TABLE.values()))
    # the goals of greedy play, solvability and a best move are not yet met on every seed: each
    # carries a floor that check asserts instead, a figure of the post's (FLOORS says which)
    targets = [
        share_target(f"solve rate, beam 32, {len(beam.lengths):,} held-out boards", beam.rate, 0.995),
        with_floor(share_target(f"solve rate, greedy, {len(greedy.lengths):,} held-out boards", greedy.rate, 0.98),
                   greedy.rate, *FLOORS["greedy"]),
        with_floor(share_target("solvability accuracy, start boards", acc.solvability, 0.99),
                   acc.solvability, *FLOORS["solvability"]),
        with_floor(share_target("optimal move (any shortest solution)", acc.optimal, 0.985),
                   acc.optimal, *FLOORS["optimal"]),
        Target("mean length, beam 32, against BFS's", "equal", f"{beam.mean_length:.3f} / {beam.optimal_length:.3f}",
               shortest),
        count_target("rows of the post's table beaten", ahead, len(ours)),
        Target("top-1 policy accuracy (the post's one label)", "-", pct(acc.policy_top1), None),
    ]
    if other is not None:
        other_acc, other_beam = other
        targets += [
            with_floor(share_target("other generator: solvability accuracy", other_acc.solvability, 0.98),
                       other_acc.solvability, *FLOORS["other solvability"]),
            share_target(f"other generator: solve rate, beam 32, {len(other_beam.lengths):,} boards",
                         other_beam.rate, 0.98),
        ]
    if seconds is not None:
        targets.append(time_target(seconds, time_limit, "data and both models' training"))
    return targets


OTHER_BOARDS = 1_000  # boards of the second generator the chapter judges a policy on, half solvable


def other_scores(model: SokobanPolicy, other: SokobanSet) -> tuple[Accuracies, Solves]:
    """A policy on boards of the second generator (`dataset.other_boards`): its teacher-forced
    accuracies, and beam search of width 32 on every solvable one."""
    boards, optimal = solvable_boards(other)
    return accuracies(model, other), solves(model, boards, optimal, width=32)


def measure(model: SokobanPolicy, config: SokobanConfig, data: dict[str, SokobanSet], train_seconds: float,
            details: bool = True) -> list[Target]:
    """The chapter's targets for a trained policy, on the held-out boards of `data`: its
    teacher-forced accuracies, greedy play on every solvable board, and beam search on the
    first BEAM_BOARDS of them; and on OTHER_BOARDS boards of the second generator. The
    chapter's time target covers the data and the training of both models, as the chapter
    trains them, not one model alone: it is left out here (the command line prints the
    training time itself), so `train_seconds` is not used; nor is `details`, as the chapter
    has no detail beside its targets."""
    boards, optimal = solvable_boards(data["held_out"])
    beam = solves(model, boards[:BEAM_BOARDS], optimal[:BEAM_BOARDS], width=32)
    other = dataset.other_boards(OTHER_BOARDS, config.data_seed, dataset.start_keys(data))
    return sokoban_targets(accuracies(model, data["held_out"]), solves(model, boards, optimal), beam,
                           other=other_scores(model, other))


# ----------------------------------------------------------------------------- the prose's claims
# Each returns {a sentence of the chapter, as a checkable statement: whether it holds}, for the
# chapter's check cells (`toylib.targets.check`); tests/test_sokoban.py shows each can fail.


def generator_claims(boards: Sequence[Board]) -> dict[str, bool]:
    """"Most boards it makes cannot be solved, usually because the box can never reach the
    goal", on fresh draws of the post's generator (`world.random_board`)."""
    if not boards:
        raise ValueError("generator_claims needs boards drawn by the generator")
    stuck = [push_distance(b) == math.inf for b in boards]  # the box can never reach the goal
    dead = [s or (b.box, b.player) not in moves_to_goal(b) for b, s in zip(boards, stuck)]
    return {"most boards drawn cannot be solved": sum(dead) > len(boards) / 2,
            "most of those: the box can never reach the goal": sum(stuck) > sum(dead) / 2}


def other_claims(held_out: Accuracies, other: Accuracies, beam: Solves, greedy: Solves) -> dict[str, bool]:
    """What the chapter says of the second generator's boards: beam search of width 32 solves
    98 % or more of its solvable ones, 99 % of those it solves by shortest paths, greedy
    decoding fewer; the verdict on them is a point or more below the held-out boards'."""
    found = beam.lengths >= 0
    longer = int((beam.lengths[found] > beam.optimal[found]).sum())
    return {
        "other boards: beam 32 solves 99 % or more by shortest paths": bool(longer <= 0.01 * found.sum()),
        "other boards: greedy solves fewer than beam 32": greedy.rate < beam.rate,
        "other boards cost the verdict a point or more": held_out.solvability - other.solvability >= 0.01,
        "search still solves them: beam 32 >= 98 %": beam.rate >= 0.98,
    }


def scorecard_claims(acc: dict[str, Accuracies], beam: dict[str, Solves], greedy: dict[str, Solves],
                     beam4: float) -> dict[str, bool]:
    """"Reading the scorecard" and "What we learned", for the transformer and the baseline
    (keys of each dict): ahead of the post's table on every row it compares (not the mean
    length, over other boards), beam search's solutions all shortest, a beam of 4 (`beam4`,
    its rate on the same boards) solves 99 % or more, and the baseline as good within a point
    (greedy: two)."""
    t, b = "transformer", "baseline"
    ours = dict(zip(POST_TABLE, post_rows(acc[t], beam[t])))
    compared = [k for k in POST_TABLE if k != "mean solution length"]
    found = beam[t].lengths >= 0
    return {
        "ahead of the post on every measure": all(ours[k] > POST_TABLE[k][0] for k in compared),
        "every beam-32 solution is a shortest one": bool((beam[t].lengths[found] == beam[t].optimal[found]).all()),
        "a beam of 4 solves >= 99 % of the 500 boards": beam4 >= 0.99,
        "baseline as accurate: optimal moves within 1 point": abs(acc[t].optimal - acc[b].optimal) <= 0.01,
        "baseline solves as many: beam 32 within 1 point, greedy 2":
            abs(beam[t].rate - beam[b].rate) <= 0.01 and abs(greedy[t].rate - greedy[b].rate) <= 0.02,
    }
