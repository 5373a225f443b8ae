"""Judging a trained Life model: its predictions and where its attention goes (what training
validates by), games run on its own outputs, grids of any size, all 512 3x3 neighbourhoods,
and the chapter's targets and summary."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from toylib.draws import stream
from toylib.infer import evaluating, infer
from toylib.life.config import LifeConfig
from toylib.life.dataset import LifeData, neighbourhood_grids, random_grids, unseen_grids
from toylib.life.net import LifeNet, OffsetAttentionNet, SingleAttentionNet, neighbour_mask
from toylib.life.world import check_grids, grid_shape, life_run, life_step
from toylib.targets import Target, share_target, time_target


# ----------------------------------------------------------------------------- what validation reads of a model: its answers, its attention


def _size(model) -> int | None:
    """The grid size a model takes: None (any) for OffsetAttentionNet."""
    return None if isinstance(model, OffsetAttentionNet) else model.config.grid_size


def predict(model: LifeNet, grids, batch_size: int | None = None) -> np.ndarray:
    """The model's next state for a grid or a batch of grids, as 0/1 uint8. batch_size: the
    grids of a forward pass; by default 32 where every cell attends to every cell (a pattern of
    32 16x16 grids is 8 MB, which the CPU's caches hold: 2.5 times as fast as 256 grids, and
    the same numbers), 256 otherwise."""
    if batch_size is None:
        batch_size = 32 if isinstance(model, SingleAttentionNet) else 256
    g = check_grids(grids, _size(model))
    alive = infer(model, g[None] if g.ndim == 2 else g, batch_size=batch_size,
                  keep=lambda out, _: out[0] > 0, numpy=True)  # (n, size, size)
    alive = alive.astype(np.uint8)
    return alive[0] if g.ndim == 2 else alive


def neighbour_attention(model: SingleAttentionNet, grids, batch_size: int = 64, on: str = "neighbours") -> float:
    """Mean share of each cell's attention that lands on its 8 neighbours (or, with
    on="self", on the cell itself), over the grids."""
    if on not in ("neighbours", "self"):
        raise ValueError(f"on must be 'neighbours' or 'self', got {on!r}")
    if isinstance(model, OffsetAttentionNet):  # attends the same way everywhere: read its pattern
        by_offset = attention_by_offset(model, grids, radius=1)
        return float(by_offset[1, 1] if on == "self" else by_offset.sum() - by_offset[1, 1])
    g = check_grids(grids, model.config.grid_size)
    g = g[None] if g.ndim == 2 else g
    size = model.config.grid_size
    mask = neighbour_mask(size) if on == "neighbours" else torch.eye(size * size, dtype=torch.bool)

    def share(out, _):  # per grid: the mean over cells of the attention on `mask`
        pattern = out[1][:, 0, 0]  # (batch, cells, cells)
        return (pattern * mask.to(pattern.device)).sum(-1).mean(-1)  # (batch,)

    return float(infer(model, g, batch_size=batch_size, keep=share).mean())


def attention_by_offset(model: SingleAttentionNet, grids, radius: int = 2, batch_size: int = 100) -> np.ndarray:
    """Mean attention by offset from the attending cell, over every cell of every grid:
    (2 * radius + 1, 2 * radius + 1), the attending cell at the centre, rows and columns
    of offsets -radius..radius. A model that attends only to its 8 neighbours, equally,
    shows 1/8 on the ring around the centre and 0 everywhere else."""
    if isinstance(model, OffsetAttentionNet):  # its pattern is by offset already, the same everywhere
        r = model.config.radius
        if not 0 <= radius <= r:
            raise ValueError(f"radius must be between 0 and the model's {r}")
        with evaluating(model) as device:
            pattern = model(torch.zeros(1, 2 * r + 1, 2 * r + 1, device=device))[1]
        return pattern[0, 0, 0, r - radius : r + radius + 1, r - radius : r + radius + 1].cpu().numpy()
    g = check_grids(grids, model.config.grid_size)
    size = model.config.grid_size
    if not 0 <= radius <= size // 2 - (size % 2 == 0):
        raise ValueError(f"radius must be between 0 and {size // 2 - (size % 2 == 0)} on a {size}x{size} grid")
    total = infer(model, g[None] if g.ndim == 2 else g, batch_size=batch_size,
                  keep=lambda out, _: out[1][:, 0, 0].sum(0, keepdim=True))  # (batches, cells, cells)
    mean = total.sum(0).numpy() / (1 if g.ndim == 2 else len(g))  # (cells, cells)
    centred = np.zeros((size, size))
    for cell in range(size * size):
        r, c = divmod(cell, size)  # roll cell (r, c) to the middle of the grid
        centred += np.roll(mean[cell].reshape(size, size), (size // 2 - r, size // 2 - c), axis=(0, 1))
    h = size // 2
    return centred[h - radius : h + radius + 1, h - radius : h + radius + 1] / (size * size)


def exact_fraction(predicted: np.ndarray, true: np.ndarray) -> float:
    """Share of grids (first axis) predicted exactly, every cell right."""
    return float((predicted == true).reshape(len(true), -1).all(1).mean())


# ----------------------------------------------------------------------------- judging a model


def model_run(model: SingleAttentionNet, grids, steps: int) -> np.ndarray:
    """Roll the model forward on its own outputs: (steps + 1, ...) starting with `grids`."""
    out = [check_grids(grids, _size(model))]
    for _ in range(steps):
        out.append(predict(model, out[-1]))
    return np.stack(out)


# Where a model that takes any size is judged, far from the 8x8 grids it trains on: random
# grids of each shape (square and not, from the smallest its 5x5 reach of offsets allows to 32
# times wider), and games run on its own outputs, (shape, steps), a grid is n or (rows, columns)
ANY_GRIDS = (256, (5, 7), (9, 31), (31, 9), (64, 200))
ANY_GAMES = ((128, 100), ((64, 200), 200))


def _shape_name(size) -> str:
    rows, cols = grid_shape(size)
    return f"{rows}x{cols}"


def any_size_check(model, grids: int = 1000, shapes=ANY_GRIDS, games=ANY_GAMES,
                   seed: int = 4321) -> dict[tuple, float]:
    """Judge a model that takes any grid size on grids it never trained on: for each shape in
    `shapes`, the share of `grids` random grids (densities 0.05 to 0.95) whose next state is
    exact, keyed ("grids", shape); for each (shape, steps) in `games`, whether one random game
    run that many steps on the model's own outputs matches the rule at every step (1.0 or
    0.0), keyed ("game", shape, steps). Every draw comes from one stream of `seed`, in order."""
    if grids < 1:
        raise ValueError(f"judge at least one grid of each shape, got grids={grids}")
    rng = stream(seed, "any_size")
    result = {}
    for size in shapes:
        rows, cols = grid_shape(size)
        right = 0
        # 50 grids at a time, 8 a batch at 256x256: a batch of 8-number tokens stays near 16 MB
        for start in range(0, grids, 50):
            x = random_grids(min(50, grids - start), (rows, cols), rng)
            right += int((predict(model, x, batch_size=max(8, 2**19 // (rows * cols))) == life_step(x))
                         .reshape(len(x), -1).all(1).sum())
        result[("grids", size)] = right / grids
    for size, steps in games:
        game = random_grids(1, size, rng, (0.25, 0.45))[0]
        result[("game", size, steps)] = float((model_run(model, game, steps) == life_run(game, steps)).all())
    return result


# Tori smaller than the model's reach (offsets alias there): every grid of the two smallest,
# and random grids 3 and 4 cells across
SMALL_EVERY = ((3, 3), (4, 4))
SMALL_GRIDS = ((100, 3), (4, 100))


def small_tori_check(model: OffsetAttentionNet, grids: int = 1000, every=SMALL_EVERY, shapes=SMALL_GRIDS,
                     seed: int = 4321) -> dict[tuple, float]:
    """Judge a model that takes any size on tori narrower than its reach, where one cell sits
    at several of its offsets: the share of every grid of each shape in `every` (2 ** cells of
    them), keyed ("every", shape), and of `grids` random grids of each shape in `shapes`,
    keyed ("grids", shape), whose next state is exact. Draws from a stream of its own, so that
    `any_size_check`'s are unchanged."""
    rng = stream(seed, "small_tori")
    result = {}
    for shape in every:
        rows, cols = grid_shape(shape)
        codes = np.arange(2 ** (rows * cols))[:, None] >> np.arange(rows * cols) & 1
        x = codes.reshape(-1, rows, cols).astype(np.uint8)  # (2 ** cells, rows, cols), every grid
        result[("every", shape)] = float((predict(model, x, batch_size=4096) == life_step(x))
                                         .reshape(len(x), -1).all(1).mean())
    for shape in shapes:
        x = random_grids(grids, grid_shape(shape), rng)
        result[("grids", shape)] = float((predict(model, x, batch_size=1024) == life_step(x))
                                         .reshape(len(x), -1).all(1).mean())
    return result


