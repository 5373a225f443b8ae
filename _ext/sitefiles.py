"""What the site serves by itself (set up by toybook.py, the book's extension).

- MathJax from the site's own `_static/mathjax/`, not from a CDN. Sphinx loads MathJax 3 from
  cdn.jsdelivr.net by default: offline, in a saved copy and often in print, every formula then
  shows as raw TeX ("Why the scores are divided by \\(\\sqrt{d_\\text{head}}\\)", in the heading
  and in the table of contents alike). The copy comes from the pinned `django-static-mathjax`
  (requirements.txt), which ships MathJax 3.2.2's browser build as package data and needs no
  Django to be read; the build copies what the page's component can load into the site and
  points `mathjax_path` at it.
- The download menu's source files download. The theme links `_sources/<page>.ipynb` (or
  `.md`) with `target="_blank"` only; a host that serves notebooks as their own type (GitHub
  Pages: application/x-ipynb+json) then opens 3 MB of raw JSON in a tab instead of saving the
  file. The theme renders those links from a macro that takes no extra attributes, so the build
  adds `download` to them in the written pages, and leaves the theme's markup as it is otherwise.
- The animations' buttons without a CDN. matplotlib's animations (`Animation.to_jshtml`, kept in
  the notebooks' outputs) link Font Awesome 4's stylesheet from maxcdn.bootstrapcdn.com for the
  icons of their buttons (`<i class="fa fa-play">`): a request to another host from every page
  with an animation, render-blocking where that host is slow, and nothing offline. The theme
  already serves Font Awesome 6 (pydata-sphinx-theme's `_static/scripts/fontawesome.js`, on every
  page), whose script swaps each `<i class="fa fa-...">` for an inline SVG, reads `fa` as its
  solid style and knows the version 4 names (`fa-step-forward`, `fa-fast-backward`); so the build
  drops that link from the written pages, and the buttons keep their icons from the site itself.
- Maths in the search page's snippets. Sphinx's search page quotes, under each result, the text
  around the word found, read from the page's HTML, where a formula is still its TeX
  (`\\(\\sqrt{d_\\text{head}}\\)`), and the search page loads no MathJax (Sphinx adds it only
  to pages with maths). The build gives the search page the site's MathJax and `SEARCH_SCRIPT`,
  which cuts each snippet at whole formulas and has MathJax typeset them.
"""

from __future__ import annotations

import json
import re
import shutil
from importlib import resources
from pathlib import Path

from sphinx.errors import ExtensionError

MATHJAX_PACKAGE = "mathjax"  # django-static-mathjax's import name: static/mathjax/es5 is MathJax's build
MATHJAX_FILE = "tex-mml-chtml.js"  # the component Sphinx loads from the CDN: TeX and MathML in, HTML out
# What that component can load while a page runs, besides itself: TeX extensions (autoload,
# \require), its fonts and the SVG output (the maths menu switches renderer), the menu, and the
# accessibility modules with their speech rules. The rest of the package (its sources, the other
# combined components, Node's) stays out of the site.
MATHJAX_PARTS = (MATHJAX_FILE, "input/tex/extensions", "output", "ui", "a11y", "sre")
MATHJAX_FOLDER = "mathjax"  # under the site's _static/

# the theme's download links to a page's source (.ipynb, .md), by the classes its macro gives them
DOWNLOAD_CLASSES = ("btn-download-source-button", "btn-download-notebook-button")
_LINK = re.compile(r"<a\b[^>]*>")
_QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")  # attribute values, set aside when reading attribute names
_DOWNLOAD = re.compile(r"\sdownload(?=[\s=/>]|$)", re.I)

# the stylesheet that matplotlib's animations link, on a CDN: the theme's Font Awesome draws the icons
_LINK_TAG = re.compile(r"<link\b[^>]*>", re.I)
_HREF = re.compile(r"""\shref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I)
_STYLESHEET = re.compile(r"""\srel\s*=\s*["']?stylesheet\b""", re.I)
_FONT_AWESOME_CDN = re.compile(r"^(?:https?:)?//[^/]+/.*font-?awesome[^/]*/.*\.css(?:[?#]|$)", re.I)

SEARCH_SCRIPT = "search_maths.js"  # beside this file; the build copies it into the site's _static/


def mathjax_source() -> Path:
    """The installed MathJax build (the es5 folder); a clear error where it is missing."""
    try:
        root = Path(str(resources.files(MATHJAX_PACKAGE))) / "static" / "mathjax"
    except ModuleNotFoundError:
        root = None
    if root is None or not (root / "es5" / MATHJAX_FILE).is_file():
        raise ExtensionError("the site serves its own MathJax, from the package django-static-mathjax: "
                             "install requirements.txt (bash scripts/setup.sh)")
    return root / "es5"


def copy_mathjax(source: Path, static: Path) -> Path:
    """Copy the MathJax parts (MATHJAX_PARTS) and its licence from `source` (an es5 folder) into
    `static`/mathjax; returns the folder. A part missing from `source` is a ValueError."""
    missing = [part for part in MATHJAX_PARTS if not (source / part).exists()]
    if missing:
        raise ValueError(f"{source} is not MathJax 3's es5 build: it lacks {', '.join(missing)}")
    target = static / MATHJAX_FOLDER
    for part in MATHJAX_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, target / part, dirs_exist_ok=True)
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / part, target / part)
    licence = source.parent / "LICENSE"  # Apache 2.0: it travels with the copy
    if licence.is_file():
        shutil.copy2(licence, target / "LICENSE")
    return target


