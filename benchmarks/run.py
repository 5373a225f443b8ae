"""Time each chapter's training to its target on this machine, and print a table.

    python benchmarks/run.py                 # every chapter, 10 seeds each
    python benchmarks/run.py --seeds 3       # fewer seeds
    python benchmarks/run.py --life-size 16  # the Life chapter at the post's grid size
    python benchmarks/run.py --chapters sequences   # one chapter only
    python benchmarks/run.py --chapters tictactoe

A run "converges" when its trained model meets every target of its chapter's summary
(measured on unseen data, as in the chapter) within the chapter's time budget.
Not a test: it takes a while, and its times belong to the machine it ran on.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import torch

from toylib import life, sequences, tictactoe
from toylib.plot import format_table


def life_rows(seeds: range, size: int, device: str | None):
    rows, times = [], []
    for seed in seeds:
        cfg = life.LifeConfig(grid_size=size, seed=seed)
        model, history, seen = life.train_life(cfg, device=device, progress=False)
        s = life.summarise(model, seen)
        met = [r[3] for r in s.rows(history.seconds, size)]
        ok = all(m in ("yes", "-") for m in met)
        times.append(history.seconds)
        rows.append((f"life {size}x{size}", seed, history.steps, f"{history.seconds:.0f}", f"{100 * s.test_exact:.2f}",
                     f"{100 * s.games_exact:.0f}", f"{100 * s.neighbourhoods_right:.0f}", f"{100 * s.neighbour_attention:.2f}",
                     "yes" if ok else "no"))
        print(format_table(rows[-1:], HEADER).splitlines()[-1], flush=True)
    n_ok = sum(r[-1] == "yes" for r in rows)
    return rows, f"life {size}x{size}: {n_ok}/{len(rows)} seeds converged; training time median {statistics.median(times):.0f} s, max {max(times):.0f} s"


def tictactoe_rows(seeds: range, device: str | None):
    """One row per seed of the default config: the split stays the chapter's (split_seed 0),
    the seed sets the initial weights and the batch order."""
    data = tictactoe.Dataset.build(tictactoe.TicTacToeConfig.split_seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the chapter trains on a CPU: the same arithmetic, so the same runs
    rows, times = [], []
    for seed in seeds:
        model, history = tictactoe.train_tictactoe(tictactoe.TicTacToeConfig(seed=seed), data, device=device, progress=False)
        s = tictactoe.summarise(model.cpu(), data, random_games=0)
        ok = all(r[3] == "yes" for r in s.rows(history.seconds))
        times.append(history.seconds)
        losses = s.exhaustive_x["loss"] + s.exhaustive_o["loss"]
        rows.append(("tictactoe", seed, history.steps, f"{history.seconds:.0f}", f"{100 * s.test.optimal:.2f}",
                     f"{100 * s.everything.optimal:.2f}", losses, "yes" if ok else "no"))
        print(format_table(rows[-1:], TICTACTOE_HEADER).splitlines()[-1], flush=True)
    torch.set_num_threads(threads)
    n_ok = sum(r[-1] == "yes" for r in rows)
    return rows, f"tictactoe: {n_ok}/{len(rows)} seeds met every target; training time median {statistics.median(times):.0f} s, max {max(times):.0f} s"


TICTACTOE_HEADER = ("chapter", "seed", "steps", "train s", "test optimal %", "all 4,520 optimal %", "games lost", "converged")
HEADER = ("chapter", "seed", "steps", "train s", "test exact %", "games %", "3x3 %", "attn on nbrs %", "converged")

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--life-size", type=int, default=life.LifeConfig.grid_size)
    p.add_argument("--device", default=None)
    p.add_argument("--chapters", default="life,sequences,tictactoe", help="comma-separated: life, sequences, tictactoe")
    args = p.parse_args()
    args.chapters = args.chapters.split(",")
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, device {args.device or 'auto'}")
    t0 = time.perf_counter()
    if "life" in args.chapters:
        print(format_table([], HEADER))
        rows, line = life_rows(range(args.seeds), args.life_size, args.device)
        print()
        print(format_table(rows, HEADER))
        print(line)
    if "sequences" in args.chapters:
        # one row per task, implementation (PyTorch, and NumPy for copy and reverse), length and seed
        rows = sequences.benchmark_rows(range(args.seeds), device=args.device or "cpu")
        print()
        print(format_table(rows, sequences.BENCHMARK_HEADER))
        for impl in ("torch", "numpy"):
            mine = [r for r in rows if r[2] == impl]
            times = [float(r[6]) for r in mine]
            print(f"sequences {impl}: {sum(r[-1] == 'yes' for r in mine)}/{len(mine)} runs converged; "
                  f"training time median {statistics.median(times):.1f} s, max {max(times):.1f} s")
    if "tictactoe" in args.chapters:
        print()
        print(format_table([], TICTACTOE_HEADER))
        rows, line = tictactoe_rows(range(args.seeds), args.device)
        print()
        print(format_table(rows, TICTACTOE_HEADER))
        print(line)
    print(f"benchmark took {time.perf_counter() - t0:.0f} s")
