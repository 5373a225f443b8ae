"""Looking inside the Sokoban policy: the frames and animation of a solve with its attention,
the nsteps head along a solution beside the truth, the first push that kills a board,
`live_board`, levels to play against the policy in the browser, and how it works: the policy
with its history taken away at play (`without_history`, `history_claims`), and a probe of what
the encoder says of the box's square, edited to move the verdict (`fit_probe`, `verdicts`),
and of the moves left (`fit_count_probe`).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from matplotlib import animation
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from toylib.decode import greedy_decode
from toylib.infer import evaluating
from toylib.live import Live, weights
from toylib.plot import DPI, LABEL_PT, TITLE_PT, animate, colorbar
from toylib.sokoban.dataset import N_NSTEPS, UNSOLVABLE, nsteps_class, replay
from toylib.sokoban.measure import START, Accuracies, Walks
from toylib.sokoban.net import SokobanPolicy
from toylib.sokoban.world import (ACTION_NAMES, SIZE, Board, Play, encode, from_xsb, live_squares, moves_to_goal,
                                  render_rgb, shortest_solution, walled)

# ----------------------------------------------------------------------------- looking inside

# Each nsteps class in words: UNSOLVABLE, then the moves left that `nsteps_class` puts in it.
NSTEPS_WORDS = ("unsolvable", "solved", "1..3", "4..11", "12..32", "33..89", "90+")


def _as_board(board: Board | str) -> Board:
    """A Board of the policy's size, from a Board or its XSB text."""
    if isinstance(board, str):
        board = from_xsb(board)
    if not isinstance(board, Board):
        raise ValueError(f"a board is a Board or its XSB text, got {type(board).__name__}")
    if board.shape != (SIZE, SIZE):
        raise ValueError(f"the policy reads {SIZE}x{SIZE} boards, got {board.shape[0]}x{board.shape[1]}")
    if not walled(board):
        raise ValueError("the policy reads boards walled all round: this one has floor on its edge")
    return board


def _visit(board: Board, actions: Sequence[int]) -> list[Board]:
    """The boards that `actions` pass through from `board`, start first: the history the
    policy reads. UNDO goes back one move, to the board before it, which joins the history
    again (as in `Walks` and in training)."""
    play, visited = Play(board), [board]
    for k, action in enumerate(actions):
        try:
            play = play.step(action)
        except ValueError as e:
            raise ValueError(f"action {k}: {e}") from None
        visited.append(play.board)
    return visited


def _read(model: SokobanPolicy, boards: Sequence[Board]) -> tuple[torch.Tensor, ...]:
    """One teacher-forced pass over a history (start first): (action logits (T, 5), nsteps
    logits (T, N_NSTEPS), patterns (layer, head, T + 1, T + 1)), on the CPU. Attention is
    causal, so row t is what the policy makes of board t having seen boards 0..t only."""
    if not boards or len(boards) > model.config.n_ctx:
        raise ValueError(f"the policy reads 1 to {model.config.n_ctx} boards, got {len(boards)}")
    planes, goals = _planes(boards)  # (T, 5, rows, cols) each; the goal is the level's
    with evaluating(model) as device:
        action, nsteps, patterns = model(goals[:1].to(device), planes[None].to(device))[:3]
    return action[0].cpu(), nsteps[0].cpu(), patterns[0].cpu()


def _greedy_walk(model: SokobanPolicy, board: Board) -> list[int]:
    """The actions `solve_greedy` plays from `board`, kept whether or not they solve it."""
    if board.is_goal():
        return []
    with evaluating(model):
        walks = Walks(model, [board])
        start = torch.full((1, 1), START, device=walks.device)
        out = greedy_decode(walks.next_logp, start, max_len=model.config.n_ctx, legal=walks.legal,
                            done=walks.done, pad=START)
    return [int(a) for a in out.tokens[0, 1 : int(out.lengths[0])]]


