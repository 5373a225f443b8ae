"""Every figure a chapter shows is legible: its smallest text at least 9 pixels high at full
size (stored notebooks), and in the built site on a phone 412 pixels wide (TOYBOOK_SITE, a
browser laid out at that width by scripts/phone.py)."""

import base64
import io
import json
import os
import re
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import matplotlib
import pytest
from PIL import Image

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from toylib.plot import TEXT_PX_KEY, figure_png, smallest_text_px  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "_ext"))
sys.path.insert(0, str(ROOT / "scripts"))
import phonefigs  # noqa: E402

CHAPTERS = sorted(p.stem for p in (ROOT / "book").glob("*.ipynb"))
MIN = phonefigs.MIN_TEXT_PX


def pictures(chapter: str):
    """(cell index, what, width, text px or None) of each picture a stored chapter shows:
    its PNG outputs (glued ones too) and its animations' frames."""
    nb = json.loads((ROOT / "book" / f"{chapter}.ipynb").read_text())
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            for mime, data in out.get("data", {}).items():
                data = "".join(data) if isinstance(data, list) else data
                if mime.endswith("image/png"):
                    with Image.open(io.BytesIO(base64.b64decode(data))) as image:
                        text = image.text.get(TEXT_PX_KEY)
                        yield i, "png", image.width, float(text) if text else None
                elif mime.endswith("text/html") and "_anim_img" in data:
                    tag = re.search(r"<img\b[^>]*_anim_img[^>]*>", data).group(0)
                    px = re.search(r'data-text-px="([\d.]+)"', tag)
                    width = re.search(r'data-width="(\d+)"', tag)
                    yield i, "animation", int(width.group(1)) if width else 0, float(px.group(1)) if px else None


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_picture_says_its_text_size_and_is_legible_at_full_size(chapter):
    found = list(pictures(chapter))
    if chapter != "how":
        assert found, f"{chapter} shows no picture?"
    unsized = [(i, kind) for i, kind, _, px in found if px is None]
    assert not unsized, f"pictures with no {TEXT_PX_KEY} (drawn before toylib.plot was imported?): {unsized}"
    small = [(i, kind, px) for i, kind, _, px in found if px < MIN]
    assert not small, f"text under {MIN} px even at full size (cell, kind, px): {small}"


def test_smallest_text_px_counts_only_what_is_drawn():
    fig, ax = plt.subplots(figsize=(3, 2), dpi=100)
    ax.plot([1, 2])
    ax.set_title("small", fontsize=6)
    assert smallest_text_px(fig) == pytest.approx(6 * 100 / 72)
    ax.set_title("")  # an empty text is not a label
    ax.tick_params(labelsize=12)
    assert smallest_text_px(fig) == pytest.approx(12 * 100 / 72)
    ax.axis("off")  # a hidden axis's tick labels are not drawn
    ax.text(0.5, 0.5, "only", fontsize=20)
    assert smallest_text_px(fig) == pytest.approx(20 * 100 / 72)
    ax.texts[0].remove()
    assert smallest_text_px(fig) is None
    with Image.open(io.BytesIO(figure_png(fig))) as image:
        assert TEXT_PX_KEY not in image.text  # nothing to read, nothing to say
    ax.text(0.5, 0.5, "back", fontsize=9)
    with Image.open(io.BytesIO(figure_png(fig))) as image:
        assert float(image.text[TEXT_PX_KEY]) == pytest.approx(12.5)
    plt.close(fig)


def test_a_picture_gets_the_width_that_keeps_its_text_legible(tmp_path):
    fig, ax = plt.subplots(figsize=(8, 2), dpi=100)
    ax.plot([1, 2])
    ax.tick_params(labelsize=9)  # 12.5 px in a PNG about 800 px wide
    (tmp_path / "f.png").write_bytes(figure_png(fig))
    plt.close(fig)
    width, px = phonefigs.png_text_px(tmp_path / "f.png")
    assert px == pytest.approx(12.5) and width > 600
    page = ('<p><img alt="a" src="f.png" /></p><picture><source srcset="g.png"><img src="f.png"></picture>'
            '<img src="none.png"><img data-text-px="18.00" data-width="600" id="_anim_img1">')
    new, count = phonefigs.legible(page, tmp_path)
    assert count == 2
    assert f'<img style="min-width: {-(-width * 9 // 12.5):.0f}px" alt="a" src="f.png" />' in new
    assert '<picture><source srcset="g.png"><img src="f.png"></picture>' in new  # has a phone version
    assert '<img src="none.png">' in new  # says no text size: left alone
    assert '<img style="min-width: 300px" data-text-px="18.00"' in new  # 9 of its 18 px
    assert phonefigs.legible(new, tmp_path) == (new, 0)  # once is enough
    assert phonefigs.min_width(400, 6) == 400  # never wider than the picture itself
    with pytest.raises(ValueError, match="width and a text size"):
        phonefigs.min_width(0, 12)


# ----------------------------------------------------------------------------- the built site, on a phone

MEASURE = """[...document.querySelectorAll('article img')].filter(i => i.checkVisibility() && i.naturalWidth)
  .map(i => ({src: i.currentSrc || i.src, natural: i.naturalWidth, shown: i.getBoundingClientRect().width,
              px: i.dataset.textPx || null}))"""


@pytest.fixture(scope="module")
def site() -> Path:
    given = os.environ.get("TOYBOOK_SITE")
    if not given:
        pytest.skip("reads a built site: bash scripts/site.sh builds one and runs these (TOYBOOK_SITE)")
    import phone

    if phone.chromium() is None:
        pytest.skip("needs Chromium (apt-get install chromium)")
    return Path(given).resolve()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_figure_is_legible_on_a_phone(site, chapter):
    """At 412 CSS pixels, each picture's smallest text, scaled as the page draws the picture,
    is at least 9 pixels high."""
    import phone

    shown = phone.evaluate(site / "book" / f"{chapter}.html", MEASURE, width=412)
    measured, small = 0, []
    for img in shown:
        if img["px"]:
            px = float(img["px"])
        else:
            url = urlparse(img["src"])
            if url.scheme != "file":
                continue
            sized = phonefigs.png_text_px(Path(unquote(url.path)))
            if sized is None:
                continue
            px = sized[1]
        measured += 1
        scaled = px * img["shown"] / img["natural"]
        if scaled < MIN - 0.05:
            small.append((Path(urlparse(img["src"]).path).name[:24], round(scaled, 1)))
    if chapter != "how":
        assert measured, f"{chapter}: no picture measured"
    assert not small, f"{chapter}: text under {MIN} px on a phone: {small}"
