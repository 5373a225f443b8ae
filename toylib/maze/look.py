"""Inside a maze model: what the looped encoder knows after each pass (its search from the
end, read through the decoder, and the wave of its way head), where the decoder's cross-attention heads look, the model without some of them, the
frames of it solving a maze, and a maze to edit that it solves as you go."""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Sequence
from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np
import torch

from toylib.attention import DecoderBlock
from toylib.draws import stream
from toylib.infer import evaluating, infer, model_device
from toylib.live import Live, weights
from toylib.maze.dataset import NO_WAY, PAD, MazeSet, solution_tensor, start_tiles, walk_tiles, ways_to_end
from toylib.maze.measure import Reroutes, close_corridor, solve_closed, solve_greedy
from toylib.maze.net import QUIET, SETTLED, STILL, MazeModel, MazeNet, Memory
from toylib.maze.world import (CENTRE, DIRECTIONS, MOVE_NAMES, START, STEP, STOP, TILE, MazeState,
                               check_pixels, check_solution, draw_maze, exits, follow_moves, from_pixels,
                               random_maze)
from toylib.plot import DPI, LABEL_PT, animate


# ----------------------------------------------------------------------------- the encoder's search


class Search(NamedTuple):
    """What the looped encoder knows after some numbers of passes, read through the decoder."""

    passes: tuple[int, ...]  # the numbers of encoder passes read, one frame each
    moves: np.ndarray  # (P, R, C) int: the move the model makes with the walker on each tile; -1 where
    #                    no walker from the start can stand, and on the end
    right: np.ndarray  # (P, R, C) bool: that move goes one tile nearer the end (a shortest path's move)
    to_end: np.ndarray  # (R, C) int: moves from each tile to the end by a shortest path; -1 if cut off
    start: tuple[int, int]
    end: tuple[int, int]


def _bfs_tiles(ex: np.ndarray, source: tuple[int, int]) -> tuple[np.ndarray, dict]:
    """Breadth-first search over the tiles from `source`: ((R, C) moves from it, -1 where
    unreachable; {tile: (the tile before it, the move from there)})."""
    dist = np.full(ex.shape[:2], -1)
    dist[source] = 0
    before, queue = {}, deque([source])
    while queue:
        r, c = queue.popleft()
        for k, m in enumerate(DIRECTIONS):
            nxt = (r + STEP[m][0], c + STEP[m][1])
            if ex[r, c, k] and dist[nxt] < 0:
                dist[nxt] = dist[r, c] + 1
                before[nxt] = ((r, c), m)
                queue.append(nxt)
    return dist, before


def encoder_search(model: MazeNet, maze, passes: Sequence[int]) -> Search:
    """The looped encoder's search, read through the decoder: after each number of encoder
    passes in `passes`, the move the model makes with the walker on each tile it can reach
    from the start. The walker is put on a tile by teacher forcing a shortest path from the
    start to it (START, then its moves): one batched decoder call per number of passes, over
    every reachable tile at once. A move is right when it goes one tile nearer the end, as
    every move of a shortest path does."""
    if not isinstance(model, MazeNet):
        raise ValueError(f"the search is the looped encoder's: model must be a MazeNet, got {type(model).__name__}")
    pixels = check_pixels(maze)
    layout = from_pixels(pixels)
    passes = tuple(int(k) for k in passes)
    if not passes or min(passes) < 1:
        raise ValueError(f"passes must be a non-empty list of pass counts >= 1, got {list(passes)}")
    ex = exits(layout.arms)
    to_end = _bfs_tiles(ex, layout.end)[0]
    from_start, before = _bfs_tiles(ex, layout.start)
    tiles = [tuple(t) for t in np.argwhere(from_start >= 0) if tuple(t) != layout.end]
    paths = []
    for t in tiles:  # START and the moves of a shortest path from the start to t
        path = []
        while t != layout.start:
            t, m = before[t]
            path.append(m)
        paths.append([START, *reversed(path)])
    longest = max(map(len, paths))
    device = model_device(model)
    # (n, longest): STOP after the path leaves the walker where it is, and the decoder is causal anyway
    tokens = torch.tensor([p + [STOP] * (longest - len(p)) for p in paths], device=device)
    last = torch.tensor([len(p) - 1 for p in paths], device=device)  # (n,) where each walker stands on its tile
    x = torch.from_numpy(pixels[None]).to(device)  # (1, H, W)
    rows, cols = zip(*tiles)
    moves = np.full((len(passes), *ex.shape[:2]), -1)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for i, k in enumerate(passes):
                memory = model.encode(x, iterations=k, keep=False)
                n = len(tiles)
                shared = Memory(memory.states.expand(n, -1, -1), None, memory.start.expand(n, -1), memory.shape)
                logits = model.decode(tokens, shared)[0]  # (n, longest, N_MOVES)
                moves[i, rows, cols] = logits[torch.arange(n, device=device), last].argmax(-1).cpu().numpy()
    finally:
        model.train(was_training)
    right = np.zeros(moves.shape, bool)
    for r, c in tiles:
        for i, m in enumerate(moves[:, r, c]):
            if m in STEP and ex[r, c, DIRECTIONS.index(m)]:
                nr, nc = r + STEP[m][0], c + STEP[m][1]
                right[i, r, c] = to_end[r, c] > 0 and to_end[nr, nc] == to_end[r, c] - 1
    return Search(passes, moves, right, to_end, layout.start, layout.end)


