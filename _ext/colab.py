"""The Colab edition: every chapter as a plain notebook that Colab reads as the site does.

Colab renders a notebook's markdown as plain Markdown, so the chapters' MyST (glued numbers,
the benchmark's numbers, cross-references, the opening pictures) would show there as raw text.
Every build of the book therefore writes an edition of each chapter into `_build/colab/`, in
the book's own folder layout:

- the same code cells, with the outputs of the run the site shows;
- the install cell first, pinned to the commit the edition was built from, so that a
  learner's Colab runs the library the page was written against;
- the prose in plain Markdown: each glued value and each `{bench}` number written in as the
  build computed it, a `{post}` figure as its text, a cross-reference as a link to the published
  site, and the opening picture (`hero`, `glue:figure`) as an image attached to its cell;
- what the site's page says about the site's own buttons, said for a reader already in Colab
  (`SITE_WORDS`): the chapters' "Reproduce these numbers" sends the site's reader to Colab "with
  the rocket button above", a button Colab does not show.

Anything else MyST would need stops the build with an error that names it, so the edition never
ships syntax Colab cannot read; so does prose that still names the site's launch button
(`SITE_ONLY`). The site's Colab button opens the edition, from the branch that the publishing
workflow pushes it to (`scripts/publish_colab.sh`).

`edition(...)` is a plain function of a notebook: the tests call it on the stored notebooks.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path, PurePosixPath

from myst_nb.core.variables import format_plain_text
from myst_nb.ext.glue.crossref import read_glue_cache
from myst_nb.sphinx_ext import OUTPUT_FOLDER
from sphinx.util import logging

from toylib import results

import benchresults  # beside this file (the book's extension puts _ext on the path)

logger = logging.getLogger(__name__)

COLAB_BRANCH = "colab"  # the branch the workflow publishes the edition to, and the Colab button opens
FOLDER = "colab"  # under _build/, beside html/
INSTALL = 'pip install -q "toylib @ git+{REPO}"'  # the install cell's one install (tests/test_notebooks.py)
PINNED = 'pip install -q "toylib @ git+{REPO}@{COMMIT}"'

ROLE = re.compile(r"\{([\w:.-]+)\}`([^`]*)`")
FENCE_OPEN = re.compile(r"^(?P<fence>`{3,}|:{3,})\s*(?:\{(?P<name>[\w:.-]+)\})?\s*(?P<args>.*)$")
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
OPTION = re.compile(r"^:(?P<key>[\w-]+):\s*(?P<value>.*)$")

# What a chapter's prose says about the site's page that reads wrong in Colab, and what the edition
# says instead: (the site's words, the edition's), the site's matched across line breaks.
SITE_WORDS = (
    ("(here, or in Colab with the rocket button above)", "(Colab's menu: Runtime, then Run all)"),
)
SITE_ONLY = re.compile(r"\brocket\b", re.I)  # the site's launch button: not in Colab, so not in the edition


class EditionError(ValueError):
    """Markdown that has no plain form: the edition would show it raw."""


def site_url(repository: str) -> str:
    """The published site's address for a GitHub repository URL: GitHub Pages' own,
    https://<owner>.github.io/<name>/."""
    m = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", repository)
    if not m:
        raise ValueError(f"the repository must be a https://github.com/<owner>/<name> URL, got {repository!r}")
    return f"https://{m[1]}.github.io/{m[2]}/"


def glued(nb: dict) -> dict[str, dict[str, str]]:
    """What a notebook's run glued (myst-nb's `glue`): {name: {mime type: data}}."""
    found = {}
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            record = out.get("metadata", {}).get("scrapbook")
            if record:
                prefix = record["mime_prefix"]
                found[record["name"]] = {k.removeprefix(prefix): v for k, v in out["data"].items()}
    return found


def glued_text(glue: dict, key: str) -> str:
    """A glued value as `{glue:text}` shows it: its text/plain, unquoted, formatted by an
    optional `:format` suffix (myst-nb's own rule)."""
    if "::" in key:
        raise EditionError(f"{{glue:text}}`{key}` glues from another page; the edition reads its own page only")
    name, _, spec = key.partition(":")
    if name not in glue or "text/plain" not in glue[name]:
        raise EditionError(f"{{glue:text}}`{key}`: the page glued no text named {name!r}")
    return format_plain_text(glue[name]["text/plain"], spec or "s")


def colab_words(text: str) -> str:
    """`text` with the site's words about its own page (SITE_WORDS) as the edition says them, a
    line break in them or not; EditionError where it still names what only the site shows."""
    for site, said in SITE_WORDS:
        text = re.sub(r"\s+".join(map(re.escape, site.split())), lambda _: said, text)
    left = SITE_ONLY.search(text)
    if left:
        line = next(line for line in text.splitlines() if SITE_ONLY.search(line))
        raise EditionError(f"{line.strip()!r} names the site's {left[0]} button, which Colab does not show: "
                           "say it for the edition in SITE_WORDS (_ext/colab.py)")
    return text


