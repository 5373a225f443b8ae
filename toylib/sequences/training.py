"""Training the sequences chapter's models: `train` (the PyTorch model, by toylib.train.fit)
and `train_numpy` (the NumPy twin, by its own loop), both validated the same way and stopped
by `at_stop_rule`; the suite of trained models (`train_suite`), the ablations
(`run_ablations`), the mixed-length runs (`train_mixed`); `benchmark` (the whole suite, for
benchmarks/run.py), the chapter's contract (`CHAPTER`) and the command line (`main`)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from toylib import cli
from toylib.draws import stream
from toylib.sequences.config import ABLATIONS, QUERIES, RELATIVE, SeqConfig
from toylib.sequences.dataset import SeqData, for_config
from toylib.sequences.measure import (FAR_GOAL, FAR_LENGTHS, FAR_N, LONG_LENGTHS, TRAIN_LENGTHS, Run,
                                      attention_on_source, evaluate, exact_match,
                                      length_table, length_targets, measure, suite_targets)
from toylib.sequences.net import SeqTransformer, sequence_loss
from toylib.sequences.numpy_net import NumpyTransformer
from toylib.sequences.world import TASKS, source_positions
from toylib.targets import Target
from toylib.train import Callback, History, fit, prepare, stop_when


# ----------------------------------------------------------------------------- the PyTorch model


def train(config: SeqConfig = SeqConfig(), data: SeqData | None = None,
          device: torch.device | str | None = None, callback: Callback | None = None,
          progress: bool = True) -> tuple[SeqTransformer, History]:
    """Build a SeqTransformer from `config` and train it with toylib.train.fit on the fresh
    batches of `data` (by default `for_config(config)`: length `config.length`;
    `for_config(config, lengths)`: mixed lengths, the position encoding computed for
    whatever length comes).

    Every `eval_every` steps it is validated on the validation sets of `data`: val_exact,
    val_loss, val_attention_on_source. Training stops at the first validation that meets
    `at_stop_rule` (never with stop_loss=0). `callback(step, model, history)` runs after
    every validation (for attention snapshots); returning True stops training.
    """
    data = for_config(config) if data is None else data
    if data.config != config:
        raise ValueError(f"the data was built for another config: {data.config}, not {config}")
    model, device, _ = prepare(config.seed, lambda: SeqTransformer(config), device)
    val = [[torch.from_numpy(a).to(device) for a in xy] for xy in data.val]
    batches = (tuple(map(torch.from_numpy, xy)) for xy in data.batches())

    def evaluate_val(m):
        right, loss, on_src = 0, 0.0, 0.0
        for x, y in val:
            logits, patterns = m(x)  # (batch, pos, vocab), (batch, layer, head, query, key)
            right += (logits.argmax(-1) == y).all(-1).sum().item()
            loss += F.cross_entropy(logits.flatten(0, 1), y.flatten()).item() / len(val)
            src = torch.from_numpy(source_positions(config.task, x.shape[1])).to(device)
            on_src += (patterns[:, 0, 0].argmax(-1) == src).float().mean().item() / len(val)
        n_val = sum(len(x) for x, _ in val)
        return {"val_exact": right / n_val, "val_loss": loss, "val_attention_on_source": on_src}

    at_target = stop_when(lambda r: at_stop_rule(config, r), callback)
    history = fit(model, batches, sequence_loss, config.train_options(), eval_fn=evaluate_val,
                  callback=at_target, device=device, progress=progress)
    return model, history


def at_stop_rule(cfg: SeqConfig, record: dict[str, float]) -> bool:
    """The stopping rule of every sequence model: every validation sequence exact, and the
    validation loss below `stop_loss` (which no loss is with stop_loss=0)."""
    return record["val_exact"] == 1.0 and record["val_loss"] < cfg.stop_loss


# ----------------------------------------------------------------------------- NumPy, training


NumpyCallback = Callable[[int, NumpyTransformer, History], "bool | None"]


def train_numpy(
    config: SeqConfig = SeqConfig(),
    data: SeqData | None = None,
    device: torch.device | str | None = None,
    callback: NumpyCallback | None = None,
    progress: bool = True,
) -> tuple[NumpyTransformer, History]:
    """Train a NumpyTransformer with Adam on the fresh batches of `data`
    (by default `for_config(config)`): the NumPy twin of `train`, with
    the same data, validation and stopping rule, and a History of the same
    records. NumPy computes on the CPU whatever `device` says."""
    if config.optimizer != "adamw":
        raise ValueError("train_numpy uses Adam; set optimizer='adamw'")
    data = for_config(config) if data is None else data
    if data.config != config:
        raise ValueError(f"the data was built for another config: "
                         f"{data.config}, not {config}")
    rng = stream(config.seed, "init")
    model = NumpyTransformer(config, rng)
    at_target = stop_when(lambda r: at_stop_rule(config, r), callback)
    batches = data.batches()
    history, running, n_running, seconds = History(), 0.0, 0, 0.0
    bar = tqdm(total=config.steps, disable=not progress, mininterval=0.5,
               leave=True)
    for step in range(1, config.steps + 1):
        x, y = next(batches)
        t0 = time.perf_counter()
        _, _, cache = model.forward(x)
        loss, grads = model.backward(cache, y)
        model.adam_step(grads, config.lr)
        seconds += time.perf_counter() - t0
        running, n_running = running + loss, n_running + 1
        bar.update(1)
        if step % config.eval_every and step != config.steps:
            continue
        record = {"step": step, "seconds": seconds, "lr": config.lr,
                  "loss": running / n_running,
                  **_validate_numpy(model, data.val)}
        history.records.append(record)
        history.seconds, history.steps = seconds, step
        running, n_running = 0.0, 0
        if at_target(step, model, history):
            history.stop_reason = "callback"
            break
    bar.close()
    return model, history


def _validate_numpy(model: NumpyTransformer, val) -> dict[str, float]:
    """`train`'s validation, for the NumPy model: the means over the validation sets."""
    exact, loss, on_src = 0.0, 0.0, 0.0
    for x, y in val:
        logits, patterns, _ = model.forward(x)
        exact += exact_match(logits.argmax(-1), y) / len(val)
        ce = F.cross_entropy(torch.from_numpy(logits).flatten(0, 1), torch.from_numpy(y).flatten())
        loss += ce.item() / len(val)
        on_src += attention_on_source(model, x, patterns=patterns) / len(val)
    return {"val_exact": exact, "val_loss": loss, "val_attention_on_source": on_src}


