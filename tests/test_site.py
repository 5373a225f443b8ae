"""The built site as a reader gets it: source files that download, maths typeset offline from
the site's own MathJax, and dark mode readable on the live boards and in the targets tables.

The tests of a built site read TOYBOOK_SITE, a site already built: scripts/site.sh, which CI
and the Pages workflow run, builds the site from the outputs stored in the notebooks and checks
it so. Without it they skip: the test command re-executes every notebook, and a site build
beside that (about 45 CPU seconds with the browser) buys nothing the next site.sh does not.
The browser tests play the pages in headless Chromium, offline (scripts/check_live_pages.py),
and skip where Chromium is absent, as tests/test_live.py does.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
import yaml
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "_ext"))
import check_live_pages  # noqa: E402
import sitefiles  # noqa: E402

needs_chromium = pytest.mark.skipif(check_live_pages.chromium() is None,
                                    reason="no Chromium: install Debian's (apt-get install chromium) to read the pages")
BOARDS = ("tictactoe", "life", "maze", "sokoban")  # the chapters with a live board
AA = 4.5  # WCAG 2's least contrast for text (1.4.3, level AA)


def pages() -> dict[str, str]:
    """Every page of _toc.yml, {docname: the suffix of its source}."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    names = [toc["root"], *(entry["file"] for entry in toc.get("chapters", []))]
    found = {}
    for name in names:
        suffixes = [s for s in (".ipynb", ".md") if (ROOT / f"{name}{s}").is_file()]
        if len(suffixes) != 1:
            raise ValueError(f"{name} in _toc.yml has {len(suffixes)} sources (.ipynb or .md), not one")
        found[name] = suffixes[0]
    return found


@pytest.fixture(scope="module")
def site() -> Path:
    """The built site's folder (the one holding index.html)."""
    given = os.environ.get("TOYBOOK_SITE")
    if not given:
        pytest.skip("reads a built site: bash scripts/site.sh builds one and runs these (TOYBOOK_SITE)")
    folder = Path(given).resolve()
    if not (folder / "index.html").is_file():
        raise ValueError(f"TOYBOOK_SITE={given} is not a built site: it has no index.html")
    return folder


def look(page: Path, mode: str, width: int = 1440) -> dict:
    """What scripts/site_checks.js reads on `page`, shown in the theme's `mode` (light or dark),
    as a reader who chose it with the theme's switch (the theme keeps the choice in localStorage)."""
    if mode not in ("light", "dark"):
        raise ValueError(f"mode must be light or dark, got {mode!r}")
    head = f'<script>localStorage.setItem("mode", "{mode}"); localStorage.setItem("theme", "{mode}");</script>'
    driver = f"<script>{(ROOT / 'scripts' / 'site_checks.js').read_text(encoding='utf8')}</script>"
    return check_live_pages.render(page, driver, width, head=head, results="toy-site-results")


# ----------------------------------------------------------------------------- downloads


def test_every_page_s_source_link_downloads_its_file(site):
    """GitHub Pages serves .ipynb as application/x-ipynb+json: without `download` the link
    opened 3 MB of raw JSON in a tab."""
    chapters = 0
    for name, suffix in pages().items():
        soup = BeautifulSoup((site / f"{name}.html").read_text(encoding="utf8"), "html.parser")
        links = soup.select("a.btn-download-source-button, a.btn-download-notebook-button")
        assert links, f"{name}.html has no source download link"
        for link in links:
            assert link.has_attr("download"), f"{name}.html: {link['href']} opens instead of downloading"
            assert link["href"].endswith(f"/_sources/{name}{suffix}")
            assert (site / f"{name}.html").parent.joinpath(link["href"]).resolve().is_file()
        chapters += suffix == ".ipynb"
    assert chapters >= 6  # every chapter is a notebook


def test_only_the_source_links_get_download_and_once():
    html = ('<a href="../_sources/book/life.ipynb" target="_blank"\n   class="btn btn-sm btn-download-source-button '
            'dropdown-item"\n   title="Download source file">.ipynb</a> <a class="reference" href="life.html">Life</a>'
            ' <a href="x.md" class="btn-download-notebook-button" download="x.md">x</a>'
            ' <a href="y.md" title="a download" class="btn-download-source-button">y</a>')
    done = sitefiles.downloadable(html)
    assert done.startswith('<a download href="../_sources/book/life.ipynb" target="_blank"\n   class="btn')
    assert '<a class="reference" href="life.html">' in done  # any other link stays as it was
    assert '<a download href="y.md" title="a download"' in done  # "download" in a value is no attribute
    assert done.count("<a download") == 2 and 'download="x.md"' in done
    assert sitefiles.downloadable(done) == done


