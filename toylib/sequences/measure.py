"""Judging the sequences chapter's models: running either model (`run_model`), exact match and
where the attention lands, on held-out sequences; the NumPy model's training loop (here
because it validates with those); the suite of trained models, the ablations and the
longer-sequence runs; the chapter's targets (`measure` for one model), `benchmark` (the whole
suite, for benchmarks/run.py) and the command line."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from toylib import cli
from toylib.draws import stream
from toylib.infer import infer
from toylib.sequences.dataset import N_TEST, TEST_SEED, SeqData, for_config, held_out
from toylib.sequences.net import QUERIES, SeqConfig, SeqTransformer, at_stop_rule, train
from toylib.sequences.numpy_net import NumpyTransformer
from toylib.sequences.world import TASKS, _check_sequences, source_positions
from toylib.targets import Target, pct, time_target
from toylib.train import History, stop_when


# ----------------------------------------------------------------------------- judging a model


def run_model(model, x, batch_size: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """(logits (n, pos, vocab), patterns (n, layer, head, query, key)) as NumPy arrays, for
    a SeqTransformer or a NumpyTransformer."""
    x = _check_sequences(x, model.config.vocab)
    if isinstance(model, NumpyTransformer):
        logits, patterns, _ = model.forward(x)
        return logits, patterns
    return infer(model, x, batch_size=batch_size, numpy=True)


def predict(model, x) -> np.ndarray:
    """The model's output symbols (n, pos)."""
    return run_model(model, x)[0].argmax(-1)


def exact_match(predicted: np.ndarray, targets: np.ndarray) -> float:
    """Share of sequences with every position right."""
    return float((predicted == targets).all(axis=1).mean())


def attention_on_source(
    model, x, task: str | None = None, layer: int = 0, head: int = 0, patterns=None, same_value: bool = False
) -> float:
    """Share of (sequence, output position) pairs whose strongest attention is on the true
    source position (`source_positions`). With same_value, a position holding the same
    symbol as the source counts too: what attention by content (matching symbols) achieves.
    Pass `patterns` to reuse a forward pass of `x`."""
    task = task or model.config.task
    x = _check_sequences(x)
    if patterns is None:
        patterns = run_model(model, x)[1]
    src = source_positions(task, patterns.shape[-1])  # (pos,)
    top = patterns[:, layer, head].argmax(-1)  # (n, query_pos)
    if same_value:
        return float((np.take_along_axis(x, top, axis=1) == x[:, src]).mean())
    return float((top == src).mean())


def filter_attention(model, x, layer: int = 0, head: int = 0) -> dict[str, float]:
    """How a filter model attends, separately at positions whose value is kept and at those
    blanked to 0: the share whose strongest attention is on their own position; for kept
    positions, the share whose strongest attention holds their own value; for blanked ones,
    the share whose strongest attention lands on some position whose value is also blanked."""
    x = _check_sequences(x, model.config.vocab)
    top = run_model(model, x)[1][:, layer, head].argmax(-1)  # (n, query)
    removed = x > model.config.threshold  # (n, pos)
    on_self = top == np.arange(x.shape[1])  # (n, query)
    return {
        "kept_argmax_self": float(on_self[~removed].mean()),
        "removed_argmax_self": float(on_self[removed].mean()),
        # is the attended position's value removed?
        "removed_argmax_on_removed": float(np.take_along_axis(removed, top, axis=1)[removed].mean()),
        "kept_argmax_on_kept_same_value": float((np.take_along_axis(x, top, axis=1) == x)[~removed].mean()),
    }


def evaluate(
    model, n: int = N_TEST, seed: int = TEST_SEED, length: int | None = None, split: str = "test",
) -> dict[str, float]:
    """Exact match, per-position accuracy and attention on the source, on `n` sequences of
    `split` (by default the held-out test split) drawn from `seed` (`held_out`)."""
    return evaluate_on(model, *held_out(model.config, n, length, split, seed))


