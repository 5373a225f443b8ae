"""The one command line of the book: every chapter runs as `python -m toylib.<chapter>`.

The flow is the same everywhere: train a model from the chapter's config (or `--load` a saved
one), measure it against the chapter's targets, print the summary table, and `--save` it.
A chapter's `main` only says which config fields become options and how to train and measure:

    CHAPTER = cli.Chapter("life", "...", LifeConfig, build_model, _train, _measure)
    main = cli.entry_point(CHAPTER)

in the chapter's `measure` room (`toylib/<chapter>/measure.py`); `__main__.py` calls `main`.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from torch import nn

from toylib.device import setup
from toylib.targets import Target, all_met, missed, table
from toylib.train import History, load_checkpoint, save_checkpoint


@dataclasses.dataclass(frozen=True)
class Option:
    """A config field that the command line sets: `--flag VALUE` (a bool field becomes
    `--flag/--no-flag`). Its type and default come from the config class."""

    flag: str | tuple[str, ...]  # "--steps", or ("-t", "--task")
    field: str
    help: str = ""
    choices: Sequence[Any] | None = None


@dataclasses.dataclass(frozen=True)
class Chapter:
    """What a chapter tells the command line."""

    name: str  # the module: python -m toylib.<name>
    description: str
    config_cls: type  # a frozen dataclass with a `seed` field
    model_cls: Callable[[Any], nn.Module]  # model_cls(config) builds the model, for --load
    # train(config, device, progress, args) -> (model, history, info passed on to measure)
    train: Callable[..., tuple[nn.Module, History, dict]]
    # measure(model, config, train_seconds, info, args) -> the chapter's targets
    measure: Callable[..., list[Target]]
    options: Sequence[Option] = ()
    extra_arguments: Callable[[argparse.ArgumentParser], None] | None = None  # options that are not config fields
    base_config: Callable[[argparse.Namespace], Any] | None = None  # the config the options change (default: config_cls())


def parser(chapter: Chapter) -> argparse.ArgumentParser:
    """The chapter's argument parser: its config options, then the options every chapter has."""
    p = argparse.ArgumentParser(prog=f"python -m toylib.{chapter.name}", description=chapter.description)
    defaults = chapter.config_cls()
    # A chapter whose data has a seed of its own (--data-seed, --split-seed) keeps its data when --seed changes.
    data_seeds = [o.flag if isinstance(o.flag, str) else o.flag[0] for o in chapter.options if o.field.endswith("_seed")]
    seed_help = (f"seed of the weights and the batch order ({', '.join(data_seeds)}: the data)" if data_seeds
                 else "seed of the weights and the data")
    for o in (Option("--seed", "seed", seed_help), *chapter.options):
        default = getattr(defaults, o.field)
        flags = (o.flag,) if isinstance(o.flag, str) else o.flag
        if isinstance(default, bool):
            p.add_argument(*flags, dest=o.field, action=argparse.BooleanOptionalAction, default=None, help=o.help)
        else:
            kind = type(default) if default is not None else int
            p.add_argument(*flags, dest=o.field, type=kind, default=None, choices=o.choices,
                           help=f"{o.help} (default {default})")
    if chapter.extra_arguments is not None:
        chapter.extra_arguments(p)
    p.add_argument("--device", default=None, help="cpu, cuda or mps (default: the best there is)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads for torch (default %(default)s)")
    p.add_argument("--save", metavar="PATH", help="save the trained model here")
    p.add_argument("--load", metavar="PATH", help="measure a saved model instead of training one")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def run(argv: Sequence[str] | None, chapter: Chapter) -> list[Target]:
    """Parse `argv`, train or load, measure, print the summary, save. Returns the targets."""
    args = parser(chapter).parse_args(argv)
    device = setup(args.threads, args.device)
    if args.load:
        model, config, extra = load_checkpoint(args.load, chapter.model_cls, chapter.config_cls)
        seconds, info = extra.get("train_seconds", math.nan), {}
        print(f"loaded {args.load}")
    else:
        base = chapter.base_config(args) if chapter.base_config else chapter.config_cls()
        changes = {o.field: getattr(args, o.field) for o in (Option("--seed", "seed"), *chapter.options)}
        config = dataclasses.replace(base, **{k: v for k, v in changes.items() if v is not None})
        model, history, info = chapter.train(config, device, not args.quiet, args)
        seconds = history.seconds
        print(f"trained {history.steps:,} steps in {seconds:.1f} s ({history.stop_reason})")
    t0 = time.perf_counter()
    targets = chapter.measure(model, config, seconds, info, args)
    print(table(targets, machine=None))
    print("every target met" if all_met(targets) else f"targets missed: {'; '.join(missed(targets))}")
    print(f"(measured in {time.perf_counter() - t0:.0f} s)")
    if args.save:
        save_checkpoint(args.save, model.cpu(), config, train_seconds=seconds)
        print(f"saved {args.save}")
    return targets


def benchmark(chapter: Chapter, seed: int, device=None, **changes) -> tuple[list[Target], float]:
    """Train the chapter's default model (with `changes` to its config) from `seed` and measure
    it as its command line does, for benchmarks/run.py: (targets, training seconds). The
    chapter's train and measure get args=None, and skip what has no target."""
    config = dataclasses.replace(chapter.config_cls(seed=seed), **changes)
    model, history, info = chapter.train(config, device, False, None)
    return chapter.measure(model, config, history.seconds, info, None), history.seconds


def entry_point(chapter: Chapter) -> Callable[[Sequence[str] | None], list[Target]]:
    """The chapter's `main(argv=None)`: what `python -m toylib.<chapter>` and its console script run."""

    def main(argv: Sequence[str] | None = None) -> list[Target]:
        return run(argv, chapter)

    main.__doc__ = f"python -m toylib.{chapter.name} [options]: {chapter.description}"
    return main
