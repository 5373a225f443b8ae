"""Life's data: random grids of mixed densities, what a model trains and is validated on
(`for_config`), test grids that training never saw (by their hashes), and every 3x3
neighbourhood tiled onto grids."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import torch

from toylib.draws import stream
from toylib.life.config import LifeConfig
from toylib.life.world import check_grids, grid_shape, life_step


# ----------------------------------------------------------------------------- data


def random_grids(n: int, size: int | tuple[int, int], rng: np.random.Generator,
                 density: tuple[float, float] = (0.05, 0.95)) -> np.ndarray:
    """`n` random grids (n, rows, columns), of `size` n x n or (rows, columns); each grid
    draws its own density uniformly from `density`, then each cell is alive with that
    probability. Mixing densities gives the model every neighbour count from 0 to 8 and both
    empty and crowded regions."""
    lo, hi = density
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(f"density must be a range (lo, hi) within [0, 1], got {density}")
    if n < 0:
        raise ValueError(f"need n >= 0 grids, got {n}")
    shape = grid_shape(size)
    p = rng.uniform(lo, hi, size=(n, 1, 1))
    return (rng.random((n, *shape)) < p).astype(np.uint8)


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


# ----------------------------------------------------------------------------- what a model trains on


@dataclasses.dataclass
class LifeData:
    """What a Life model trains and is validated on: an endless stream of fresh random grids
    with their next states, and held-out validation grids from a stream of their own.
    `seen` gains the hash of every training grid as the stream is drawn, so that after
    training the test grids can leave them all out."""

    grid_size: int
    batch_size: int  # grids per training batch
    density: tuple[float, float]  # each training grid's density is drawn from this range
    seed: int  # of the training stream
    val_x: np.ndarray  # (val_grids, size, size) validation grids, densities 0.05 to 0.95
    val_y: np.ndarray  # (val_grids, size, size) their next states
    seen: set[bytes] = dataclasses.field(default_factory=set)  # hashes of the training grids drawn

    def batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Endless training batches (grids, next states), each (batch_size, size, size); every
        call starts the same stream from `seed` again."""
        rng = stream(self.seed)  # the training stream: the seed's own
        while True:
            x = random_grids(self.batch_size, self.grid_size, rng, self.density)
            self.seen.update(grid_hashes(x))
            yield torch.from_numpy(x), torch.from_numpy(life_step(x))


def for_config(config: LifeConfig) -> LifeData:
    """The data `config` trains on: training grids from `config.seed`'s stream, and
    `config.val_grids` validation grids from a stream of their own (`stream(seed, "val")`),
    never the training stream."""
    val_x = random_grids(config.val_grids, config.grid_size, stream(config.seed, "val"))
    return LifeData(config.grid_size, config.batch_size, config.density, config.seed, val_x, life_step(val_x))


# ----------------------------------------------------------------------------- every neighbourhood


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
