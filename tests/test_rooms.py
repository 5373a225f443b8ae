"""The house: every chapter is a package with the same rooms, every import between two rooms
of a chapter points one way (down the list below: a room uses only rooms above it), no room
imports a private name (a leading underscore) from another, nothing is imported inside a
function to dodge a cycle, and every chapter's package is on the one list of chapters
(toylib.chapters), which the benchmarks walk. Read from the source, so that a cycle fails
here even where Python would tolerate it."""

import ast
import importlib
from pathlib import Path

import pytest

from toylib import chapters
from toylib.cli import Chapter

ROOT = Path(__file__).resolve().parent.parent
# a chapter's rooms, top to bottom; a room may import only rooms above it
ROOMS = ("world", "env", "config", "dataset", "net", "numpy_net", "post", "measure", "training", "look",
         "__main__")
EVERY_CHAPTER = ("__init__", "__main__", "world", "config", "dataset", "net", "measure", "training", "look")
PACKAGES = sorted(p.parent.name for p in (ROOT / "toylib").glob("*/__init__.py") if p.parent.name != "js")


def room_imports(path: Path) -> list[tuple[str, str, list[str], bool]]:
    """(chapter, room, names, at top level) for each import of a chapter's room in `path`."""
    found = []
    tree = ast.parse(path.read_text())
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("toylib."):
            parts = node.module.split(".")
            names = [a.name for a in node.names]
            if len(parts) == 2 and parts[1] in PACKAGES:  # from toylib.life import net, world
                found += [(parts[1], name, [], id(node) in top) for name in names]
            elif len(parts) == 3 and parts[1] in PACKAGES:  # from toylib.life.net import train
                found.append((parts[1], parts[2], names, id(node) in top))
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if len(parts) == 3 and parts[1] in PACKAGES:
                    found.append((parts[1], parts[2], [], id(node) in top))
    return found


def test_the_list_of_chapters_is_every_chapter_package():
    assert sorted(chapters.CHAPTERS) == PACKAGES
    for name in chapters.CHAPTERS:
        spec = chapters.contract(name)
        assert isinstance(spec, Chapter) and spec.name == name
    with pytest.raises(ValueError, match="unknown chapter 'chess'; the chapters are life, sequences"):
        chapters.contract("chess")


@pytest.mark.parametrize("chapter", PACKAGES)
def test_every_chapter_has_the_same_rooms_and_no_others(chapter):
    rooms = {p.stem for p in (ROOT / "toylib" / chapter).glob("*.py")}
    assert set(EVERY_CHAPTER) <= rooms, set(EVERY_CHAPTER) - rooms
    assert rooms <= {*ROOMS, "__init__"}, rooms - {*ROOMS, "__init__"}
    main = (ROOT / "toylib" / chapter / "__main__.py").read_text().splitlines()
    assert main[0] == f"from toylib.{chapter}.training import main" and len(main) == 2, main


@pytest.mark.parametrize("chapter", PACKAGES)
def test_rooms_import_one_way_and_nothing_private(chapter):
    wrong = []
    for path in sorted((ROOT / "toylib" / chapter).glob("*.py")):
        room = path.stem
        for other, used, names, at_top in room_imports(path):
            where = f"{chapter}/{path.name} imports {other}.{used}"
            if other != chapter:
                wrong.append(f"{where}: another chapter's room")
                continue
            if room != "__init__" and ROOMS.index(used) >= ROOMS.index(room):
                wrong.append(f"{where}: a room below it (or itself)")
            if not at_top:
                wrong.append(f"{where}: inside a function or a TYPE_CHECKING block")
            wrong += [f"{where}.{n}: a private name" for n in names if n.startswith("_")]
    assert not wrong, "\n".join(wrong)


def test_the_checks_see_a_cycle_and_a_private_name(tmp_path):
    """The checks above on a made-up room, so that they cannot pass by reading nothing."""
    source = ("from toylib.maze.measure import score\nfrom toylib.maze.world import _walk\n"
              "def f():\n    from toylib.maze import look\n")
    (tmp_path / "net.py").write_text(source)
    found = room_imports(tmp_path / "net.py")
    assert found == [("maze", "measure", ["score"], True), ("maze", "world", ["_walk"], True),
                     ("maze", "look", [], False)]


def test_every_chapter_is_importable_room_by_room():
    for chapter in PACKAGES:
        for room in EVERY_CHAPTER:
            if room != "__main__":
                importlib.import_module(f"toylib.{chapter}.{room}".removesuffix(".__init__"))


@pytest.mark.parametrize("chapter", chapters.CHAPTERS)
def test_every_list_of_chapters_names_each_chapter(chapter):
    """The places CONTRIBUTING.md lists for a new chapter: one left out fails here."""
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts.get(f"toylib-{chapter}") == f"toylib.{chapter}.training:main"
    assert (ROOT / "book" / f"{chapter}.ipynb").is_file()
    assert f"file: book/{chapter}\n" in (ROOT / "_toc.yml").read_text()
    assert f"| `book/{chapter}.ipynb` |" in (ROOT / "README.md").read_text()
    assert (ROOT / "tests" / f"test_{chapter}.py").is_file()
    assert f"def test_{chapter}_step_reads_nothing(" in (ROOT / "tests" / "test_sync.py").read_text()


def test_the_book_reads_the_chapters_in_the_order_of_the_list():
    toc = [line.split("book/")[1] for line in (ROOT / "_toc.yml").read_text().splitlines() if "file: book/" in line]
    assert [name for name in toc if name in chapters.CHAPTERS] == list(chapters.CHAPTERS)
