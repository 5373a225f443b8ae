"""Sokoban's verdict alone: a classifier of start boards (can this board be solved?), trained for
a fixed time, judged on the held-out boards and on the second generator's (issue 25).

    python benchmarks/verdict.py                                 # the chapter's board encoder, 100 s
    python benchmarks/verdict.py --seconds 300 --seed 1
    python benchmarks/verdict.py --block looped --channels 16 --passes 8

It trains on one CPU thread for `--seconds` by the clock (a cosine schedule over that time),
batches of 128 start boards drawn at random from those of `dataset.for_config` with 48,000
start boards (its "starts" and "train" sets, each board under its 8 symmetries), and prints
the accuracy on the 4,000 held-out start boards and on 1,000 boards of the second generator
(`dataset.other_boards`), which it never trains on; a looped block is scored again at half,
twice and three times its passes. The chapter's policy asks the same question with its
nsteps head at the start board, beside learning its moves.

`--block encoder` is the policy's `BoardEncoder` (six 3x3 convolutions over the five planes
and the player's region, pooled to a token) with a logit on top. `--block looped` runs one
block again and again, the board fed back in at every pass (as Bansal et al.'s recurrent
"DeepThinking" networks do) and the state kept on the floor: a wall square holds nothing, so
what spreads, spreads along the floor, as a box and the player do. Not a test: what a run
reaches in its time depends on the machine's speed. It writes its rows to
`benchmarks/results/verdict-native.json` (`--out` elsewhere).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from toylib import results
from toylib.attention import count_parameters
from toylib.device import seed_everything
from toylib.infer import evaluating
from toylib.sokoban import dataset, net
from toylib.sokoban.config import SokobanConfig
from toylib.sokoban.dataset import UNSOLVABLE, SokobanSet
from toylib.sokoban.world import CHANNELS

BATCH = 128
N_STARTS = 48_000  # start boards beside the training boards' own (the chapter draws 24,000)


def start_boards(data: SokobanSet) -> tuple[torch.Tensor, torch.Tensor]:
    """The start board of every entry as planes (n, 5, rows, cols) uint8, and 1.0 where it cannot be solved (n,)."""
    boards = data.inputs(np.arange(len(data)))[1][:, 0]
    return torch.from_numpy(boards), torch.from_numpy(data.nsteps[:, 0] == UNSOLVABLE).float()


class EncoderVerdict(nn.Module):
    """The policy's board encoder, then a logit: unsolvable or not."""

    def __init__(self, channels: int):
        super().__init__()
        policy = SokobanConfig()  # its layers and token width; `channels` may differ
        self.encoder = net.BoardEncoder(channels, policy.conv_layers, policy.d_model, region=True)
        self.head = nn.Linear(policy.d_model, 1)

    def forward(self, planes: torch.Tensor) -> torch.Tensor:
        return self.head(F.gelu(self.encoder(planes)))[:, 0]  # (n,)


class LoopedVerdict(nn.Module):
    """A state of `channels` per square, zero at first, that one block of two 3x3 convolutions
    updates `passes` times from itself and the board, kept to the floor and scaled so that
    its largest value stays under 4 however many passes run; then each channel's maximum and
    mean over the squares, and a logit."""

    def __init__(self, channels: int, passes: int):
        super().__init__()
        self.passes = passes
        self.embed = nn.Conv2d(len(CHANNELS) + 1, channels, 3, padding=1)
        self.mix = nn.Conv2d(2 * channels, channels, 3, padding=1)
        self.update = nn.Conv2d(channels, channels, 3, padding=1)
        self.out = nn.Linear(2 * channels, 64)
        self.head = nn.Linear(64, 1)

    def forward(self, planes: torch.Tensor, passes: int | None = None) -> torch.Tensor:
        x = planes.float()
        x = torch.cat([x, net.walkable(x)], 1)  # (n, 6, rows, cols)
        floor = x[:, 1:2]  # (n, 1, rows, cols)
        board = F.gelu(self.embed(x))  # (n, channels, rows, cols): fed in again at every pass
        state = torch.zeros_like(board)
        for _ in range(self.passes if passes is None else passes):
            state = floor * (state + F.gelu(self.update(F.gelu(self.mix(torch.cat([state, board], 1))))))
            # without a bound the state grows with every pass, and more passes than training
            # ran would read values it never saw
            state = 4 * state / (1 + state.abs().amax((1, 2, 3), keepdim=True))
        pooled = torch.cat([state.amax((2, 3)), state.mean((2, 3))], 1)  # (n, 2 * channels)
        return self.head(F.gelu(self.out(pooled)))[:, 0]  # (n,)


