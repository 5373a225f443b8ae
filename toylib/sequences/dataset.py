"""The sequences chapter's data: held-out data is split by a stable hash of each sequence
(`split_of`), so a test sequence can never be drawn for training, at any length; the samplers
draw from one split only. `for_config` builds what a config trains and is judged on
(`SeqData`): fresh training batches from its seed, the validation sets and the test set."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

import numpy as np

from toylib.draws import stream
from toylib.sequences.config import SeqConfig
from toylib.sequences.world import check_task, make_targets

SPLIT_MOD = 10  # a sequence is test if its hash % 10 == 0, validation if == 1, else training
SPLITS = {"test": 0, "val": 1}


# ----------------------------------------------------------------------------- held-out data

_FNV_OFFSET, _FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)


def sequence_hash(x) -> np.ndarray:
    """(n,) uint64: a hash of each sequence's length and symbols that is the same on every
    machine and every run (Python's hash() of bytes is salted per process)."""
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"sequences must be 2-D (n, length), got shape {x.shape}")
    h = np.full(len(x), _FNV_OFFSET ^ np.uint64(x.shape[1]), dtype=np.uint64)
    for column in x.T.astype(np.uint64):  # FNV-1a over the symbols; uint64 arithmetic wraps
        h = (h ^ column) * _FNV_PRIME
    # splitmix64's finaliser, so that h % SPLIT_MOD depends on every bit
    for shift, multiplier in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        h ^= h >> np.uint64(shift)
        h *= np.uint64(multiplier)
    h ^= h >> np.uint64(31)
    return h


def split_of(x) -> np.ndarray:
    """(n,) array of "train", "val" or "test" for each sequence: 10 % test,
    10 % validation, the rest training."""
    r = sequence_hash(x) % np.uint64(SPLIT_MOD)
    split = np.where(r == SPLITS["val"], "val", "train")
    return np.where(r == SPLITS["test"], "test", split)


def in_split(x, split: str) -> np.ndarray:
    """(n,) bool: which sequences belong to `split`."""
    if split not in ("train", "val", "test"):
        raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")
    return split_of(x) == split


def sample_sequences(n: int, length: int, vocab: int, rng: np.random.Generator, split: str = "train") -> np.ndarray:
    """`n` random sequences (n, length) of content symbols 1..vocab-1, all from `split`.

    Draws uniformly and rejects sequences of the other splits, so the splits never share a
    sequence. Draws are with replacement: a split may repeat a sequence when few exist."""
    check_task("copy", length, vocab, threshold=1)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    kept, have = [], 0
    for _ in range(1000):
        if have >= n:
            break
        x = rng.integers(1, vocab, size=(2 * (n - have) + 16, length))
        x = x[in_split(x, split)][: n - have]
        kept.append(x)
        have += len(x)
    else:
        raise ValueError(f"the {split} split of length-{length} sequences over {vocab - 1} values is (nearly) empty")
    return np.concatenate(kept) if kept else np.zeros((0, length), np.int64)


def draw_sequences(cfg: SeqConfig, n: int, rng: np.random.Generator, split: str = "train",
                   length: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets), each (n, length), for the config's task."""
    x = sample_sequences(n, length or cfg.length, cfg.vocab, rng, split)
    return x, make_targets(cfg.task, x, cfg.threshold)


# ----------------------------------------------------------------------------- a config's data

N_TEST = 10_000  # test sequences every model is judged on
TEST_SEED = 1234  # the test sequences are the same for every config: drawn from this seed


def held_out(cfg: SeqConfig, n: int = N_TEST, length: int | None = None, split: str = "test",
             seed: int = TEST_SEED) -> tuple[np.ndarray, np.ndarray]:
    """`n` sequences of `split` (by default the test split) and their targets, drawn from
    `seed` alone: the same for every model of a task, whatever its own seed."""
    return draw_sequences(cfg, n, stream(seed, "test"), split, length)


@dataclasses.dataclass(frozen=True, eq=False)  # arrays: no == between two SeqData
class SeqData:
    """What a config's model trains and is judged on (`for_config`): an endless stream of
    fresh training batches (`batches()`), the validation sets, one per training length,
    and the test set, at the config's length."""

    config: SeqConfig
    lengths: tuple[int, ...]  # the training lengths: each batch draws one of them
    val: tuple[tuple[np.ndarray, np.ndarray], ...]  # (inputs, targets) per length, of the "val" split
    test: tuple[np.ndarray, np.ndarray]  # (inputs, targets): N_TEST sequences of the "test" split

    def batches(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Endless training batches (inputs, targets) of `config.batch` sequences, each batch
        of one length; the same stream, from the config's seed, on every call."""
        c = self.config
        rng = stream(c.seed, "train")
        while True:
            # one length: no draw, so that the stream of batches is the same as ever
            n = self.lengths[rng.integers(len(self.lengths))] if len(self.lengths) > 1 else self.lengths[0]
            yield draw_sequences(c, c.batch, rng, "train", n)


def for_config(cfg: SeqConfig, lengths: Iterable[int] | None = None) -> SeqData:
    """The data of `cfg`: training batches of length `cfg.length`, or of mixed `lengths` (each
    batch draws one of them, so that no batch needs padding), `cfg.val_size` validation
    sequences shared out among the lengths, and the test set (`held_out`)."""
    lengths = (cfg.length,) if lengths is None else tuple(lengths)
    if not lengths or min(lengths) < 1:
        raise ValueError(f"lengths must be lengths >= 1, got {lengths}")
    val_rng = stream(cfg.seed, "val")
    per_length = max(1, cfg.val_size // len(lengths))
    val = tuple(draw_sequences(cfg, per_length, val_rng, "val", n) for n in lengths)
    return SeqData(cfg, lengths, val, held_out(cfg))
