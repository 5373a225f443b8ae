"""Build the site into _build/html.

    python scripts/build_book.py                  # execute every notebook, then build (the book command)
    python scripts/build_book.py --workers 1      # the same, one notebook at a time (or BOOK_WORKERS=1)
    python scripts/build_book.py --stored-outputs # build from the outputs stored in the notebooks (CI)

Executing: every notebook in _toc.yml runs in jupyter-cache's local-parallel executor, one
more at once than there are CPU cores (--workers): each kernel uses one thread, and with only
as many workers as cores the last chapter waits for another to end (on 2 cores, the three
chapters took 338 s that way and 273 s three at a time). A notebook whose metadata holds
`"toy_book": {"alone": true}` runs first, with the machine to itself, before the others start:
one that trains on every core and times itself against a target counted by the clock (Sokoban)
would otherwise print the time it took beside the other chapters. The others start the
longest-running first (scripts/longest_first.py), so that no long chapter starts last and
runs on alone while a core idles. Each kernel runs in its notebook's
folder, with the cell timeout of _config.yml, into a cache made afresh under _build/ by every
run (the cache's hash sees a notebook's cells, not a change to toylib). Then jupyter-book
renders the pages from that cache (myst-nb's `execute_notebooks: cache`), so every output on
the site comes from this run.

Either way, the build also writes the Colab edition of every chapter into _build/colab/
(_ext/colab.py: plain Markdown, numbers written in, the install cell first and pinned).

Either way, warnings are errors and a cell that raises fails the build: when executing, before
Sphinx starts, naming the notebook with the cell's traceback. (myst-nb would quietly execute a
notebook missing from the cache, one at a time inside Sphinx: this script checks that none is
missing before the build and that none was executed during it.)

_config.yml keeps `execute_notebooks: force` (what a bare `jupyter-book build .` does: every
notebook executed, one after another); this script builds from a copy of the configuration
with the mode it needs.
"""

import argparse
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path, PurePosixPath

import yaml
from jupyter_cache import get_cache
from jupyter_cache.cache.main import JupyterCacheBase
from jupyter_cache.executors.base import ExecutorRunResult
from jupyter_cache.executors.basic import (
    REPORT_LEVEL,
    ExecutionWorkerLocalMProc,
    ExecutionWorkerTempMProc,
    JupyterExecutorLocalMproc,
    ProcessData,
)
from jupyter_cache.executors.utils import copy_assets, single_nb_execution
from longest_first import stored_seconds

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "_build" / ".jupyter_cache"  # removed and made anew by every executing build


def cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def fail(message: str) -> None:
    sys.exit(f"scripts/build_book.py: {message}")


def executed_notebooks(config: dict) -> list:
    """The notebooks of _toc.yml that myst-nb would execute: .ipynb files, and MyST Markdown
    notebooks, less those matching `execute: exclude_patterns`. Each as (path, reader)."""
    from myst_nb.core.read import is_myst_markdown_notebook
    from sphinx_external_toc.parsing import parse_toc_yaml

    site_map = parse_toc_yaml(ROOT / "_toc.yml")
    paths = [ROOT / f"{docname}.ipynb" for docname in site_map] + [ROOT / f"{docname}.md" for docname in site_map]
    paths += [path for pattern in sorted(site_map.globs()) for path in sorted(ROOT.glob(f"{pattern}.ipynb"))]
    excluded = (config.get("execute") or {}).get("exclude_patterns") or []
    found = []
    for path in dict.fromkeys(paths):  # in order, once each
        if not path.is_file() or any(PurePosixPath(path.as_posix()).match(p) for p in excluded):
            continue
        if path.suffix == ".ipynb":
            found.append((path, {"name": "nbformat", "type": "plugin"}))
        elif is_myst_markdown_notebook(path.read_text(encoding="utf8")):
            found.append((path, {"name": "myst_nb_md", "type": "plugin"}))  # myst-nb's reader
    return found


