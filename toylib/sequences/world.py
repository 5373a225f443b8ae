"""The four tasks of the sequences chapter: what each writes for an input (`make_targets`, the
ground truth that trains and judges the models) and which input position each output reads
(`source_positions`). Nothing here learns.

Symbols: 0 is the *empty* symbol, 1..vocab-1 are content. Inputs hold content only; 0
appears in outputs, where filter writes it in place of every value above `threshold`.
"""

from __future__ import annotations

import numpy as np

TASKS = ("copy", "reverse", "rotate", "filter")
EMPTY = 0  # the empty symbol: never in an input, written by filter


# ----------------------------------------------------------------------------- the tasks


def check_task(task: str, length: int, vocab: int, threshold: int) -> None:
    """Raise ValueError saying what is wrong with a task's settings, if anything is."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; the tasks are {TASKS}")
    if not isinstance(length, (int, np.integer)) or length < 1:
        raise ValueError(f"length must be an integer >= 1, got {length!r}")
    if vocab < 2:
        raise ValueError(f"vocab must be >= 2 (the empty symbol 0 and at least one value), got {vocab}")
    if task == "filter" and not 1 <= threshold < vocab - 1:
        # threshold >= vocab - 1 filters nothing (filter would be copy); threshold < 1 filters everything
        raise ValueError(
            f"filter needs 1 <= threshold < vocab - 1 so that some values (1..vocab-1) are kept and some "
            f"removed; got threshold={threshold} with vocab={vocab} (values 1..{vocab - 1})"
        )


def check_sequences(x, vocab: int | None = None) -> np.ndarray:
    """`x` as an int64 array (n, length) of inputs, or a ValueError saying what is wrong with
    it: not 2-D integers, a symbol below 1 (inputs hold content only), or one outside `vocab`."""
    x = np.asarray(x)
    if x.ndim != 2 or not np.issubdtype(x.dtype, np.integer):
        raise ValueError(f"sequences must be a 2-D integer array (n, length), got {x.dtype} of shape {x.shape}")
    if x.size and x.min() < 1:
        raise ValueError(f"inputs hold content symbols >= 1 only (0 is the empty symbol), found {x.min()}")
    if vocab is not None and x.size and x.max() >= vocab:
        raise ValueError(f"symbol {x.max()} is outside the vocabulary 0..{vocab - 1}")
    return x.astype(np.int64)


def make_targets(task: str, x, threshold: int = 5) -> np.ndarray:
    """The right answer for every sequence of `x` (n, length): the ground
    truth.

    copy: x; reverse: x backwards; rotate: left by one ([a b c d] ->
    [b c d a]); filter: x with every value above `threshold` replaced by the
    empty symbol 0.
    """
    x = check_sequences(x)
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; the tasks are {TASKS}")
    if task == "filter":
        if threshold < 1:
            raise ValueError(f"filter needs threshold >= 1, "
                             f"got {threshold}")
        return np.where(x > threshold, EMPTY, x)
    return x[:, source_positions(task, x.shape[1])]


def source_positions(task: str, length: int) -> np.ndarray:
    """(length,): the input position each output position is read from.

    Filter reads its own position (and then keeps or blanks the value)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; the tasks are {TASKS}")
    if not isinstance(length, (int, np.integer)) or length < 1:
        raise ValueError(f"length must be an integer >= 1, got {length!r}")
    i = np.arange(length)
    if task == "reverse":
        return length - 1 - i
    if task == "rotate":
        return (i + 1) % length
    return i  # copy, filter
