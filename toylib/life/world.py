"""The rules of Conway's Game of Life on a torus, the ground truth that trains and judges the
model, and a few famous patterns to start from. Nothing here learns."""

from __future__ import annotations

import numpy as np
import torch

# The 8 offsets (row, column) of a cell's neighbours.
NEIGHBOUR_OFFSETS = [(dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if (dr, dc) != (0, 0)]


# ----------------------------------------------------------------------------- the rules


def check_grids(grids, size: int | tuple[int, int] | None = None) -> np.ndarray:
    """Return `grids` as a uint8 array after checking it is one 0/1 grid (rows, columns) or a
    batch of them (n, rows, columns), at least 3x3 (a torus any smaller would count a cell
    twice among one cell's 8 neighbours); raise ValueError saying what is wrong otherwise.
    size: the shape the grids must have, `n` for n x n or (rows, columns)."""
    g = grids.detach().cpu().numpy() if isinstance(grids, torch.Tensor) else np.asarray(grids)
    if g.ndim not in (2, 3):
        raise ValueError(f"a Life grid must be 2-D (rows, columns) or a batch (n, rows, columns), got shape {g.shape}")
    if min(g.shape[-2:]) < 3:
        raise ValueError(f"a Life grid needs at least 3x3 cells so that 8 neighbours are distinct, "
                         f"got {g.shape[-2]}x{g.shape[-1]}")
    if size is not None:
        want = grid_shape(size)
        if g.shape[-2:] != want:
            raise ValueError(f"expected {want[0]}x{want[1]} grids, got {g.shape[-2]}x{g.shape[-1]}")
    if g.size and not np.isin(g, (0, 1)).all():
        bad = np.unique(g[~np.isin(g, (0, 1))])[:5]
        raise ValueError(f"a Life grid holds only 0 (dead) and 1 (alive), found {bad.tolist()}")
    return g.astype(np.uint8)


def grid_shape(size: int | tuple[int, int]) -> tuple[int, int]:
    """(rows, columns) from `n` (an n x n grid) or (rows, columns), each at least 3."""
    shape = (size, size) if np.ndim(size) == 0 else tuple(size)
    if len(shape) != 2 or not all(isinstance(n, (int, np.integer)) and n >= 3 for n in shape):
        raise ValueError(f"a grid's size is n or (rows, columns), each a whole number of at least 3, got {size!r}")
    return int(shape[0]), int(shape[1])


def neighbour_counts(grids) -> np.ndarray:
    """Live neighbours of every cell, on a torus: same shape as the grid(s)."""
    g = check_grids(grids)
    return sum(np.roll(g, (dr, dc), axis=(-2, -1)) for dr, dc in NEIGHBOUR_OFFSETS).astype(np.uint8)


def life_step(grids) -> np.ndarray:
    """One generation of Life on a torus, for one grid (rows, columns) or a
    batch of grids (n, rows, columns).

    A cell is alive next if it has 3 live neighbours, or if it is alive and
    has 2."""
    g = check_grids(grids)
    n = neighbour_counts(g)
    return ((n == 3) | ((g == 1) & (n == 2))).astype(np.uint8)


def life_run(grid, steps: int) -> np.ndarray:
    """The true game: (steps + 1, rows, columns), starting with `grid` itself."""
    out = [check_grids(grid)]
    for _ in range(steps):
        out.append(life_step(out[-1]))
    return np.stack(out)


# A few famous patterns, as lists of strings ("#" alive). `place` puts one on a grid.
PATTERNS: dict[str, list[str]] = {
    "glider": [".#.", "..#", "###"],
    "blinker": ["###"],
    "toad": [".###", "###."],
    "beacon": ["##..", "##..", "..##", "..##"],
    "block": ["##", "##"],
    "beehive": [".##.", "#..#", ".##."],
    "lightweight spaceship": [".#..#", "#....", "#...#", "####."],
    "r-pentomino": [".##", "##.", ".#."],
    "diehard": ["......#.", "##......", ".#...###"],
}


def place(pattern: str | list[str], size: int, top: int | None = None, left: int | None = None) -> np.ndarray:
    """A (size, size) grid with a pattern (a name from PATTERNS, or rows of "#"/".") placed
    at (top, left); centred when those are not given."""
    rows = PATTERNS[pattern] if isinstance(pattern, str) and pattern in PATTERNS else pattern
    if isinstance(rows, str):
        raise ValueError(f"unknown pattern {pattern!r}; known: {sorted(PATTERNS)}")
    h, w = len(rows), max(len(r) for r in rows)
    if h > size or w > size:
        raise ValueError(f"a {h}x{w} pattern does not fit a {size}x{size} grid")
    top = (size - h) // 2 if top is None else top
    left = (size - w) // 2 if left is None else left
    g = np.zeros((size, size), np.uint8)
    for i, row in enumerate(rows):
        for j, ch in enumerate(row):
            if ch not in "#.":
                raise ValueError(f"pattern rows use '#' (alive) and '.' (dead), found {ch!r}")
            g[(top + i) % size, (left + j) % size] = ch == "#"
    return g