class Page:
    """One chapter's markdown made plain: `doc` is its path without suffix ("book/life")."""

    def __init__(self, doc: str, glue: dict, site: str, titles: dict[str, str], bench_folder: Path):
        self.doc, self.glue, self.site, self.titles = PurePosixPath(doc), glue, site, titles
        self.bench_folder = bench_folder
        self.attachments: dict[str, dict[str, str]] = {}

    def url(self, target: str) -> str:
        """A page of the book, relative to this one ("how.ipynb#x", "results"), on the site."""
        path, _, anchor = target.partition("#")
        stem = re.sub(r"\.(ipynb|md)$", "", path)
        parts = []
        for part in (self.doc.parent / stem).parts:
            if part == "..":
                parts.pop()
            elif part != ".":
                parts.append(part)
        return f"{self.site}{'/'.join(parts)}.html" + (f"#{anchor}" if anchor else "")

    def role(self, name: str, text: str) -> str:
        if name in ("glue:text", "glue"):
            return glued_text(self.glue, text)
        if name == "bench":
            return results.resolve(text, self.bench_folder)
        if name == "post":  # a figure quoted from a post: its text as written
            return text
        if name == "doc":  # {doc}`target` or {doc}`words <target>`
            m = re.fullmatch(r"(?:(?P<words>.*?)\s*<(?P<target>[^>]+)>|(?P<bare>.+))", text.strip())
            target = m["target"] or m["bare"]
            doc = str(PurePosixPath(*[p for p in (self.doc.parent / target).parts if p != "."]))
            words = m["words"] or self.titles.get(doc)
            if not words:
                raise EditionError(f"{{doc}}`{text}`: no page {doc!r} in the book")
            return f"[{words}]({self.url(target)})"
        raise EditionError(f"the role {{{name}}} has no plain form in the Colab edition")

    def inline(self, text: str) -> str:
        """Roles and links to the book's pages, and the site's own words (SITE_WORDS), in one
        line or paragraph of prose."""
        text = colab_words(text)
        text = ROLE.sub(lambda m: self.role(m[1], m[2]), text)

        def link(m: re.Match) -> str:
            target = m["target"]
            if re.match(r"^(https?:|mailto:|#|attachment:)", target) or not re.search(r"\.(ipynb|md)(#|$)", target):
                return m[0]
            return f"]({self.url(target)})"

        return LINK.sub(link, text)

    def picture(self, key: str, alt: str) -> str:
        """A glued picture, attached to the cell: Colab shows it without the site."""
        png = self.glue.get(key, {}).get("image/png")
        if png is None:
            raise EditionError(f"the page glued no picture named {key!r}")
        self.attachments[f"{key}.png"] = {"image/png": png}
        return f"![{alt}](attachment:{key}.png)"

    def directive(self, name: str, args: str, options: dict[str, str], body: str) -> str:
        caption = self.inline(body.strip())
        if name == "hero":  # the opening picture: document::key (the wide picture; a phone gets the same)
            _, _, key = args.partition("::")
            return f"{self.picture(key.strip(), options.get('alt', ''))}\n\n{caption}".strip()
        if name == "glue:figure":
            return f"{self.picture(args.strip(), options.get('alt', ''))}\n\n{caption}".strip()
        if name == "dropdown":  # folded on the site; Colab's Markdown folds HTML's details alike
            return f"<details>\n<summary>{self.inline(args.strip())}</summary>\n\n{caption}\n\n</details>"
        if name == "bench-rows":  # a study's table, from its result file
            record = results.load_study(args.strip(), options.get("path", "native"), self.bench_folder)
            rows = [record["header"], ["---"] * len(record["header"]), *record["rows"]]
            return "\n".join("| " + " | ".join(str(c) for c in row) + " |" for row in rows)
        raise EditionError(f"the directive {{{name}}} has no plain form in the Colab edition")

    def markdown(self, source: str) -> str:
        """A markdown cell's source, plain. Fenced code without a directive is kept as it is;
        the prose between fences is converted a run of lines at a time (a role may wrap)."""
        lines, chunks, prose, i = source.split("\n"), [], [], 0

        def flush():
            if prose:
                chunks.append(self.inline("\n".join(prose)))
                prose.clear()

        while i < len(lines):
            m = FENCE_OPEN.match(lines[i])
            if not m:
                prose.append(lines[i])
                i += 1
                continue
            flush()
            fence, end = m["fence"], i + 1
            while end < len(lines) and lines[end].strip() != fence:
                end += 1
            if end == len(lines):
                raise EditionError(f"a fence {fence!r} that never closes")
            inner = lines[i + 1:end]
            if m["name"] is None:  # plain code: verbatim, no roles inside
                chunks.append("\n".join(lines[i:end + 1]))
            else:
                options = {}
                while inner and (o := OPTION.match(inner[0])):
                    options[o["key"]] = o["value"].strip()
                    inner = inner[1:]
                chunks.append(self.directive(m["name"], m["args"], options, "\n".join(inner)))
            i = end + 1
        flush()
        return "\n".join(chunks)


