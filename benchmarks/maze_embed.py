"""What the maze chapter's post model gains from learned embeddings, at the chapter's budget.

    python benchmarks/maze_embed.py                   # seeds 0 to 2, raw numbers then embeddings
    python benchmarks/maze_embed.py --seeds 1 --steps 200
    python benchmarks/maze_embed.py --profile ordinary

The post's architecture (`PostMazeConfig`), trained the chapter's way (AdamW, peak learning
rate 2e-3, 100 warm-up steps, cosine decay, batches of 64, the gradient's norm clipped to 1,
padding left out of the loss, the best of the validation checks kept), once fed its raw
numbers and once through learned embeddings (`embed=True`), on one CPU thread; then solved
greedily on the chapter's 1,000 test mazes. It writes `benchmarks/results/maze-embed-<path>.json`
(`toylib.results.write_study`), which the maze chapter shows as its table.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from toylib import results
from toylib.device import PROFILES, profile_env, setup
from toylib.maze import dataset, measure, training
from toylib.maze.config import MazeConfig, PostMazeConfig
from toylib.targets import pct

HEADER = ("inputs", "seed", "solved", "by a shortest path", "token accuracy (real tokens)", "training")


def main(argv: list[str] | None = None) -> list[list[str]]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--profile", choices=PROFILES, help="a CPU profile: the kernels of PyTorch, oneDNN and MKL")
    p.add_argument("--out", type=Path, default=results.FOLDER, help="where the result file goes")
    args = p.parse_args(argv)
    words = sys.argv[1:] if argv is None else list(argv)
    want = profile_env(args.profile) if args.profile else {}
    if any(os.environ.get(k) != v for k, v in want.items()):
        os.execve(sys.executable, [sys.executable, __file__, *words], {**os.environ, **want})
    device = setup(threads=1, prefer="cpu")
    splits = dataset.for_config(MazeConfig())  # the chapter's mazes, the same for every run
    record = results.start_study("maze-embed", device, HEADER, profile=args.profile,
                                 command=" ".join(["python benchmarks/maze_embed.py", *results.without(words, ["--out"])]))
    path = args.out / results.file_name(record)
    for embed in (False, True):
        for seed in range(args.seeds):
            config = PostMazeConfig(embed=embed, pad_as_stop=False, batch_size=64, lr=2e-3, grad_clip=1.0, warmup=100,
                                    schedule="cosine", steps=args.steps, eval_every=400, stop_at=None, seed=seed)
            model, history = training.train(config, splits, device=device, progress=False)
            s = measure.score(model, splits["test"])
            row = ["learned embeddings" if embed else "raw numbers (the post's)", str(seed), pct(s.solved, 1),
                   pct(s.shortest, 1), pct(s.token_accuracy, 1), f"{history.seconds:.0f} s"]
            record["rows"].append(row)
            results.write(record, path)
            print("  ".join(row), flush=True)
    return record["rows"]


if __name__ == "__main__":
    main()