@torch.no_grad()
def window_margins(model: OffsetAttentionNet) -> dict[str, float]:
    """Every input the model can meet at one cell, run: the cell's state, and which of the
    cells within its reach are alive (2 * 2 ** 24 windows for a reach of two). The model sees
    them only through the attention they put on live cells (`OffsetAttentionNet.readout`), so
    this is the sum over the 8 neighbours' subsets plus that over the 16 cells two steps away.
    Right on every window means right at every cell of every torus of at least 3x3: where a
    torus is narrower than the reach, the far offsets read cells that are also neighbours,
    which is one of the windows run here.

    Returns "windows" (how many), "wrong" (how many the rule disagrees with) and "margin":
    the smallest logit on the rule's side (positive: right everywhere, by that much; the
    forward pass sums the same weights in another order, a change of about 1e-7)."""
    model = model.cpu()
    r = model.config.radius
    pattern = torch.from_numpy(attention_by_offset(model, None)).double()  # (2r+1, 2r+1)
    near = torch.zeros_like(pattern, dtype=torch.bool)
    near[r - 1:r + 2, r - 1:r + 2] = True
    near[r, r] = False  # the cell itself: masked, weight 0
    far = ~near
    far[r, r] = False

    def subset_sums(weights):  # weights (k,) -> (2 ** k,): the sum over each subset, by its bits
        bits = torch.arange(2 ** len(weights))[:, None] >> torch.arange(len(weights)) & 1
        return bits.double() @ weights, bits.sum(1)

    s_near, n_near = subset_sums(pattern[near])  # (256,), live neighbours of each subset
    s_far, _ = subset_sums(pattern[far])  # (2 ** 16,)
    wrong, margin = 0, math.inf
    for state in (0, 1):
        token = model.W_state[state]  # (d,)
        for i in range(len(s_near)):
            on_alive = (s_near[i] + s_far).float()  # (2 ** 16,)
            logit = model.readout(token.expand(len(on_alive), -1), on_alive)
            n = int(n_near[i])
            alive_next = n == 3 or (state == 1 and n == 2)
            signed = logit if alive_next else -logit  # positive where the model agrees
            wrong += int((signed <= 0).sum())
            margin = min(margin, float(signed.min()))
    return {"windows": 2 * len(s_near) * len(s_far), "wrong": wrong, "margin": margin}


