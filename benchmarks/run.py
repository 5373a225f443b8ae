"""How many seeds meet every target of each chapter, and how long training takes, on this machine.

    python benchmarks/run.py                          # every chapter, 10 seeds each
    python benchmarks/run.py --seeds 3                # fewer seeds
    python benchmarks/run.py --chapters tictactoe     # some chapters only (comma-separated)
    python benchmarks/run.py --chapters life --set grid_size=16   # a config field changed
    python benchmarks/run.py --chapters life --preset any_size    # one of a chapter's presets
    python benchmarks/run.py --capability avx2        # another CPU's arithmetic (ATEN_CPU_CAPABILITY)
    python benchmarks/run.py --profile ordinary       # an AVX2 CPU's kernels everywhere (toylib.device.PROFILES)

For each seed, `toylib.cli.benchmark` trains the chapter's default model (or a preset, with
`--set` changes) and measures it against the chapter's targets (sequences: the chapter's whole
suite), exactly as the chapter's summary does (on data the model never trained on). A seed
"meets every target" when no target of the model is missed (`toylib.targets.all_met`, the
verdict the chapter's check cell gives: the training time is the machine's, and has its own
column); that verdict is computed from the targets, never read back from printed text. Each
run uses one CPU thread, as the chapters do.

`--capability` (default, avx2, avx512) picks the vector kernels PyTorch uses on the CPU, as the
environment variable ATEN_CPU_CAPABILITY does: another CPU's arithmetic, forced on this one.
`--profile ordinary` does that for oneDNN's convolutions and MKL's products too (AVX2 in all):
the CPU most learners have.
The same seed then trains along another path to other weights, as it would on that CPU, so
a count of seeds holds for a machine only where it holds under several capabilities. Not a
test: it takes a while, and its times belong to the machine it ran on.

Each chapter's run writes a result file, `benchmarks/results/<chapter>[-<preset>]-<path>.json`
(`toylib.results`: the command, commit, date, CPU, kernels and device, and every seed's
targets and training time), rewritten after each seed; the book's pages read their counts,
ranges and times from these files when the book is built. `--out` writes them elsewhere.
A chapter's seeds can run in several processes, one per core (`--first-seed`, `--seeds`,
each with its own `--out`); `--merge A.json B.json ...` then writes their one file, with the
command that measures all of them.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import torch

from toylib import chapters, cli, results
from toylib.device import cpu_kernels, profile_env, run_again_with, setup
from toylib.targets import all_met, format_table

# each chapter's contract (toylib.cli.Chapter), which its training room holds
CHAPTERS = {name: chapters.contract(name) for name in chapters.CHAPTERS}
CAPABILITIES = ("default", "avx2", "avx512")
HEADER = ("chapter", "seed", "train s", "every target", "missed")


def main(argv: list[str] | None = None) -> dict[str, list[bool]]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    results.seed_options(p)
    p.add_argument("--device", default=None)
    p.add_argument("--chapters", default=",".join(CHAPTERS), help=f"comma-separated, of {', '.join(CHAPTERS)}")
    p.add_argument("--preset", help="a named config of the chapter (python -m toylib.<chapter> --help lists them)")
    p.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE",
                   help="change the config (sequences: every model of its suite)")
    p.add_argument("--capability", choices=CAPABILITIES,
                   help="PyTorch's CPU vector kernels (ATEN_CPU_CAPABILITY); default: the best this CPU has")
    args = p.parse_args(argv)
    words = sys.argv[1:] if argv is None else list(argv)
    if args.merge:
        parts = [results.load(path) for path in args.merge]
        whole = results.command(results.without(parts[0]["command"].split()[2:], ("--first-seed", "--seeds")),
                                parts[0]["chapter"])
        record = results.merge(parts, whole)
        results.write(record, args.out / results.file_name(record))
        print(f"{len(record['seeds'])} seeds of {record['chapter']} written to {args.out / results.file_name(record)}")
        return {}
    want = {**(profile_env(args.profile) if args.profile else {}),
            **({"ATEN_CPU_CAPABILITY": args.capability} if args.capability else {})}
    run_again_with(want, __file__, words)
    chapters = args.chapters.split(",")
    unknown = set(chapters) - set(CHAPTERS)
    if unknown:
        p.error(f"unknown chapters {sorted(unknown)}; known: {', '.join(CHAPTERS)}")
    changes = cli.parse_changes(args.set)
    device = setup(threads=1, prefer=args.device)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"{torch.get_num_threads()} thread, device {device}, "
          f"CPU kernels {cpu_kernels()}" + (f", config changes {changes}" if changes else ""))
    t0 = time.perf_counter()
    verdicts: dict[str, list[bool]] = {}
    for name in chapters:
        rows, times, ok = [], [], []
        record = results.start(name, device, profile=args.profile, capability=args.capability, preset=args.preset,
                               changes=changes, command=results.command(words, name))
        path = args.out / results.file_name(record)
        print()
        print(format_table([], HEADER))
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            targets, seconds = cli.benchmark(CHAPTERS[name], seed, device=device, preset=args.preset, **changes)
            ok.append(all_met(targets))
            times.append(seconds)
            # what it missed, by how much (a time over its budget is the machine's: the "train s" column)
            short = [f"{t.measure}: {t.measured}" for t in targets if t.met is False and not t.machine]
            rows.append((name, seed, f"{seconds:.0f}", "yes" if ok[-1] else "no", "; ".join(short) or "-"))
            print(format_table(rows[-1:], HEADER).splitlines()[-1], flush=True)
            results.add_seed(record, seed, seconds, targets)
            results.write(record, path)
        verdicts[name] = ok
        print(f"{name}: {sum(ok)} of {len(ok)} seeds meet every target; training time median "
              f"{statistics.median(times):.0f} s, max {max(times):.0f} s; written to {path}")
    print(f"\nbenchmark took {time.perf_counter() - t0:.0f} s")
    return verdicts


if __name__ == "__main__":
    main()