def copy_search_script(static: Path) -> Path:
    """Copy SEARCH_SCRIPT into `static` (the site's _static/); returns its path there."""
    static.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy2(Path(__file__).with_name(SEARCH_SCRIPT), static / SEARCH_SCRIPT))


def serve_mathjax(app, config) -> None:
    """config-inited: every page loads MathJax from the site (relative to _static/)."""
    config.mathjax_path = f"{MATHJAX_FOLDER}/{MATHJAX_FILE}"


def install_mathjax(app) -> None:
    """builder-inited: copy MathJax, and the search page's SEARCH_SCRIPT, into the site before any
    page is written, so that Sphinx stamps the scripts' addresses with the files' checksums (a new
    MathJax is not read from a reader's cache)."""
    if app.builder.format == "html":
        copy_mathjax(mathjax_source(), Path(app.builder.outdir) / "_static")
        copy_search_script(Path(app.builder.outdir) / "_static")


def search_maths(app, pagename, templatename, context, doctree) -> None:
    """html-page-context: the search page loads MathJax as a page with maths does (sphinx.ext.mathjax,
    with the same configuration), and SEARCH_SCRIPT after it; both deferred, so that they run once
    searchtools.js has defined `Search` and before it searches (on DOMContentLoaded)."""
    if pagename != "search" or app.builder.format != "html" or app.builder.math_renderer_name != "mathjax":
        return
    if app.config.mathjax3_config:
        app.builder.add_js_file("", body=f"window.MathJax = {json.dumps(app.config.mathjax3_config)}")
    options = dict(app.config.mathjax_options or {})
    if "async" not in options and "defer" not in options:
        options["defer"] = "defer"
    app.builder.add_js_file(app.config.mathjax_path, **options)
    app.builder.add_js_file(SEARCH_SCRIPT, defer="defer")


def downloadable(html: str) -> str:
    """`html` with the `download` attribute on the theme's links to a page's source file."""
    def add(match: re.Match) -> str:
        tag = match.group(0)
        classes = re.search(r'\sclass="([^"]*)"', tag)
        if classes is None or not set(classes.group(1).split()) & set(DOWNLOAD_CLASSES):
            return tag
        if _DOWNLOAD.search(_QUOTED.sub('""', tag)):  # already there
            return tag
        return "<a download" + tag[2:]

    return _LINK.sub(add, html)


def without_cdn_icons(html: str) -> str:
    """`html` without its links to Font Awesome's stylesheet on another host (matplotlib's
    animations link version 4's from a CDN); any other link stays as it is."""
    def drop(match: re.Match) -> str:
        tag = match.group(0)
        href = _HREF.search(tag)
        address = href and next(group for group in href.groups() if group is not None)
        if address and _STYLESHEET.search(tag) and _FONT_AWESOME_CDN.match(address.strip()):
            return ""
        return tag

    return _LINK_TAG.sub(drop, html)


PAGE_REWRITES = (downloadable, without_cdn_icons)  # applied, in this order, to every page written


def rewrite_pages(app, exception) -> None:
    """build-finished: PAGE_REWRITES on every page written (source links that download, no CDN)."""
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.builder.outdir)
    for page in outdir.rglob("*.html"):
        if page.relative_to(outdir).parts[0] in ("_static", "_sources", "_images"):
            continue
        text = page.read_text(encoding="utf8")
        changed = text
        for rewrite in PAGE_REWRITES:
            changed = rewrite(changed)
        if changed != text:
            page.write_text(changed, encoding="utf8")


def setup(app):
    app.connect("config-inited", serve_mathjax)
    app.connect("builder-inited", install_mathjax)
    app.connect("html-page-context", search_maths)
    app.connect("build-finished", rewrite_pages)