# colours of a search picture: walls, open floor no walker reaches, a tile whose move is right or not
class Wave(NamedTuple):
    """How the end's news spreads through the looped encoder as it solves, pass by pass, over
    the tiles the end can be reached from (each a share of them, one per pass, from pass 1)."""

    reach: np.ndarray  # (P,): tiles the news could have reached, fewer moves from the end than passes run
    right: np.ndarray  # (P,): tiles whose way head names one of their ways to the end
    early: np.ndarray  # (P,): tiles the news could not have reached that name a move or STOP all the same


def wave(model: MazeNet, mazes) -> Wave:
    """`Wave` of `model` solving `mazes` (pixels (n, R*TILE, C*TILE), all of one size, or one
    maze): the way head read from every tile's state after every pass that solving runs (a
    maze that stopped keeps its last states), against breadth-first search from the end."""
    if getattr(model, "way_head", None) is None:
        raise ValueError("the wave is read by the way head: model must be a MazeNet with ways > 0")
    pixels = np.asarray(mazes)
    pixels = np.stack([check_pixels(p) for p in (pixels[None] if pixels.ndim == 2 else pixels)])
    with evaluating(model) as device:
        x = torch.from_numpy(pixels).to(device)
        trace = model.encode(x, keep=False, trace=True).trace  # (n, P, tiles, d)
        named = model.way_head(trace).argmax(-1)  # (n, P, tiles)
    ways, distance = ways_to_end(x)  # (n, tiles, N_MOVES + 1), (n, tiles)
    reachable = distance < torch.inf  # (n, tiles)
    after = torch.arange(1, named.shape[1] + 1, device=x.device)[None, :, None]  # (1, P, 1)
    reached = distance[:, None] < after  # (n, P, tiles)
    right = ways.gather(-1, named.transpose(1, 2)).transpose(1, 2)  # (n, P, tiles)
    early = ~reached & (named != NO_WAY)

    def share(t: torch.Tensor) -> np.ndarray:  # (P,): over every maze's reachable tiles
        return ((t & reachable[:, None]).sum((0, 2)) / reachable.sum()).cpu().numpy()

    return Wave(share(reached), share(right), share(early))


_SEARCH_RGB = {"wall": "#23262f", "floor": "#f2eee3", "right": "#4daf4a", "wrong": "#b3b3b3",
               "start": "#17becf", "end": "#d62728"}


def _rgb(colour: str) -> np.ndarray:
    return np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)]) / 255


