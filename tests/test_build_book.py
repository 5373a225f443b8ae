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