@torch.no_grad()
def readout_crossings(model: OffsetAttentionNet, points: int = 8001) -> dict[int, list[float]]:
    """Where the readout changes its mind: for a dead cell (0) and a live one (1), the numbers
    of live neighbours (as a real number from 0 to 8, the far cells dead) at which the logit
    changes sign, each model read at its own mean weight on a neighbour. Life needs, for a dead
    cell, one change between 2 and 3 and one between 3 and 4; for a live one, between 1 and 2
    and between 3 and 4."""
    model = model.cpu()
    by_offset = attention_by_offset(model, None)
    per_neighbour = float(by_offset[offset_masks(by_offset)[0]].mean())
    live = torch.linspace(0, 8, points, dtype=torch.float64)  # (points,)
    found = {}
    for state in (0, 1):
        logit = model.readout(model.W_state[state].expand(points, -1), (live * per_neighbour).float())
        on = (logit > 0).numpy()
        flips = np.flatnonzero(on[1:] != on[:-1])
        found[state] = [float(live[i] + live[i + 1]) / 2 for i in flips]
    return found


def any_size_targets(result: dict[tuple, float], train_seconds: float, grids: int = 1000) -> list[Target]:
    """The targets of a model that takes any size, from `any_size_check` (with as many grids),
    with those of `small_tori_check` where `result` holds them (its keys "every")."""
    targets = []
    for key, value in result.items():
        if key[0] == "windows":
            targets.append(share_target(f"right on all {key[1]:,} windows (a cell, the 24 within two steps)", value))
        elif key[0] == "every":
            rows, cols = key[1]
            targets.append(share_target(f"exact next state, all {2 ** (rows * cols):,} {rows}x{cols} grids", value))
        elif key[0] == "grids":
            targets.append(share_target(f"exact next state, {grids:,} random {_shape_name(key[1])} grids", value))
        else:
            targets.append(Target(f"exact {_shape_name(key[1])} game, {key[2]} steps on own outputs", "yes",
                                  "yes" if value == 1 else "no", value == 1))
    return targets + [time_target(train_seconds, 60, "training time (any size)")]


