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

from toylib.plot import GLUE_PREFIX

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
    aliases = {}  # the names the notebook gives toylib's modules: `from toylib[.chapter] import a, b as c`
    for c in cells:
        for package, names in re.findall(r"^from (toylib(?:\.\w+)?) import ([\w ,]+)$", "".join(c["source"]), re.M):
            for name in names.split(","):
                module, _, alias = name.strip().partition(" as ")
                try:
                    aliases[alias or module] = importlib.import_module(f"{package}.{module}")
                except ModuleNotFoundError:
                    pass  # a function or class, not a module
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
def test_headings_never_skip_a_level(nb):
    """myst warns of a skipped level (# then ###), and the site is built with warnings as errors."""
    levels = [len(m) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "markdown"
              for m in re.findall(r"^(#+) ", "".join(c["source"]), re.M)]
    assert levels and levels[0] == 1, "a page starts with its title"
    skips = [(a, b) for a, b in zip(levels, levels[1:]) if b > a + 1]
    assert not skips, skips


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_with_outputs_and_small(nb):
    cells = code_cells(nb)
    assert all(c.get("execution_count") for c in cells), "every code cell has been executed"
    assert sum(bool(c.get("outputs")) for c in cells) >= len(cells) // 2, "outputs are stored, for nbval to compare"
    assert nb.stat().st_size < 5 * 1024 * 1024
    errors = [o for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors


def cell_text(cell) -> str:
    """A cell's printed text and the plain-text form of what it displayed (a `Table` shows as
    HTML on the page; its text/plain is the same table as text)."""
    return "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                   for o in cell.get("outputs", []) if o.get("output_type") != "display_data"
                   or not any(k.startswith(GLUE_PREFIX) for k in o.get("data", {})))


def tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def test_book_configuration_guards_the_build():
    execute = CONFIG["execute"]
    assert execute["execute_notebooks"] == "force" and execute["allow_errors"] is False
    assert execute["timeout"] >= 600
    assert CONFIG["only_build_toc_files"] is True
    assert CONFIG["repository"]["branch"] and CONFIG["launch_buttons"]["colab_url"]
    assert CONFIG["sphinx"]["recursive_update"] is True


# ----------------------------------------------------------------------------- on any machine
# How nbval compares a chapter (tests/nbval_sanitize.cfg says the same): a cell whose output
# depends on the path training took (a trained model's scores, attention shares, times) is
# tagged nbval-ignore-output; every other output (rules, data, ground truth, splits,
# parameter counts, the post's numbers) is compared as it is. What a reader relies on in an
# ignored cell is asserted by the chapter itself: hidden check cells call toylib.targets.check
# on the targets and on each claim of the prose, raise if one fails, and print one line that
# nbval compares. The prose takes its numbers from the run through myst-nb's glue.


def check_cells(nb):
    return [c for c in code_cells(nb) if re.search(r"\bprint\(check\(", "".join(c["source"]))]


TOUR = "how.ipynb"  # "How transformers work": measurements of the pieces, no model to score, so no targets


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_a_chapter_checks_its_targets_and_claims_when_it_runs(nb):
    cells = check_cells(nb)
    assert cells, f"{nb.name} has no check cell"
    for c in cells:
        assert "remove-cell" in tags(c), "a check cell is kept out of the reader's way"
        assert "nbval-ignore-output" not in tags(c), "nbval compares what a check cell printed"
        assert cell_text(c).startswith("checked: "), cell_text(c)[:200]
    if nb.name != TOUR:
        assert any(re.search(r"targets? met", cell_text(c)) for c in cells), "the summary's targets are checked"
    assert any(re.search(r"claims? holds?", cell_text(c)) for c in cells), "the prose's claims are checked"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_only_sokoban_holds_goals_to_floors_and_exempts_nothing(nb):
    """A goal not yet met on every seed carries a floor on its Target (Sokoban's four, from
    measure.FLOORS), which the check cell asserts and counts; nothing is exempted."""
    from toylib.sokoban.measure import FLOORS

    lines = [line for c in check_cells(nb) for line in cell_text(c).splitlines()]
    held = sum(int(m.group(1)) for line in lines for m in [re.search(r"(\d+) floors? held", line)] if m)
    assert held == (len(FLOORS) if nb.name == "sokoban.ipynb" else 0), lines
    assert not any("exempt" in line for line in lines), lines


def paragraphs(nb):
    """The markdown's paragraphs and list items."""
    md = [("".join(c["source"])) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "markdown"]
    return [p for text in md for p in re.split(r"\n\s*\n|\n(?=\s*(?:[-*]|\d+\.) )", text) if p.strip()]


# A number a run measures, as prose types it: a percentage, a count ("9 of 10"), a time ("43 s",
# "3 minutes"). "0s and 1s" are digits, not seconds: a time has a space before its unit.
RESULT = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?: ?%| of \d[\d,]*\b| (?:s|ms|min|minutes?|seconds?|hours?)\b)")
GOAL_WORD = re.compile(r"\b(?:goals?|targets?|budgets?)\b[^.;]{0,40}$", re.I)  # "the goal is 99 %", "a budget of 3 minutes"
SOURCED = re.compile(r"\{(?:glue:[a-z]*|bench|post)\}`[^`]*`")  # glued from the run, read from a result file, quoted


