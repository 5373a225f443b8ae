"""Figures that stay legible on a phone (loaded by toybook.py).

A figure is drawn for the desktop column, about 800 pixels wide; a phone held upright leaves
it about 380 (412 less the page's margins), and a browser shrinks the picture to fit, labels
and all: a 9-point label of an 800-pixel figure would be drawn under 6 pixels high. Every PNG
a chapter shows says how tall its smallest text is (`toylib.plot.TEXT_PX_KEY`, a PNG text
chunk; an animation's frame carries it as `data-text-px`), so after the build each such image
gets the narrowest width at which that text is still `MIN_TEXT_PX` high: a `min-width`, which
changes nothing where the column is wider, and on a phone stops the shrinking there. A figure
wider than that then scrolls sideways inside its output, as the wide tables do, rather than
shrinking out of reading. A picture with a phone version of its own (a `<picture>`, the
chapters' opening pictures) is left to it. tests/test_figures.py measures the result in a
browser 412 pixels wide.
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

from PIL import Image
from sphinx.util import logging

logger = logging.getLogger(__name__)

MIN_TEXT_PX = 9  # the smallest text a phone reader is asked to read, in CSS pixels
TEXT_PX_KEY = "toybook:text_px"  # as toylib.plot writes it (the site does not import toylib)
IMG = re.compile(r"<img\b[^>]*>")
PICTURE = re.compile(r"<picture\b.*?</picture>", re.S)


def _attribute(tag: str, name: str) -> str | None:
    found = re.search(rf'\s{name}="([^"]*)"', tag)
    return html.unescape(found.group(1)) if found else None


def min_width(width: int, text_px: float) -> int:
    """The narrowest a picture `width` pixels wide may be drawn for its smallest text,
    `text_px` pixels high at full size, to stay MIN_TEXT_PX high (never wider than itself)."""
    if width < 1 or text_px <= 0:
        raise ValueError(f"a picture has a width and a text size, got {width} and {text_px}")
    return min(width, math.ceil(width * MIN_TEXT_PX / text_px))


def png_text_px(path: Path) -> tuple[int, float] | None:
    """(width, smallest text's height) of a PNG that carries TEXT_PX_KEY, else None."""
    try:
        with Image.open(path) as image:
            text = getattr(image, "text", {}).get(TEXT_PX_KEY)
            return (image.width, float(text)) if text else None
    except (OSError, ValueError):
        return None


def legible(page: str, folder: Path) -> tuple[str, int]:
    """`page` (HTML in `folder`) with a min-width on every picture that says its text size;
    and how many it gave one."""
    pictures = [m.span() for m in PICTURE.finditer(page)]
    count = 0

    def fix(match: re.Match) -> str:
        nonlocal count
        tag = match.group(0)
        if any(start <= match.start() < end for start, end in pictures) or "min-width" in tag:
            return tag
        if (px := _attribute(tag, "data-text-px")) and (width := _attribute(tag, "data-width")):
            size = (int(width), float(px))  # an animation: its frames are inside its script
        elif (src := _attribute(tag, "src")) and src.endswith(".png") and "://" not in src:
            size = png_text_px((folder / src).resolve())
        else:
            size = None
        if size is None:
            return tag
        count += 1
        style = f"min-width: {min_width(*size)}px"
        if (old := _attribute(tag, "style")) is not None:
            return tag.replace(f'style="{old}"', f'style="{html.escape(old)}; {style}"', 1)
        return tag[:4] + f' style="{style}"' + tag[4:]

    return IMG.sub(fix, page), count


def rewrite(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    total = 0
    for path in out.rglob("*.html"):
        if "_static" in path.parts:
            continue
        text = path.read_text(encoding="utf8")
        new, count = legible(text, path.parent)
        if count:
            path.write_text(new, encoding="utf8")
            total += count
    logger.info(f"phone figures: {total} pictures keep their labels at least {MIN_TEXT_PX} px high")


def setup(app):
    app.connect("build-finished", rewrite)
