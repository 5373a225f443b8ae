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

import argparse
import dataclasses
import datetime
import json
import os
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import torch

from toylib.device import PROFILES, cpu_kernels, cpu_name
from toylib.targets import Floor, Target, all_met, goal_text, missed, over

FOLDER = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
KEYS = ("chapter", "preset", "changes", "path", "command", "commit", "dirty", "date", "cpu", "cores", "torch",
        "kernels", "device", "seeds")
PATHS = {"ordinary": "the ordinary profile (AVX2)", "native": "this CPU's own kernels", "default": "ATen's default kernels",
         "avx2": "AVX2 kernels", "avx512": "AVX-512 kernels", "gpu": "a GPU"}


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


def without(words: Sequence[str], flags: Sequence[str]) -> list[str]:
    """`words` (a command's arguments) without each of `flags` and its value."""
    kept, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in flags:
            skip = True
        elif not word.startswith(tuple(f"{f}=" for f in flags)):
            kept.append(word)
    return kept


def command(words: Sequence[str], chapter: str) -> str:
    """The command that writes this chapter's file again: `words` (run.py's arguments) for
    this chapter alone, without where the files go."""
    return " ".join(["python benchmarks/run.py", "--chapters", chapter, *without(words, ("--chapters", "--out"))])


def seed_options(p: argparse.ArgumentParser) -> None:
    """The options of a benchmark over seeds (benchmarks/run.py, benchmarks/maze_large.py):
    which seeds, the CPU profile, where the files go, and merging the files of runs that
    measured some seeds each."""
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--profile", choices=PROFILES, help="a CPU profile: the kernels of PyTorch, oneDNN and MKL")
    p.add_argument("--out", type=Path, default=FOLDER, help="where the result files go")
    p.add_argument("--merge", nargs="+", type=Path, metavar="FILE",
                   help="write one result file of these runs' seeds into --out, and stop")


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


def start_study(name: str, device: torch.device | str, header: Sequence[str], *, profile: str | None = None,
                command: str = "") -> dict:
    """A new record of a study that measures a table, not seeds against targets (its rows
    are added as they are measured): `benchmarks/maze_embed.py`."""
    record = start(name, device, profile=profile, command=command)
    del record["seeds"]
    return {**record, "header": list(header), "rows": []}


def save_study(name: str, header: Sequence[str], rows: Sequence[Sequence], *, script: str, words: Sequence[str],
               profile: str | None = None, device: torch.device | str = "cpu", out: Path = FOLDER) -> Path:
    """Write a study's table (`header`, `rows`, each cell its str) to `out`/`<name>-<path>.json`,
    with the command that measured it (`script` and its arguments `words`, without --out):
    how the benchmarks that print a table keep it. Returns the file's path."""
    record = start_study(name, device, header, profile=profile,
                         command=" ".join([f"python benchmarks/{script}", *without(words, ["--out"])]))
    record["rows"] = [[str(c) for c in row] for row in rows]
    if any(len(row) != len(header) for row in record["rows"]):
        raise ValueError(f"every row of {name} needs {len(header)} cells, one per column of {list(header)}")
    path = out / file_name(record)
    write(record, path)
    return path


def load_study(name: str, path: str, folder: Path = FOLDER) -> dict:
    """A study's result file: `name` on the arithmetic `path`."""
    file = folder / f"{name}-{path}.json"
    record = _read(file)
    if not record.get("rows") or any(len(r) != len(record.get("header", ())) for r in record["rows"]):
        raise ValueError(f"the result file {file} has no rows, or rows that do not fit its header")
    return record


def add_seed(record: dict, seed: int, seconds: float, targets: Iterable[Target]) -> None:
    """One seed's outcome: its training time and its targets, judged as the chapter judges them."""
    targets = list(targets)
    record["seeds"].append({
        "seed": seed, "train_s": round(float(seconds), 2), "every_target": all_met(targets),
        "missed": missed(targets), "over": over(targets), "targets": [dataclasses.asdict(t) for t in targets],
    })


SAME = ("chapter", "preset", "changes", "path", "commit", "dirty", "cpu", "cores", "torch", "kernels", "device")


def merge(records: Sequence[Mapping], command: str) -> dict:
    """One record of the seeds that several runs of one benchmark measured (the same chapter,
    path, commit, machine and kernels; no seed twice), such as seeds 0 to 4 and 5 to 9 run
    side by side to use every core. `command` is the one command that measures them all; the
    parts' own commands are kept under "parts". Its date is the last part's."""
    if len(records) < 2:
        raise ValueError("merge takes two records or more")
    differ = [k for k in SAME if any(r[k] != records[0][k] for r in records)]
    if differ:
        raise ValueError(f"the records differ in {differ}: they are not runs of one benchmark")
    seeds = [s["seed"] for r in records for s in r["seeds"]]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"a seed is in two records: {sorted(seeds)}")
    merged = {**records[0], "command": command, "date": max(r["date"] for r in records),
              "parts": [r["command"] for r in records]}
    merged["seeds"] = sorted((s for r in records for s in r["seeds"]), key=lambda s: s["seed"])
    return merged


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


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read the result file {path}: {exc}") from None


def load(path: Path | str) -> dict:
    """A result file, checked to hold what the book reads."""
    path = Path(path)
    record = _read(path)
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
    """The row of `target_rows` whose measure contains `measure`: exactly one must."""
    found = [r for r in target_rows(record) if measure in r["measure"]]
    if len(found) != 1:
        raise ValueError(f"{len(found)} targets of {record['chapter']} contain {measure!r}: "
                         f"{[r['measure'] for r in target_rows(record)]}")
    return found[0]


