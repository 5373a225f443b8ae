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
"""

from __future__ import annotations

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


def serve_mathjax(app, config) -> None:
    """config-inited: every page loads MathJax from the site (relative to _static/)."""
    config.mathjax_path = f"{MATHJAX_FOLDER}/{MATHJAX_FILE}"


def install_mathjax(app) -> None:
    """builder-inited: copy MathJax into the site before any page is written, so that Sphinx
    stamps the script's address with the file's checksum (a new MathJax is not read from a
    reader's cache)."""
    if app.builder.format == "html":
        copy_mathjax(mathjax_source(), Path(app.builder.outdir) / "_static")


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


def sources_download(app, exception) -> None:
    """build-finished: add `download` to the source links of every page written."""
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.builder.outdir)
    for page in outdir.rglob("*.html"):
        if page.relative_to(outdir).parts[0] in ("_static", "_sources", "_images"):
            continue
        text = page.read_text(encoding="utf8")
        changed = downloadable(text)
        if changed != text:
            page.write_text(changed, encoding="utf8")


def setup(app):
    app.connect("config-inited", serve_mathjax)
    app.connect("builder-inited", install_mathjax)
    app.connect("build-finished", sources_download)