class SolveFrames(NamedTuple):
    """A solve by the policy, one frame per board of its history (T boards)."""

    boards: list[Board]  # (T,) the boards visited, start first
    actions: list[int]  # (T - 1,) the action taken from each board but the last
    images: np.ndarray  # (T, rows * px, cols * px, 3) uint8: `render_rgb` of each board
    attention: np.ndarray  # (T, heads, width): board t's pattern over [goal, board 0..t], 0 beyond
    nsteps: np.ndarray  # (T,) the nsteps class the policy gives each board
    titles: list[str]  # (T,) step, the nsteps class in words, the action taken
    solved: bool  # the last board has the box on the goal


def solve_frames(model: SokobanPolicy, board: Board | str, actions: Sequence[int] | None = None,
                 layer: int = -1, width: int | None = None, px: int = 16) -> SolveFrames:
    """What an animation of the policy solving `board` needs: each board of the solve, and
    where that board's token looks in `layer`, head by head, over the goal and the boards so
    far. The actions are the policy's greedy play (`solve_greedy`'s, kept even when it fails)
    unless `actions` are given (a `solve_beam` result, or BFS's `shortest_solution`), and the patterns
    come from one teacher-forced pass over the boards, which is what the policy saw at each
    step (its attention is causal).

    The last layer by default: its output is all the action and nsteps heads read, and its
    heads are kept apart because they look at different boards (a mean over heads or layers
    would blur a head that looks at the goal into one that looks at the board before).
    Each pattern row is padded with zeros to `width` keys (default T + 1, this solve's), so
    that every frame has one shape; a longer width lines up solves of different lengths."""
    board = _as_board(board)
    actions = _greedy_walk(model, board) if actions is None else [int(a) for a in actions]
    boards = _visit(board, actions)
    t = len(boards)
    width = t + 1 if width is None else width
    if not isinstance(width, (int, np.integer)) or width < t + 1:
        raise ValueError(f"width must hold the goal and all {t} boards, at least {t + 1}; got {width!r}")
    n_layers = model.config.n_layers
    if not isinstance(layer, (int, np.integer)) or not -n_layers <= layer < n_layers:
        raise ValueError(f"layer is -{n_layers}..{n_layers - 1}, got {layer!r}")
    _, nsteps_logits, patterns = _read(model, boards)  # (T, N_NSTEPS), (layer, head, T + 1, T + 1)
    attention = np.zeros((t, model.config.n_heads, width), np.float32)
    attention[:, :, : t + 1] = patterns[layer, :, 1:].transpose(0, 1).numpy()  # (T, head, T + 1): board queries
    nsteps = nsteps_logits.argmax(-1).numpy()  # (T,)
    titles = []
    for k, here in enumerate(boards):
        then = (f"then {ACTION_NAMES[actions[k]]}" if k < len(actions)
                else "solved" if here.is_goal() else "not solved")
        titles.append(f"step {k}: nsteps {NSTEPS_WORDS[nsteps[k]]}; {then}")
    images = np.stack([render_rgb(b, px) for b in boards])  # (T, rows * px, cols * px, 3)
    return SolveFrames(boards, actions, images, attention, nsteps, titles, boards[-1].is_goal())


