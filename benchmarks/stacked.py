"""Does training several same-shaped models at once, as one batched computation, save CPU time?

    python benchmarks/stacked.py                      # every case, 4 models each
    python benchmarks/stacked.py --models 8 --steps 30
    python benchmarks/stacked.py --profile ordinary   # with an AVX2 CPU's kernels

For each case, K models of one shape (the four sequence tasks; K seeds of Life's default
model) take the same batches two ways: one model after another, each
with its own AdamW (as the chapters train them), and all at once through `torch.func`
(`stack_module_state`, `functional_call` under `vmap`, the K losses summed, the gradient of
each model clipped alone, one AdamW over the stacked weights, which is K AdamWs, since AdamW
works weight by weight). It prints the time of
a step of all K models both ways, and the largest difference between the two ways' gradients
at the first step, relative to the largest gradient of each weight tensor (float rounding
alone: the two ways compute the same thing), and writes the table to
`benchmarks/results/stacked-<profile>.json` (`--out` elsewhere). One thread, as the chapters
train. Not a test: its times belong to the machine.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import torch
from torch.func import functional_call, stack_module_state, vmap

from toylib import results
from toylib.device import PROFILES, cpu_kernels, profile_env, run_again_with, seed_everything


def sequences(k: int):
    from toylib.sequences import dataset, net, world
    from toylib.sequences.config import SeqConfig

    configs = [SeqConfig(task=t, seed=0) for t in world.TASKS][:k]
    models = [net.SeqTransformer(c) for c in configs]
    streams = [dataset.for_config(c).batches() for c in configs]

    def batches():
        return [tuple(map(torch.from_numpy, next(s))) for s in streams]

    return models, batches, net.sequence_loss


def life(k: int):
    from toylib.life import dataset, net
    from toylib.life.config import LifeConfig

    configs = [LifeConfig(seed=s) for s in range(k)]
    models = [net.build_model(c) for c in configs]
    streams = [dataset.for_config(c).batches() for c in configs]

    def batches():
        return [next(s) for s in streams]

    return models, batches, lambda m, b: net.life_loss(m, b, 0.1)[0]


CASES = {"sequences": sequences, "life": life}


def stack(group: list) -> tuple:
    """K batches, each a tuple of tensors -> one tuple, each tensor (K, ...)."""
    return tuple(torch.stack(parts) for parts in zip(*group))


def clip_per_model(params: dict[str, torch.Tensor], max_norm: float) -> None:
    """`nn.utils.clip_grad_norm_` for each of the K stacked models alone: the gradients of
    model k (row k of every weight) scaled down to a norm of at most `max_norm`."""
    grads = [p.grad for p in params.values() if p.grad is not None]
    norms = torch.stack([g.reshape(len(g), -1).pow(2).sum(1) for g in grads]).sum(0).sqrt()  # (K,)
    scale = (max_norm / (norms + 1e-6)).clamp(max=1.0)  # (K,)
    for g in grads:
        g.mul_(scale.view(-1, *[1] * (g.dim() - 1)))


def two_ways(name: str, k: int, steps: int, grad_clip: float | None = 1.0) -> dict:
    """K models of case `name` trained `steps` steps on the same batches one after another
    (each with its AdamW and its gradient clipping) and all at once (`vmap`, the losses
    summed, one AdamW over the stacked weights, clipping per model). Returns the models of the
    first way ("separate"), the stacked weights of the second ("stacked", each (K, ...)), the
    largest gap between the two ways' first-step gradients relative to each weight's largest
    gradient ("gap"), and each way's milliseconds for a step of every model after the first
    ("times")."""
    seed_everything(0)
    models, make_batches, loss_fn = CASES[name](k)
    batches = [make_batches() for _ in range(steps)]
    separate = copy.deepcopy(models)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in separate]

    def one_by_one(step):
        for m, opt, batch in zip(separate, opts, batches[step]):
            loss = loss_fn(m, batch)
            opt.zero_grad()
            loss.backward()
            if grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(m.parameters(), grad_clip)
            opt.step()

    params = stack_module_state(models)[0]  # every weight (K, ...)
    buffers = dict(models[0].named_buffers())  # fixed masks and tables: the same in every model
    base = copy.deepcopy(models[0]).to("meta")
    stacked_opt = torch.optim.AdamW(list(params.values()), lr=1e-3)

    class Stand(torch.nn.Module):  # the one model `loss_fn` sees, its weights swapped in
        def __init__(self, p, b):
            super().__init__()
            self.p, self.b, self.config = p, b, base.config
            self.anchor = torch.nn.Parameter(torch.zeros(()))  # model_device reads a parameter

        def forward(self, *args, **kwargs):
            return functional_call(base, (self.p, self.b), args, kwargs)

    def loss_of(p, b, batch):
        return loss_fn(Stand(p, b), batch)

    first_grads = {}

    def at_once(step):
        group = batches[step]
        batch = stack(group)  # (K, ...) each
        losses = vmap(loss_of, in_dims=(0, None, 0), randomness="same")(params, buffers, batch)  # (K,)
        stacked_opt.zero_grad()
        losses.sum().backward()  # model k's weights get model k's gradient alone
        if grad_clip is not None:
            clip_per_model(params, grad_clip)
        if step == 0:  # as clipped, as the separate models' gradients are
            first_grads.update({key: p.grad.clone() for key, p in params.items()})
        stacked_opt.step()

    # the first step both ways, from the same weights and batches: their gradients (clipped) are compared
    one_by_one(0)
    at_once(0)
    gap = 0.0
    for i, m in enumerate(separate):
        for key, weight in m.named_parameters():
            scale = weight.grad.abs().max().clamp(min=1e-12)
            gap = max(gap, ((first_grads[key][i] - weight.grad).abs().max() / scale).item())
    times = {}
    for how, run in (("one after another", one_by_one), ("at once", at_once)):
        start = time.perf_counter()
        for step in range(1, steps):
            run(step)
        times[how] = (time.perf_counter() - start) / max(1, steps - 1) * 1000
    return {"separate": separate, "stacked": params, "gap": gap, "times": times}


HEADER = ("case", "models", "one after another", "at once", "speed-up", "largest gradient gap, first step")


def compare(name: str, k: int, steps: int) -> tuple[str, ...]:
    """One row of the table: ms for one step of every model, each way."""
    run = two_ways(name, k, steps)
    times = run["times"]
    row = (name, str(k), f"{times['one after another']:.1f}", f"{times['at once']:.1f}",
           f"{times['one after another'] / times['at once']:.2f}", f"{run['gap']:.1e}")
    print("| " + " | ".join(row) + " |", flush=True)
    return row


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    p.add_argument("--profile", choices=PROFILES, default="native")
    p.add_argument("--out", type=Path, default=results.FOLDER, help="where the result file goes")
    args = p.parse_args(argv)
    run_again_with(profile_env(args.profile), __file__, sys.argv[1:] if argv is None else argv)
    torch.set_num_threads(1)
    print(f"{cpu_kernels()}, one thread; ms for one step of every model")
    print("| " + " | ".join(HEADER) + " |")
    print("|---|---|---|---|---|---|")
    rows = [compare(name, args.models, args.steps) for name in args.cases.split(",")]
    saved = results.save_study("stacked", HEADER, rows, script="stacked.py",
                               words=sys.argv[1:] if argv is None else argv, profile=args.profile, out=args.out)
    print(f"written to {saved}")


if __name__ == "__main__":
    main()
