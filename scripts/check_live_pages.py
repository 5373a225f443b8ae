"""Play the live boards of built pages in headless Chromium, offline, as a reader would, and
print what each page then shows (scripts/live_drivers.js does the clicking).

    .venv/bin/python scripts/check_live_pages.py _build/html/book/tictactoe.html ...

A page is copied beside itself with the driver appended, so that it loads the site's own
styles and scripts by the same relative paths; Chromium runs with every host name unresolvable,
so a board that needed the network would fail here. Exits 1 if a page has no live board, a
script error, or a board wider than the page. tests/test_live.py checks the numbers.
"""

from __future__ import annotations

import html as html_lib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DRIVER = ROOT / "scripts" / "live_drivers.js"


def chromium() -> str | None:
    """The Chromium on this machine, or None."""
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


def render(page: Path, end: str, width: int = 1440, head: str = "", results: str = "toy-live-results",
           timeout: float = 120) -> dict:
    """Load `page` (an HTML file) in headless Chromium, offline, `width` pixels wide, with `head`
    (HTML) put first in its head and `end` (HTML: the driver's script) last in its body, and
    return the JSON that the driver wrote into the pre element whose id is `results`."""
    browser = chromium()
    if browser is None:
        raise RuntimeError("no Chromium: install Debian's (apt-get install chromium) to play the live boards")
    html = page.read_text(encoding="utf8")
    at = html.rfind("</body>")
    at = len(html) if at < 0 else at
    html = html[:at] + end + html[at:]
    if head:
        opened = re.search(r"<head\b[^>]*>", html)
        if opened is None:
            raise ValueError(f"{page} has no <head> to put {head[:40]!r} in")
        html = html[:opened.end()] + head + html[opened.end():]
    copy = page.with_name(f"_live_check_{page.name}")  # beside the page: the site's files by the same paths
    copy.write_text(html, encoding="utf8")
    try:
        out = subprocess.run(
            [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--mute-audio",
             "--host-resolver-rules=MAP * ~NOTFOUND", f"--window-size={width},2000", "--virtual-time-budget=20000",
             "--dump-dom", copy.resolve().as_uri()],
            capture_output=True, text=True, timeout=timeout, check=True).stdout
    finally:
        copy.unlink()
    # the last such element (the driver's own source names it too); the site's theme adds attributes
    found = list(re.finditer(rf'<pre id="{re.escape(results)}"[^>]*>(.*?)</pre>', out, re.S))
    if not found:
        raise RuntimeError(f"{page}: the driver left no results (did the page's scripts run?)")
    body = found[-1].group(1)
    return json.loads(html_lib.unescape(body))


def play(page: Path, width: int = 1440, timeout: float = 120) -> dict:
    """Load `page` (an HTML file) with the driver appended, `width` pixels wide, and return
    the driver's results: {"boards": [...], "errors": [...]}."""
    # Chromium's window is at least 500 pixels wide: narrower, the boards get a column as wide
    # as a phone's page leaves them (the page's margins taken off), and must fit it
    narrow = f"<style>.toy-live {{ max-width: {width - 32}px; }}</style>" if width < 500 else ""
    driver = f"<script>{DRIVER.read_text(encoding='utf8')}</script>"
    return render(page, narrow + driver, width, timeout=timeout)


def main(argv: list[str]) -> int:
    bad = 0
    for name in argv:
        for width in (1440, 412):
            result = play(Path(name), width)
            print(f"{name} at {width} px: {json.dumps(result)[:600]}")
            if result["errors"] or not result["boards"]:
                bad += 1
            bad += sum(b["width"] > b["shown"] for b in result["boards"])  # scrolls sideways
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
