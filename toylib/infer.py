"""Running a trained model on many inputs: batched, in eval mode, without gradients, on the
model's own device, with the answers gathered on the CPU.

Every chapter judges its model on thousands of inputs (grids, sequences, boards, mazes).
`infer` is the one place that splits them into batches, moves each batch to wherever the
model lives (a GPU on Colab), and brings the results back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch import nn


def model_device(model: nn.Module) -> torch.device:
    """The device of the model's first parameter or buffer (the CPU for a model with neither)."""
    for t in list(model.parameters()) + list(model.buffers()):
        return t.device
    return torch.device("cpu")


@contextlib.contextmanager
def evaluating(model: nn.Module) -> Iterator[torch.device]:
    """`with evaluating(model) as device:` runs the block in eval mode (no dropout), without
    gradients, and gives the model's device; the model's train/eval mode comes back after."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model_device(model)
    finally:
        model.train(was_training)


def _as_tensor(x: Any) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x)
    return torch.as_tensor(x)


def _rebuild(like: tuple | list, items) -> Any:
    """A tuple, list or named tuple (Seq2SeqPatterns) of the same type as `like`, holding `items`."""
    items = list(items)
    return type(like)(*items) if hasattr(like, "_fields") else type(like)(items)


def _cpu(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return out.detach().cpu()
    if isinstance(out, (tuple, list)):
        return _rebuild(out, (_cpu(o) for o in out))
    raise ValueError(f"a model's batch output must be tensors or tuples of tensors, got {type(out).__name__}")


def _cat(parts: list[Any]) -> Any:
    first = parts[0]
    if isinstance(first, torch.Tensor):
        return torch.cat(parts)
    return _rebuild(first, (_cat([p[i] for p in parts]) for i in range(len(first))))


def _numpy(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return out.numpy()
    return _rebuild(out, (_numpy(o) for o in out))


@torch.no_grad()
def infer(
    model: nn.Module,
    *inputs: Any,
    batch_size: int = 1024,
    keep: Callable[..., Any] | None = None,
    numpy: bool = False,
    run: Callable[..., Any] | None = None,
) -> Any:
    """Run `model(*batch)` over `inputs` (arrays or tensors sharing their first axis) in
    batches of `batch_size`, in eval mode and without gradients, on the model's device.

    run(model, *batch) -> outputs, instead of model(*batch): any function of the model, e.g.
        decoding a maze greedily, batched the same way.

    keep(outputs, *batch) -> what to gather from each batch (a tensor or a tuple of tensors),
        e.g. only the logits, or the argmax: big attention patterns need not come back.
        Default: the model's outputs as they are.
    Returns the gathered results concatenated along the first axis, on the CPU: tensors, or
    NumPy arrays with numpy=True. The model's train/eval mode is restored afterwards.
    """
    if not inputs:
        raise ValueError("infer needs at least one input")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    tensors = [_as_tensor(x) for x in inputs]
    n = len(tensors[0])
    if any(len(t) != n for t in tensors):
        raise ValueError(f"inputs must share their first axis, got lengths {[len(t) for t in tensors]}")
    if n == 0:
        raise ValueError("infer got empty inputs: nothing to run the model on")
    device, was_training = model_device(model), model.training
    model.eval()
    try:
        parts = []
        for i in range(0, n, batch_size):
            batch = [t[i : i + batch_size].to(device) for t in tensors]
            out = model(*batch) if run is None else run(model, *batch)
            parts.append(_cpu(keep(out, *batch) if keep is not None else out))
    finally:
        model.train(was_training)
    result = _cat(parts)
    return _numpy(result) if numpy else result
