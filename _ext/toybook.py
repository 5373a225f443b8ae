"""The book's own Sphinx extension (listed in _config.yml under `sphinx.local_extensions`).

- `hero`: a picture that a chapter's run glued (`toylib.plot.glue(name, figure)`), shown on
  another page with its alt text and caption: the landing page's picture of each chapter.

      ```{hero} life.ipynb::life_hero
      :alt: what the picture shows, for a reader who cannot see it
      :narrow: life_hero_narrow
      Caption, a paragraph of MyST.
      ```

  `:narrow:` names a second picture that the same chapter glued: the same panels stacked
  for a phone. The page then holds both, as an HTML `<picture>`, and the browser shows the
  narrow one when the window is at most `NARROW_PX` wide, so that a wide row of panels does
  not shrink to half its size, labels and all. A chapter opens with its own hero this way.

  myst-nb's own `{glue:any}` with `:doc:` pastes a picture from another page, but with no alt
  text (the reader would hear a file name), no caption, and, unless the chapter shows the
  picture itself, a broken link (it never writes the file).
- A number keeps its unit on its line: in prose, tables and glued numbers alike, the space
  between a number and its unit ("98.77 %", "43 s") becomes a no-break space, so that a
  phone's narrow column never leaves a "%" or an "s" alone at the start of a line. Code,
  printed outputs and raw HTML keep their text as it is.
- Each inline script once: sphinx-togglebutton's and sphinx-thebe's settings reach every page
  twice (added as Sphinx starts, once with no file name and once with an empty one), so every
  page declared `const THEBE_JS_URL` twice and logged an error in the browser's console.
"""

from __future__ import annotations

import hashlib
import html
import os
import re
from binascii import a2b_base64
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from myst_nb.ext.glue.crossref import read_glue_cache
from myst_nb.ext.glue.utils import PendingGlueReference, PendingGlueReferenceError, create_pending_glue_ref
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

# a space after a digit and before a unit that stands as a word of its own: "10 seeds" keeps its space
UNIT_SPACE = re.compile(r"(?<=\d) (?=(?:%|s|ms|µs|min|kB|MB|GB|px)(?!\w))")
NARROW_PX = 600  # the widest window that gets a hero's narrow picture (a phone, held upright)


class HeroDirective(SphinxDirective):
    required_arguments = 1  # document::key
    has_content = True
    option_spec = {"alt": directives.unchanged_required, "narrow": directives.unchanged_required,
                   "name": directives.unchanged_required}

    def run(self) -> list[nodes.Node]:
        doc, sep, key = self.arguments[0].partition("::")
        if not sep or not key:
            raise self.error(f"hero takes document::key, got {self.arguments[0]!r}")
        if not self.options.get("alt", "").strip():
            raise self.error("hero needs :alt:, a sentence that says what the picture shows")
        try:
            ref = create_pending_glue_ref(self.state.document, *self.get_source_info(), doc, key)
        except PendingGlueReferenceError as exc:
            raise self.error(str(exc)) from exc
        figure = nodes.figure("", ref, classes=["toy-hero"])
        figure["toy_alt"] = self.options["alt"].strip()
        if "narrow" in self.options:
            figure["toy_narrow"] = self.options["narrow"].strip()
        self.add_name(figure)
        if self.content:
            holder = nodes.Element()
            self.state.nested_parse(self.content, self.content_offset, holder)
            first = holder[0]
            if not isinstance(first, nodes.paragraph):
                raise self.error("a hero's caption is a paragraph")
            figure += nodes.caption(first.rawsource, "", *first.children)
        return [figure]