def title(nb_or_text) -> str | None:
    """A page's title: its first level-one heading."""
    text = nb_or_text if isinstance(nb_or_text, str) else "\n".join(
        "".join(c["source"]) for c in nb_or_text["cells"] if c["cell_type"] == "markdown")
    m = re.search(r"^# (.+)$", text, re.M)
    return m[1].strip() if m else None


def book_titles(root: Path, docs) -> dict[str, str]:
    """{doc: title} of the book's pages, for `{doc}` references without words."""
    titles = {}
    for doc in docs:
        for suffix in (".ipynb", ".md"):
            path = root / f"{doc}{suffix}"
            if path.is_file():
                text = path.read_text()
                titles[doc] = title(json.loads(text) if suffix == ".ipynb" else text)
    return {k: v for k, v in titles.items() if v}


def pin_install(source: str, commit: str) -> str:
    """The install cell, pinned: it installs the library at `commit`."""
    if INSTALL not in source or not re.search(r"^REPO = ", source, re.M):
        raise EditionError(f"the install cell must hold REPO = ... and {INSTALL!r}")
    source = re.sub(r"^(REPO = .*)$", rf'\1\nCOMMIT = "{commit}"  # the library this edition was built with',
                    source, count=1, flags=re.M)
    return source.replace(INSTALL, PINNED)


def edition(nb: dict, doc: str, commit: str, site: str, titles: dict[str, str], bench_folder: Path,
            glue: dict | None = None) -> dict:
    """The Colab edition of a chapter notebook `nb` (executed), whose path in the book is `doc`
    ("book/life"). Its glued values are `glue`, or those stored in `nb`'s outputs. Raises
    EditionError on markdown with no plain form."""
    page = Page(doc, glued(nb) if glue is None else glue, site, titles, bench_folder)
    cells, install = [], None
    for cell in nb["cells"]:
        cell = copy.deepcopy(cell)
        source = "".join(cell["source"])
        tags = cell.get("metadata", {}).get("tags", [])
        cell["metadata"] = {"tags": tags} if tags else {}
        if cell["cell_type"] == "markdown":
            page.attachments = {}
            try:
                cell["source"] = page.markdown(source)
            except EditionError as exc:
                raise EditionError(f"{doc}: {exc}") from None
            if page.attachments:
                cell["attachments"] = page.attachments
        elif cell["cell_type"] == "code":
            cell.pop("execution_count", None)
            cell["execution_count"] = None
            if INSTALL in source and install is None:
                cell["source"] = pin_install(source, commit)
                install = cell
                continue
            cell["source"] = source
        cells.append(cell)
    if install is None:
        raise EditionError(f"{doc}: no install cell ({INSTALL!r})")
    metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                "language_info": {"name": "python"},
                "colab": {"provenance": [], "toc_visible": True}}
    return {"cells": [install, *cells], "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}


def commit_of(root: Path) -> str:
    """The commit the book is built from (the library the edition pins); a build outside git
    pins the branch the site names instead."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def write(nb: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


# ----------------------------------------------------------------------------- Sphinx


def _repository(app) -> tuple[str, str]:
    info = app.config.html_theme_options or {}
    return info.get("repository_url", ""), info.get("repository_branch", "main")


def write_editions(app, exception) -> None:
    """After a successful HTML build: the edition of every notebook page, into _build/colab/."""
    if exception is not None or app.builder.format != "html":
        return
    root, env = Path(app.srcdir), app.env
    repository, branch = _repository(app)
    site = site_url(repository)
    commit = commit_of(root) or branch
    out = Path(app.outdir).parent / FOLDER
    executed = Path(app.outdir).parent / OUTPUT_FOLDER  # where myst-nb writes each page's run (as it finds it)
    titles = book_titles(root, env.found_docs)
    for doc in sorted(env.found_docs):
        if not (root / f"{doc}.ipynb").is_file():
            continue
        # this build's run: the notebook with its outputs, and apart from it what it glued
        ran = executed / f"{doc}.ipynb"
        nb = json.loads((ran if ran.is_file() else root / f"{doc}.ipynb").read_text())
        glue = glued(nb) | {k: v["data"] for k, v in read_glue_cache(str(executed), doc).items()}
        try:
            write(edition(nb, doc, commit, site, titles, benchresults.folder(env), glue), out / f"{doc}.ipynb")
        except EditionError as exc:
            logger.warning(f"Colab edition: {exc}", location=doc)
    logger.info(f"the Colab edition is in {out}")


def colab_button(app, pagename, templatename, context, doctree) -> None:
    """The Colab button opens the page's edition, on the branch the workflow publishes it to."""
    _, branch = _repository(app)
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        for button in group.get("buttons", []):
            if button.get("text") == "Colab":
                button["url"] = button["url"].replace(f"/blob/{branch}/", f"/blob/{COLAB_BRANCH}/", 1)


def setup(app):
    app.connect("build-finished", write_editions)
    app.connect("html-page-context", colab_button, priority=600)  # after the theme's buttons (501)


if __name__ == "__main__":
    sys.exit("colab.py is loaded by the book's Sphinx extension (toybook); the book command writes the edition")
