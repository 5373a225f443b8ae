"""How far past its training size the maze model solves, and what one solve costs.

    python benchmarks/maze_large.py --profile ordinary     # seeds 0 to 9, 256x256 on seed 0
    python benchmarks/maze_large.py --seeds 5 --first-seed 5 --out /tmp/b   # part of the seeds
    python benchmarks/maze_large.py --merge A.json B.json  # one file of the parts
    python benchmarks/maze_large.py --big-seeds 3          # 256x256 on seeds 0 to 2

For each seed, the chapter's model is trained on 5x5 mazes as the chapter trains it
(`MazeConfig`, that seed), then solves mazes of 32x32, 64x64 and 128x128 tiles of three kinds
(`measure.LARGE_KINDS`), and 256x256 ones on the first `--big-seeds` seeds: each maze alone,
greedily, on one CPU thread, every move checked against BFS. The same mazes for every seed
(`measure.large_mazes`). A seed meets its targets when every one of its mazes is solved by a shortest path;
the rows on time (the slowest loop-free maze of each size against 2 s, 10 s and a minute) are
the machine's: each of those mazes is solved twice, to the same moves, and the faster time is
kept, so that a moment of other work on the machine does not make the row. The result file is `benchmarks/results/maze-large-<path>.json`.

Seed 0's solves are the cost curve, also from 8x8 and 16x16 mazes: per size and kind, the
mean path length, encoder passes, and the encoder's and the decoder's seconds, and the slowest
maze, in the study `maze-cost-<path>.json`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from toylib import results
from toylib.device import profile_env, setup
from toylib.maze import dataset, measure, training
from toylib.maze.config import MazeConfig
from toylib.maze.world import check_solution
from toylib.targets import share_target, time_target

KINDS = measure.LARGE_KINDS  # what each kind is called in the tables (dataset.TREE_KINDS draws them)
COUNTS = {32: 10, 64: 4, 128: 1, 256: 1}  # mazes of each kind per size, per seed
CURVE = {8: 10, 16: 10}  # smaller mazes for the cost curve, seed 0 only
BIG = 256  # solved on the first --big-seeds seeds only
LIMITS = {64: 2.0, 128: 10.0, 256: 60.0}  # seconds for one loop-free maze, from pixels to STOP
COST_HEADER = ("size", "kind", "mazes", "path (moves)", "encoder passes", "encoder (s)", "decoder (s)", "slowest (s)",
               "by a shortest path")  # the means over the mazes, but the slowest


def _seconds(solve: measure.Solve) -> float:
    return solve.encode_s + solve.decode_s


def judge(model, size: int, n: int, cost: list | None) -> list:
    """Solve `n` mazes of each kind at `size`, alone: the seed's targets at this size. Appends
    a row per kind to `cost` (when given): the mean path length, encoder passes, and seconds
    of the encoder and the decoder, and the slowest maze's seconds."""
    targets = []
    slowest = {}
    for kind in KINDS:
        s = measure.large_mazes(size, n, kind)  # the same for every seed and run
        solves = [measure.solve_timed(model, maze) for maze in s.mazes]
        checks = [check_solution(maze, solve.moves) for maze, solve in zip(s.mazes, solves)]
        right = sum(c.optimal for c in checks)
        seconds = [_seconds(solve) for solve in solves]
        if kind == "tree" and size in LIMITS:  # a time row: each maze solved again, the faster kept
            seconds = [min(t, _seconds(measure.solve_timed(model, maze))) for t, maze in zip(seconds, s.mazes)]
        slowest[kind] = max(seconds)
        if cost is not None:
            means = [np.mean(xs) for xs in ([c.shortest for c in checks], [x.passes for x in solves],
                                            [x.encode_s for x in solves], [x.decode_s for x in solves])]
            cost.append((f"{size}x{size}", KINDS[kind], len(solves), *(f"{m:,.0f}" for m in means[:2]),
                         *(f"{m:.3g}" for m in [*means[2:], slowest[kind]]), f"{right} of {len(solves)}"))
        targets.append(share_target(f"solved by a shortest path, {len(s.mazes)} {size}x{size} "
                                    f"({KINDS[kind]})", right / len(s.mazes), 1.0))
    if size in LIMITS:
        targets.append(time_target(slowest["tree"], LIMITS[size], f"one {size}x{size} maze with no loops, "
                                                          f"pixels to STOP (the slowest)"))
    return targets


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    results.seed_options(p)
    p.add_argument("--big-seeds", type=int, default=1, help=f"how many seeds, from seed 0, solve {BIG}x{BIG} mazes")
    args = p.parse_args(argv)
    words = sys.argv[1:] if argv is None else list(argv)
    script = "python benchmarks/maze_large.py"
    if args.merge:
        parts = sorted((results.load(path) for path in args.merge), key=lambda r: r["seeds"][0]["seed"])
        words = results.without(parts[0]["command"].split()[2:], ("--first-seed", "--seeds"))
        record = results.merge(parts, " ".join([script, *words]))
        results.write(record, args.out / results.file_name(record))
        print(f"{len(record['seeds'])} seeds written to {args.out / results.file_name(record)}")
        return record
    want = profile_env(args.profile) if args.profile else {}
    if any(os.environ.get(k) != v for k, v in want.items()):
        os.execve(sys.executable, [sys.executable, __file__, *words], {**os.environ, **want})
    device = setup(threads=1, prefer="cpu")  # solving alone on one thread: what the targets name
    record = results.start("maze", device, profile=args.profile, preset="large",
                           command=" ".join([script, *results.without(words, ["--out"])]))
    path = args.out / results.file_name(record)
    # the cost curve's record, begun now: the commit and the state of the checkout the run started from
    again = [*results.without(words, ("--seeds", "--first-seed", "--big-seeds", "--out")), "--seeds", "1"]
    study = results.start_study("maze-cost", device, COST_HEADER, profile=args.profile,
                                command=" ".join([script, *again]))
    t0 = time.perf_counter()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        config = MazeConfig(seed=seed)
        model, history = training.train(config, dataset.for_config(config), device=device, progress=False)
        first = seed == 0  # the cost curve's model
        cost = [] if first else None
        targets = []
        for size, n in ({**CURVE, **COUNTS} if first else COUNTS).items():
            if size == BIG and seed >= args.big_seeds:
                continue
            judged = judge(model, size, n, cost)
            targets += judged if size in COUNTS else []
        results.add_seed(record, seed, history.seconds, targets)
        results.write(record, path)
        if cost:
            study["rows"] = [[str(c) for c in row] for row in cost]
            results.write(study, args.out / results.file_name(study))
            print(f"the cost curve, seed {seed}: {args.out / results.file_name(study)}")
        right = sum(t.met is not False for t in targets if not t.machine)
        print(f"seed {seed}: trained in {history.seconds:.0f} s; {right} of "
              f"{sum(not t.machine for t in targets)} sets solved by a shortest path; "
              + "; ".join(f"{t.measure}: {t.measured}" for t in targets if t.machine), flush=True)
    print(f"written to {path}; the benchmark took {time.perf_counter() - t0:.0f} s")
    return record


if __name__ == "__main__":
    main()
