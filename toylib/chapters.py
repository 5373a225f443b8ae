"""The book's chapters, in reading order: the one list that the benchmarks, the scripts and
the tests walk, so that a chapter left out of it is left out everywhere at once, and a test
(tests/test_rooms.py) fails when a chapter's package is missing from it."""

from __future__ import annotations

import importlib

CHAPTERS = ("life", "sequences", "tictactoe", "maze", "sokoban")


def contract(name: str):
    """The chapter's `toylib.cli.Chapter` (what the command line and the benchmarks train and
    measure), which its training room holds."""
    if name not in CHAPTERS:
        raise ValueError(f"unknown chapter {name!r}; the chapters are {', '.join(CHAPTERS)}")
    return importlib.import_module(f"toylib.{name}.training").CHAPTER
