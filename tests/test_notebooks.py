"""Checks on the notebooks as files: the Colab install cell, stored outputs, size.
(nbval, run by the README's test command, re-executes them and compares outputs.)"""

import importlib
import inspect
import json
import re
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = (ROOT / "_toc.yml").read_text()


def code_cells(path):
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def test_there_are_chapters_and_each_is_in_the_table_of_contents():
    assert NOTEBOOKS
    for nb in NOTEBOOKS:
        assert f"book/{nb.stem}" in TOC, nb.name


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_install_cell_names_the_repository_in_config(nb):
    url = CONFIG["repository"]["url"]
    first = "".join(code_cells(nb)[0]["source"])
    # installs only when toylib is missing, and installs nothing but toylib, from REPO
    assert "import toylib" in first and "except ImportError" in first
    repos = re.findall(r'^REPO = "([^"]*)"$', first, flags=re.M)
    assert repos == [url], f"{nb.name} sets REPO to {repos}, _config.yml says {url}"
    installs = re.findall(r"pip install[^\n]*", first)
    assert installs == ['pip install -q "toylib @ git+{REPO}"'], installs


COLUMN = 76  # characters of code that fit the page's column at the theme's default width (measured)


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_code_fits_the_column(nb):
    """Code cells, and the toylib source a chapter shows with show_code, never scroll sideways."""
    cells = code_cells(nb)
    long = [line for c in cells for line in "".join(c["source"]).splitlines() if len(line) > COLUMN]
    assert not long, f"{len(long)} code lines longer than {COLUMN}: {long[:3]}"
    aliases = {}  # the names the notebook gives toylib's modules
    for c in cells:
        for module, alias in re.findall(r"^from toylib import (\w+)(?: as (\w+))?$", "".join(c["source"]), re.M):
            aliases[alias or module] = importlib.import_module(f"toylib.{module}")
    shown = [m for c in cells for m in re.findall(r"show_code\(([\w.]+)\)", "".join(c["source"]))]
    assert shown, "a chapter shows some of the code it runs"
    for name in shown:
        head, *rest = name.split(".")
        obj = aliases[head]
        for part in rest:
            obj = getattr(obj, part)
        long = [line for line in textwrap.dedent(inspect.getsource(obj)).splitlines() if len(line) > COLUMN]
        assert not long, f"{name} shows lines longer than {COLUMN}: {long[:2]}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_with_outputs_and_small(nb):
    cells = code_cells(nb)
    assert all(c.get("execution_count") for c in cells), "every code cell has been executed"
    assert sum(bool(c.get("outputs")) for c in cells) >= len(cells) // 2, "outputs are stored, for nbval to compare"
    assert nb.stat().st_size < 5 * 1024 * 1024
    errors = [o for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors


def stored_summary(notebook: str, marker: str) -> str:
    """The stored output of the first cell whose source contains `marker`: the chapter's
    summary table, which nbval must compare (so the cell is not tagged to be ignored)."""
    cells = [c for c in code_cells(ROOT / "book" / notebook) if marker in "".join(c["source"])]
    assert cells, f"{notebook} prints a summary"
    assert "nbval-ignore-output" not in cells[0].get("metadata", {}).get("tags", [])
    return "".join("".join(o.get("text", "")) for o in cells[0]["outputs"])


def assert_every_target_met(text: str) -> None:
    """A stored summary (toylib.targets.table) whose every row is met or has no target."""
    lines = text.strip().splitlines()
    assert lines[0].split() == ["measure", "target", "measured", "met"] and set(lines[1]) <= {"-", " "}
    verdicts = [line.split()[-1] for line in lines[2:]]
    assert verdicts and set(verdicts) <= {"yes", "-"}, "the stored summary meets every target"


def test_the_life_summary_table_is_compared_by_nbval():
    text = stored_summary("life.ipynb", "life.summarise(model, seen)")
    assert "exact next state" in text and "16x16" in text  # the post's grid size, by default
    assert_every_target_met(text)


def test_book_configuration_guards_the_build():
    execute = CONFIG["execute"]
    assert execute["execute_notebooks"] == "force" and execute["allow_errors"] is False
    assert execute["timeout"] >= 600
    assert CONFIG["only_build_toc_files"] is True
    assert CONFIG["repository"]["branch"] and CONFIG["launch_buttons"]["colab_url"]
    assert CONFIG["sphinx"]["recursive_update"] is True


def test_the_sequences_summary_table_is_compared_by_nbval():
    text = stored_summary("sequences.ipynb", "seq.claim_targets(")
    assert "PyTorch exact match" in text and "attention on source" in text
    assert_every_target_met(text)


def test_the_tictactoe_summary_table_is_compared_by_nbval():
    text = stored_summary("tictactoe.ipynb", "t3.summarise(")
    summary = text.split("\n\n")[0]  # the targets; the detail table follows
    assert "held-out test positions" in summary and "exhaustive play as O" in summary
    assert_every_target_met(summary)


def test_the_maze_summary_table_is_compared_by_nbval():
    text = stored_summary("maze.ipynb", "mz.maze_targets(")
    assert "1,000 test mazes" in text and "7x7 (trained on 5x5)" in text
    assert_every_target_met(text)


def test_the_sokoban_summary_and_the_posts_table_are_compared_by_nbval():
    text = stored_summary("sokoban.ipynb", "sk.sokoban_targets(")
    assert "solve rate, beam 32" in text and "solvability accuracy" in text and "optimal move" in text
    lines = text.strip().splitlines()
    assert lines[0].split() == ["measure", "target", "measured", "met"]
    post = stored_summary("sokoban.ipynb", "sk.post_table(")
    assert "solvability accuracy" in post and "0.921" in post  # the post's solve rate, beside ours
