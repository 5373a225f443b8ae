"""The 8 symmetries of a grid (4 quarter turns, each with and without a transpose), which
tic-tac-toe and Sokoban both use: tic-tac-toe to keep a position and its twins in one split,
Sokoban to multiply its training boards eightfold and to find twins among them.

Symmetry s (0..7) transposes when s >= 4, then turns a quarter counter-clockwise s % 4
times; symmetry 0 leaves a grid as it is. A grid of r x c squares is indexed row by row
(square r0 * c + c0), as both worlds store boards.
"""

from __future__ import annotations

import functools

import numpy as np

N_SYMMETRIES = 8


def check_symmetry(s) -> int:
    """`s` as an int, or a ValueError when it names none of the 8 symmetries."""
    if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 0 <= s < N_SYMMETRIES:
        raise ValueError(f"a symmetry is an int 0..{N_SYMMETRIES - 1}, got {s!r}")
    return int(s)


def turn(grid: np.ndarray, s: int) -> np.ndarray:
    """Symmetry s of a grid, or of a stack of grids on its last two axes."""
    s = check_symmetry(s)
    grid = np.asarray(grid)
    if grid.ndim < 2:
        raise ValueError(f"a grid has at least 2 axes, got shape {grid.shape}")
    if s >= 4:
        grid = np.swapaxes(grid, -1, -2)
    return np.rot90(grid, s % 4, axes=(-2, -1))


def _came_from(shape: tuple[int, int], s: int) -> np.ndarray:
    """[r, c] of the image under symmetry s: the square of a grid of `shape` that lands there."""
    rows, cols = (int(n) for n in shape)
    if rows < 1 or cols < 1:
        raise ValueError(f"a grid's shape is (rows, cols), both >= 1, got {shape}")
    return turn(np.arange(rows * cols).reshape(rows, cols), s)


@functools.lru_cache(maxsize=None)
def square_map(shape: tuple[int, int], s: int) -> tuple[tuple[int, ...], tuple[int, int]]:
    """(where symmetry s takes each square of a grid of `shape`, the shape it becomes):
    square i of the grid is square `where[i]` of its image."""
    came_from = _came_from(shape, s)
    where = np.empty(came_from.size, int)
    where[came_from.ravel()] = np.arange(came_from.size)
    return tuple(int(x) for x in where), came_from.shape


@functools.lru_cache(maxsize=None)
def cell_order(shape: tuple[int, int], s: int) -> tuple[int, ...]:
    """Symmetry s as a reordering of squares: square i of the image is square `order[i]` of
    the grid, so `[cells[j] for j in order]` is the image of a flat board `cells`."""
    return tuple(int(i) for i in _came_from(shape, s).ravel())
