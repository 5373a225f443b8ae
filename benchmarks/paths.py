"""Which switches change each chapter's training path on this machine.

    python benchmarks/paths.py                       # every chapter, every switch
    python benchmarks/paths.py --chapters tictactoe  # one chapter

For each chapter, trains its default model from seed 0 for a few dozen steps, in a fresh
process per switch, and prints a fingerprint of the weights (their sum, and a hash of their
bytes). A switch that changes the fingerprint makes that chapter train along another path:
after thousands of steps, to another model, as another CPU (or a GPU) would. Switches:
PyTorch's CPU kernels (ATEN_CPU_CAPABILITY), MKL's instruction set (MKL_ENABLE_INSTRUCTIONS),
oneDNN's (DNNL_MAX_CPU_ISA), two torch threads instead of one, and the ordinary profile (all
three capped at AVX2, toylib.device.PROFILES). It writes the table to
`benchmarks/results/paths-native.json` (`--out` elsewhere). Not a test: the answer
belongs to the CPU it ran on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from toylib import results
from toylib.chapters import CHAPTERS, contract
from toylib.device import PROFILES

SHORT = {"life": {"steps": 60}, "sequences": {"steps": 60}, "tictactoe": {"max_epochs": 2},
         "maze": {"steps": 30}, "sokoban": {"steps": 20}}  # a few seconds of training each
SWITCHES = {
    "this CPU's best": {},
    "ATEN_CPU_CAPABILITY=default": {"ATEN_CPU_CAPABILITY": "default"},
    "ATEN_CPU_CAPABILITY=avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "ATEN_CPU_CAPABILITY=avx512": {"ATEN_CPU_CAPABILITY": "avx512"},
    "MKL_ENABLE_INSTRUCTIONS=AVX2": {"MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "DNNL_MAX_CPU_ISA=AVX2": {"DNNL_MAX_CPU_ISA": "AVX2"},
    "2 threads": {"TOYLIB_PATHS_THREADS": "2"},
    "TOYLIB_PROFILE=ordinary": PROFILES["ordinary"],  # AVX2 in ATen, oneDNN and MKL at once
}


def fingerprint(chapter: str) -> dict:
    """Train `chapter` briefly in this process; its weights' sum and hash."""
    import dataclasses

    import torch

    from toylib.device import setup

    device = setup(threads=int(os.environ.get("TOYLIB_PATHS_THREADS", "1")), prefer="cpu")
    spec = contract(chapter)
    config = dataclasses.replace(spec.config_cls(seed=0), **SHORT[chapter])
    model, _ = spec.train(config, spec.for_config(config), device, progress=False)
    flat = torch.cat([p.detach().double().flatten() for p in model.parameters()])
    return {"sum": round(float(flat.sum()), 6),
            "hash": hashlib.sha256(flat.float().numpy().tobytes()).hexdigest()[:10],
            "kernels": torch.backends.cpu.get_cpu_capability()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--chapters", default=",".join(CHAPTERS))
    p.add_argument("--one", help=argparse.SUPPRESS)  # internal: fingerprint one chapter in this process
    p.add_argument("--out", type=Path, default=results.FOLDER, help="where the result file goes")
    args = p.parse_args()
    if args.one:
        print(json.dumps(fingerprint(args.one)))
        return
    rows = []
    for chapter in args.chapters.split(","):
        if chapter not in CHAPTERS:
            p.error(f"unknown chapter {chapter!r}; known: {', '.join(CHAPTERS)}")
        print(f"\n{chapter}: {', '.join(f'{k}={v}' for k, v in SHORT[chapter].items())}, seed 0")
        base = None
        for name, env in SWITCHES.items():
            out = subprocess.run([sys.executable, __file__, "--one", chapter], env={**os.environ, **env},
                                 capture_output=True, text=True, check=True)
            fp = json.loads(out.stdout.strip().splitlines()[-1])
            base = base or fp
            same = "same path" if fp["hash"] == base["hash"] else "ANOTHER PATH"
            print(f"  {name:30s} kernels {fp['kernels']:8s} sum {fp['sum']:>14.6f}  {fp['hash']}  {same}", flush=True)
            rows.append((chapter, name, fp["kernels"], f"{fp['sum']:.6f}", fp["hash"], same))
    saved = results.save_study("paths", ("chapter", "switch", "kernels", "sum of the weights", "hash", "path"), rows,
                               script="paths.py", words=sys.argv[1:], out=args.out)
    print(f"written to {saved}")


if __name__ == "__main__":
    main()
