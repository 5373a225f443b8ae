"""Judging the sequences chapter's models: running either model (`run_model`), exact match and
where the attention lands, on held-out sequences (`evaluate`); the chapter's targets (the suite's,
the post's claims, the lengths far past training) and `measure`, the targets of one model. Nothing
here trains: training.py does."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np
from torch import nn

from toylib.infer import infer
from toylib.sequences.config import ABLATIONS, ABLATIONS_OURS, NO_POSITIONS, SeqConfig
from toylib.sequences.dataset import N_TEST, TEST_SEED, SeqData, held_out
from toylib.sequences.numpy_net import NumpyTransformer
from toylib.sequences.world import TASKS, check_sequences, source_positions
from toylib.targets import Target, below_target, count_target, pct, share_target, time_target
from toylib.train import History


# ----------------------------------------------------------------------------- judging a model


def run_model(model, x, batch_size: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """(logits (n, pos, vocab), patterns (n, layer, head, query, key)) as NumPy arrays, for
    a SeqTransformer or a NumpyTransformer."""
    x = check_sequences(x, model.config.vocab)
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
    x = check_sequences(x)
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
    x = check_sequences(x, model.config.vocab)
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


# ----------------------------------------------------------------------------- the chapter's targets


@dataclasses.dataclass(frozen=True)
class Run:
    """One trained model of the chapter and what it scored on the held-out test sequences."""

    model: nn.Module
    history: History
    result: dict[str, float]  # from `evaluate`


TIME_BUDGET_S = {"torch": 60.0, "numpy": 90.0}  # the chapter's targets: training seconds per task
ATTENTION_GOAL = 0.999  # the share of positions whose strongest attention is on the true source


def exact_target(what: str, run_or_result: Run | dict[str, float]) -> Target:
    """The row "exact match on every held-out sequence" of a Run, or of `evaluate`'s result."""
    r = run_or_result.result if isinstance(run_or_result, Run) else run_or_result
    return share_target(what, r["exact"])


def attention_target(what: str, task: str, on_source: float) -> Target:
    """The row "strongest attention on the true source": at least ATTENTION_GOAL; filter's is
    reported, with no goal."""
    if task == "filter":
        return Target(what, "-", pct(on_source), None)
    return share_target(what, on_source, ATTENTION_GOAL)


def suite_targets(torch_runs: dict[tuple[str, int], Run], numpy_runs: dict[tuple[str, int], Run]) -> list[Target]:
    """The targets of the chapter's trained models: exact on every test sequence, strongest
    attention on the true source at >= ATTENTION_GOAL of positions (filter: reported, no target),
    and the training times (machine-dependent)."""
    out = [exact_target(f"PyTorch exact match, {task}, length {length}", run)
           for (task, length), run in torch_runs.items()]
    for (task, length), run in torch_runs.items():
        out.append(attention_target(f"PyTorch attention on source, {task}, length {length}", task,
                                    run.result["attention_on_source"]))
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
        below_target("NumPy gradients vs finite differences, rel. error", fd, 1e-6),
        below_target("NumPy gradients vs PyTorch autograd, rel. error", ag, 1e-10),
        below_target("claim: without positions, reverse and rotate fail (best exact)", no_pe, 0.01, share=True),
        count_target("claim: 1 layer, 1 head, no residual/norm suffice (tasks exact)", ours, len(TASKS)),
        count_target("claim: plain SGD meets the target in AdamW's budget (runs)", sgd_hits, n_sgd, goal=0),
        Target("the post's queries: copy attention on source", "-",
               "below 99.9 %" if post_copy < ATTENTION_GOAL else "99.9 % or more", None),
        Target("mixed lengths 2-16: copy, rotate, filter exact at every training length", "-",
               "yes" if gen_ok else "no", None),
    ]


# ----------------------------------------------------------------------------- longer sequences than in training

TRAIN_LENGTHS = tuple(range(2, 17))  # mixed-length training: each batch draws one of these
TEST_LENGTHS = (8, 16, 17, 20, 32, 64, 128, 256)  # the chapter's length table
LONG_LENGTHS = (64, 128, 256)  # the targets: >= LONG_GOAL exact at these, 4, 8 and 16 times 16
LONG_GOAL = 0.99


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
    return [share_target(f"relative, trained on {trained}: exact, {task}, length {length}", by_length[length],
                         LONG_GOAL)
            for task, by_length in table.items() for length in lengths]


# ----------------------------------------------------------------------------- one model's targets (the command line's)


def measure(model: nn.Module, config: SeqConfig, data: SeqData, train_seconds: float,
            details: bool = True) -> list[Target]:
    """The targets of one model (the command line's): exact match and attention on the source
    on the test set of `data`, and the training time. details=False leaves out the rows
    without a goal (per-position accuracy; filter's attention)."""
    r = evaluate_on(model, *data.test)
    where = f"{config.task}, length {data.test[0].shape[1]}, {len(data.test[0]):,} held-out sequences"
    rows = [
        exact_target(f"exact match, {where}", r),
        Target(f"per position, {where}", "-", pct(r["token_acc"]), None),
        attention_target(f"attention on source, {where}", config.task, r["attention_on_source"]),
        time_target(train_seconds, TIME_BUDGET_S["torch"]),
    ]
    return rows if details else [t for t in rows if t.met is not None]