def accuracy(model: nn.Module, boards: torch.Tensor, dead: torch.Tensor, **kwargs) -> float:
    """Percent of boards on which the logit's sign is the verdict (positive: cannot be solved)."""
    with evaluating(model):
        logits = torch.cat([model(boards[i : i + 500], **kwargs) for i in range(0, len(boards), 500)])
    return 100 * ((logits > 0).float() == dead).float().mean().item()


def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--block", choices=("encoder", "looped"), default="encoder")
    p.add_argument("--seconds", type=float, default=100.0, help="training time by the clock")
    p.add_argument("--channels", type=int, default=32)
    p.add_argument("--passes", type=int, default=12, help="passes of the looped block")
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (AdamW)")
    p.add_argument("--seed", type=int, default=0, help="initial weights and batches (the boards are data seed 0's)")
    p.add_argument("--out", type=Path, default=results.FOLDER, help="where the result file goes")
    args = p.parse_args(argv)
    if args.seconds <= 0 or args.channels < 1 or args.passes < 1 or args.lr <= 0:
        raise ValueError("--seconds, --channels, --passes and --lr must be positive")
    torch.set_num_threads(1)
    seed_everything(args.seed)
    data = dataset.for_config(SokobanConfig(n_starts=N_STARTS))
    boards, dead = (torch.cat(t) for t in zip(start_boards(data["starts"]), start_boards(data["train"])))
    held_out = start_boards(data["held_out"])
    other = start_boards(dataset.other_boards(1_000, 0, dataset.start_keys(data)))
    if args.block == "encoder":
        model: nn.Module = EncoderVerdict(args.channels)
    else:
        model = LoopedVerdict(args.channels, args.passes)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    print(f"{args.block}, {args.channels} channels{f', {args.passes} passes' if args.block == 'looped' else ''}: "
          f"{count_parameters(model):,} parameters, {len(boards):,} start boards, "
          f"{args.seconds:.0f} s on one CPU thread", flush=True)
    t0, steps = time.perf_counter(), 0
    while (elapsed := time.perf_counter() - t0) < args.seconds:
        for group in opt.param_groups:  # warm up for 100 steps, then cosine decay over the time
            group["lr"] = args.lr * min(1.0, steps / 100) * 0.5 * (1 + math.cos(math.pi * elapsed / args.seconds))
        i = torch.randint(len(boards), (BATCH,))
        loss = F.binary_cross_entropy_with_logits(model(boards[i]), dead[i])
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        steps += 1
    scores = {"held_out": accuracy(model, *held_out), "other": accuracy(model, *other)}
    print(f"  {steps:,} steps ({steps * BATCH:,} boards): held-out {scores['held_out']:.2f} %, "
          f"second generator {scores['other']:.2f} %")
    rows = [(args.block, f"{steps:,}", f"{scores['held_out']:.2f} %", f"{scores['other']:.2f} %")]
    if args.block == "looped":
        for passes in (args.passes // 2, 2 * args.passes, 3 * args.passes):
            rows.append((f"{args.block}, at {passes} passes", f"{steps:,}", f"{accuracy(model, *held_out, passes=passes):.2f} %",
                         f"{accuracy(model, *other, passes=passes):.2f} %"))
            print(f"  {rows[-1][0]}: held-out {rows[-1][2]}, second generator {rows[-1][3]}")
    saved = results.save_study("verdict", ("block", "steps", "held-out start boards", "second generator"), rows,
                               script="verdict.py", words=sys.argv[1:] if argv is None else argv, out=args.out)
    print(f"written to {saved}")
    return scores


if __name__ == "__main__":
    main()
