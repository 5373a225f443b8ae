"""A page as a phone shows it: headless Chromium driven over the DevTools protocol, with the
viewport of a phone held upright (412 CSS pixels wide by default, touch, no desktop minimum).

Chromium's --window-size cannot go below 500 pixels: a page "screenshotted at 412 px" that way
is laid out 500 px wide and cropped. Here the page is laid out at the width asked for.

    python scripts/phone.py shot _build/html/book/life.html life-412.png   # the whole page
    python scripts/phone.py shot PAGE OUT --width 1440 --height 900 --top 3000  # a window of it
    python scripts/phone.py shot PAGE OUT --image 3    # the page around its fourth picture

`evaluate(page, expression)` runs a JavaScript expression in the loaded page (after its
scripts, MathJax included, have settled) and returns its value (tests/test_figures.py).
Offline: every host but the page's own files is unreachable.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path


def chromium() -> str | None:
    """Debian's Chromium, or None."""
    return next((found for name in ("chromium", "chromium-browser", "google-chrome")
                 if (found := shutil.which(name))), None)


class Browser:
    """One headless Chromium, spoken to over a pipe (--remote-debugging-pipe: JSON messages
    ending in a NUL byte, on the child's file descriptors 3 and 4)."""

    def __init__(self, timeout: float = 120):
        path = chromium()
        if path is None:
            raise RuntimeError("no Chromium: install Debian's (apt-get install chromium)")
        to_child, self._write = os.pipe()
        self._read, from_child = os.pipe()

        def plumb():  # in the child: its fd 3 reads our commands, its fd 4 writes the replies
            os.dup2(to_child, 3)
            os.dup2(from_child, 4)

        self.process = subprocess.Popen(
            [path, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--mute-audio",
             "--hide-scrollbars", "--host-resolver-rules=MAP * ~NOTFOUND", "--remote-debugging-pipe",
             "about:blank"],
            pass_fds=(3, 4), preexec_fn=plumb,  # kept open past the preexec: the numbers, not the pipes stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_child)
        os.close(from_child)
        self.timeout, self._next, self._buffer = timeout, 0, b""

    def _message(self) -> dict:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._read, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, session: str | None = None, **params) -> dict:
        """Send one command and return its result (events that arrive meanwhile are dropped,
        but for the ones `wait_for` is waiting on)."""
        self._next += 1
        message = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._message()
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    _events: list

    def wait_for(self, event: str) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            for i, e in enumerate(self._events):
                if e.get("method") == event:
                    return self._events.pop(i)
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {event}")
            self._events.append(self._message())

    def open(self, url: str, width: int, height: int, mobile: bool) -> str:
        """A new tab `width` x `height` CSS pixels, `url` loaded; returns its session."""
        self._events = []
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.send("Emulation.setDeviceMetricsOverride", session, width=width, height=height,
                  deviceScaleFactor=1, mobile=mobile)
        if mobile:
            self.send("Emulation.setTouchEmulationEnabled", session, enabled=True)
        self.send("Page.enable", session)
        self.send("Page.navigate", session, url=url)
        self.wait_for("Page.loadEventFired")
        return session

    def evaluate(self, session: str, expression: str):
        result = self.send("Runtime.evaluate", session, expression=expression, awaitPromise=True,
                           returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"the page's script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (RuntimeError, OSError, TimeoutError):
            pass
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        os.close(self._write)
        os.close(self._read)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()


# let the page's own scripts finish (MathJax typesets after load; images decode)
SETTLE = """new Promise(done => {
  const typeset = window.MathJax && MathJax.startup ? MathJax.startup.promise : Promise.resolve();
  Promise.all([typeset, ...[...document.images].map(i => i.decode().catch(() => null))])
    .then(() => setTimeout(done, 300));
})"""


def evaluate(page: Path, expression: str, width: int = 412, height: int = 900, mobile: bool = True):
    """The value of `expression` on `page` as a phone `width` CSS pixels wide shows it."""
    with Browser() as browser:
        session = browser.open(Path(page).resolve().as_uri(), width, height, mobile)
        browser.evaluate(session, SETTLE)
        return browser.evaluate(session, expression)


def shot(page: Path, out: Path, width: int = 412, height: int | None = None, top: int = 0,
         image: int | None = None) -> Path:
    """A PNG of `page` laid out `width` pixels wide: all of it, or `height` pixels from `top`,
    or (`image`) the page around its `image`-th picture (from 0), the picture's output whole."""
    mobile = width < 600
    with Browser() as browser:
        session = browser.open(Path(page).resolve().as_uri(), width, height or 900, mobile)
        browser.evaluate(session, SETTLE)
        full = browser.evaluate(session, "document.documentElement.scrollHeight")
        if image is not None:
            box = browser.evaluate(session, f"""(() => {{
                const i = [...document.querySelectorAll('article img')].filter(i => i.checkVisibility())[{image}];
                const b = (i.closest('.cell_output, figure') || i).getBoundingClientRect();
                return [b.top + window.scrollY, b.height]; }})()""")
            top, height = max(0, int(box[0]) - 40), int(box[1]) + 80
        clip = {"x": 0, "y": top, "width": width, "height": min(height or full, full - top), "scale": 1}
        data = browser.send("Page.captureScreenshot", session, format="png", captureBeyondViewport=True,
                            clip=clip)["data"]
    out = Path(out)
    out.write_bytes(base64.b64decode(data))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("shot", help="a PNG of a page")
    s.add_argument("page", type=Path)
    s.add_argument("out", type=Path)
    s.add_argument("--width", type=int, default=412)
    s.add_argument("--height", type=int, help="pixels to keep (default: the whole page)")
    s.add_argument("--top", type=int, default=0, help="where the kept pixels start")
    s.add_argument("--image", type=int, help="the page around its N-th picture (from 0) only")
    args = parser.parse_args(argv)
    print(shot(args.page, args.out, args.width, args.height, args.top, args.image))
    return 0


if __name__ == "__main__":
    sys.exit(main())