def evaluate_on(model, x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """`evaluate` on the sequences `x` and their targets `y`, e.g. a SeqData's test set."""
    n = len(x)
    logits, patterns = run_model(model, x)
    pred = logits.argmax(-1)
    out = {"exact": exact_match(pred, y), "token_acc": float((pred == y).mean()), "n": float(n)}
    out["attention_on_source"] = attention_on_source(model, x, patterns=patterns)
    out["attention_on_source_value"] = attention_on_source(model, x, patterns=patterns, same_value=True)
    return out


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
    (by default `for_config(config)`): the NumPy twin of `net.train`, with
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
    """net.train's validation, for the NumPy model: the means over the validation sets."""
    exact, loss, on_src = 0.0, 0.0, 0.0
    for x, y in val:
        logits, patterns, _ = model.forward(x)
        exact += exact_match(logits.argmax(-1), y) / len(val)
        ce = F.cross_entropy(torch.from_numpy(logits).flatten(0, 1), torch.from_numpy(y).flatten())
        loss += ce.item() / len(val)
        on_src += attention_on_source(model, x, patterns=patterns) / len(val)
    return {"val_exact": exact, "val_loss": loss, "val_attention_on_source": on_src}


# ----------------------------------------------------------------------------- the chapter's targets


@dataclasses.dataclass(frozen=True)
class Run:
    """One trained model of the chapter and what it scored on the held-out test sequences."""

    model: nn.Module
    history: History
    result: dict[str, float]  # from `evaluate`


TIME_BUDGET_S = {"torch": 60.0, "numpy": 90.0}  # the chapter's targets: training seconds per task


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


def exact_target(what: str, run_or_result: Run | dict[str, float]) -> Target:
    """The row "exact match on every held-out sequence" of a Run, or of `evaluate`'s result."""
    r = run_or_result.result if isinstance(run_or_result, Run) else run_or_result
    return Target(f"{what}", "100 %", pct(r["exact"]), r["exact"] == 1.0)


def suite_targets(torch_runs: dict[tuple[str, int], Run], numpy_runs: dict[tuple[str, int], Run]) -> list[Target]:
    """The targets of the chapter's trained models: exact on every test sequence, strongest
    attention on the true source at >= 99.9 % of positions (filter: reported, no target),
    and the training times (machine-dependent)."""
    out = [exact_target(f"PyTorch exact match, {task}, length {length}", run)
           for (task, length), run in torch_runs.items()]
    for (task, length), run in torch_runs.items():
        on_source = run.result["attention_on_source"]
        met = None if task == "filter" else bool(on_source >= 0.999)
        out.append(Target(f"PyTorch attention on source, {task}, length {length}", "-" if met is None else ">= 99.9 %",
                          pct(on_source), met))
    out += [exact_target(f"NumPy exact match, {task}, length {length}", run)
            for (task, length), run in numpy_runs.items()]
    for impl, runs in (("PyTorch", torch_runs), ("NumPy", numpy_runs)):
        if runs:
            slowest = max(r.history.seconds for r in runs.values())
            budget = TIME_BUDGET_S["torch" if impl == "PyTorch" else "numpy"]
            out.append(time_target(slowest, budget, f"{impl} training per task, slowest of {len(runs)}"))
    return out


def claim_targets(
    grad_errors: dict[str, tuple[float, float]], ablation: dict[tuple[str, str], Run],
    generalisation: dict[str, dict[int, float]],
) -> list[Target]:
    """The post's findings, as targets, from `gradient_check` per query kind, `run_ablations`
    and the sinusoid models trained on mixed lengths (`train_mixed`), per task."""
    fd = max(e[0] for e in grad_errors.values())
    ag = max(e[1] for e in grad_errors.values())
    exact = {key: run.result["exact"] for key, run in ablation.items()}
    reached = {key: run.history.stop_reason == "callback" for key, run in ablation.items()}
    no_pe = max(exact[NO_POSITIONS, t] for t in ("reverse", "rotate"))
    ours = sum(exact[ABLATIONS_OURS, t] == 1.0 for t in TASKS)
    sgd_hits = sum(reached[name, t] for name in ABLATIONS if name.startswith("plain SGD") for t in TASKS)
    n_sgd = sum(name.startswith("plain SGD") for name in ABLATIONS) * len(TASKS)
    post_copy = ablation["the post (queries from content + position)", "copy"].result["attention_on_source"]
    gen_ok = all(generalisation[t][n] == 1.0 for t in ("copy", "rotate", "filter") for n in range(2, 17))
    return [
        Target("NumPy gradients vs finite differences, rel. error", "< 1e-6",
               "< 1e-6" if fd < 1e-6 else "1e-6 or more", fd < 1e-6),
        Target("NumPy gradients vs PyTorch autograd, rel. error", "< 1e-10",
               "< 1e-10" if ag < 1e-10 else "1e-10 or more", ag < 1e-10),
        Target("claim: without positions, reverse and rotate fail (best exact)", "< 1 %", f"{100 * no_pe:.2f} %",
               no_pe < 0.01),
        Target("claim: 1 layer, 1 head, no residual/norm suffice (tasks exact)", f"{len(TASKS)} of {len(TASKS)}",
               f"{ours} of {len(TASKS)}", ours == len(TASKS)),
        Target("claim: plain SGD meets the target in AdamW's budget (runs)", f"0 of {n_sgd}",
               f"{sgd_hits} of {n_sgd}", sgd_hits == 0),
        Target("the post's queries: copy attention on source", "-",
               "below 99.9 %" if post_copy < 0.999 else "99.9 % or more", None),
        Target("mixed lengths 2-16: copy, rotate, filter exact at every training length", "-",
               "yes" if gen_ok else "no", None),
    ]


# One change at a time to the chapter's model or its training (the chapter's ablation table).
ABLATIONS_OURS = "this chapter (queries from position)"
NO_POSITIONS = "no position encoding (the post's queries)"
ABLATIONS: dict[str, dict] = {
    ABLATIONS_OURS: {},
    "the post (queries from content + position)": {"queries": "input"},
    # (with queries from the position only, no position encoding leaves every query zero:
    # attention is uniform by construction, so that row would teach nothing)
    NO_POSITIONS: {"positions": False, "queries": "input"},
    "plain SGD, lr 0.1": {"optimizer": "sgd", "lr": 0.1},
    "residual + LayerNorm + MLP (the post's queries)": {"residual": True, "queries": "input"},
}


def run_ablations(
    steps: int = 1500, length: int = 8, n_test: int = 10_000, device: torch.device | str | None = None,
) -> dict[tuple[str, str], Run]:
    """Train every task under every change of ABLATIONS with the same budget of `steps`:
    {(variant, task): Run}. A run met the validation target if it stopped by the callback."""
    return {(name, task): run for name, change in ABLATIONS.items()
            for (task, _), run in train_suite(lengths=(length,), n_test=n_test, device=device, steps=steps,
                                              **change).items()}


# ----------------------------------------------------------------------------- longer sequences than in training

TRAIN_LENGTHS = tuple(range(2, 17))  # mixed-length training: each batch draws one of these
TEST_LENGTHS = (8, 16, 17, 20, 32, 64, 128, 256)  # the chapter's length table
LONG_LENGTHS = (64, 128, 256)  # the targets: >= LONG_GOAL exact at these, 4, 8 and 16 times 16
LONG_GOAL = 0.99
# The relative-position model, as a change to SeqConfig: lr 0.02 meets the stopping rule in
# 100-250 steps (0.01: 600-800); 500 steps is the budget of it and of its variants below.
RELATIVE: dict = {"scheme": "relative", "lr": 2e-2, "steps": 500}
# One change at a time to RELATIVE, on the tasks where it shows: (changes, tasks).
RELATIVE_VARIANTS: dict[str, tuple[dict, tuple[str, ...]]] = {
    "no end bias (from_end=False)": ({"from_end": False}, ("reverse", "rotate")),
    "window +-16 (max_offset=16)": ({"max_offset": 16}, ("rotate",)),
    "no length scaling (log_scale=False)": ({"log_scale": False}, ("copy", "rotate")),
    "bias in units of 1 (bias_scale=1)": ({"bias_scale": 1.0}, ("copy", "filter")),
}


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


def length_table(
    models: dict[str, nn.Module], lengths: Iterable[int] = TEST_LENGTHS, n: int = 1000,
    batch_size: int = 32,
) -> dict[str, dict[int, float]]:
    """Exact match of each task's model on `n` test sequences of every length (the same
    sequences as `evaluate`'s): {task: {length: share}}. Small batches: at length 256 a batch
    of 32 keeps each (batch, query, key) tensor at 8 MB, in cache: about 1.5 times as fast as 128."""
    def argmax(outputs, _):  # the symbols only: 1,000 patterns of 256 x 256 would be 262 MB
        return outputs[0].argmax(-1)  # (batch, pos)

    lengths = tuple(lengths)
    table = {}
    for task, model in models.items():
        table[task] = {}
        for length in lengths:
            x, y = held_out(model.config, n, length)
            predicted = infer(model, x, batch_size=batch_size, keep=argmax, numpy=True)  # (n, length)
            table[task][length] = exact_match(predicted, y)
    return table


def length_targets(
    table: dict[str, dict[int, float]], lengths: Iterable[int] = LONG_LENGTHS,
    trained_on: Iterable[int] = TRAIN_LENGTHS,
) -> list[Target]:
    """The rows "at least LONG_GOAL exact" of a `length_table` of relative models trained on
    the lengths `trained_on`, at `lengths` far past them."""
    trained = f"{min(trained_on)}-{max(trained_on)}"
    return [Target(f"relative, trained on {trained}: exact, {task}, length {length}",
                   f">= {100 * LONG_GOAL:.0f} %", pct(by_length[length]), by_length[length] >= LONG_GOAL)
            for task, by_length in table.items() for length in lengths]


def benchmark(seed: int, device: torch.device | str | None = None, **changes) -> tuple[list[Target], float]:
    """benchmarks/run.py: the chapter's trained models for one seed, and their targets: the
    suite (`suite_targets`), and the relative models trained on lengths 2-16 judged at
    LONG_LENGTHS, up to 256 (`length_targets`), every config with `changes` (e.g. steps=60).
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
    table = length_table({task: model for task, (model, _) in relative.items()}, LONG_LENGTHS)
    seconds = sum(r.history.seconds for r in (*torch_runs.values(), *numpy_runs.values()))
    seconds += sum(history.seconds for _, history in relative.values())
    return suite_targets(torch_runs, numpy_runs) + length_targets(table), seconds


# ----------------------------------------------------------------------------- command line


def measure(model: nn.Module, config: SeqConfig, data: SeqData, train_seconds: float,
            details: bool = True) -> list[Target]:
    """The targets of one model (the command line's): exact match and attention on the source
    on the test set of `data`, and the training time. details=False leaves out the rows
    without a goal (per-position accuracy; filter's attention)."""
    r = evaluate_on(model, *data.test)
    where = f"{config.task}, length {data.test[0].shape[1]}, {len(data.test[0]):,} held-out sequences"
    on_source = None if config.task == "filter" else bool(r["attention_on_source"] >= 0.999)
    rows = [
        exact_target(f"exact match, {where}", r),
        Target(f"per position, {where}", "-", pct(r["token_acc"]), None),
        Target(f"attention on source, {where}", "-" if on_source is None else ">= 99.9 %",
               pct(r["attention_on_source"]), on_source),
        time_target(train_seconds, TIME_BUDGET_S["torch"]),
    ]
    return rows if details else [t for t in rows if t.met is not None]


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
