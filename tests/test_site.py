"""The built site as a reader gets it: source files that download, maths typeset offline from
the site's own MathJax (in the search page's snippets too), nothing fetched from another host
(the animations' buttons draw their icons offline), and dark mode readable on the live boards
and in the targets tables.

The tests of a built site read TOYBOOK_SITE, a site already built: scripts/site.sh, which CI
and the Pages workflow run, builds the site from the outputs stored in the notebooks and checks
it so. Without it they skip: the test command re-executes every notebook, and a site build
beside that (about 45 CPU seconds with the browser) buys nothing the next site.sh does not.
The browser tests play the pages in headless Chromium, offline (scripts/check_live_pages.py),
and skip where Chromium is absent, as tests/test_live.py does. The search page is played from a
server on this machine's loopback: it fetches each page found to quote it, which a browser
refuses between file:// addresses.
"""

from __future__ import annotations

import html as html_lib
import json
import os
import re
import subprocess
import sys
import threading
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "_ext"))
import check_live_pages  # noqa: E402
import colab  # noqa: E402
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


# ----------------------------------------------------------------------------- nothing from another host

# what a page fetches by itself, (tag, attribute); a link that the reader follows (<a href>) is no fetch
FETCHES = (("link", "href"), ("script", "src"), ("img", "src"), ("img", "srcset"), ("source", "src"),
           ("source", "srcset"), ("iframe", "src"), ("video", "src"), ("video", "poster"), ("audio", "src"),
           ("track", "src"), ("embed", "src"), ("object", "data"))
NAVIGATION = {"canonical", "alternate", "index", "search", "next", "prev", "author", "license", "help"}  # <link rel>
CSS_ADDRESS = re.compile(r"""(?:@import\s+|url\(\s*)["']?\s*((?:https?:)?//[^"')\s;]+)""", re.I)


def from_elsewhere(address: str, own: str) -> bool:
    """Whether `address` names another host than the site's own (`own`, its published address)."""
    address = address.strip()
    return bool(re.match(r"(?:https?:)?//", address, re.I)) and not address.startswith(own)


def fetched_elsewhere(html: str, own: str) -> list[str]:
    """What a page (`html`) fetches from another host than `own`: stylesheets, scripts, fonts and
    pictures, by their tags and in its CSS."""
    soup = BeautifulSoup(html, "html.parser")
    found = []
    for tag, attribute in FETCHES:
        for element in soup.find_all(tag, attrs={attribute: True}):
            if tag == "link" and set(element.get("rel") or []) <= NAVIGATION and element.get("rel"):
                continue
            addresses = element[attribute].split(",") if attribute == "srcset" else [element[attribute]]
            found += [f"<{tag} {attribute}={a.split()[0]}>" for a in addresses if a.split() and
                      from_elsewhere(a.split()[0], own)]
    styles = [style.get_text() for style in soup.find_all("style")] + [e["style"] for e in soup.find_all(style=True)]
    found += [f"CSS {a}" for css in styles for a in CSS_ADDRESS.findall(css) if from_elsewhere(a, own)]
    return found


