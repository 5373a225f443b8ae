"""The one training loop of the book, its history, and checkpoints.

`fit` knows nothing about any chapter: the chapter hands it batches, a loss function and,
if it wants them, an evaluation function and a callback. Evaluation belongs to the task;
the loop only records what the task measures and decides when to stop.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import multiprocessing
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from toylib.device import cpu_cores, pick_device, seed_everything

Batch = Any
LossFn = Callable[[nn.Module, Batch], "torch.Tensor | tuple[torch.Tensor, dict[str, torch.Tensor | float]]"]


@dataclasses.dataclass
class History:
    """What a training run measured. `records` holds one dict per evaluation, each with at
    least `step`, `seconds` (training time so far, evaluation excluded), `lr` and `loss`
    (the mean training loss since the previous record), and, with `log_every`, one more
    between evaluations with those four alone."""

    records: list[dict[str, float]] = dataclasses.field(default_factory=list)
    seconds: float = 0.0  # training time, evaluation and callbacks excluded
    steps: int = 0
    stop_reason: str = "steps"  # "steps", "early_stopping" or "callback"
    restored_step: int | None = None  # the step whose weights were restored at the end, if any

    def column(self, key: str) -> list[float]:
        """One metric over the run, e.g. history.column("loss")."""
        return [r[key] for r in self.records if key in r]

    def series(self, key: str) -> tuple[list[int], list[float]]:
        """The steps at which `key` was recorded, and its values there (for a plot)."""
        return [r["step"] for r in self.records if key in r], self.column(key)

    @property
    def last(self) -> dict[str, float]:
        return self.records[-1] if self.records else {}


def lr_factor(schedule: str, step: int, total: int, warmup: int) -> float:
    """Multiplier of the base learning rate at `step` (0-based): linear warm-up, then
    "constant" or "cosine" decay to zero at `total`."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    if schedule == "cosine":
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    raise ValueError(f"schedule must be 'constant' or 'cosine', got {schedule!r}")


