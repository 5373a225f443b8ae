"""Random draws the chapters share: named streams of one seed, and draws that never repeat.

Each purpose draws from its own stream of the seed (`stream(seed, "val")`), so that drawing
more training data, or drawing it in another order, never moves the validation or test
draws. `distinct` draws until it has enough items that no earlier draw, nor an excluded set
(another split, the training data), already holds.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import TypeVar

import numpy as np

T = TypeVar("T")

# The streams' numbers are part of every chapter's data: renumbering one redraws that data.
STREAMS = {"train": 0, "val": 1, "test": 2, "init": 3, "any_size": 7, "small_tori": 8}


def stream(seed: int, name: str | None = None) -> np.random.Generator:
    """Stream `name` of `seed` (one of STREAMS), or with no name the seed's own stream,
    `np.random.default_rng(seed)`, which a chapter uses when one generator draws all its
    splits in turn."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if name is None:
        return np.random.default_rng(seed)
    if name not in STREAMS:
        raise ValueError(f"unknown stream {name!r}; the streams are {sorted(STREAMS)}")
    return np.random.default_rng([seed, STREAMS[name]])


def distinct(
    draw: Callable[[], T], key: Callable[[T], Hashable], seen: set, max_draws: int,
    keep: Callable[[T], bool] = lambda item: True, what: str = "items",
) -> Iterator[T]:
    """Items from `draw()` whose `key` is not yet in `seen`, which gains each key given out;
    items that `keep` refuses are passed over (their keys stay free). Take as many as needed:
    the draws stop when the caller does. After `max_draws` draws (a budget, so that an
    impossible request fails instead of running for ever) a RuntimeError reads "found only
    {given} {what} in {max_draws} draws": `what` reads best as "of 7 new mazes ..."."""
    if max_draws < 0:
        raise ValueError(f"max_draws must be >= 0, got {max_draws}")
    given = 0
    for _ in range(max_draws):
        item = draw()
        if not keep(item):
            continue
        k = key(item)
        if k in seen:
            continue
        seen.add(k)
        given += 1
        yield item
    raise RuntimeError(f"found only {given} {what} in {max_draws} draws")


def budget(n: int) -> int:
    """The draws `distinct` may take to find `n` items: a hundred per item, and a thousand more
    so that small requests of rare items get a fair chance."""
    return 100 * n + 1_000