def test_no_page_fetches_anything_from_another_host(site):
    """Offline, in a saved copy, behind a firewall, the site works from its own files: matplotlib's
    animations linked Font Awesome 4's stylesheet from maxcdn.bootstrapcdn.com."""
    own = colab.site_url(yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"])
    animated, bad = 0, {}
    for page in site.rglob("*.html"):
        if page.relative_to(site).parts[0] in ("_sources", "_static"):  # sources and the theme's templates
            continue
        text = page.read_text(encoding="utf8")
        animated += 'class="fa fa-play"' in text  # matplotlib's animations, their buttons kept
        if found := fetched_elsewhere(text, own):
            bad[str(page.relative_to(site))] = found
    for css in site.rglob("*.css"):
        if found := [a for a in CSS_ADDRESS.findall(css.read_text(encoding="utf8")) if from_elsewhere(a, own)]:
            bad[str(css.relative_to(site))] = found
    assert bad == {}
    assert animated >= 1


def test_the_animations_lose_their_cdn_stylesheet_and_nothing_else():
    """What matplotlib writes (the notebooks' outputs hold it), and links that stay."""
    from matplotlib.animation import FuncAnimation
    from matplotlib.figure import Figure

    animation = FuncAnimation(Figure(figsize=(1, 1), dpi=20), lambda frame: [], frames=2)
    made = animation.to_jshtml()
    assert re.search(r'<link rel="stylesheet"\s+href="https://[^"]*/font-awesome/[^"]*\.css">', made)
    done = sitefiles.without_cdn_icons(made)
    assert "<link" not in done and "font-awesome" not in done
    assert done == re.sub(r"<link[^>]*>", "", made)  # the buttons' markup, <i class="fa fa-play"> and all, as it was
    kept = ('<link rel="stylesheet" href="../_static/vendor/fontawesome/css/all.min.css">'
            "<link rel='stylesheet' href='https://example.org/other.css'>"
            '<link rel="preload" href="https://cdn.example/font-awesome/x.css">')
    assert sitefiles.without_cdn_icons(kept) == kept
    assert sitefiles.without_cdn_icons("<link href='//cdn.example/font-awesome/4.7.0/css/font-awesome.css' "
                                       "rel=stylesheet>x") == "x"
    assert sitefiles.without_cdn_icons(done) == done


DRIVER = """<script>
(function () {
  "use strict";
  const results = { errors: [] };
  window.addEventListener("error", (e) => results.errors.push(String(e.message)));
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  HELPERS
  async function run() {
    try {
      BODY
    } catch (e) {
      results.errors.push(String(e.stack || e));
    }
    const pre = document.createElement("pre");
    pre.id = "RESULTS";
    pre.textContent = JSON.stringify(results);
    document.body.appendChild(pre);
  }
  if (document.readyState === "complete") run(); else window.addEventListener("load", run);
})();
</script>"""


def driver(results: str, body: str, helpers: str = "") -> str:
    """A script to append to a page (`check_live_pages.render`): once the page has loaded, `body`
    (the inside of an async function, with `results`, `sleep(ms)` and `helpers` in scope) fills
    `results`, which is then written as JSON into the pre element whose id is `results`. The
    page's errors and the body's go to results.errors."""
    return DRIVER.replace("HELPERS", helpers).replace("BODY", body).replace("RESULTS", results)


ANIMATION_DRIVER = driver("toy-animation-results", """
    // the theme's Font Awesome swaps each <i class="fa ..."> for an SVG once the page has loaded
    for (let i = 0; i < 50 && document.querySelector(".anim-buttons i"); i++) await sleep(100);
    await document.fonts.ready;
    results.buttons = [...document.querySelectorAll(".animation .anim-buttons button")].map((button) => {
      const svg = button.querySelector("svg");
      const box = (svg || button.querySelector("i") || button).getBoundingClientRect();
      const path = svg && svg.querySelector("path");
      return { title: button.title, svg: !!svg, icon: svg ? svg.dataset.icon : null,
               drawn: !!(path && (path.getAttribute("d") || "").length > 20), width: box.width, height: box.height };
    });
    results.left = document.querySelectorAll(".anim-buttons i").length;
    results.fetched = performance.getEntriesByType("resource").map((r) => r.name);""")


@needs_chromium
def test_the_animations_buttons_draw_their_icons_offline(site):
    """With no CDN (every host name unresolvable), each button of Life's animations shows its
    icon, drawn by the theme's Font Awesome: Life's page has two animations of nine buttons."""
    result = check_live_pages.render(site / "book" / "life.html", ANIMATION_DRIVER, results="toy-animation-results")
    assert result["errors"] == [] and result["left"] == 0
    buttons = result["buttons"]
    assert len(buttons) >= 9 and len(buttons) % 9 == 0
    for button in buttons:
        assert button["svg"] and button["drawn"] and button["width"] >= 6 and button["height"] >= 6, button
    # Font Awesome 6's names for version 4's (fa-step-forward is forward-step)
    assert {b["icon"] for b in buttons} == {"minus", "backward-fast", "backward-step", "play", "pause",
                                            "forward-step", "forward-fast", "plus"}
    assert [r for r in result["fetched"] if not r.startswith(("file:", "data:"))] == []


# ----------------------------------------------------------------------------- search

SEARCH_DRIVER = driver("toy-search-results", r"""
      // done when Sphinx has said how many pages it found and each has its snippet (fetched one by one)
      for (let i = 0; i < 300; i++) {
        const items = Search.output ? [...Search.output.children] : [];
        if (Search.status && Search.status.innerText && items.every((li) => li.querySelector("p.context"))) break;
        await sleep(100);
      }
      const made = synthetic();
      const startup = window.MathJax && window.MathJax.startup;
      for (let promise = null; startup && promise !== startup.promise;) {  // every typesetting, chained there
        promise = startup.promise;
        await promise;
      }
      results.pages = [...Search.output.children].map((li) => (
        { href: li.querySelector("a").getAttribute("href"), ...found(li.querySelector("p.context")) }));
      results.shown = document.getElementById("search-results").innerText;
      results.synthetic = found(made);""", helpers=r"""
  const found = (p) => ({ text: p ? p.innerText : null, typeset: p ? p.querySelectorAll("mjx-container").length : 0,
                          errors: p ? p.querySelectorAll("mjx-merror").length : 0 });
  // text where the stretch Sphinx quotes (from 120 characters before the word) starts and ends inside a formula
  function synthetic() {
    const a = "\\(\\sqrt{d_\\text{head}} + 1\\)", b = "\\(\\frac{1}{2}\\)", lead = "Lead ";
    const pad = (n) => "word ".repeat(n).slice(0, n);
    const text = lead + a + pad(120 - Math.floor(a.length / 2)) + "needle" + pad(114 - Math.floor(b.length / 2)) + b
      + " and after it" + pad(40);
    const at = text.indexOf("needle"), inside = (f, i) => text.indexOf(f) < i && i < text.indexOf(f) + f.length;
    results.cut = [inside(a, at - 120), inside(b, at + 120)];  // Sphinx's stretch starts in a and ends in b
    const p = Search.makeSearchSummary(`<div role="main"><p>${text}</p></div>`, ["needle"], "");
    return document.body.appendChild(document.createElement("div")).appendChild(p);
  }""")
RAW_TEX = re.compile(r"\\[a-zA-Z]+|\\[()\[\]]")  # a TeX command or delimiter, as a reader would see it


@contextmanager
def served(folder: Path):
    """`folder` over HTTP on this machine's loopback, for as long as the block runs: its address."""
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def search(site: Path, query: str, width: int = 1440) -> dict:
    """What the site's search page shows for `query` (SEARCH_DRIVER reads it), served from the
    loopback with every other host unresolvable."""
    page = site / "search.html"
    text = page.read_text(encoding="utf8")
    at = text.rfind("</body>")
    copy = page.with_name("_search_check_search.html")  # beside the page: the site's files by the same paths
    copy.write_text(text[:at] + SEARCH_DRIVER + text[at:], encoding="utf8")
    try:
        with served(site) as address:
            out = subprocess.run(
                [check_live_pages.chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", f"--window-size={width},2000",
                 "--virtual-time-budget=20000", "--dump-dom", f"{address}{copy.name}?q={query}"],
                capture_output=True, text=True, timeout=120, check=True).stdout
    finally:
        copy.unlink()
    found = re.findall(r'<pre id="toy-search-results"[^>]*>(.*?)</pre>', out, re.S)
    if not found:
        raise RuntimeError(f"search for {query!r}: the driver left no results (did the page's scripts run?)")
    return json.loads(html_lib.unescape(found[-1]))


@needs_chromium
@pytest.mark.parametrize("query", ["divided", "sqrt"])
def test_search_snippets_show_maths_typeset_not_tex(site, query):
    """The snippet under "How transformers work" read "...divided by \\(\\sqrt{d_\\text{head}}\\)...":
    the search page quoted the page's TeX. ("sqrt" is found inside that formula.)"""
    result = search(site, query)
    assert result["errors"] == []
    (how,) = [p for p in result["pages"] if p["href"].startswith("book/how.html")]
    assert how["typeset"] >= 1 and how["errors"] == 0
    assert not RAW_TEX.search(result["shown"]), result["shown"]
    # where Sphinx's stretch of text would cut a formula in two, the snippet takes it whole
    assert result["cut"] == [True, True]
    synthetic = result["synthetic"]
    assert synthetic["typeset"] == 2 and synthetic["errors"] == 0 and not RAW_TEX.search(synthetic["text"]), synthetic
    assert synthetic["text"].startswith("...") and synthetic["text"].endswith("...")


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