def runs_alone(path: Path) -> bool:
    """Whether the notebook at `path` asks to run with the machine to itself (metadata
    `"toy_book": {"alone": true}`; only .ipynb files can say so)."""
    if path.suffix != ".ipynb":
        return False
    meta = json.loads(path.read_text(encoding="utf8")).get("metadata", {}).get("toy_book", {})
    return meta.get("alone") is True


def _execute_without_widget_state(project_nb, data: ProcessData, cwd: str):
    """nbclient as jupyter-cache runs it, less the widgets' saved state: with it, the static
    page would load the widget scripts and draw each widget frozen as it was when the run
    ended (a progress bar at 24 %, a board no click can change)."""
    return single_nb_execution(project_nb.nb, cwd=cwd, timeout=data.timeout, allow_errors=data.allow_errors,
                               store_widget_state=False)


class NoWidgetStateLocal(ExecutionWorkerLocalMProc):
    @staticmethod
    def execute(project_nb, data: ProcessData):
        return _execute_without_widget_state(project_nb, data, str(Path(project_nb.uri).parent))


class NoWidgetStateTemp(ExecutionWorkerTempMProc):
    @staticmethod
    def execute(project_nb, data: ProcessData):
        with tempfile.TemporaryDirectory() as cwd:
            copy_assets(project_nb.uri, project_nb.assets, cwd)
            return _execute_without_widget_state(project_nb, data, cwd)


class LocalParallel(JupyterExecutorLocalMproc):
    """jupyter-cache's "local-parallel" executor (a pool of processes, each running a notebook
    with nbclient in the notebook's folder and storing it in the cache), with the pool's size
    set: the library's own run_and_cache always opens os.cpu_count() processes."""

    def __init__(self, cache, workers: int, in_temp: bool = False, alone: frozenset = frozenset()):
        super().__init__(cache)
        self.workers = workers
        self.alone = alone  # the URIs of notebooks that run one at a time before the rest
        self.worker = (NoWidgetStateTemp if in_temp else NoWidgetStateLocal)()

    def run_and_cache(self, *, timeout, allow_errors, **_) -> ExecutorRunResult:
        records = self.get_records()  # those not in the cache: every notebook, as it is new
        jobs = [ProcessData(r.pk, r.uri, self.cache, timeout, allow_errors) for r in records]
        multiprocessing.log_to_stderr(REPORT_LEVEL)  # "Executing: ...", "Execution Successful: ..."
        first = [job for job in jobs if job.uri in self.alone]
        rest = sorted((job for job in jobs if job.uri not in self.alone), key=lambda job: -stored_seconds(Path(job.uri)))
        results = self.pool_map(first, 1) + self.pool_map(rest, self.workers)
        return ExecutorRunResult(
            succeeded=[uri for code, uri in results if code == 0],
            excepted=[uri for code, uri in results if code == 1],
            errored=[uri for code, uri in results if code == 2],
        )

    def pool_map(self, jobs: list, workers: int) -> list:
        """Each job in a pool of `workers` processes (each notebook's kernel is a process of
        its own, whatever the pool's size); (code, uri) for each."""
        if not jobs:
            return []
        with multiprocessing.Pool(max(1, min(workers, len(jobs)))) as pool:
            try:
                return pool.map(self.worker, jobs, chunksize=1)
            except BaseException:
                # Ctrl-C: a worker interrupted inside nbclient can keep nbclient's SIGTERM
                # handler, and then the pool's terminate() waits for it forever. Kill the
                # workers; their kernels notice that their parent is gone and exit.
                for child in multiprocessing.active_children():
                    child.kill()
                raise