# ----------------------------------------------------------------------------- maths


def test_the_site_serves_its_own_mathjax(site):
    """No page asks a CDN for MathJax, and the file the pages load is in the site."""
    loaded = {}
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf8")
        assert "cdn.jsdelivr.net" not in text, f"{page.relative_to(site)} still names the CDN"
        for src in re.findall(r'<script[^>]*\ssrc="([^"]*mathjax[^"]*)"', text, re.I):
            assert "//" not in src, f"{page.relative_to(site)} loads MathJax from {src}"
            loaded[page.relative_to(site)] = (page.parent / src.split("?")[0]).resolve()
    assert Path("book/how.html") in loaded  # the page with the most maths
    assert all(path == site / "_static" / "mathjax" / sitefiles.MATHJAX_FILE for path in loaded.values())
    assert all(path.is_file() for path in loaded.values())
    mathjax = site / "_static" / "mathjax"
    assert (mathjax / "output" / "chtml" / "fonts" / "woff-v2" / "MathJax_Main-Regular.woff").is_file()
    assert (mathjax / "input" / "tex" / "extensions" / "boldsymbol.js").is_file()  # autoloaded by \boldsymbol
    assert (mathjax / "LICENSE").is_file()


def test_mathjax_comes_from_the_pinned_package(tmp_path):
    assert re.search(r"^django-static-mathjax==3\.2\.2\.\d+$", (ROOT / "requirements.txt").read_text(), re.M)
    source = sitefiles.mathjax_source()
    assert json.loads((source.parent / "package.json").read_text())["version"].startswith("3.")
    with pytest.raises(ValueError, match="not MathJax 3's es5 build"):
        sitefiles.copy_mathjax(tmp_path, tmp_path / "_static")


@needs_chromium
def test_how_typesets_its_maths_offline(site):
    """Offline (every host name unresolvable), the heading "Why the scores are divided by
    √d_head" and its table-of-contents entries show maths, not TeX."""
    result = look(site / "book" / "how.html", "light")
    maths = result["maths"]
    assert result["errors"] == [] and maths["loaded"] and maths["version"].startswith("3.")
    assert maths["formulas"] > 10 and maths["typeset"] == maths["formulas"] and maths["errors"] == 0
    (heading,) = [h for h in maths["headings"] if "divided by" in h["text"]]
    toc = [entry for entry in maths["toc"] if "divided by" in entry["text"]]
    assert toc, "the table of contents has no entry for the heading"
    for shown in (heading, *toc):
        assert shown["typeset"] and not shown["raw"], shown
    assert maths["fonts"].get("loaded", 0) > 0 and "error" not in maths["fonts"]  # the site's own fonts


# ----------------------------------------------------------------------------- dark mode


def _unreadable(result: dict) -> list[str]:
    return [f"{t['kind']} {t['text']!r} ({t['classes']}): {t['fg']} on {t['bg']}, {t['ratio']}:1"
            for t in result["texts"] if t["ratio"] < AA]


@needs_chromium
@pytest.mark.parametrize("chapter", BOARDS)
def test_dark_mode_keeps_every_text_of_the_board_and_the_tables_readable(site, chapter):
    """In dark mode the boards' unselected buttons were white on near-white (1.1:1), and the
    tables' "met" column dark on dark (1.3:1 for its header)."""
    result = look(site / "book" / f"{chapter}.html", "dark")
    assert result["theme"] == "dark" and result["errors"] == []
    kinds = {t["kind"] for t in result["texts"]}
    assert {"board button", "met cell"} <= kinds
    assert any(t["kind"] == "board button" and "toy-on" not in t["classes"] for t in result["texts"])
    assert result["unmeasured"] == 0
    assert _unreadable(result) == []


@needs_chromium
def test_light_mode_keeps_every_text_of_the_board_and_the_tables_readable(site):
    """Sokoban's page has a board and the model's verdicts, yes and NO. ("over", a machine's
    time past its budget, shows only where the run that stored the page was slow: the pages'
    texts are measured wherever it does, as on the maze's page in dark mode.)"""
    result = look(site / "book" / "sokoban.html", "light")
    assert result["theme"] == "light" and result["errors"] == []
    verdicts = {t["classes"] for t in result["texts"] if t["kind"] == "met cell"}
    assert verdicts >= {"met", "met-yes", "met-no"}
    assert _unreadable(result) == []