# ----------------------------------------------------------------------------- the suite and the ablations


def train_suite(
    seed: int = 0, lengths: Iterable[int] = (8, 16), tasks: Iterable[str] = TASKS, numpy: bool = False,
    n_test: int = 10_000, device: torch.device | str | None = None, **changes,
) -> dict[tuple[str, int], Run]:
    """Train the default model (NumPy's with numpy=True; with `changes` to its config) on every
    task and length, and judge each on `n_test` held-out sequences: {(task, length): Run}."""
    runs = {}
    for length in lengths:
        for task in tasks:
            cfg = SeqConfig(task=task, length=length, seed=seed, **changes)
            model, history = (train_numpy if numpy else train)(cfg, device=device, progress=False)
            runs[task, length] = Run(model, history, evaluate(model, n_test))
    return runs


def run_ablations(
    steps: int = 1500, length: int = 8, n_test: int = 10_000, device: torch.device | str | None = None,
) -> dict[tuple[str, str], Run]:
    """Train every task under every change of ABLATIONS with the same budget of `steps`:
    {(variant, task): Run}. A run met the validation target if it stopped by the callback."""
    return {(name, task): run for name, change in ABLATIONS.items()
            for (task, _), run in train_suite(lengths=(length,), n_test=n_test, device=device, steps=steps,
                                              **change).items()}


# ----------------------------------------------------------------------------- longer sequences than in training


def train_mixed(
    seed: int = 0, tasks: Iterable[str] = TASKS, lengths: Iterable[int] = TRAIN_LENGTHS,
    device: torch.device | str | None = None, **changes,
) -> dict[str, tuple[SeqTransformer, History]]:
    """Train one model per task on batches of mixed `lengths` (`for_config(config, lengths)`),
    the default config with `changes` (RELATIVE for relative positions): {task: (model, history)}."""
    lengths = tuple(lengths)
    configs = {task: SeqConfig(task=task, length=max(lengths), seed=seed, **changes) for task in tasks}
    return {task: train(config, for_config(config, lengths), device=device, progress=False)
            for task, config in configs.items()}


def benchmark(seed: int, device: torch.device | str | None = None, **changes) -> tuple[list[Target], float]:
    """benchmarks/run.py: the chapter's trained models for one seed, and their targets: the
    suite (`suite_targets`), and the relative models trained on lengths 2-16 judged at
    LONG_LENGTHS, up to 256, and at FAR_LENGTHS, up to 1,024 (`length_targets`), every config
    with `changes` (e.g. steps=60).
    Returns (targets, seconds of training summed over the runs)."""
    fields = {f.name for f in dataclasses.fields(SeqConfig)}
    unknown = sorted(set(changes) - fields)
    if unknown:
        raise ValueError(f"SeqConfig has no field {', '.join(unknown)}; its fields: {', '.join(sorted(fields))}")
    fixed = sorted({"task", "length"} & set(changes))
    if fixed:
        raise ValueError(f"the suite sets {', '.join(fixed)} itself: it trains every task at its lengths")
    torch_runs = train_suite(seed, device=device, **changes)
    numpy_runs = train_suite(seed, tasks=("copy", "reverse"), numpy=True, **changes)
    relative = train_mixed(seed, device=device, **{**RELATIVE, **changes})
    models = {task: model for task, (model, _) in relative.items()}
    table = length_table(models, LONG_LENGTHS)
    far = length_table(models, FAR_LENGTHS, n=FAR_N)
    seconds = sum(r.history.seconds for r in (*torch_runs.values(), *numpy_runs.values()))
    seconds += sum(history.seconds for _, history in relative.values())
    return (suite_targets(torch_runs, numpy_runs) + length_targets(table)
            + length_targets(far, FAR_LENGTHS, goal=FAR_GOAL, n=FAR_N)), seconds


# ----------------------------------------------------------------------------- command line


CHAPTER = cli.Chapter(
    "sequences", "One attention layer learns copy, reverse, rotate or filter.",
    SeqConfig, SeqTransformer, for_config, train, measure,
    options=(
        cli.Option(("-t", "--task"), "task", "the task", choices=TASKS),
        cli.Option(("-S", "--length"), "length", "sequence length"),
        cli.Option("--steps", "steps", "most training steps"),
        cli.Option("--queries", "queries", "queries from the position only, or from the whole input as in the post",
                   choices=QUERIES),
    ),
    benchmark=benchmark,
)

main = cli.entry_point(CHAPTER)  # python -m toylib.<chapter>, and its console script
