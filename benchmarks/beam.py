"""Beam search one board at a time against all boards at once, on Sokoban's held-out boards.

    python benchmarks/beam.py                       # train the chapter's policy (about 4 min), then time
    python benchmarks/beam.py --load policy.pt      # a policy saved by `python -m toylib.sokoban --save`
    python benchmarks/beam.py --boards 200 --width 8
    python benchmarks/beam.py --threads 2           # both searches on two CPU threads
    python benchmarks/beam.py --device cuda         # both searches on a GPU

Both searches run on the same solvable held-out boards with the same policy, on one CPU
thread (or `--threads`, or `--device`): `measure.solve_beam` per board (the core's `beam_search`, one prefix
at a time, as the chapter searched before) and `measure.solve_beams` (the core's `beam_search_batch` over
`measure.Frontier`, every board's beams in one forward pass per step). It prints boards per
second for each, their ratio, and on how many boards the two found the same solution; they
should agree on all of them (a board could differ only if batching rounded a logit to a tie
differently), and writes them to `benchmarks/results/beam-<path>.json` (`--out` elsewhere).
Not a test: its times belong to the machine it ran on.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from toylib import results
from toylib.device import pick_device
from toylib.infer import evaluating, model_device
from toylib.sokoban import dataset, measure, training
from toylib.sokoban.config import SokobanConfig
from toylib.train import load_checkpoint


def main(argv: list[str] | None = None) -> float:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--load", metavar="PATH", help="a saved policy (default: train the chapter's own)")
    p.add_argument("--boards", type=int, default=measure.BEAM_BOARDS, help="solvable held-out boards")
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--threads", type=int, default=1, help="CPU threads for both searches (training: one)")
    p.add_argument("--device", default="cpu", help="where both searches run: cpu (default) or cuda")
    p.add_argument("--out", type=Path, default=results.FOLDER, help="where the result file goes")
    args = p.parse_args(argv)
    if args.threads < 1:
        raise ValueError(f"--threads must be at least 1, got {args.threads}")
    torch.set_num_threads(1)
    if args.load:
        model, config, _ = load_checkpoint(args.load, training.CHAPTER.build_model, SokobanConfig)
    else:
        config = SokobanConfig()
    data = dataset.for_config(config)
    if not args.load:
        model, _ = training.train(config, data, device="cpu")
    boards, _ = measure.solvable_boards(data["held_out"], args.boards)
    torch.set_num_threads(args.threads)
    model = model.to(pick_device(args.device))
    with evaluating(model):
        # once each before the clocks start: a GPU loads its kernels and libraries on first use
        measure.solve_beam(model, boards[0], args.width)
        measure.solve_beams(model, boards[:2], args.width)
        t0 = time.perf_counter()
        alone = [measure.solve_beam(model, b, args.width) for b in boards]
        t1 = time.perf_counter()
        together = measure.solve_beams(model, boards, args.width)
        t2 = time.perf_counter()
    per_board, batched = len(boards) / (t1 - t0), len(boards) / (t2 - t1)
    same = sum(a == b for a, b in zip(alone, together))
    where = model_device(model)
    if where.type == "cpu":
        threads = "one CPU thread" if args.threads == 1 else f"{args.threads} CPU threads"
        runs_on = f"{threads} ({torch.backends.cpu.get_cpu_capability()} kernels)"
    else:
        runs_on = f"on {torch.cuda.get_device_name() if where.type == 'cuda' else where}"
    print(f"beam search of width {args.width} on {len(boards):,} solvable held-out boards, {runs_on}")
    print(f"  one board at a time: {t1 - t0:6.2f} s  {per_board:7.1f} boards/s  "
          f"({sum(a is not None for a in alone):,} solved)")
    print(f"  all boards at once:  {t2 - t1:6.2f} s  {batched:7.1f} boards/s  "
          f"({sum(a is not None for a in together):,} solved)")
    print(f"  ratio {batched / per_board:.1f}x; the same solution on {same:,} of {len(boards):,} boards")
    header = ("runs on", "boards", "width", "one at a time, boards/s", "all at once, boards/s", "same solution")
    row = (runs_on, len(boards), args.width, f"{per_board:.1f}", f"{batched:.1f}", f"{same:,} of {len(boards):,}")
    saved = results.save_study("beam", header, [row], script="beam.py", words=sys.argv[1:] if argv is None else argv,
                               device=where, out=args.out)
    print(f"written to {saved}")
    return batched / per_board


if __name__ == "__main__":
    main()
