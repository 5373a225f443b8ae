"""Life's data: random grids of mixed densities, test grids that training never saw (by
their hashes), and every 3x3 neighbourhood tiled onto grids."""

from __future__ import annotations

import numpy as np

from toylib.life.world import check_grids


# ----------------------------------------------------------------------------- data


def random_grids(n: int, size: int, rng: np.random.Generator, density: tuple[float, float] = (0.05, 0.95)) -> np.ndarray:
    """`n` random grids (n, size, size); each grid draws its own density uniformly from
    `density`, then each cell is alive with that probability. Mixing densities gives the
    model every neighbour count from 0 to 8 and both empty and crowded regions."""
    lo, hi = density
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(f"density must be a range (lo, hi) within [0, 1], got {density}")
    if n < 0 or size < 3:
        raise ValueError(f"need n >= 0 and size >= 3, got n={n}, size={size}")
    p = rng.uniform(lo, hi, size=(n, 1, 1))
    return (rng.random((n, size, size)) < p).astype(np.uint8)


def unseen_grids(n: int, size: int, rng: np.random.Generator, seen: set[bytes]) -> tuple[np.ndarray, int]:
    """`n` random grids (densities 0.05 to 0.95) none of which is in `seen` (hashes of the
    training grids). Returns (grids, how many draws were dropped as seen). Small grids at
    low density repeat often (the empty grid is one of them), so the check matters."""
    kept, dropped, have = [], 0, 0
    while have < n:
        x = random_grids(n - have, size, rng)
        fresh = np.array([key not in seen for key in _grid_keys(x)], bool)
        kept.append(x[fresh])
        dropped += int((~fresh).sum())
        have += int(fresh.sum())
    return np.concatenate(kept), dropped


def _grid_keys(grids: np.ndarray) -> list[bytes]:
    """One short byte string per grid of a batch: its cells packed 8 to a byte."""
    return [row.tobytes() for row in np.packbits(grids.reshape(len(grids), -1), axis=1)]


def grid_hashes(grids: np.ndarray) -> set[bytes]:
    """A set of byte strings, one per grid, to check that test grids never appeared in training."""
    return set(_grid_keys(check_grids(grids)))


def neighbourhood_grids(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """All 512 3x3 neighbourhoods, each centred on every one of the size*size cells.

    The neighbourhoods are tiled into 3x3 blocks, so one grid tests many at once; the tiling
    is shifted to every offset so that each neighbourhood is centred on every cell.
    Returns (grids (m, size, size), grid index, centre row, centre column) for each of the
    512 * size * size (neighbourhood, cell) pairs; the pair's neighbourhood is the 3x3 block
    around that centre in that grid."""
    if size < 3:
        raise ValueError(f"size must be at least 3, got {size}")
    codes = np.arange(512)
    patterns = ((codes[:, None] >> np.arange(9)) & 1).reshape(512, 3, 3).astype(np.uint8)
    per_row = size // 3
    per_grid = per_row * per_row
    grids, where = [], []
    for dr in range(size):
        for dc in range(size):
            for start in range(0, 512, per_grid):
                chunk = patterns[start : start + per_grid]
                g = np.zeros((size, size), np.uint8)
                centres = []
                for j, p in enumerate(chunk):
                    r, c = 3 * (j // per_row), 3 * (j % per_row)
                    g[r : r + 3, c : c + 3] = p
                    centres.append(((r + 1 + dr) % size, (c + 1 + dc) % size))
                grids.append(np.roll(g, (dr, dc), axis=(0, 1)))
                where.extend((len(grids) - 1, r_, c_) for r_, c_ in centres)
    w = np.array(where)
    return np.stack(grids), w[:, 0], w[:, 1], w[:, 2]