def animate_solve(frames: SolveFrames, size: float = 2.6, dpi: int = DPI,
                  interval: int = 700) -> animation.FuncAnimation:
    """The board beside its attention, one frame per step: heads down, keys across (the goal,
    then boards 0, 1, ...), the keys the board cannot see yet left blank and its own key
    outlined, on one colour scale from 0 to 1 with its colour bar. Show it with
    `toylib.plot.show_animation`."""
    from matplotlib.patches import Rectangle

    t, heads, width = frames.attention.shape
    shown = np.where(np.arange(width) <= np.arange(t)[:, None, None] + 1, frames.attention, np.nan)

    def decorate(fig, axes):
        att = axes[1]
        att.set_aspect("auto")
        every = max(1, -(-width // 8))  # at most 8 labels: 9 pt needs the room
        ticks = [0, *range(1 + every, width, every)]  # board 0 (key 1) unlabelled: "goal" needs the room
        att.set_xticks(ticks, ["goal" if k == 0 else str(k - 1) for k in ticks], fontsize=LABEL_PT)
        att.set_yticks(range(heads), [f"head {h}" for h in range(heads)], fontsize=LABEL_PT)
        att.set_xlabel("key: the goal, then board 0, 1, ...", fontsize=LABEL_PT)
        colorbar(fig, att.images[0], att, "attention weight", fraction=0.05, pad=0.03)
        own = att.add_patch(Rectangle((0.5, -0.5), 1, heads, fill=False, ec="#17becf", lw=2))
        return lambda k: own.set_x(k + 0.5)  # board k is key k + 1

    return animate({"the board": frames.images, "the policy's attention, last layer": shown},
                   frame_titles=frames.titles, cmap=[None, "magma"], vmin=0, vmax=1, size=size,
                   dpi=dpi, interval=interval, width_ratios=(1, 1.8), decorate=decorate)


# What a board's key is to the board that looks at it: the goal, the start board, a board in
# between, the board just before, or the board itself (the columns of `attention_roles`).
ROLES = ("goal", "start board", "boards between", "board before", "itself")


def attention_roles(frames: SolveFrames) -> np.ndarray:
    """(heads, len(ROLES)): each head's attention over a solve, summed by what each key is to
    the board that looks (`ROLES`), and averaged over the boards from step 2 on (before it,
    the start board is also the board before or the board itself). Each row sums to 1."""
    t, heads, _ = frames.attention.shape
    if t < 3:
        raise ValueError(f"attention_roles needs a solve of at least 3 boards (2 moves), got {t}")
    shares = np.zeros((t - 2, heads, len(ROLES)))
    for i, k in enumerate(range(2, t)):  # board k looks at keys 0 (goal), 1 (board 0) .. k + 1 (itself)
        row = frames.attention[k]  # (heads, width)
        shares[i, :, 0] = row[:, 0]
        shares[i, :, 1] = row[:, 1]
        shares[i, :, 2] = row[:, 2:k].sum(-1)  # boards 1 .. k - 2
        shares[i, :, 3] = row[:, k]
        shares[i, :, 4] = row[:, k + 1]
    return shares.mean(0)


def board_xy(square: int, px: int) -> tuple[float, float]:
    """The pixel centre (x, y) of a square of a board rendered `px` pixels a square."""
    if not isinstance(square, (int, np.integer)) or not 0 <= square < SIZE * SIZE:
        raise ValueError(f"a square is 0..{SIZE * SIZE - 1}, got {square!r}")
    row, col = divmod(int(square), SIZE)
    return (col + 0.5) * px, (row + 0.5) * px


def solve_picture(frames: SolveFrames, title: str | None = None, size: tuple[float, float] | None = None,
                  stacked: bool = False) -> Figure:
    """A still of a solve, for a reader's first look: on the left the start board with the
    player's route (blue) and the box's (orange); on the right `attention_roles`, what each
    head of the layer of `frames` looks at over the solve, with the shares written in and
    its colour bar. stacked: the board above the heads, for a narrow page. size: inches,
    (7, 3.6) by default, stacked (4.4, 7.2)."""
    if len(frames.boards) < 3:
        raise ValueError("solve_picture needs a solve of at least 2 moves")
    px = frames.images.shape[1] // SIZE
    roles = attention_roles(frames)  # (heads, roles)
    heads = roles.shape[0]
    if stacked:
        fig, (ax, att) = plt.subplots(2, 1, figsize=size or (4.4, 7.2), dpi=DPI,
                                      gridspec_kw={"height_ratios": (1, 1.1)}, layout="constrained")
    else:
        fig, (ax, att) = plt.subplots(1, 2, figsize=size or (7.0, 3.6), dpi=DPI,
                                      gridspec_kw={"width_ratios": (1, 1.35)}, layout="constrained")
    ax.imshow(frames.images[0], interpolation="nearest")
    for square, colour, width in (([b.player for b in frames.boards], "#1f77b4", 2.0),
                                  ([b.box for b in frames.boards], "#ff7f0e", 3.0)):
        xy = np.array([board_xy(s, px) for s in square])  # (T, 2)
        ax.plot(xy[:, 0], xy[:, 1], "-", color=colour, lw=width, alpha=0.9, solid_capstyle="round")
        ax.plot(*xy[-1], "o", color=colour, ms=5)
    ax.set_xticks([])
    ax.set_yticks([])
    moves = len(frames.actions)
    ax.set_title(f"{'solved' if frames.solved else 'not solved'} in {moves} moves", fontsize=TITLE_PT)
    ax.set_xlabel("route: player blue, box orange", fontsize=LABEL_PT)
    image = att.imshow(roles, cmap="magma", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    for h in range(heads):
        for r in range(len(ROLES)):
            share = roles[h, r]
            att.text(r, h, f"{100 * share:.0f}", ha="center", va="center", fontsize=LABEL_PT,
                     color="black" if share > 0.6 else "white")
    att.set_xticks(range(len(ROLES)), [r.replace(" ", "\n") for r in ROLES], fontsize=LABEL_PT)
    att.set_yticks(range(heads), [f"head {h}" for h in range(heads)], fontsize=LABEL_PT)
    att.set_title("last layer: where each head looks (%)", fontsize=TITLE_PT)
    colorbar(fig, image, att, "share of attention", fraction=0.06, pad=0.03)
    if title:
        fig.suptitle(title, fontsize=TITLE_PT)
    return fig


class NstepsAlong(NamedTuple):
    """The policy's nsteps head at each board of a history (T boards), beside the truth."""

    boards: list[Board]  # (T,) the boards visited, start first
    actions: list[int]  # (T - 1,)
    probs: np.ndarray  # (T, N_NSTEPS) the policy's probability of each nsteps class
    moves_left: np.ndarray  # (T,) BFS's fewest moves from each board on its own; -1: none can solve it
    truth: np.ndarray  # (T,) nsteps_class of moves_left: UNSOLVABLE where the board is dead
    target: np.ndarray  # (T,) training's label: UNDO is a move, so a dead board after a bad push is not UNSOLVABLE


def nsteps_along(model: SokobanPolicy, board: Board | str, actions: Sequence[int] | None = None) -> NstepsAlong:
    """The nsteps class probabilities the policy gives each board it is shown, teacher-forced
    along `actions` from `board` (default: BFS's shortest solution; no moves when the board
    cannot be solved), beside two answers. `truth` is the board's own: BFS from it alone,
    UNSOLVABLE when it is dead. `target` is the label training used: with UNDO a move, a
    board reached by a bad push is one undo more than the board before it, so only a board
    dead from the start is labelled UNSOLVABLE. The two differ exactly after such a push."""
    board = _as_board(board)
    if actions is None:
        actions = shortest_solution(board) or []
    actions = [int(a) for a in actions]
    boards = _visit(board, actions)
    table = moves_to_goal(board)  # one table serves every board: they share walls and goal
    left = np.array([table.get((b.box, b.player), -1) for b in boards])  # (T,)
    truth = np.array([nsteps_class(int(n) if n >= 0 else None) for n in left])
    if left[0] >= 0:
        target = np.array(replay(board, actions, table, None).nsteps)
    else:  # every board reached from a dead one is dead too
        target = np.full(len(boards), UNSOLVABLE)
    _, nsteps_logits, _ = _read(model, boards)  # (T, N_NSTEPS)
    probs = torch.softmax(nsteps_logits, -1).numpy()
    return NstepsAlong(boards, actions, probs, left, truth, target)


def first_deadlock(board: Board | str, actions: Sequence[int] | None = None) -> tuple[int, int] | None:
    """(step, move): the first board along `actions` (default: BFS's solution) that can still
    be solved, and is not yet, where a legal push leaves it dead, and that push; None if
    there is none.
    Only a push can kill a board: the player can always walk back."""
    board = _as_board(board)
    actions = (shortest_solution(board) or []) if actions is None else list(actions)
    table = moves_to_goal(board)
    for k, here in enumerate(_visit(board, actions)):
        if here.is_goal() or (here.box, here.player) not in table:
            continue
        for move in here.legal_actions():
            after = here.apply_action(move)
            if after.box != here.box and (after.box, after.player) not in table:
                return k, move
    return None


def draw_nsteps(ax: Axes, along: NstepsAlong, title: str | None = None) -> Axes:
    """The nsteps probabilities as a heat map, classes down and steps across, with the truth
    of each board (circles) and, where training taught otherwise, its target (crosses)."""
    t = len(along.boards)
    ax.imshow(along.probs.T, cmap="Blues", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    steps = np.arange(t)
    ax.scatter(steps, along.truth, s=40, facecolors="none", edgecolors="#d62728", lw=1.5, label="truth")
    other = along.target != along.truth
    if other.any():
        ax.scatter(steps[other], along.target[other], s=40, marker="x", c="#ff7f0e",
                   label="training's target")
    ax.set_yticks(range(N_NSTEPS), NSTEPS_WORDS, fontsize=LABEL_PT)
    ax.set_xticks(steps[:: max(1, -(-t // 12))])
    ax.tick_params(axis="x", labelsize=LABEL_PT)
    ax.set_xlabel("step", fontsize=LABEL_PT)
    if title:
        ax.set_title(title, fontsize=LABEL_PT)
    return ax


# ----------------------------------------------------------------------------- a level to play, in the browser


def live_board(model: SokobanPolicy, levels: Sequence[Board | str]):
    """The levels to play in the browser, with no kernel, one after another: arrow keys (or
    the buttons, or a click beside the player) move, `u` undoes, "the model's move" plays the
    policy's most likely legal action and "let the model finish" plays them to the end. Below
    the board: the policy's suggestion, its nsteps estimate and BFS's fewest moves left. The
    policy reads the boards visited, undone ones too, as in training."""
    if not levels:
        raise ValueError("give at least one level to play")
    boards = [_as_board(b) for b in levels]
    fewest = [shortest_solution(b) for b in boards]
    if any(f is None for f in fewest):
        raise ValueError("every level must be solvable: the page counts the fewest moves of each")
    c = model.config
    return Live("sokoban", "ToySokoban", {
        "weights": weights(model), "d_model": c.d_model, "n_heads": c.n_heads, "n_layers": c.n_layers,
        "channels": c.channels, "conv_layers": c.conv_layers, "region": c.region, "inside": c.inside,
        "pieces": c.pieces, "n_ctx": c.n_ctx, "history": c.history,
        "levels": [{"board": {"walls": b.grid.reshape(-1), "goal": b.goal, "box": b.box, "player": b.player},
                    "fewest": len(f)} for b, f in zip(boards, fewest)]})


# ----------------------------------------------------------------------------- how it works: the history taken away


def without_history(model: SokobanPolicy) -> SokobanPolicy:
    """A copy of `model` whose boards attend only to the goal and to themselves, as the
    baseline's do (config.history False), its weights untouched: the history taken away at
    play. An intervention: what it changes is what the trained policy reads from the boards
    before the current one."""
    if not model.config.history:
        raise ValueError("this policy already plays without its history")
    out = copy.deepcopy(model)
    out.config = dataclasses.replace(model.config, history=False)
    return out


def history_claims(whole: Accuracies, blind: Accuracies, baseline: Accuracies) -> dict[str, bool]:
    """"How it works": the trained transformer's teacher-forced measures with its history
    (`whole`) and with it taken away at play (`blind`, `without_history`), beside the baseline
    trained without one: the best move moves by under 3 points, the nsteps class (how many
    moves are left) falls by over 3, and the baseline's nsteps class is within 3 points of the
    transformer's: trained without a history, a policy reads the count off the board."""
    return {
        "without its history, the best-move rate moves by under 3 points": abs(whole.optimal - blind.optimal) < 0.03,
        "and the nsteps class is right over 3 points less often": whole.nsteps_top1 - blind.nsteps_top1 > 0.03,
        "the baseline's nsteps class is within 3 points of the transformer's":
            abs(whole.nsteps_top1 - baseline.nsteps_top1) < 0.03,
    }


# ----------------------------------------------------------------------------- how it works: what the encoder reads


def _planes(boards: Sequence[Board]) -> tuple[torch.Tensor, torch.Tensor]:
    """Start boards as the policy reads them, and their goal boards (box on goal, no player): (n, 5, rows, cols)."""
    walls, goals = np.stack([b.grid for b in boards]), np.array([b.goal for b in boards])
    return (torch.from_numpy(encode(walls, goals, np.array([b.box for b in boards]),
                                    np.array([b.player for b in boards]))),
            torch.from_numpy(encode(walls, goals, goals, -1)))


def encoder_maps(model: SokobanPolicy, boards: Sequence[Board]) -> list[torch.Tensor]:
    """`BoardEncoder.features` of each board on the CPU: the planes, then each convolution's map (n, ch, rows, cols)."""
    with evaluating(model) as device:
        return [m.cpu() for m in model.encoder.features(_planes(boards)[0].to(device))]


class Probe(NamedTuple):
    """A linear read-out of features, weight . features + bias: the log-odds of a yes or no
    (`fit_probe`: is the box's square live, `world.live_squares`) or a number (`fit_count_probe`)."""

    weight: torch.Tensor  # (channels,) float64
    bias: torch.Tensor  # () float64

    def read(self, features: torch.Tensor) -> torch.Tensor:
        """features (n, channels) -> (n,) float64."""
        return features.double() @ self.weight + self.bias


def fit_probe(features: torch.Tensor, live: torch.Tensor, steps: int = 200) -> Probe:
    """Logistic regression of `live` (n,) bool on `features` (n, channels), in float64 by
    L-BFGS from zero, with a small L2 penalty so that the answer is unique: the same probe
    from the same features, however it is run."""
    if features.ndim != 2 or live.shape != features.shape[:1]:
        raise ValueError(f"features are (n, channels) and live (n,), "
                         f"got {tuple(features.shape)} and {tuple(live.shape)}")
    x, y = features.double(), live.double()
    scale = x.std(0).clamp(min=1e-6)  # features on one scale, for L-BFGS
    w = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=steps, line_search_fn="strong_wolfe")

    def loss():
        opt.zero_grad()
        out = F.binary_cross_entropy_with_logits(x / scale @ w + b, y) + 1e-4 * w.square().sum()
        out.backward()
        return out

    with torch.enable_grad():
        opt.step(loss)
    return Probe((w / scale).detach(), b.detach())


def fit_count_probe(features: torch.Tensor, counts: torch.Tensor, ridge: float = 1e-3) -> Probe:
    """Least squares of `counts` (n,) on `features` (n, channels), float64, in closed form (a small ridge: unique)."""
    if features.ndim != 2 or counts.shape != features.shape[:1]:
        raise ValueError(f"features are (n, channels) and counts (n,), "
                         f"got {tuple(features.shape)} and {tuple(counts.shape)}")
    x, y = features.double(), counts.double()
    mean, scale = x.mean(0), x.std(0).clamp(min=1e-6)
    z = (x - mean) / scale  # (n, channels)
    w = torch.linalg.solve(z.T @ z + ridge * len(z) * torch.eye(z.shape[1], dtype=z.dtype), z.T @ (y - y.mean()))
    return Probe(w / scale, y.mean() - (mean / scale) @ w)


def box_live(boards: Sequence[Board]) -> np.ndarray:
    """(n,) bool: whether each board's box stands on a live square (BFS, `world.live_squares`)."""
    return np.array([bool(live_squares(b).reshape(-1)[b.box]) for b in boards])


def verdicts(model: SokobanPolicy, boards: Sequence[Board], edit: torch.Tensor | None = None,
             states: bool = False) -> np.ndarray | tuple[np.ndarray, torch.Tensor, torch.Tensor]:
    """(n,): the probability of UNSOLVABLE that the nsteps head gives each start board, read
    alone after its goal: the verdict. `edit` (n, channels), if given, is added to the
    encoder's last map at the box's square before the map becomes a token: an intervention
    on what the encoder says of that square, the board itself unchanged. states: also each
    board's token (n, d_model) and the transformer's output at it (n, d_model), on the CPU."""
    planes, goals = _planes(boards)
    out = []  # what the heads read: the transformer's output at each board
    hook = model.nsteps_head.register_forward_pre_hook(lambda head, args: out.append(args[0][:, 0]))
    try:  # the hook comes off even if the pass fails
        with evaluating(model) as device:
            planes, goals = planes.to(device), goals.to(device)
            x = model.encoder.features(planes)[-1]  # (n, channels, rows, cols)
            if edit is not None:
                box = planes[:, 4:5, 1:-1, 1:-1] if model.config.inside else planes[:, 4:5]  # (n, 1, rows, cols)
                x = x + edit.to(device, x.dtype)[:, :, None, None] * box
            token = model.encoder.pool(x, planes)  # (n, d_model)
            nsteps = model.attend(model.tokens(goals), token[:, None])[1][:, 0]
    finally:
        hook.remove()
    p = torch.softmax(nsteps.float(), -1)[:, UNSOLVABLE].cpu().numpy()
    return (p, token.cpu(), out[0].cpu()) if states else p


def at_box(model: SokobanPolicy, maps: torch.Tensor, boards: Sequence[Board]) -> torch.Tensor:
    """(n, channels): each board's features at its box's square, from its `maps` (n, channels, rows, cols)."""
    off = 1 if model.config.inside else 0
    rows, cols = (np.array([divmod(b.box, b.shape[1])[k] for b in boards]) - off for k in (0, 1))
    return maps[torch.arange(len(boards)), :, torch.from_numpy(rows), torch.from_numpy(cols)]


def probe_edits(probe: Probe, features: torch.Tensor, to: float, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Edits (n, channels) of `features` (n, channels) at the box's squares that move the
    probe's log-odds there to `to` along its own direction, and a control: edits of the same
    sizes along random directions square to it (drawn with `seed`), which the probe cannot
    see. Returns (along the probe, control), float32."""
    w = probe.weight
    along = (to - (features.double() @ w + probe.bias))[:, None] * w / w.square().sum()  # (n, channels)
    gen = torch.Generator().manual_seed(seed)
    noise = torch.randn(features.shape, generator=gen, dtype=torch.float64)
    noise -= (noise @ w)[:, None] * w / w.square().sum()  # square to the probe
    control = noise / noise.norm(dim=1, keepdim=True) * along.norm(dim=1, keepdim=True)
    return along.float(), control.float()


def verdict_errors(unsolvable_said: np.ndarray, solvable: np.ndarray, box_live: np.ndarray,
                   box_read_live: np.ndarray) -> dict[str, int]:
    """The verdict's errors on start boards (each (n,) bool: the verdict says unsolvable; the
    board can be solved; the box's square is live; the probe reads it live), counted by what
    the encoder read at the box's square."""
    wrong_dead = solvable & unsolvable_said  # solvable, called unsolvable
    wrong_live = ~solvable & ~unsolvable_said  # unsolvable, called solvable
    return {
        "solvable, called unsolvable": int(wrong_dead.sum()),
        "of those, the probe reads the box's square dead": int((wrong_dead & ~box_read_live).sum()),
        "unsolvable, called solvable": int(wrong_live.sum()),
        "of those, the box on a dead square, read live": int((wrong_live & ~box_live & box_read_live).sum()),
        "of those, the box on a live square: the player cannot get behind it": int((wrong_live & box_live).sum()),
    }


def box_map(model: SokobanPolicy, probe: Probe, board: Board) -> np.ndarray:
    """(rows, cols): the probe's P(live) at the box's square, the box put on each floor square
    of `board` in turn, the player where it stands: what the encoder says of every square as
    a place for the box. NaN on walls and on the player's square."""
    squares = [s for s in range(len(board.walls)) if not board.walls[s] and s != board.player]
    moved = [dataclasses.replace(board, box=s) for s in squares]
    features = at_box(model, encoder_maps(model, moved)[-1], moved)  # (squares, channels)
    out = np.full(len(board.walls), np.nan)
    out[squares] = torch.sigmoid(probe.read(features)).numpy()
    return out.reshape(board.shape)


def draw_box_map(ax: Axes, board: Board, live_p: np.ndarray, title: str | None = None):
    """`board` with each floor square coloured by `box_map`'s P(live), and a cross on each
    square that BFS finds dead. Returns the colour layer (for a colour bar)."""
    px = 16
    ax.imshow(render_rgb(board, px), interpolation="nearest")
    layer = ax.imshow(np.ma.masked_invalid(live_p), cmap="RdYlGn", vmin=0, vmax=1, alpha=0.6,
                      extent=(0, board.shape[1] * px, board.shape[0] * px, 0), interpolation="nearest")
    dead = np.flatnonzero(~live_squares(board).reshape(-1) & ~board.grid.reshape(-1).astype(bool))
    for s in dead:
        ax.plot(*board_xy(int(s), px), "x", color="black", ms=5, mew=1.2)
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title, fontsize=TITLE_PT)
    return layer


def probe_claims(depth: Sequence[float], majority: float, dead: tuple[float, float], live: tuple[float, float],
                 errors: dict[str, int], moves_off: Sequence[float]) -> dict[str, bool]:
    """"How it works": the box probe's held-out accuracy after each convolution (`depth`, the
    planes first) against the majority class; the share of verdicts an edit turns, (along
    the probe, the random control), writing "dead" on solvable boards and "live" on boards
    whose box is on a dead square; `verdict_errors`; and the mean error of moves left read
    by `fit_count_probe` from the board's token, the transformer's output, and two distances."""
    wrong = errors["unsolvable, called solvable"]
    read = (errors["of those, the box on a dead square, read live"]
            + errors["of those, the box on a live square: the player cannot get behind it"])
    return {
        "the planes alone say no more than the majority class": depth[0] < majority + 0.05,
        "after the last convolution the probe is right on over 90 % of held-out boxes": depth[-1] > 0.9,
        "writing 'dead' turns the verdict on 5 times as many solvable boards as a random edit":
            dead[0] >= 5 * max(dead[1], 0.01),
        "writing 'live' turns it on 3 times as many dead boxes as a random edit": live[0] >= 3 * max(live[1], 0.01),
        "a misread box or a player that cannot get behind it: 8 in 10 of the errors on unsolvable boards":
            read >= 0.8 * wrong,
        "the token reads moves left with a fifth less error than the distances": moves_off[0] <= 0.8 * moves_off[2],
        "the transformer's output reads them less than a fifth better": moves_off[1] > 0.8 * moves_off[0],
    }
