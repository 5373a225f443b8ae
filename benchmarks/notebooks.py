"""Where the book's time goes: each chapter's notebook executed alone, its wall and CPU seconds,
and its slowest cells. It writes `benchmarks/results/notebooks-<profile>.json` (`--out` elsewhere).

    python benchmarks/notebooks.py                    # every notebook of _toc.yml, one after another
    python benchmarks/notebooks.py --only maze,life   # some of them (names without .ipynb)
    python benchmarks/notebooks.py --cells 5          # the 5 slowest cells of each (default 3)
    python benchmarks/notebooks.py --profile ordinary # with the kernels of an AVX2 CPU (toylib.device.PROFILES)

Each notebook runs in a kernel of its own (`jupyter execute`, into a temporary copy: the book's
stored outputs are left alone) with nothing else started beside it, so that its CPU seconds
(user and system, of the kernel and every process it starts) say how much work it is. The
book command and the test command run several notebooks at once on the machine's cores: they
cannot take less wall time than the sum of these CPU seconds divided by the cores. Not a test:
its times belong to the machine it ran on, and to what else that machine was doing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toylib import results
from toylib.device import PROFILES, cpu_cores, profile_env, run_again_with

ROOT = Path(__file__).resolve().parent.parent


def notebooks() -> list[Path]:
    """The notebooks of _toc.yml, in its order."""
    from sphinx_external_toc.parsing import parse_toc_yaml

    site_map = parse_toc_yaml(ROOT / "_toc.yml")
    return [ROOT / f"{name}.ipynb" for name in site_map if (ROOT / f"{name}.ipynb").is_file()]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cell_seconds(path: Path) -> list[tuple[float, int, str]]:
    """(seconds, index, first line) of each executed code cell, from the timing nbclient records."""
    cells = []
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        timing = cell.get("metadata", {}).get("execution", {})
        if cell["cell_type"] != "code" or "shell.execute_reply" not in timing:
            continue
        start, end = (datetime.datetime.fromisoformat(timing[k].replace("Z", "+00:00"))
                      for k in ("iopub.execute_input", "shell.execute_reply"))
        first = next((line for line in "".join(cell["source"]).splitlines() if line and not line.startswith("#")), "")
        cells.append(((end - start).total_seconds(), i, first.strip()[:60]))
    return sorted(cells, reverse=True)


def main(argv: list[str] | None = None) -> dict[str, tuple[float, float]]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", help="comma-separated notebook names (default: every one in _toc.yml)")
    p.add_argument("--cells", type=int, default=3, help="slowest cells to list per notebook")
    p.add_argument("--timeout", type=int, default=1800, help="seconds a cell may take")
    p.add_argument("--profile", choices=PROFILES, default="native",
                   help="the CPU profile the kernels compute with (default: this CPU's best)")
    p.add_argument("--out", type=Path, default=results.FOLDER, help="where the result file goes")
    args = p.parse_args(argv)
    paths = notebooks()
    if args.only:
        wanted = args.only.split(",")
        unknown = set(wanted) - {path.stem for path in paths}
        if unknown:
            p.error(f"unknown notebooks {sorted(unknown)}; known: {', '.join(path.stem for path in paths)}")
        paths = [path for path in paths if path.stem in wanted]
    jupyter = Path(sys.executable).parent / "jupyter"
    # the kernels run with the profile, and so does this process, whose kernels the result names
    run_again_with(profile_env(args.profile), __file__, sys.argv[1:] if argv is None else argv)
    env = dict(os.environ)
    print(f"{cpu_cores()} cores, CPU profile {args.profile}; each notebook alone, one after another")
    print("| notebook | wall s | CPU s | slowest cells (s) |")
    print("|---|---|---|---|")
    found, total_wall, total_cpu, rows = {}, 0.0, 0.0, []
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            copy = Path(tmp) / path.name
            shutil.copy(path, copy)
            cpu0, t0 = children_cpu(), time.perf_counter()
            # in the notebook's own folder, as the book runs it
            done = subprocess.run([str(jupyter), "execute", "--inplace", f"--timeout={args.timeout}", str(copy)],
                                  cwd=path.parent, capture_output=True, text=True, env=env)
            wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
            if done.returncode:
                sys.exit(f"{path.name} failed:\n{done.stderr[-3000:]}")
            slow = "; ".join(f"[{i}] {first} {s:.0f}" for s, i, first in cell_seconds(copy)[: args.cells])
            print(f"| {path.stem} | {wall:.0f} | {cpu:.0f} | {slow} |", flush=True)
            rows.append((path.stem, f"{wall:.0f}", f"{cpu:.0f}", slow))
            found[path.stem] = wall, cpu
            total_wall, total_cpu = total_wall + wall, total_cpu + cpu
    cores = cpu_cores()
    print(f"| total | {total_wall:.0f} | {total_cpu:.0f} | at least {total_cpu / cores:.0f} s of wall time "
          f"on {cores} cores |")
    rows.append(("total", f"{total_wall:.0f}", f"{total_cpu:.0f}", ""))
    saved = results.save_study("notebooks", ("notebook", "wall s", "CPU s", "slowest cells (s)"), rows,
                               script="notebooks.py", words=sys.argv[1:] if argv is None else argv,
                               profile=args.profile, out=args.out)
    print(f"written to {saved}")
    return found


if __name__ == "__main__":
    main()