def _between(low: str, high: str) -> str:
    """"low to high", or the one value when they are the same."""
    return low if low == high else f"{low} to {high}"


def seconds_range(record: Mapping) -> str:
    """The training times of a record, "80 to 90 s" (whole seconds)."""
    low, high = train_range(record)
    low, high = round(low), round(high)
    return f"{low} s" if low == high else f"{low} to {high} s"


def date_text(record: Mapping) -> str:
    """"28 November 2026"."""
    day = datetime.datetime.fromisoformat(record["date"])
    return f"{day.day} {day:%B %Y}"


def seeds_missing(record: Mapping) -> str:
    """The seeds that missed a target of the model: "none", "seed 6", "seeds 2 and 6"."""
    seeds = [str(s["seed"]) for s in record["seeds"] if not s["every_target"]]
    if not seeds:
        return "none"
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {', '.join(seeds[:-1])} and {seeds[-1]}"


def fraction(part: int, whole: int) -> str:
    return f"{part} of {whole}"


def resolve(spec: str, folder: Path = FOLDER) -> str:
    """What the book's `{bench}` role shows for `spec`, "chapter[/preset]:path:what[:measure]":

    count: seeds that met every target ("10 of 10"); seeds: "0 to 9"; train: training time per
    seed ("80 to 90 s"); misses: the seeds that missed a target ("seed 6"); date: "28 November
    2026"; range:<measure>: the lowest and highest value of the target whose measure contains <measure>
    ("97.88 % to 98.80 %"); met:<measure>: seeds that met its goal; floor:<measure>: seeds that
    held its floor; lowest:<measure> and highest:<measure>: one end of its range; goal:<measure>:
    its goal as the benchmark judged it, a floor by its figure alone ("99 %" for ">= 99 %")."""
    parts = spec.split(":", 3)
    if len(parts) < 3:
        raise ValueError(f"a bench spec is chapter[/preset]:path:what[:measure], got {spec!r}")
    who, path, what = parts[:3]
    measure = parts[3] if len(parts) == 4 else None
    chapter, _, preset = who.partition("/")
    record = find(chapter, path, preset or None, folder)
    simple = {"count": lambda: fraction(*count(record)), "seeds": lambda: seeds_text(record),
              "train": lambda: seconds_range(record), "misses": lambda: seeds_missing(record),
              "date": lambda: date_text(record)}
    if what in simple:
        if measure is not None:
            raise ValueError(f"{what} takes no measure, got {spec!r}")
        return simple[what]()
    per_target = {"range": lambda r: _between(r["lowest"], r["highest"]), "lowest": lambda r: r["lowest"],
                  "highest": lambda r: r["highest"], "met": lambda r: fraction(r["met"], r["seeds"]),
                  "floor": lambda r: fraction(r["floors_held"], r["seeds"]),
                  "goal": lambda r: r["goal"].removeprefix(">= ")}
    if what not in per_target:
        raise ValueError(f"unknown bench value {what!r} in {spec!r}; known: {', '.join([*simple, *per_target])}")
    if not measure:
        raise ValueError(f"{what} needs a measure: {spec!r}")
    row = target_row(record, measure)
    if what == "floor" and not row["floor"]:
        raise ValueError(f"{row['measure']!r} has no floor ({spec!r})")
    return per_target[what](row)


def path_label(record: Mapping) -> str:
    """A record's arithmetic path as a column names it: "ordinary (AVX2)", "native (AVX512)"."""
    if record["path"] == "gpu":
        return f"GPU ({record['device']})"
    kernels = re.match(r"ATen (\w+)", record["kernels"])
    return f"{record['path']} ({kernels.group(1) if kernels else record['kernels']})"


def table(chapter: str, paths: Sequence[str], preset: str | None = None, folder: Path = FOLDER,
          every_row: bool = False) -> tuple[list[str], list[list[str]], list[dict]]:
    """The results page's table of a chapter, a column per arithmetic path in `paths`: the seeds
    that met every target and the training time per seed; then each target that some seed
    missed (its goal and floor; per path, the seeds that met it and the range measured), and
    one row for the targets every seed met (a row each with `every_row`). Returns (header,
    rows, the records read)."""
    records = [find(chapter, path, preset, folder) for path in paths]
    header = ["", "goal"] + [path_label(r) for r in records]
    rows = [["every target", ""] + [f"{fraction(*count(r))} seeds" for r in records],
            ["training per seed", ""] + [seconds_range(r) for r in records]]
    per_path = [{row["measure"]: row for row in target_rows(r)} for r in records]
    always = 0
    for measure, first in per_path[0].items():
        found = [p.get(measure) for p in per_path]
        if not every_row and all(f is not None and f["met"] == f["seeds"] for f in found):
            always += 1
            continue
        floor = Floor(**first["floor"]) if first["floor"] else None
        goal = goal_text(Target(measure, first["goal"], "", False, floor=floor))
        rows.append([measure, goal] + ["" if f is None else f"{fraction(f['met'], f['seeds'])}: "
                                       f"{_between(f['lowest'], f['highest'])}" for f in found])
    if always:
        rows.append([f"the other {always} targets" if always < len(per_path[0]) else f"all {always} targets",
                     ""] + ["met by every seed"] * len(records))
    return header, rows, records