def neighbourhood_accuracy(model: SingleAttentionNet) -> tuple[float, int]:
    """Judge the model on all 512 3x3 neighbourhoods, each centred on every cell.

    Returns (share of the 512 neighbourhoods right at every cell, number of
    (neighbourhood, cell) pairs got wrong)."""
    size = model.config.grid_size
    grids, gi, r, c = neighbourhood_grids(size)
    right = predict(model, grids)[gi, r, c] == life_step(grids)[gi, r, c]
    # read each pair's neighbourhood back from the grid itself, as a code 0..511
    block = np.stack([grids[gi, (r + dr) % size, (c + dc) % size] for dr in (-1, 0, 1) for dc in (-1, 0, 1)], 1)
    code = (block * (1 << np.arange(9))).sum(1)
    all_right = np.ones(512, bool)
    np.logical_and.at(all_right, code, right)
    return float(all_right.mean()), int((~right).sum())


# ----------------------------------------------------------------------------- the chapter's targets


@dataclasses.dataclass(frozen=True)
class Summary:
    """What `summarise` measured of a trained model, on data it never trained on."""

    test_exact: float  # share of held-out random grids whose next state is exactly right
    test_grids: int
    dropped_as_seen: int  # random test draws left out because training had seen them
    games_exact: float  # share of model-run games that match the true game at every step
    games: int
    game_steps: int
    neighbourhoods_right: float  # share of the 512 3x3 neighbourhoods right at every cell
    neighbourhood_errors: int  # (neighbourhood, cell) pairs got wrong, out of 512 * cells
    neighbour_attention: float  # mean share of each cell's attention on its 8 neighbours

    def targets(self, train_seconds: float, grid_size: int, time_limit: float = 180.0) -> list[Target]:
        """The chapter's summary: the targets and what was measured."""
        return [
            share_target(f"exact next state, {self.test_grids:,} unseen grids", self.test_exact),
            share_target(f"exact games, {self.games} x {self.game_steps} steps on own outputs", self.games_exact),
            share_target("3x3 neighbourhoods right at every cell (of 512)", self.neighbourhoods_right),
            share_target("attention on the 8 neighbours (mean)", self.neighbour_attention, 0.99, digits=1),
            Target("grid size", "16x16 (post)", f"{grid_size}x{grid_size}", True if grid_size == 16 else None),
            time_target(train_seconds, time_limit),
        ]


def summarise(
    model: SingleAttentionNet, seen: set[bytes], test_grids: int = 10_000, games: int = 100, game_steps: int = 100, seed: int = 1234
) -> Summary:
    """Measure a trained model against the chapter's targets, on random grids (densities
    0.05 to 0.95) from `seed`'s own stream, leaving out every grid in `seen` (the hashes of
    the training grids: `data.seen` after `train`)."""
    size = model.config.grid_size
    rng = stream(seed, "test")
    x, dropped = unseen_grids(test_grids, size, rng, seen)
    starts, dropped_starts = unseen_grids(games, size, rng, seen)
    truth = life_run(starts, game_steps)  # (steps + 1, games, size, size)
    ours = model_run(model, starts, game_steps)
    games_exact = float((ours == truth).reshape(game_steps + 1, games, -1).all(axis=(0, 2)).mean())
    right, errors = neighbourhood_accuracy(model)
    return Summary(
        test_exact=exact_fraction(predict(model, x), life_step(x)),
        test_grids=test_grids,
        dropped_as_seen=dropped + dropped_starts,
        games_exact=games_exact,
        games=games,
        game_steps=game_steps,
        neighbourhoods_right=right,
        neighbourhood_errors=errors,
        neighbour_attention=(neighbour_attention(model, x[:1000]) if model.config.mixer in ("attention", "offset")
                             else float("nan")),
    )