class HeroPicture(SphinxPostTransform):
    """Put each hero's picture in place, with its alt text, before myst-nb's own transform
    (priority 5) would: that one links the picture from the site's image folder without ever
    writing it there, so a picture that its chapter glued but did not show came out broken."""

    default_priority = 4

    def run(self, **kwargs) -> None:
        for figure in list(self.document.findall(nodes.figure)):
            if "toy_alt" not in figure:
                continue
            ref = next(iter(figure.findall(PendingGlueReference)))
            wide = self._png(ref, ref.key)
            if wide is None:
                ref.parent.remove(ref)
                continue
            uri, alt = self._write(wide), figure["toy_alt"]
            narrow = self._png(ref, figure["toy_narrow"]) if "toy_narrow" in figure else None
            if narrow is None:
                ref.replace_self(nodes.image(uri=uri, alt=alt, candidates={"*": uri}))
                continue
            # both pictures in the page, the browser shows the narrow one on a phone
            ref.replace_self(nodes.raw("", (
                f'<picture><source media="(max-width: {NARROW_PX}px)" srcset="{html.escape(self._write(narrow))}">'
                f'<img src="{html.escape(uri)}" alt="{html.escape(alt)}"></picture>'), format="html"))

    def _png(self, ref: PendingGlueReference, key: str) -> str | None:
        """The base64 PNG that `ref`'s document glued as `key`, or None (and a warning)."""
        output = read_glue_cache(self.env.mystnb_config.output_folder, ref.refdoc).get(key)
        png = (output or {}).get("data", {}).get("image/png")
        if png is None:
            logger.warning(f"hero: {ref.refdoc} glued no picture named {key!r} (a matplotlib Figure)", location=ref)
        return png

    def _write(self, png: str) -> str:
        """Write a glued picture (base64 PNG) into the site's image folder, named by its hash:
        its address from this page."""
        data = a2b_base64(png)
        name = hashlib.sha256(data).hexdigest() + ".png"
        folder = Path(self.app.builder.outdir) / self.app.builder.imagedir
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
        return os.path.relpath(folder / name, (Path(self.app.builder.outdir) / self.env.docname).parent)


def units_stay_with_numbers(doctree: nodes.Node) -> int:
    """Replace, in every text of `doctree` but code, printed outputs, raw HTML and maths, the
    space between a number and its unit by a no-break space. Returns how many texts changed."""
    changed = 0
    for text in list(doctree.findall(nodes.Text)):
        if not UNIT_SPACE.search(text) or _verbatim(text):
            continue
        text.parent.replace(text, nodes.Text(UNIT_SPACE.sub("\u00a0", text)))
        changed += 1
    return changed


def _verbatim(node: nodes.Node) -> bool:
    """Whether `node` lies inside text that the page shows exactly as written."""
    while node is not None:
        if isinstance(node, (nodes.FixedTextElement, nodes.literal, nodes.raw, nodes.math)):
            return True
        node = node.parent
    return False


class UnitsStayWithNumbers(SphinxPostTransform):
    """`units_stay_with_numbers` on every page, after myst-nb has pasted the glued numbers in
    (its transform has priority 5)."""

    default_priority = 900

    def run(self, **kwargs) -> None:
        units_stay_with_numbers(self.document)


def each_script_once(app, pagename, templatename, context, doctree) -> None:
    seen, unique = set(), []
    for script in context.get("script_files", []):
        # the same script added once with filename None and once with "" (from the saved environment)
        key = (str(getattr(script, "filename", script) or ""),
               tuple(sorted((k, str(v)) for k, v in getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app):
    import benchresults  # beside this file: the benchmark's numbers on the pages
    import colab  # and the Colab edition of every chapter
    import phonefigs  # and figures whose labels a phone can read
    import sitefiles  # and what the site serves itself: MathJax (search too), downloads, no CDN icons

    benchresults.setup(app)
    colab.setup(app)
    phonefigs.setup(app)
    sitefiles.setup(app)
    app.add_directive("hero", HeroDirective)
    app.add_post_transform(HeroPicture)
    app.add_post_transform(UnitsStayWithNumbers)
    app.connect("html-page-context", each_script_once, priority=900)  # after the handlers that add scripts
    return {"parallel_read_safe": True, "parallel_write_safe": True}

