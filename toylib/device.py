"""Device choice and seeding, in one place for the whole book."""

from __future__ import annotations

import os
import random

import numpy as np
import torch


def pick_device(prefer: str | None = None) -> torch.device:
    """CUDA if there is one, else Apple's MPS, else the CPU.

    `prefer` ("cpu", "cuda", "mps") overrides the choice, and so does the environment
    variable TOYLIB_DEVICE, which lets a reader with a GPU reproduce the CPU numbers.
    """
    choice = prefer or os.environ.get("TOYLIB_DEVICE")
    if choice:
        if choice not in ("cpu", "cuda", "mps"):
            raise ValueError(f"device must be 'cpu', 'cuda' or 'mps', got {choice!r}")
        return torch.device(choice)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int, deterministic: bool = True) -> np.random.Generator:
    """Seed Python, NumPy and torch (every device), and return a NumPy generator from `seed`.

    Chapters draw their data from the returned generator rather than from global state, so
    that data and initial weights can be reproduced independently of each other.

    With `deterministic`, torch uses its deterministic kernels. Without them two runs of the
    same seed differ in the ninth decimal after a few steps on a CPU (some backward passes
    accumulate in parallel, in whatever order threads finish), and over thousands of steps
    that grows into a different model. Ops with no deterministic kernel only warn.
    """
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds CUDA and MPS
    if deterministic:
        # cuBLAS needs this to be deterministic; it only takes effect before CUDA starts
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(deterministic, warn_only=True)
    return np.random.default_rng(seed)
