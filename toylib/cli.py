"""The one command line of the book: every chapter runs as `python -m toylib.<chapter>`.

The flow is the same everywhere: train a model from the chapter's config (or `--load` a saved
one), measure it against the chapter's targets, print the summary table, and `--save` it.
A chapter only says which config fields become options, and hands over its contract:

    CHAPTER = cli.Chapter("life", "...", LifeConfig, build_model, for_config, train, measure,
                          options=(cli.Option("--steps", "steps", "most training steps"),),
                          presets={"any_size": ANY_SIZE})
    main = cli.entry_point(CHAPTER)

Every chapter also takes `--set field=value ...` for any config field, and `--preset NAME`.

The contract and `main` live in the chapter's `training` room (`toylib/<chapter>/training.py`),
because they name its `train`; `__main__.py` calls `main`, and `toylib.chapters.contract(name)`
finds the contract for the benchmarks.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from torch import nn

from toylib.device import setup
from toylib.targets import Target, all_met, missed, over, seconds_text, table
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
    """What a chapter tells the command line and the benchmark: the same contract in every
    chapter, so that `python -m toylib.<chapter>` and `benchmarks/run.py` treat them alike.

        data = for_config(config)                     # dataset.for_config: built in one place
        model, history = train(config, data=None, device=None, callback=None, progress=True)
        targets = measure(model, config, data, train_seconds, details=True)

    `train` builds the data itself when it gets none. `measure` returns the chapter's targets;
    with details=True it may also print what has no target (a table by length, say), which
    the benchmark, passing False, skips."""

    name: str  # the package: python -m toylib.<name>
    description: str
    config_cls: type  # a frozen dataclass with a `seed` field, whose defaults reach the targets
    build_model: Callable[[Any], nn.Module]  # build_model(config), for --load
    for_config: Callable[[Any], Any]  # for_config(config) -> the data that train and measure share
    train: Callable[..., tuple[nn.Module, History]]
    measure: Callable[..., list[Target]]
    options: Sequence[Option] = ()
    presets: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # --preset NAME: a config the options change
    # benchmark(seed, device, **changes) -> (targets, training seconds), where one seed trains
    # more than one model (sequences: the chapter's whole suite); default: train and measure.
    benchmark: Callable[..., tuple[list[Target], float]] | None = None


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
    if chapter.presets:
        p.add_argument("--preset", choices=list(chapter.presets),
                       help="start from this named config, which the options above then change")
    p.add_argument("--set", nargs="+", default=[], metavar="FIELD=VALUE",
                   help="change any config field, e.g. --set lr=0.003 steps=500")
    p.add_argument("--device", default=None, help="cpu, cuda or mps (default: the best there is)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads for torch (default %(default)s)")
    p.add_argument("--save", metavar="PATH", help="save the trained model here")
    p.add_argument("--load", metavar="PATH", help="measure a saved model instead of training one")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def parse_changes(items: Sequence[str]) -> dict[str, Any]:
    """["grid_size=16", "lr=0.003", "mixer=pool"] -> {"grid_size": 16, "lr": 0.003, "mixer": "pool"}"""
    changes = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"a change is FIELD=VALUE, got {item!r}")
        try:
            changes[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            changes[key] = value  # a plain string
    return changes


def configure(chapter: Chapter, changes: dict[str, Any] | None = None, preset: str | None = None) -> Any:
    """The chapter's config (or its preset), with `changes`; a ValueError names a field the
    config does not have."""
    if preset is not None and preset not in chapter.presets:
        raise ValueError(f"{chapter.name} has no preset {preset!r}; it has {sorted(chapter.presets)}")
    base = chapter.presets[preset] if preset is not None else chapter.config_cls()
    fields = {f.name for f in dataclasses.fields(base)}
    unknown = sorted(set(changes or {}) - fields)
    if unknown:
        # a preset may be of another config class (maze's post model), with fields of its own
        having = [name for name, p in chapter.presets.items()
                  if set(unknown) <= {f.name for f in dataclasses.fields(p)}]
        hint = f" (--preset {' or '.join(having)} has it)" if having else ""
        raise ValueError(f"{type(base).__name__} has no field {', '.join(unknown)}{hint}; "
                         f"its fields: {', '.join(sorted(fields))}")
    return dataclasses.replace(base, **(changes or {}))


def run(argv: Sequence[str] | None, chapter: Chapter) -> list[Target]:
    """Parse `argv`, train or load, measure, print the summary, save. Returns the targets."""
    p = parser(chapter)
    args = p.parse_args(argv)
    device = setup(args.threads, args.device)
    if args.load:
        # a preset may be of another config class (maze's post model): --preset names the class to load into
        preset = getattr(args, "preset", None)
        config_cls = type(chapter.presets[preset]) if preset is not None else chapter.config_cls
        model, config, extra = load_checkpoint(args.load, chapter.build_model, config_cls)
        seconds = extra.get("train_seconds", math.nan)
        data = chapter.for_config(config)  # the data is rebuilt from the config, as training built it
        print(f"loaded {args.load}")
    else:
        options = {o.field: getattr(args, o.field) for o in (Option("--seed", "seed"), *chapter.options)}
        try:
            changes = {**{k: v for k, v in options.items() if v is not None}, **parse_changes(args.set)}
            config = configure(chapter, changes, getattr(args, "preset", None))
        except ValueError as e:
            p.error(str(e))
        data = chapter.for_config(config)
        model, history = chapter.train(config, data, device, progress=not args.quiet)
        seconds = history.seconds
        print(f"trained {history.steps:,} steps in {seconds:.1f} s ({history.stop_reason})")
    t0 = time.perf_counter()
    targets = chapter.measure(model, config, data, seconds)
    print(table(targets, machine=None))
    print("every target met" if all_met(targets) else f"targets missed: {'; '.join(missed(targets))}")
    if over(targets):  # the machine's speed, and what else it ran: said, never a miss
        print(f"over its budget on this machine: {'; '.join(over(targets))}")
    print(f"(measured in {seconds_text(time.perf_counter() - t0)})")
    if args.save:
        save_checkpoint(args.save, model.cpu(), config, train_seconds=seconds)
        print(f"saved {args.save}")
    return targets


def benchmark(chapter: Chapter, seed: int, device=None, preset: str | None = None,
              **changes) -> tuple[list[Target], float]:
    """Train the chapter's default model (or its `preset`, with `changes` to the config) from
    `seed` and measure it as its command line does, without the untargeted details, for
    benchmarks/run.py: (targets, training seconds)."""
    if chapter.benchmark is not None:
        if preset is not None:
            raise ValueError(f"{chapter.name}'s benchmark is its whole suite: it takes no preset")
        return chapter.benchmark(seed, device, **changes)
    config = configure(chapter, {**changes, "seed": seed}, preset)
    data = chapter.for_config(config)
    model, history = chapter.train(config, data, device, progress=False)
    return chapter.measure(model, config, data, history.seconds, details=False), history.seconds


def entry_point(chapter: Chapter) -> Callable[[Sequence[str] | None], list[Target]]:
    """The chapter's `main(argv=None)`: what `python -m toylib.<chapter>` and its console script run."""

    def main(argv: Sequence[str] | None = None) -> list[Target]:
        return run(argv, chapter)

    main.__doc__ = f"python -m toylib.{chapter.name} [options]: {chapter.description}"
    return main
