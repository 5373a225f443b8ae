"""The benchmark's result files: what `benchmarks/run.py` writes, and what the book reads.

A result file holds one chapter's benchmark on one arithmetic path: the command that ran it,
the commit, the date, the CPU, its kernels and the device, and for every seed its training
time and its targets (`toylib.targets.Target`, as data). The book's pages take their seed
counts, ranges and times from these files when the book is built (the book's extension,
`_ext/toybook.py`), so no count over seeds is typed by hand.

    record = start("maze", device, profile="ordinary", command="python benchmarks/run.py ...")
    add_seed(record, 0, 84.2, targets)
    write(record, FOLDER / file_name(record))
    count(load(path))          # (seeds that met every target, seeds)
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import torch

from toylib.device import cpu_kernels
from toylib.targets import Target, all_met, missed, over

FOLDER = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
KEYS = ("chapter", "preset", "changes", "path", "command", "commit", "dirty", "date", "cpu", "cores", "torch",
        "kernels", "device", "seeds")
PATHS = {"ordinary": "the ordinary profile (AVX2)", "native": "this CPU's own kernels", "default": "ATen's default kernels",
         "avx2": "AVX2 kernels", "avx512": "AVX-512 kernels", "gpu": "a GPU"}


def cpu_name() -> str:
    """The CPU's model, as the system names it ("AMD EPYC 9B14"), or the machine's kind."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_state(root: Path = FOLDER.parent.parent) -> tuple[str, bool]:
    """(the commit checked out at `root`, whether its tracked files differ from it); ("", False)
    outside a git checkout."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                check=True).stdout.strip()
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                 capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "", False
    return commit, bool(changed)


def path_name(device: torch.device | str, profile: str | None = None, capability: str | None = None) -> str:
    """The arithmetic path a run took, as its file names it: "gpu" on a GPU, else the CPU
    profile ("ordinary", "native"), else ATen's capability ("avx2"), else "native"."""
    if torch.device(device).type != "cpu":
        return "gpu"
    return profile or capability or "native"


def command(words: Sequence[str], chapter: str) -> str:
    """The command that writes this chapter's file again: `words` (run.py's arguments) for
    this chapter alone, without where the files go."""
    kept, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in ("--chapters", "--out"):
            skip = True
        elif not word.startswith(("--chapters=", "--out=")):
            kept.append(word)
    return " ".join(["python benchmarks/run.py", "--chapters", chapter, *kept])


def start(chapter: str, device: torch.device | str, *, profile: str | None = None, capability: str | None = None,
          preset: str | None = None, changes: Mapping | None = None, command: str = "") -> dict:
    """A new record of a chapter's benchmark, with no seed yet."""
    commit, dirty = git_state()
    return {
        "chapter": chapter, "preset": preset, "changes": {k: repr(v) for k, v in (changes or {}).items()},
        "path": path_name(device, profile, capability), "command": command, "commit": commit, "dirty": dirty,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_name(), "cores": os.cpu_count(), "torch": torch.__version__, "kernels": cpu_kernels(),
        "device": str(torch.device(device)), "seeds": [],
    }


def add_seed(record: dict, seed: int, seconds: float, targets: Iterable[Target]) -> None:
    """One seed's outcome: its training time and its targets, judged as the chapter judges them."""
    targets = list(targets)
    record["seeds"].append({
        "seed": seed, "train_s": round(float(seconds), 2), "every_target": all_met(targets),
        "missed": missed(targets), "over": over(targets), "targets": [dataclasses.asdict(t) for t in targets],
    })


def file_name(record: Mapping) -> str:
    """`<chapter>[-<preset>][-<field>=<value>...]-<path>.json`."""
    parts = [record["chapter"], *([record["preset"]] if record["preset"] else []),
             *(f"{k}={v}" for k, v in sorted(record["changes"].items())), record["path"]]
    name = "-".join(parts)
    return re.sub(r"[^\w.=-]", "_", name) + ".json"


def write(record: Mapping, path: Path) -> None:
    """Write `record` to `path` whole: a reader never finds half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part")
    part.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    part.replace(path)


def load(path: Path | str) -> dict:
    """A result file, checked to hold what the book reads."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read the result file {path}: {exc}") from None
    lacking = [k for k in KEYS if k not in record]
    if lacking:
        raise ValueError(f"the result file {path} lacks {lacking}")
    if not record["seeds"]:
        raise ValueError(f"the result file {path} has no seed")
    return record


def find(chapter: str, path: str, preset: str | None = None, folder: Path = FOLDER) -> dict:
    """The result file of `chapter` (its default model, or `preset`) on the arithmetic `path`."""
    if path not in PATHS:
        raise ValueError(f"unknown path {path!r}; known: {', '.join(PATHS)}")
    name = "-".join([chapter, *([preset] if preset else []), path]) + ".json"
    if not (folder / name).exists():
        have = sorted(p.name for p in folder.glob("*.json")) if folder.exists() else []
        raise ValueError(f"no result file {name} in {folder}; there are {have}")
    return load(folder / name)


def count(record: Mapping) -> tuple[int, int]:
    """(seeds whose model met every target, seeds)."""
    return sum(s["every_target"] for s in record["seeds"]), len(record["seeds"])


def seeds_text(record: Mapping) -> str:
    """The seeds a record covers: "0 to 9", or "3" for one."""
    seeds = [s["seed"] for s in record["seeds"]]
    return str(seeds[0]) if len(seeds) == 1 else f"{min(seeds)} to {max(seeds)}"


def train_range(record: Mapping) -> tuple[float, float]:
    """The shortest and the longest training, in seconds."""
    times = [s["train_s"] for s in record["seeds"]]
    return min(times), max(times)


NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def _value(text: str) -> tuple[float, str]:
    """A measured value's order: by its first number ("98.77 %", "3 of 4"), then by its text
    ("yes", "< 1e-6")."""
    found = NUMBER.search(text)
    return (float(found.group(0).replace(",", "")) if found else 0.0), text


def target_rows(record: Mapping) -> list[dict]:
    """Each judged target of the model across seeds: its measure, goal (and floor), how many
    seeds met it, and the lowest and highest value measured, as the summary printed them."""
    rows: dict[str, dict] = {}
    for seed in record["seeds"]:
        for t in seed["targets"]:
            if t["met"] is None or t["machine"]:
                continue
            row = rows.setdefault(t["measure"], {"measure": t["measure"], "goal": t["goal"], "floor": t.get("floor"),
                                                 "met": 0, "floors_held": 0, "seeds": 0, "values": []})
            row["seeds"] += 1
            row["met"] += bool(t["met"])
            row["floors_held"] += bool(t.get("floor") and t["floor"]["met"])
            row["values"].append(t["measured"])
    for row in rows.values():
        values = sorted(row.pop("values"), key=_value)
        row["lowest"], row["highest"] = values[0], values[-1]
    return list(rows.values())


def target_row(record: Mapping, measure: str) -> dict:
    """The row of `target_rows` whose measure starts with `measure`: exactly one must."""
    found = [r for r in target_rows(record) if r["measure"].startswith(measure)]
    if len(found) != 1:
        raise ValueError(f"{len(found)} targets of {record['chapter']} start with {measure!r}: "
                         f"{[r['measure'] for r in target_rows(record)]}")
    return found[0]
