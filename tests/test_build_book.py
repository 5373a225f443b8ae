"""The book build's scheduling: which notebooks run with the machine to themselves."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
build_book = pytest.importorskip("build_book")  # needs jupyter-cache and myst-nb (the pinned environment)


def notebook(tmp_path: Path, name: str, metadata: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"cells": [], "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_a_notebook_runs_alone_only_when_its_metadata_says_so(tmp_path):
    assert build_book.runs_alone(notebook(tmp_path, "a.ipynb", {"toy_book": {"alone": True}}))
    assert not build_book.runs_alone(notebook(tmp_path, "b.ipynb", {}))
    assert not build_book.runs_alone(notebook(tmp_path, "c.ipynb", {"toy_book": {"alone": "yes"}}))
    md = tmp_path / "d.md"
    md.write_text("# a page\n")
    assert not build_book.runs_alone(md)


def test_the_chapter_timed_on_every_core_runs_alone_and_the_others_do_not():
    # Sokoban times its data and its two side-by-side trainings against a clock target:
    # beside the other chapters that row would measure the build, not the chapter.
    alone = {path.name for path, _ in build_book.executed_notebooks(build_book.yaml.safe_load(
        (ROOT / "_config.yml").read_text())) if build_book.runs_alone(path)}
    assert alone == {"sokoban.ipynb"}


def test_executing_saves_no_widget_state(tmp_path):
    """A widget's saved state would draw it frozen on the static page (a progress bar at 24 %)."""
    nb = {"cells": [{"cell_type": "code", "id": "slider", "metadata": {}, "execution_count": None, "outputs": [],
                     "source": "import ipywidgets\nipywidgets.IntSlider(3)"}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "w.ipynb"
    path.write_text(json.dumps(nb))
    execute_notebook = pytest.importorskip("execute_notebook")
    execute_notebook.main([str(path)])
    done = json.loads(path.read_text())
    assert "widgets" not in done["metadata"]
    assert "application/vnd.jupyter.widget-view+json" in done["cells"][0]["outputs"][0]["data"]


def test_the_book_extension_writes_each_inline_script_once():
    """sphinx-thebe's settings reached every page twice: a console error (THEBE_JS_URL declared twice)."""
    sys.path.insert(0, str(ROOT / "_ext"))
    toybook = pytest.importorskip("toybook")
    from sphinx.builders.html._assets import _JavaScript

    scripts = [_JavaScript(None, body="const THEBE_JS_URL = 1"), _JavaScript("a.js"),
               _JavaScript("", body="const THEBE_JS_URL = 1"), _JavaScript("a.js"), _JavaScript(None, body="let b")]
    context = {"script_files": scripts}
    toybook.each_script_once(None, "book/life", "page.html", context, None)
    assert context["script_files"] == [scripts[0], scripts[1], scripts[4]]


def test_the_longest_running_notebook_starts_first(tmp_path):
    """By the execution times stored in each notebook's cells: a notebook stored without them
    counts as instant and goes last, keeping the order it was given."""
    from longest_first import longest_first, stored_seconds

    def timed(name: str, start: str, end: str) -> Path:
        path = notebook(tmp_path, name, {})
        cells = [{"cell_type": "code", "metadata": {"execution": {"iopub.execute_input": t, "shell.execute_reply": u}},
                  "source": "", "outputs": [], "execution_count": 1} for t, u in ((start, start), (end, end))]
        path.write_text(json.dumps({**json.loads(path.read_text()), "cells": cells}))
        return path

    short = timed("short.ipynb", "2026-11-24T08:00:00.000000Z", "2026-11-24T08:00:30.500000Z")
    long = timed("long.ipynb", "2026-11-24T07:58:00.000000Z", "2026-11-24T08:02:00.000000Z")
    bare, also_bare = notebook(tmp_path, "bare.ipynb", {}), notebook(tmp_path, "also.ipynb", {})
    assert stored_seconds(short) == 30.5 and stored_seconds(long) == 240 and stored_seconds(bare) == 0
    assert longest_first([bare, short, also_bare, long]) == [long, short, bare, also_bare]
    assert stored_seconds(tmp_path / "page.md") == 0


def test_every_chapter_stores_its_execution_times():
    """What orders the book and the test command: a chapter re-executed without them would be
    started last, whatever its length."""
    from longest_first import stored_seconds

    assert all(stored_seconds(nb) > 0 for nb in (ROOT / "book").glob("*.ipynb"))


def test_a_number_keeps_its_unit_on_its_line_outside_code():
    """On a phone "98.77 %" broke before its "%"; code and printed outputs keep their spaces."""
    sys.path.insert(0, str(ROOT / "_ext"))
    toybook = pytest.importorskip("toybook")
    from docutils import nodes

    prose = nodes.paragraph("", "", nodes.Text("98.77 % of 10 seeds in 43 s, 2 min; 4 ms, 3 sets"),
                            nodes.literal("", "5 %"))
    block = nodes.literal_block("", "1 % in 2 s")
    assert toybook.units_stay_with_numbers(nodes.section("", prose, block)) == 1
    assert prose.astext() == "98.77\u00a0% of 10 seeds in 43\u00a0s, 2\u00a0min; 4\u00a0ms, 3 sets5 %"
    assert block.astext() == "1 % in 2 s"

    class App:  # records what the extension registers
        def __init__(self):
            self.calls = []

        def __getattr__(self, name):
            return lambda *args, **kwargs: self.calls.append((name, args))

    app = App()
    toybook.setup(app)
    assert ("add_post_transform", (toybook.UnitsStayWithNumbers,)) in app.calls