def execute(notebooks: list, workers: int, execute_config: dict) -> JupyterCacheBase:
    """Execute the notebooks into a fresh cache, `workers` at a time; exit naming every
    notebook that failed. Returns the cache."""
    shutil.rmtree(CACHE, ignore_errors=True)
    CACHE.mkdir(parents=True)
    cache = get_cache(CACHE)
    for path, reader in notebooks:
        cache.add_nb_to_project(str(path), read_data=reader)
    alone = [path for path, _ in notebooks if runs_alone(path)]
    order = f"{len(notebooks) - len(alone)} notebooks, {workers} at a time, the longest-running first"
    if alone:
        order = ", ".join(f"{p.relative_to(ROOT)} alone" for p in alone) + f", then the other {order}"
    print(f"Executing into {CACHE.relative_to(ROOT)}: {order}", flush=True)
    runner = LocalParallel(cache, workers, bool(execute_config.get("run_in_temp")), frozenset(map(str, alone)))
    result = runner.run_and_cache(
        timeout=execute_config.get("timeout", 30),  # myst-nb's defaults
        allow_errors=execute_config.get("allow_errors", False),
    )
    failed = []
    for uri in result.excepted:
        name = Path(uri).relative_to(ROOT)
        traceback = cache.get_project_record(uri).traceback or "(no traceback recorded)"
        cell = traceback.rfind("\nnbclient.exceptions.")  # the cell and its error, not nbclient's frames
        print(f"\n=== {name}: a cell failed ===\n{traceback[cell + 1:]}", file=sys.stderr)
        failed.append(f"{name} (a cell failed)")
    for uri in result.errored:
        failed.append(f"{Path(uri).relative_to(ROOT)} (could not be executed or cached: see the log above)")
    if failed:
        fail("the site was not built: " + "; ".join(failed))
    missing = [str(path.relative_to(ROOT)) for path, _ in notebooks if cache.get_cached_project_nb(str(path)) is None]
    if missing:
        fail(f"not in the cache after executing (changed meanwhile?): {', '.join(missing)}")
    return cache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stored-outputs", action="store_true", help="do not execute the notebooks")
    parser.add_argument(
        "--workers", type=int, default=os.environ.get("BOOK_WORKERS") or cores() + 1,
        help="notebooks executed at once (default: $BOOK_WORKERS, else one more than the CPU cores)",
    )
    args = parser.parse_args()
    # Stopped by SIGTERM (a CI time limit), exit through Python, so that the executor's
    # worker processes are killed with it (below) rather than left running.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if args.workers < 1:
        fail(f"--workers must be at least 1, got {args.workers}")

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    execute_config = config.get("execute") or {}
    if execute_config.get("execute_notebooks") != "force":
        fail("_config.yml no longer says 'execute_notebooks: force' (this script replaces that mode)")

    jb = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT), "--warningiserror", "--keep-going"]
    jb.append("--all")  # Sphinx re-reads every page: an unchanged notebook would keep its old outputs

    cache = None
    if args.stored_outputs:
        execute_config["execute_notebooks"] = "off"
    else:
        cache = execute(executed_notebooks(config), args.workers, execute_config)
        execute_config.update(execute_notebooks="cache", cache=str(CACHE))
        before = {record.pk for record in cache.list_cache_records()}

    # Jupyter Book 1 takes its execution mode from the configuration file only: build from a
    # copy of _config.yml with the mode changed. It finds local extensions relative to the
    # file it reads: the copy names their folders by absolute path.
    sphinx = config.get("sphinx") or {}
    if sphinx.get("local_extensions"):
        sphinx["local_extensions"] = {name: str(ROOT / path) for name, path in sphinx["local_extensions"].items()}
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "_config.yml"
        copy.write_text(yaml.safe_dump({**config, "execute": execute_config}, sort_keys=False))
        code = subprocess.call(jb + ["--config", str(copy)], cwd=ROOT)

    if cache is not None:
        inside = [str(Path(r.uri).relative_to(ROOT)) for r in cache.list_cache_records() if r.pk not in before]
        if inside:
            fail(f"not found in the cache, so myst-nb executed it again inside Sphinx: {', '.join(inside)}")
    sys.exit(code)


if __name__ == "__main__":
    main()