@dataclasses.dataclass(frozen=True)
class TrainOptions:
    """How `fit` trains, as one value: a chapter's config builds it (`config.train_options()`)."""

    steps: int  # at most this many batches
    lr: float = 1e-3  # peak learning rate
    weight_decay: float = 0.0
    decay_all: bool = True  # decay biases and LayerNorm gains too; False: only matrices (nanoGPT's rule)
    schedule: str = "constant"  # "constant" or "cosine", after `warmup` (see `lr_factor`)
    warmup: int = 0  # steps of linear warm-up
    plateau: tuple[float, int] | None = None  # (factor, patience): lower the rate when `monitor` stalls, instead
    eval_every: int = 100  # steps between evaluations
    log_every: int | None = None  # steps between records of the training loss alone (cheap: no evaluation)
    # what plateau, patience and restore_best rank evaluations by: a metric of the evaluation (lower is better;
    # "-name": higher is better), or several, ranked in order: the first decides, the next breaks its ties
    monitor: str | tuple[str, ...] = "val_loss"
    patience: int | None = None  # early stopping after this many evaluations without a better `monitor`
    restore_best: bool = False  # out of steps: restore the weights of the best `monitor`
    grad_clip: float | None = None  # clip the gradient norm to this
    optimizer: str = "adamw"  # or "sgd": plain SGD, no momentum, for ablations

    @classmethod
    def from_config(cls, config: Any, **overrides: Any) -> TrainOptions:
        """The options a chapter's config names, field by field (steps, lr, weight_decay, ...),
        then `overrides` for what the chapter fixes (its monitor, restore_best)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        named = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name in fields}
        return cls(**{**named, **overrides})

    def __post_init__(self):
        if self.steps < 1 or self.eval_every < 1 or (self.log_every is not None and self.log_every < 1):
            raise ValueError(f"steps, eval_every and log_every must be positive, got steps={self.steps}, "
                             f"eval_every={self.eval_every}, log_every={self.log_every}")
        if self.optimizer not in ("adamw", "sgd"):
            raise ValueError(f"optimizer must be 'adamw' or 'sgd', got {self.optimizer!r}")
        if self.schedule not in ("constant", "cosine"):
            raise ValueError(f"schedule must be 'constant' or 'cosine', got {self.schedule!r}")
        if self.plateau is not None and (self.warmup or self.schedule != "constant"):
            # the plateau sets the rate itself: a schedule beside it would be silently ignored
            raise ValueError(f"plateau replaces the schedule: give warmup=0 and schedule='constant' with it, "
                             f"got warmup={self.warmup}, schedule={self.schedule!r}")
        names = (self.monitor,) if isinstance(self.monitor, str) else self.monitor
        if not isinstance(names, tuple) or not names or not all(isinstance(n, str) and n.lstrip("-") for n in names):
            raise ValueError(f"monitor must be a metric's name or a tuple of them, got {self.monitor!r}")


def rank(record: dict[str, float], monitor: str | tuple[str, ...]) -> tuple[float, ...] | None:
    """Where an evaluation stands by `monitor` (see `TrainOptions.monitor`), as a tuple that
    sorts the best first: Python compares tuples in order, so the first metric decides and
    the next only breaks its ties, with no weights to choose. None when the record lacks one
    of the metrics."""
    names = (monitor,) if isinstance(monitor, str) else monitor
    if any(n.lstrip("-") not in record for n in names):
        return None
    return tuple(-record[n[1:]] if n.startswith("-") else record[n] for n in names)


def prepare(seed: int, build: Callable[[], nn.Module],
            device: str | torch.device | None = None) -> tuple[nn.Module, torch.device, torch.Generator]:
    """How every chapter's training starts, in one order, so that a seed draws the same weights
    in every chapter and on every device: seed Python, NumPy and torch (`seed_everything`),
    build the model on the CPU and move it to `device` (default `pick_device()`), and make a
    generator of its own, on the CPU, for whatever the training draws as it goes (the order of
    batches, the encoder's passes). Returns (model, device, generator)."""
    seed_everything(seed)
    device = torch.device(device) if device is not None else pick_device()
    model = build().to(device)
    return model, device, torch.Generator().manual_seed(seed)


def set_nll(logp: torch.Tensor, allowed: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """-log of the probability given to a set of right answers together, where any of them is
    right (several moves start a shortest solution; several boards are optimal). logp:
    log-probabilities over the answers along `dim`; allowed: True at the right ones, the same
    shape. One value per item (`dim` removed): with one right answer it is the cross-entropy;
    with none it is inf. The log-probabilities outside the set get no gradient of their own:
    raising the set's probability lowers theirs only through the softmax that made them."""
    return -torch.logsumexp(logp.masked_fill(~allowed, -math.inf), dim)


def param_groups(model: nn.Module, weight_decay: float, decay_all: bool = True) -> list[dict]:
    """The optimiser's parameter groups: with decay_all, one group decayed by `weight_decay`;
    without, only tensors of two or more dimensions (weight matrices, embeddings) are decayed,
    and biases and LayerNorm gains are not (nanoGPT's rule)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if decay_all:
        return [{"params": params, "weight_decay": weight_decay}]
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


def fit(
    model: nn.Module,
    batches: Iterable[Batch],
    loss_fn: LossFn,
    options: TrainOptions,
    *,
    eval_fn: Callable[[nn.Module], dict[str, float]] | None = None,
    callback: Callable[[int, nn.Module, History], bool | None] | None = None,
    device: torch.device | str | None = None,
    progress: bool = True,
    watch: Callable[[int, nn.Module, History], object] | None = None,
    watch_every: int | None = None,
) -> History:
    """Train `model` for at most `options.steps` batches drawn from `batches`, as `options` says.

    loss_fn(model, batch) -> loss, or (loss, metrics); it moves the batch to the model's
        device itself, so batches can be built on the CPU. Metrics are best left tensors
        (detached): `fit` reads the last batch's at each evaluation, and nothing in between.
    eval_fn(model) -> metrics, run in eval mode under no_grad every `eval_every` steps and
        at the end; metrics are stored in the history.
    options.log_every: also record the mean training loss every that many steps, without
        evaluating (a finer loss curve for the price of nothing).
    options.monitor: how evaluations rank (`rank`); "better" below means ranked higher.
    options.plateau (factor, patience): the learning rate times `factor` once more than
        `patience` evaluations in a row are no better than the best (ReduceLROnPlateau's rule,
        without its threshold: any better evaluation counts).
    options.patience: early stopping when `monitor` has not improved for that many
        evaluations; the weights of the best evaluation are restored.
    options.restore_best: when training runs out of steps, restore the weights of the
        evaluation with the best `monitor`, so that a late loss spike is never the final model.
    callback(step, model, history) runs after every evaluation (for attention snapshots,
        live plots); returning True stops training, e.g. once a target is reached.
    watch(step, model, history) looks at the model more often than evaluation does (a
        `Snapshots` for an animation of training): before the first step (step 0), after every
        `watch_every` steps, and on the model `fit` returns. It runs in eval mode under
        no_grad and cannot stop training, so training is the same with or without it.
    """
    if (watch is None) != (watch_every is None):
        raise ValueError("watch and watch_every go together: give both or neither")
    if watch_every is not None and watch_every < 1:
        raise ValueError(f"watch_every must be a positive number of steps, got {watch_every}")
    o = options
    watched = None  # the step `watch` last saw

    def look(step: int) -> None:
        nonlocal watched
        if watch is not None:
            model.eval()
            with torch.no_grad():
                watch(step, model, history)
            watched = step

    if device is not None:
        model.to(device)
    groups = param_groups(model, o.weight_decay, o.decay_all)
    if o.optimizer == "adamw":
        opt = torch.optim.AdamW(groups, lr=o.lr)
    else:
        opt = torch.optim.SGD(groups, lr=o.lr)
    sched = None if o.plateau is not None else \
        torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(o.schedule, s, o.steps, o.warmup))
    history, best, best_state, best_step = History(), None, None, None
    bad_evals, stalled = 0, 0  # evaluations since the best; the same, since the plateau last lowered the rate
    it: Iterator[Batch] = iter(batches)
    bar = tqdm(total=o.steps, disable=not progress, mininterval=0.5, leave=True)
    # A step reads nothing back from the device: the losses add up as a tensor, and metrics stay
    # tensors until a record reads them, so a GPU runs steps ahead of Python. The clock runs
    # from start to each record minus what is not training (watching, evaluating, callbacks);
    # the record's first read waits for the steps before it, so their time is all counted.
    running, n_running, paused = 0.0, 0, 0.0
    look(0)
    started = time.perf_counter()
    for step in range(1, o.steps + 1):
        model.train()
        out = loss_fn(model, next(it))
        loss, metrics = out if isinstance(out, tuple) else (out, {})
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if o.grad_clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), o.grad_clip)
        opt.step()
        if sched is not None:
            sched.step()
        running = running + _wide(loss.detach())  # as Python's float sum of .item() values, without the wait
        n_running += 1
        bar.update(1)
        if watch_every is not None and step % watch_every == 0:
            float(running)  # the steps so far finish before the clock stops for watching
            t0 = time.perf_counter()
            look(step)
            paused += time.perf_counter() - t0
        evaluating = step % o.eval_every == 0 or step == o.steps
        if not evaluating and not (o.log_every and step % o.log_every == 0):
            continue
        mean_loss = float(running) / n_running  # waits for every step so far
        train_seconds = time.perf_counter() - started - paused
        t0 = time.perf_counter()
        record = {"step": step, "seconds": train_seconds, "lr": opt.param_groups[0]["lr"], "loss": mean_loss}
        running, n_running = 0.0, 0
        if not evaluating:  # the training loss alone, between evaluations
            history.records.append(record)
            paused += time.perf_counter() - t0
            continue
        record.update({k: float(v) for k, v in metrics.items()})
        if eval_fn is not None:
            model.eval()
            with torch.no_grad():
                record.update({k: float(v) for k, v in eval_fn(model).items()})
        history.records.append(record)
        history.seconds, history.steps = train_seconds, step
        bar.set_postfix({k: f"{v:.4g}" for k, v in record.items() if k not in ("step", "seconds", "lr")}, refresh=False)
        place = rank(record, o.monitor)
        if place is not None:
            if best is None or place < best:
                best, best_step, bad_evals, stalled = place, step, 0, 0
                if o.patience is not None or o.restore_best:
                    best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            else:
                bad_evals, stalled = bad_evals + 1, stalled + 1
            if o.plateau is not None and stalled > o.plateau[1]:
                for group in opt.param_groups:
                    group["lr"] *= o.plateau[0]
                stalled = 0
            if o.patience is not None and bad_evals >= o.patience:
                history.stop_reason = "early_stopping"
                break
        stop = callback is not None and callback(step, model, history)
        paused += time.perf_counter() - t0
        if stop:
            history.stop_reason = "callback"
            break
    bar.close()
    restore = history.stop_reason == "early_stopping" or (o.restore_best and history.stop_reason == "steps")
    if restore and best_state is not None and best_step != history.steps:
        model.load_state_dict(best_state)
        history.restored_step = best_step
    if history.restored_step is not None or watched != history.steps:  # the model as returned
        look(history.restored_step or history.steps)
    return history


def _wide(x: torch.Tensor) -> torch.Tensor:
    """`x` in float64, where the device has it (Apple's MPS has not): sums of a few thousand
    float32 losses then round as Python's float sum of their values does."""
    return x.float() if x.device.type == "mps" else x.double()


Callback = Callable[[int, nn.Module, History], "bool | None"]


def stop_when(reached: Callable[[dict[str, float]], bool], then: Callback | None = None) -> Callback:
    """A `fit` callback that stops training at the first evaluation whose record satisfies
    `reached` (a chapter's target), after running the caller's own callback `then`, which
    is always called and may stop training too."""

    def on_eval(step: int, model: nn.Module, history: History) -> bool:
        stop = bool(reached(history.last))
        if then is not None and then(step, model, history):
            stop = True
        return stop

    return on_eval


class Snapshots:
    """A `fit` callback that keeps something of the model at every evaluation: an attention
    pattern for an animation, say. `take(model)` runs in eval mode without gradients;
    `title(step, history)` (optional) names each frame.

    After training: `frames` (a list of what `take` returned), `steps`, `titles`."""

    def __init__(self, take: Callable[[nn.Module], Any], title: Callable[[int, History], str] | None = None):
        self.take, self.title = take, title
        self.frames: list[Any] = []
        self.steps: list[int] = []
        self.titles: list[str] = []

    def __call__(self, step: int, model: nn.Module, history: History) -> None:
        was_training = model.training
        model.eval()
        with torch.no_grad():
            self.frames.append(self.take(model))
        model.train(was_training)
        self.steps.append(step)
        self.titles.append(self.title(step, history) if self.title else f"step {step:,}")


def forever(make_batch: Callable[[], Batch]) -> Iterator[Batch]:
    """An endless stream of freshly generated batches, for tasks whose data is unlimited."""
    while True:
        yield make_batch()


def minibatch_indices(n: int, batch_size: int, generator: torch.Generator,
                      drop_last: bool = False) -> Iterator[torch.Tensor]:
    """Endless shuffled batches of indices into n items, epoch after epoch: each epoch one
    permutation drawn from `generator`, cut into batches of `batch_size` (the last one shorter,
    or left out with `drop_last`). For data that is not a tuple of tensors (Sokoban's entries,
    which become tensors only once a batch is chosen); `minibatches` indexes tensors with it."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    if n < (batch_size if drop_last else 1):
        raise ValueError(f"a batch of {batch_size} asks for more than the {n} there are")
    while True:
        order = torch.randperm(n, generator=generator)
        for i in range(0, n - batch_size + 1 if drop_last else n, batch_size):
            yield order[i : i + batch_size]


def minibatches(*tensors: torch.Tensor, batch_size: int, generator: torch.Generator) -> Iterator[tuple[torch.Tensor, ...]]:
    """Endless shuffled minibatches (epoch after epoch) over a fixed dataset of equal-length tensors."""
    n = len(tensors[0])
    if any(len(t) != n for t in tensors):
        raise ValueError(f"tensors must have the same length, got {[len(t) for t in tensors]}")
    for idx in minibatch_indices(n, batch_size, generator):
        yield tuple(t[idx] for t in tensors)


def _one_thread() -> None:
    torch.set_num_threads(1)


def side_by_side(fn: Callable[..., Any], jobs: Sequence[tuple], workers: int | None = None) -> list[Any]:
    """`[fn(*job) for job in jobs]`, the jobs running at the same time, each in a process of its
    own with one torch thread: on a 2-core CPU two trainings take about the time of one.

    workers: processes at once; by default one per job, at most one per CPU core this process
        may use. With 1 (or one job) every job runs here, one after another.
    The processes are spawned, not forked (a fork of a process whose torch threads have
    started can hang), so `fn` must be a module-level function they can import, and jobs and
    results travel pickled. A job that seeds itself (as `fit`'s callers do) computes the same
    numbers in its own process as here on one thread.
    """
    jobs = list(jobs)
    workers = max(1, min(len(jobs), cpu_cores())) if workers is None else workers
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    if workers == 1 or len(jobs) <= 1:
        return [fn(*job) for job in jobs]
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=_one_thread) as pool:
        futures = [pool.submit(fn, *job) for job in jobs]
        return [f.result() for f in futures]


def save_checkpoint(path: str | Path, model: nn.Module, config: Any, **extra: Any) -> None:
    """Save weights and the model's frozen-dataclass config (plus plain-data extras such as
    metrics) in a file that `torch.load(..., weights_only=True)` can read back."""
    if not dataclasses.is_dataclass(config):
        raise ValueError(f"config must be a dataclass instance, got {type(config).__name__}")
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    torch.save({"config": dataclasses.asdict(config), "state_dict": state, "extra": extra}, path)


def load_checkpoint(path: str | Path, model_cls: type[nn.Module], config_cls: type) -> tuple[nn.Module, Any, dict]:
    """Rebuild `model_cls(config_cls(**saved_config))` and load its weights.

    Returns (model in eval mode on the CPU, config, extras)."""
    saved = torch.load(path, map_location="cpu", weights_only=True)
    fields = {f.name for f in dataclasses.fields(config_cls)}
    unknown = set(saved["config"]) - fields
    if unknown:
        raise ValueError(f"checkpoint {path} has config fields {sorted(unknown)} unknown to {config_cls.__name__}")
    config = config_cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved["config"].items()})
    model = model_cls(config)
    model.load_state_dict(saved["state_dict"])
    return model.eval(), config, saved["extra"]
