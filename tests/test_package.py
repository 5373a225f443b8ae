"""The library as a reader installs it: a wheel built from this checkout (what `pip install
git+...` builds on Colab) holds every chapter's package, and each chapter imports and runs its
command line from the installed copy, not from the checkout (an editable install would hide
a subpackage missing from the wheel)."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from toylib import chapters

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = list(chapters.CHAPTERS)  # the rooms each has: tests/test_rooms.py


def test_no_module_is_much_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "toylib").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 550}
    assert not long, long


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel built from this checkout, installed into a folder of its own."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"  # a copy: building in the checkout would leave build/ behind
    shutil.copytree(ROOT / "toylib", source / "toylib", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                    "-w", str(tmp), str(source)], check=True)
    (wheel,) = tmp.glob("toylib-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(tmp / "site"), str(wheel)], check=True)
    return tmp


def test_the_wheel_ships_every_module_of_the_checkout(installed):
    (wheel,) = installed.glob("toylib-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    # the modules, and the live boards' scripts and style sheet that they write into pages
    source = {str(p.relative_to(ROOT)) for ext in ("py", "js", "css") for p in (ROOT / "toylib").rglob(f"*.{ext}")}
    assert source <= shipped, sorted(source - shipped)


def test_each_chapter_runs_from_the_installed_wheel(installed, tmp_path):
    # one interpreter for every chapter: starting one (and torch in it) is most of the cost
    site = installed / "site"
    code = ("import importlib, sys, toylib, toylib.live as live; print(toylib.__file__); live.source('js/nn.js')\n"
            f"for chapter in {CHAPTERS!r}:\n"
            "    importlib.import_module(f'toylib.{chapter}.look')\n"
            "    training = importlib.import_module(f'toylib.{chapter}.training')\n"
            "    print('chapter', chapter, flush=True)\n"
            "    try:\n"
            "        training.main(['--help'])\n"
            "    except SystemExit as e:\n"
            "        assert not e.code, (chapter, e.code)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stdout[-300:] + out.stderr[-2000:]
    assert out.stdout.startswith(str(site)), out.stdout[:300]  # the installed copy, not the checkout
    helps = out.stdout.split("\nchapter ")[1:]
    assert [h.split("\n", 1)[0] for h in helps] == CHAPTERS
    assert all("usage:" in h for h in helps), out.stdout
