"""The Sokoban policy at work: solving boards greedily and by beam search (`Walks` feeds the
core's decoders), `Solves`, the post's table beside ours, the chapter's targets, `measure`,
and the command line (`CHAPTER`, `python -m toylib.sokoban`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import torch

from toylib import cli
from toylib.decode import beam_search, greedy_decode
from toylib.infer import model_device
from toylib.sokoban import dataset, net
from toylib.sokoban.dataset import SokobanSet
from toylib.sokoban.net import Accuracies, SokobanConfig, SokobanPolicy, accuracies
from toylib.sokoban.world import ACTION_NAMES, SIZE, Board, Play, encode
from toylib.targets import Target, format_table, pct, time_target

# ----------------------------------------------------------------------------- solving with the policy

START = len(ACTION_NAMES)  # the token that begins every action sequence the decoders grow


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
        if not starts:
            raise ValueError("no boards to solve")
        if any(not isinstance(b, Board) or b.shape != (SIZE, SIZE) for b in starts):
            raise ValueError(f"the policy reads {SIZE}x{SIZE} Boards")
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


# ----------------------------------------------------------------------------- the chapter's measures and targets


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


BEAM_BOARDS = 500  # held-out boards solved by beam search: a search of width 32 takes about 40 ms a board


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
        found = [solve_beam(model, b, width) for b in boards]
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


def post_rows(acc: Accuracies, beam: Solves) -> list[float]:
    """Our numbers for the rows of POST_TABLE, in its order."""
    return [acc.solvability, acc.policy_top1, acc.policy_top2, acc.nsteps_top1, acc.nsteps_top2, beam.rate,
            beam.mean_length]


def post_table(ours: tuple[Accuracies, Solves], baseline: tuple[Accuracies, Solves]) -> str:
    """The post's table with ours beside it: transformer and baseline, the post's and ours."""
    rows = [(name, f"{p[0]:.3f}", f"{o:.3f}", f"{p[1]:.3f}", f"{b:.3f}")
            for (name, p), o, b in zip(POST_TABLE.items(), post_rows(*ours), post_rows(*baseline))]
    return format_table(rows, ("measure", "post", "ours", "post, baseline", "ours, baseline"))


def sokoban_targets(acc: Accuracies, greedy: Solves, beam: Solves, seconds: float | None = None,
                    time_limit: float = 240.0) -> list[Target]:
    """The chapter's summary for the transformer policy: its targets on the held-out boards,
    and (a machine row) the time that data and the training of both models took."""
    over = beam.mean_length / beam.optimal_length - 1
    targets = [
        Target(f"solve rate, beam 32, {len(beam.lengths):,} held-out boards", ">= 99 %", pct(beam.rate),
               beam.rate >= 0.99),
        Target(f"solve rate, greedy, {len(greedy.lengths):,} held-out boards", ">= 95 %", pct(greedy.rate),
               greedy.rate >= 0.95),
        Target("solvability accuracy, start boards", ">= 99 %", pct(acc.solvability), acc.solvability >= 0.99),
        Target("optimal move (any shortest solution)", ">= 98 %", pct(acc.optimal), acc.optimal >= 0.98),
        Target("mean length, beam 32, over BFS's", "<= +2 %",
               f"{beam.mean_length:.3f} / {beam.optimal_length:.3f} ({100 * over:+.2f} %)", over <= 0.02),
        Target("top-1 policy accuracy (the post's one label)", "-", pct(acc.policy_top1), None),
    ]
    if seconds is not None:
        targets.append(time_target(seconds, time_limit, "data and both models' training"))
    return targets


def measure(model: SokobanPolicy, config: SokobanConfig, data: dict[str, SokobanSet], train_seconds: float,
            details: bool = True) -> list[Target]:
    """The chapter's targets for a trained policy, on the held-out boards of `data`: its
    teacher-forced accuracies, greedy play on every solvable board, and beam search on the
    first BEAM_BOARDS of them. The chapter's time target covers the data and the training of
    both models, as the chapter trains them, not one model alone: it is left out here (the
    command line prints the training time itself), so `train_seconds` is not used; nor is
    `details`, as the chapter has no detail beside its targets."""
    boards, optimal = solvable_boards(data["held_out"])
    beam = solves(model, boards[:BEAM_BOARDS], optimal[:BEAM_BOARDS], width=32)
    return sokoban_targets(accuracies(model, data["held_out"]), solves(model, boards, optimal), beam)


_OPTIONS = (cli.Option("--steps", "steps", "most training steps"), cli.Option("--lr", "lr", "peak learning rate"),
            cli.Option("--history", "history", "attend over the history (--no-history: the baseline)"),
            cli.Option("--data-seed", "data_seed", "which boards"))
_ABOUT = "A transformer policy learns one-box Sokoban from shortest solutions, and says which boards cannot be solved."
CHAPTER = cli.Chapter("sokoban", _ABOUT, SokobanConfig, SokobanPolicy, dataset.for_config, net.train, measure,
                      options=_OPTIONS)
main = cli.entry_point(CHAPTER)