def search_image(maze, search: Search, i: int) -> np.ndarray:
    """(H, W, 3) RGB: the maze after `search.passes[i]` passes, each reachable tile's open
    pixels green where the model's move is right and grey where it is not; start cyan, end red."""
    pixels = check_pixels(maze)
    if not -len(search.passes) <= i < len(search.passes):
        raise ValueError(f"frame {i} of a search of {len(search.passes)} frames")
    if search.moves.shape[1:] != tuple(s // TILE for s in pixels.shape):
        raise ValueError(f"the search is of a {search.moves.shape[1:]} maze, this maze has "
                         f"{tuple(s // TILE for s in pixels.shape)} tiles")
    image = np.where((pixels > 0)[..., None], _rgb(_SEARCH_RGB["floor"]), _rgb(_SEARCH_RGB["wall"]))
    block = np.ones((TILE, TILE), bool)
    for what, where in (("right", search.right[i]), ("wrong", (search.moves[i] >= 0) & ~search.right[i])):
        image[np.kron(where, block).astype(bool) & (pixels > 0)] = _rgb(_SEARCH_RGB[what])
    for what, (r, c) in (("start", search.start), ("end", search.end)):
        image[r * TILE + CENTRE, c * TILE + CENTRE] = _rgb(_SEARCH_RGB[what])
    return image


def _arrows(ax, search: Search, i: int):
    """Draw each tile's move as an arrow, and rings round the start and the end; returns the
    quiver, whose `set_UVC` moves the arrows."""
    rows, cols = np.mgrid[: search.moves.shape[1], : search.moves.shape[2]]
    for what, (r, c) in (("start", search.start), ("end", search.end)):
        ax.plot(c * TILE + CENTRE, r * TILE + CENTRE, "o", mfc="none", mec=_SEARCH_RGB[what], ms=13, mew=3)
    quiver = ax.quiver(cols * TILE + CENTRE, rows * TILE + CENTRE, *_arrow_uv(search, i), angles="xy",
                       scale_units="xy", scale=1, pivot="middle", color="#23262f", width=0.012, headwidth=3.5,
                       headlength=3.5, headaxislength=3)
    return quiver


def _arrow_uv(search: Search, i: int) -> tuple[np.ndarray, np.ndarray]:
    """(R, C) x and y lengths (pixels) of each tile's arrow; NaN (no arrow) where it makes no move."""
    m = search.moves[i]
    u, v = np.full(m.shape, np.nan), np.full(m.shape, np.nan)
    for move, (dr, dc) in STEP.items():
        u[m == move], v[m == move] = 3.2 * dc, 3.2 * dr  # image rows grow downwards, as y does here
    return u, v


def draw_search(ax, maze, search: Search, i: int, walk: Sequence[int] | None = None):
    """Draw frame `i` of a search on `ax`: `search_image` with each tile's move as an arrow,
    and optionally a walk (moves, START first) through the tile centres in orange."""
    ax.imshow(search_image(maze, search, i), interpolation="nearest")
    _arrows(ax, search, i)
    if walk is not None:
        tiles = follow_moves(MazeState.start_of(check_pixels(maze)), list(walk))[0]
        r, c = (np.array(x) * TILE + CENTRE for x in zip(*tiles))
        ax.plot(c, r, color="#ff7f0e", lw=3, alpha=0.8, solid_capstyle="round")
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


def search_legend(where, **kwargs):
    """A legend for search pictures (on a figure or an axes): what green and grey tiles mean."""
    from matplotlib.patches import Patch

    handles = [Patch(color=_SEARCH_RGB["right"], label="its move leads one tile nearer the end"),
               Patch(color=_SEARCH_RGB["wrong"], label="it does not (yet)"),
               Patch(color=_SEARCH_RGB["start"], label="start"), Patch(color=_SEARCH_RGB["end"], label="end")]
    return where.legend(handles=handles, fontsize=LABEL_PT, frameon=False, **kwargs)


def search_picture(maze, search: Search, walk: Sequence[int], passes: Sequence[int], columns: int = 3):
    """The search after each of three passes (each in `search.passes`), the last with the walk
    (moves, START first) drawn on it, and the legend below. columns: 3 puts them in one row
    (7 x 3.2 inches); 2, two above and the last centred below them, for a phone (4.4 x 5.6).
    Returns the Figure."""
    if columns not in (2, 3) or len(passes) != 3:
        raise ValueError(f"columns must be 3 (one row) or 2 (two rows), for 3 passes; "
                         f"got {columns} columns for {len(passes)} passes")
    if columns == 3:
        fig, axes = plt.subplot_mosaic([[0, 1, 2]], figsize=(7, 3.2), dpi=DPI, layout="constrained")
    else:
        fig, axes = plt.subplot_mosaic([[0, 0, 1, 1], [".", 2, 2, "."]], figsize=(4.4, 5.6), dpi=DPI,
                                       layout="constrained")
    for j, k in enumerate(passes):
        last = j == len(passes) - 1
        draw_search(axes[j], maze, search, search.passes.index(k), walk=walk if last else None)
        note = (" (the last): the walk" if columns == 3 else " (the last):\nthe walk") if last else ""
        axes[j].set_title(f"after pass {k}{note}", fontsize=LABEL_PT)
    search_legend(fig, loc="outside lower center", ncol=2)
    return fig


def animate_search(maze, search: Search, size: float = 4.5, interval: int = 400):
    """An animation of the search, one frame per entry of `search.passes` (in order, the last
    one the pass solving stops at): `draw_search`'s picture, titled with the pass, out of the
    last, and the share of reachable tiles whose move is right."""
    images = np.stack([search_image(maze, search, i) for i in range(len(search.passes))])  # (P, H, W, 3)
    reachable = (search.moves >= 0).sum((1, 2))  # (P,)
    last = search.passes[-1]
    titles = [f"after pass {k} of {last}: {search.right[i].sum()} of {reachable[i]} tiles point the right way"
              for i, k in enumerate(search.passes)]

    def decorate(fig, axes):
        quiver = _arrows(axes[0], search, 0)
        fig.set_size_inches(size + 0.8, size + 1.3)
        search_legend(axes[0], loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=2)
        return lambda k: quiver.set_UVC(*_arrow_uv(search, k))

    anim = animate({"": images}, frame_titles=titles, size=size, interval=interval, decorate=decorate)
    return anim


# ----------------------------------------------------------------------------- the decoder

# Where a head's strongest tile is, relative to the walker; each step counts in the first that fits
PLACES = ("the walker's tile", "the next tile", "another neighbour of the next tile", "elsewhere")


def _strongest_tiles(model: MazeModel, pixels: torch.Tensor, moves: torch.Tensor) -> torch.Tensor:
    """(batch, head, T): the tile each head of the last decoder layer attends to most, at each step."""
    _, _, cross = model.decode(moves, model.encode(pixels, keep=False))  # cross (batch, layer, head, T, tiles)
    return cross[:, -1].argmax(-1)


def where_heads_look(model: MazeModel, mazes: MazeSet, batch_size: int = 250) -> dict:
    """Teacher-forced along each stored solution: at every step that chooses a move (not the
    final STOP), where each cross-attention head of the last decoder layer puts its largest
    weight, as shares of steps over PLACES ("beside": a neighbour of the next tile other than
    the walker's own). Returns {"places": (head, 4) array, "near_next": (head,) share on the
    next tile or a neighbour of it (the walker's tile included), "any_head": the share of steps
    where at least one head does, "steps": how many steps were counted}."""
    tokens = solution_tensor(mazes.solutions)  # (n, T + 1)
    inputs = tokens[:, :-1].clamp(min=0)  # (n, T): START and the moves, padding read as STOP
    strongest = infer(model, mazes.mazes, inputs, batch_size=batch_size, run=_strongest_tiles)  # (n, head, T)
    rows, cols = (s // TILE for s in mazes.mazes.shape[1:])
    start = start_tiles(torch.from_numpy(mazes.mazes))  # (n, 2)
    here = walk_tiles(inputs, start, (rows, cols))  # (n, T, 2): where the walker stands after each token
    nxt = torch.roll(here, -1, dims=1)  # (n, T, 2): where the next move takes it
    moves = (tokens[:, 1:] != PAD) & (tokens[:, 1:] != STOP)  # (n, T): steps whose answer is a move
    looked = torch.stack((strongest // cols, strongest % cols), -1)  # (n, head, T, 2)
    dist_here = (looked - here[:, None]).abs().sum(-1)  # (n, head, T)
    dist_next = (looked - nxt[:, None]).abs().sum(-1)
    place = torch.full_like(dist_here, 3)
    place[dist_next == 1] = 2
    place[dist_next == 0] = 1
    place[dist_here == 0] = 0
    chosen = place.transpose(1, 2)[moves]  # (steps, head)
    shares = np.stack([(chosen == k).float().mean(0).numpy() for k in range(len(PLACES))], 1)  # (head, 4)
    near = chosen <= 2  # on the next tile or beside it; the walker's tile is beside it
    return {"places": shares, "near_next": near.float().mean(0).numpy(),
            "any_head": float(near.any(1).float().mean()), "steps": len(chosen)}


def without_cross_heads(model: MazeModel, heads: Sequence[int]) -> MazeModel:
    """A copy of `model` whose decoder cross-attention heads `heads` add nothing: their slice
    of the output projection is zeroed, in every decoder layer. An ablation."""
    n = model.config.n_heads
    heads = [int(h) for h in heads]
    if not heads or any(not 0 <= h < n for h in heads):
        raise ValueError(f"heads must be a non-empty list of heads in 0..{n - 1}, got {heads}")
    ablated = copy.deepcopy(model)
    d_head = model.config.d_model // n
    with torch.no_grad():
        for m in ablated.modules():
            if isinstance(m, DecoderBlock):
                for h in heads:
                    m.cross_attn.W_O.weight[:, h * d_head : (h + 1) * d_head] = 0
    return ablated


def closed_picture(model: MazeNet, maze, tile: tuple[int, int], move: int, width: float = 4.4):
    """One maze (pixels) solved twice by `model`, side by side: as it is, and with the corridor
    leaving `tile` by `move` closed in the encoder's attention alone (`measure.solve_closed`):
    both panels draw the same pixels, the closed corridor crossed by a red bar. The titles say
    how long each walk is and whether it solves the maze with that corridor walled off by a
    shortest path. Returns the Figure."""
    walled = close_corridor(maze, tile, move)
    walks = {"as it is": solve_greedy(model, maze),
             "the corridor closed\nin the attention": solve_closed(model, maze[None], walled[None])[0]}
    fig, axes = plt.subplots(1, 2, figsize=(width, width / 2 + 0.9), dpi=DPI, layout="constrained")
    (r, c), (dr, dc) = tile, STEP[move]
    # the bar across the corridor, half way between the two tile centres, at right angles to it
    mid_r, mid_c = (r + dr / 2) * TILE + CENTRE, (c + dc / 2) * TILE + CENTRE
    along_r, along_c = dc * TILE * 0.45, dr * TILE * 0.45
    for ax, (name, walk) in zip(axes, walks.items()):
        draw_maze(ax, maze, walk)
        ax.plot([mid_c - along_c, mid_c + along_c], [mid_r - along_r, mid_r + along_r], color="#d62728", lw=4)
        judged = check_solution(walled, walk)  # on the maze with the corridor walled off
        if judged.optimal:
            verdict = "round it by a shortest path"
        else:  # a walk the pixels allow that hits the wall there went through the corridor
            verdict = "through it" if judged.first_invalid is not None else "not by a shortest path"
        ax.set_title(f"{name}: {len(walk) - 2} moves,\n{verdict}", fontsize=LABEL_PT)
    return fig


def solve_frames(model: MazeModel, maze) -> tuple[np.ndarray, list[str]]:
    """Frames for `toylib.plot.animate` of the model solving one maze greedily: per step, the
    maze with the walk so far (the walker's tile bright), then one panel per cross-attention
    head of the last decoder layer, its weight on each tile drawn over the maze's corridors.
    Returns (frames (steps, 1 + heads, H, W) in [0, 1], titles)."""
    pixels = check_pixels(maze)
    from_pixels(pixels)  # a maze, or a clear error
    moves = solve_greedy(model, pixels)  # START, ..., STOP or an invalid move
    tokens = torch.tensor([moves[:-1]])  # (1, T): the prefixes that chose each move
    x = torch.from_numpy(pixels[None])
    _, patterns = infer(model, x, tokens)
    cross = patterns.cross[0, -1].numpy()  # (head, T, tiles)
    rows, cols = (s // TILE for s in pixels.shape)
    open_ = (pixels > 0).astype(float)
    block = np.ones((TILE, TILE))
    tiles = follow_moves(MazeState.start_of(pixels), moves)[0]
    frames, titles = [], []
    for t, move in enumerate(moves[1:]):
        board = 0.3 * open_
        for r, c in tiles[: t + 1]:
            board[r * TILE + CENTRE, c * TILE + CENTRE] = 0.7
        r, c = tiles[min(t, len(tiles) - 1)]
        board[r * TILE : (r + 1) * TILE, c * TILE : (c + 1) * TILE] += 0.3 * open_[r * TILE : (r + 1) * TILE,
                                                                                   c * TILE : (c + 1) * TILE]
        heads = [0.15 * open_ + 0.85 * np.kron(a[t].reshape(rows, cols), block) for a in cross]
        frames.append(np.stack([np.clip(board, 0, 1), *heads]))
        titles.append(f"step {t + 1}: on tile {(r, c)}, the model says {MOVE_NAMES[move]}")
    return np.stack(frames), titles


# ----------------------------------------------------------------------------- a maze to edit, in the browser


def live_board(model: MazeModel, maze=None, seed: int = 0):
    """The maze to edit in the browser, with no kernel: open or close passages, move the start
    and the end, then watch `model` walk it step by step beside BFS's shortest path, or draw a
    new maze with no loops of 5x5 to 32x32 tiles. Starts from `maze` (pixels), or one of the
    post's mazes drawn from `seed`. Needs the chapter's looped model."""
    if not isinstance(model, MazeNet):
        raise ValueError(f"the live board runs the chapter's looped model (a MazeNet, from a MazeConfig), "
                         f"got a {type(model).__name__}")
    c = model.config
    layout = from_pixels(maze if maze is not None else random_maze(stream(seed)).maze)
    rows, cols = layout.arms.shape[:2]
    return Live("maze", "ToyMaze", {
        "weights": weights(model), "d_model": c.d_model, "n_heads": c.n_heads, "n_decoder_layers": c.n_decoder_layers,
        "radius": c.radius, "ways": c.ways, "squash": c.squash, "window": c.window, "extra_passes": c.extra_passes,
        "settled": SETTLED, "quiet": QUIET, "still": STILL,
        "maze": {"rows": rows, "cols": cols, "arms": layout.arms.astype(bool), "start": list(layout.start),
                 "end": list(layout.end)}})


# ----------------------------------------------------------------------------- the prose's claims
# Each returns {a sentence of the chapter, as a checkable statement: whether it holds}, for the
# chapter's check cells (`toylib.targets.check`); tests/test_maze.py shows each can fail.


def wave_lag(front: Wave) -> float:
    """How far, in shares of tiles, the way head ever trails the news's reach."""
    return float((front.reach - front.right).max())


def wave_claims(front: Wave, most_trained: int) -> dict[str, bool]:
    """What the chapter says of the wave on its biggest mazes: almost no tile names a way
    before the end's news can have reached it, the way head keeps up with the news, every tile
    names a right way in the end, and those mazes ran more passes than training ever did
    (`most_trained`: `training.most_passes`)."""
    return {
        "no pass has over 1 % of tiles name a way before the news": bool(front.early.max() <= 0.01),
        "the way head keeps within 5 points of the news's reach": wave_lag(front) <= 0.05,
        "after the last pass every tile names a right way": bool(front.right[-1] == 1.0),
        "the mazes ran more passes than training ever did": len(front.reach) > most_trained,
    }


def reroute_claims(counts: dict[str, Reroutes]) -> dict[str, bool]:
    """The sentences on closing a corridor in the encoder's attention alone (`measure.reroutes`,
    per set of mazes): in every set, at least 99 % of the walks go round it by a shortest path of
    the maze with that corridor walled off, and at most 1 % go through it, as the pixels allow."""
    if not counts:
        raise ValueError("reroute_claims needs the counts of at least one set of mazes")
    return {
        "with a corridor closed in the attention, >= 99 % of walks go round it by a shortest path":
            all(c.round_by_shortest >= 0.99 * c.n for c in counts.values()),
        "and <= 1 % go through it": all(c.through <= 0.01 * c.n for c in counts.values()),
    }


def head_claims(places: np.ndarray, solved: float, without_one: Sequence[float], without_all: float) -> dict[str, bool]:
    """What the chapter says of the decoder's heads: none puts its strongest look on the
    walker's tile in more than 9 steps of 10 (`places`: `where_heads_look`'s shares, a row per
    head, the walker's tile first), and the walk hardly needs them: solved shares with any one
    head removed (`without_one`) and with all removed stay at 90 % or more (`solved`: with all)."""
    if not 0 <= solved <= 1 or not without_one:
        raise ValueError(f"head_claims needs shares solved, with the heads and without each, got {solved}, {without_one}")
    return {
        "each head's strongest tile is elsewhere in >= 1 step in 10": bool(places[:, 0].max() <= 0.9),
        "removing any one head leaves >= 90 % solved": all(s >= 0.9 for s in without_one),
        "removing all four leaves >= 90 % solved": without_all >= 0.9,
    }