def typed_results(text: str) -> list[str]:
    """The numbers of runs that `text` (MyST) types by hand: every percentage, count and time
    outside a glued value, a benchmark's value (`{bench}`), a quotation of a post (`{post}`),
    code, or a goal ("goal 98 %")."""
    text = re.sub(r"^(`{3,}|:{3,}).*?^\1\s*$", "", text, flags=re.M | re.S)  # code, directives and their options
    text = re.sub(r"`[^`]*`", "", SOURCED.sub("", text))  # sourced numbers, then inline code
    found = []
    for m in RESULT.finditer(text):
        if not GOAL_WORD.search(text[:m.start()]):
            found.append(text[max(0, m.start() - 40):m.end()].replace("\n", " "))
    return found


PAGES = sorted(NOTEBOOKS) + [ROOT / "book" / "results.md", ROOT / "book" / "intro.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_result_is_typed_into_the_prose(page):
    """A percentage, count or time in the prose comes from the run (glue), from a benchmark's
    result file (`{bench}`), or is a figure quoted from the chapter's post (`{post}`), or a goal."""
    if page.suffix == ".ipynb":
        text = "\n\n".join("".join(c["source"]) for c in json.loads(page.read_text())["cells"]
                            if c["cell_type"] == "markdown")
    else:
        text = page.read_text()
    typed = typed_results(text)
    assert not typed, f"{len(typed)} numbers typed by hand: {typed}"


def test_the_typed_result_check_finds_what_it_should():
    assert typed_results("it solves 97.5 % of them") and typed_results("9 of 10 seeds") and typed_results("in 43 s")
    assert typed_results("trained in 2 to 6 seconds")
    assert not typed_results("solves {glue:text}`maze_rate` of them, {bench}`maze:ordinary:count` seeds")
    assert not typed_results("the post's {post}`97.7 %`; the goal is 99 %; a budget of 3 minutes")
    assert not typed_results("5 planes of 0s and 1s; `--set lr=0.5`")
    assert not typed_results("```python\nprint(f'{0.5 * 100} %')\n```\n")


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_every_glued_number_in_the_prose_is_glued_by_the_notebook(nb):
    used = {key.split(":")[0] for p in paragraphs(nb) for key in re.findall(r"\{glue:[a-z]*\}`([^`]*)`", p)}
    sources = "".join("".join(c["source"]) for c in code_cells(nb))
    glued = set(re.findall(r"""\bglue\(\s*["'](\w+)["']""", sources))
    prefixes = re.findall(r"""\bglue\(\s*f["'](\w+)\{""", sources)  # glue(f"t3_{name}", ...) in a loop
    glued |= {key for key in used if any(key.startswith(p) for p in prefixes)}
    stored = {o["metadata"]["scrapbook"]["name"] for c in code_cells(nb) for o in c.get("outputs", [])
              if "scrapbook" in o.get("metadata", {})}
    assert used <= glued, f"glued nowhere: {sorted(used - glued)}"
    assert used <= stored, f"not in the stored outputs (execute the notebook): {sorted(used - stored)}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_sets_one_cpu_thread_before_its_first_torch_work(nb):
    """The two commands run notebooks side by side on the cores. A kernel left on torch's
    default (a thread per core) waits at every small operation for threads that the other
    notebooks hold up: "How transformers work" took 89 s beside one busy process instead of
    4 s, until it set one thread. So each notebook calls `toylib.device.setup()` (or sets
    one thread itself) in its imports cell, the first cell that imports torch or toylib's
    chapters (the install cell before it imports only `toylib`)."""
    cells = ["".join(c["source"]) for c in code_cells(nb)]
    first = next(i for i, src in enumerate(cells) if re.search(r"^(import torch|from toylib\.)", src, re.M))
    assert re.search(r"^(\w+ = )?setup\(|^torch\.set_num_threads\(1\)", cells[first], re.M), (
        f"{nb.name}: its imports cell (code cell {first}) sets no single CPU thread")


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_no_model_output_is_read_off_its_device(nb):
    """On Colab the models live on a GPU: .numpy() on a CUDA tensor raises, so a notebook
    reads a tensor as an array only after .cpu() (toylib's functions return CPU results)."""
    bad = [line.strip() for c in code_cells(nb) for line in "".join(c["source"]).splitlines()
           if re.search(r"(?<!\.cpu\(\))\.numpy\(\)", line)]
    assert not bad, bad


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_nbval_markers_are_tags_not_comments(nb):
    """A `# NBVAL_...` comment shows on the page; a cell tag does not."""
    marked = [c["source"][0] for c in code_cells(nb) if "NBVAL_" in "".join(c["source"])]
    assert not marked, marked


def shown_outputs(nb):
    """(cell source, output) for every output the page shows: not in a removed cell or output."""
    for c in code_cells(nb):
        if {"remove-cell", "remove-output"} & set(tags(c)):
            continue
        for o in c.get("outputs", []):
            if not any(k.startswith(GLUE_PREFIX) for k in o.get("data", {})):
                yield "".join(c["source"]), o


RULE = re.compile(r"^-+( +-+)+$", re.M)  # the line under a plain-text table's header
PROGRESS = re.compile(r"\d+%\|| \d+/\d+ \[\d+:\d+|it/s\]")  # tqdm: "24%|██", "1200/5000 [00:31", "12.3it/s]"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_the_page_shows_no_wide_plain_table_no_progress_bar_and_no_widget_state(nb):
    """Tables reach the page as HTML (toylib.targets.Table), which wraps to the column: a table
    printed as text wider than the column hides its right-hand columns. A progress bar, or a
    widget's saved state, shows the page frozen mid-run. Re-execute a notebook with
    scripts/execute_notebook.py, which saves no widget state."""
    meta = json.loads(nb.read_text())["metadata"]
    assert "widgets" not in meta, "saved widget state: re-execute with scripts/execute_notebook.py"
    wide, bars = [], []
    for source, o in shown_outputs(nb):
        data = o.get("data", {})
        if "application/vnd.jupyter.widget-view+json" in data and PROGRESS.search("".join(data.get("text/plain", ""))):
            bars.append(source[:60])
        plain = "".join(o.get("text", "")) if "text" in o else (
            "" if "text/html" in data or "image/png" in data else "".join(data.get("text/plain", "")))
        if PROGRESS.search(plain):
            bars.append(source[:60])
        if RULE.search(plain) and max(map(len, plain.splitlines())) > COLUMN:
            wide.append(source[:60])
    assert not bars, f"progress bars on the page: {bars}"
    assert not wide, f"plain-text tables wider than the column ({COLUMN} characters): {wide}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_a_captioned_cell_shows_one_thing(nb):
    """myst-nb puts a cell's figure caption under each thing the cell shows: a table shown
    beside the figure gets the figure's caption too, and the page repeats it. Such a table
    goes in a cell of its own. (A glued value is kept, not shown.)"""
    twice = []
    for cell in code_cells(nb):
        if cell.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("caption"):
            shown = [o for o in cell.get("outputs", []) if o["output_type"] in ("display_data", "execute_result")
                     and not any(k.startswith(GLUE_PREFIX) for k in o.get("data", {}))]
            if len(shown) > 1:
                twice.append("".join(cell["source"])[:60])
    assert not twice, f"cells whose caption the page would show more than once: {twice}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_no_output_names_a_file_of_the_machine_that_ran_it(nb):
    """A temporary file or a home folder in an output belongs to one run on one machine: the
    reader sees a path that means nothing to them."""
    paths = re.compile(r"/tmp/|/var/folders/|/home/\w+|/root/|/work/|[A-Z]:\\\\Users")
    found = [m.group(0) for c in code_cells(nb) for o in c.get("outputs", [])
             for text in ["".join(o.get("text", "")), "".join(o.get("data", {}).get("text/plain", ""))]
             for m in [paths.search(text)] if m]
    assert not found, found


def glued_pictures(nb: Path) -> set[str]:
    """The names of the pictures (PNG) that a notebook's stored outputs glue."""
    return {o["metadata"]["scrapbook"]["name"] for c in code_cells(nb) for o in c.get("outputs", [])
            if f"{GLUE_PREFIX}image/png" in o.get("data", {}) and "scrapbook" in o.get("metadata", {})}


def named_pictures(text: str, here: str) -> list[tuple[str, str]]:
    """(notebook, name) of every glued picture a page shows: `{glue:figure} name` from its own
    notebook, `{hero} doc.ipynb::name` and its `:narrow: name` from that notebook."""
    found = [(here, m) for m in re.findall(r"```\{glue:figure\} (\w+)", text)]
    for doc, key, options in re.findall(r"```\{hero\} (\w+)\.ipynb::(\w+)\n((?::\w+:[^\n]*\n)*)", text):
        found.append((doc, key))
        found += [(doc, narrow) for narrow in re.findall(r":narrow: (\w+)", options)]
    return found


def test_every_picture_a_page_names_is_one_its_notebook_glued():
    """A picture glued by name that the run never made would be missing from the page (the
    build warns); a hero's narrow picture, the one a phone shows, most of all."""
    pages = {nb.stem: "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"]
                              if c["cell_type"] == "markdown") for nb in NOTEBOOKS}
    pages["intro"] = (ROOT / "book" / "intro.md").read_text()
    named = [(page, doc, key) for page, text in pages.items() for doc, key in named_pictures(text, page)]
    assert any(key.endswith("_narrow") for _, _, key in named)
    missing = [(page, doc, key) for page, doc, key in named if key not in glued_pictures(ROOT / "book" / f"{doc}.ipynb")]
    assert not missing, missing