# ----------------------------------------------------------------------------- what the command line and the benchmark run


def measure(model: LifeNet, config: LifeConfig, data: LifeData, train_seconds: float,
            details: bool = True) -> list[Target]:
    """The chapter's targets for a model trained on `data`: the summary on grids it never
    trained on, and for a model that takes any size, the grids of other sizes. With details,
    it also prints how many test draws were left out as seen in training."""
    if not data.seen:
        print("(a loaded model does not carry its training grids: the test grids are not checked against them)")
    summary = summarise(model, data.seen)
    if details:
        print(f"test draws left out as seen in training: {summary.dropped_as_seen}")
    targets = summary.targets(train_seconds, config.grid_size)
    if isinstance(model, OffsetAttentionNet):  # and the sizes it never saw
        windows = window_margins(model)
        judged = {**any_size_check(model), **small_tori_check(model),
                  ("windows", windows["windows"]): 1 - windows["wrong"] / windows["windows"]}
        targets += any_size_targets(judged, train_seconds)
    return targets


# ----------------------------------------------------------------------------- the prose's claims
# Each returns {a sentence of the chapter, as a checkable statement: whether it holds}, for the
# chapter's check cells (`toylib.targets.check`); each can fail, and tests/test_life.py shows how.


def offset_masks(by_offset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the 8 neighbours, every offset beyond them) as boolean masks over an attention-by-offset
    table (`attention_by_offset`, radius >= 2: the attending cell at the centre)."""
    side = by_offset.shape[0]
    if by_offset.ndim != 2 or by_offset.shape[1] != side or side < 5 or side % 2 == 0:
        raise ValueError(f"an attention-by-offset table of radius >= 2 is square and odd, got {by_offset.shape}")
    h = side // 2
    ring = np.zeros((side, side), bool)
    ring[h - 1 : h + 2, h - 1 : h + 2] = True
    ring[h, h] = False
    beyond = np.ones((side, side), bool)
    beyond[h - 1 : h + 2, h - 1 : h + 2] = False
    return ring, beyond


def attention_claims(at_start: np.ndarray, by_offset: np.ndarray, readable: int) -> dict[str, bool]:
    """"It starts out nearly uniform" (`at_start`: one grid's attention at step 0, (cells,
    cells), each cell able to read `readable` cells), and "about one eighth on each neighbour,
    nothing on the cell itself, almost nothing beyond" (`by_offset` of the trained model)."""
    off_diagonal = at_start[~np.eye(len(at_start), dtype=bool)]
    uniform = 1 / readable
    ring, beyond = offset_masks(by_offset)
    h = by_offset.shape[0] // 2
    return {
        "at the start, every weight is within 2x of uniform":
            bool((off_diagonal < 2 * uniform).all() and (off_diagonal > uniform / 2).all()),
        "each neighbour gets 10 to 15 %": bool(((by_offset[ring] > 0.10) & (by_offset[ring] < 0.15)).all()),
        "the cell itself gets nothing": bool(by_offset[h, h] == 0),
        "each cell beyond gets < 1 %": bool((by_offset[beyond] < 0.01).all()),
    }


def game_claims(model: SingleAttentionNet, games: dict[str, np.ndarray], start: np.ndarray,
                generations: int = 40) -> dict[str, bool]:
    """The games the chapter plays ("0 cells differ over 40 generations") and its opening
    picture: the model's step of the unseen grid `start` is the rule's, and its middle cell
    puts almost all its attention on its neighbours."""
    size = start.shape[0]
    middle = (size // 2) * size + size // 2
    pattern = infer(model, check_grids(start, size)[None], numpy=True)[1][0, 0, 0][middle].reshape(size, size)
    ring = neighbour_mask(size)[middle].reshape(size, size).numpy()
    return {
        f"both {generations}-generation games match the rule": all(
            bool((model_run(model, g, generations) == life_run(g, generations)).all()) for g in games.values()),
        "the opening picture: the model's step is the rule's": bool((predict(model, start) == life_step(start)).all()),
        "the middle cell puts >= 95 % of its attention on its neighbours": bool(pattern[ring].sum() >= 0.95),
    }


# the variants of the chapter's table, by the names it gives them
OURS, CELL, POST = "ours", "a vector per cell (the post's positions)", "the post's model"
STATE, ITSELF = "state embedding at the usual scale", "self allowed"
NO_SCALE, NO_SMOOTHING = "no learned scale (fixed at 1)", "no label smoothing"


def variant_claims(exact: dict[str, float], first: dict[str, float], on: dict[str, float],
                   self_share: float) -> dict[str, bool]:
    """The sentences under the table of variants. `exact`: each variant's share of exact
    validation grids; `first`: the step it was first exact (inf if never); `on`: each attention
    variant's share on the neighbours; `self_share`: the self-allowed variant's share on itself.
    Pools are the variants named "fixed ..."; our changes, taken back one at a time, are the
    attention variants other than ours and the post's."""
    pools = [k for k in exact if k.startswith("fixed")]
    changes = [k for k in on if k not in (OURS, POST)]
    if not pools or CELL not in changes or {OURS, POST, STATE, ITSELF, NO_SCALE, NO_SMOOTHING} - set(on):
        raise ValueError(f"the variants' table lacks some of its rows: {sorted(exact)}")
    return {
        "the pools: 100 % exact, first exact in half ours' steps or less":
            all(exact[k] == 1 and 2 * first[k] <= first[OURS] for k in pools),
        "a vector per cell: fewest exact, least on the neighbours":
            exact[CELL] == min(exact[k] for k in changes) and on[CELL] == min(on[k] for k in changes),
        "a vector per cell and the post's: < 20 % on the neighbours": bool(on[CELL] < 0.2 and on[POST] < 0.2),
        "the post's model: never exact on validation": first[POST] == np.inf,
        "state at the usual scale: fewer exact than ours": exact[STATE] < exact[OURS],
        "self allowed: >= 1 % on itself, >= 99 % exact": bool(self_share >= 0.01 and exact[ITSELF] >= 0.99),
        "no learned scale, no smoothing: less on the neighbours than ours":
            bool(max(on[NO_SCALE], on[NO_SMOOTHING]) < on[OURS]),
    }


def mechanism_claims(crossings: dict[int, list[float]], hand_windows: dict[str, float],
                     windows: dict[str, float]) -> dict[str, bool]:
    """The "How it works" section: the rule written by hand into the any-size model is right on
    every window (`window_margins`), and so is the trained model, whose readout switches where
    the rule does (`readout_crossings`): a dead cell on between 2 and 3 live neighbours, a live
    one between 1 and 2, both off between 3 and 4."""
    def between(found, gaps):
        return len(found) == len(gaps) and all(lo < x < hi for x, (lo, hi) in zip(found, gaps))

    return {
        "the hand-set model is right on every window": hand_windows["wrong"] == 0 and hand_windows["margin"] > 0,
        "the trained model is right on every window": windows["wrong"] == 0 and windows["margin"] > 0,
        "the trained readout turns a dead cell on between 2 and 3 live neighbours, off between 3 and 4":
            between(crossings[0], [(2, 3), (3, 4)]),
        "and a live cell on between 1 and 2, off between 3 and 4": between(crossings[1], [(1, 2), (3, 4)]),
    }


def two_away_claims(by_offset: np.ndarray) -> dict[str, bool]:
    """"The cells two steps away keep a small weight" (the any-size model's `by_offset`)."""
    _, beyond = offset_masks(by_offset)
    two_away = by_offset[beyond]
    return {"two steps away: every weight > 0 and < 1 %": bool((two_away > 0).all() and (two_away < 0.01).all())}
