"""Live boards for the static site: a chapter's trained model played in the reader's browser,
with no kernel. A board is an HTML output (`Live`) that carries the model's weights, the
shared forward pass (`js/nn.js`), the chapter's own script (`<chapter>/live.js`: its rules,
its model, its board) and their style sheet, all inline: the page fetches nothing, so it
works from a file, offline, in Jupyter and on Colab alike.

The weights are the ones the notebook just trained, written into the page as base64 float32
(`weights`); nothing is committed. tests/test_live.py runs the scripts under Node against the
PyTorch models and the Python rules, and drives the built boards in headless Chromium.
"""

from __future__ import annotations

import base64
import itertools
import json
from importlib import resources

import numpy as np
import torch
from torch import nn

SCRIPTS = ("js/nn.js",)  # every board's: the shared forward pass
_ids = itertools.count(1)


def weights(model: nn.Module) -> dict[str, dict]:
    """The model's parameters and persistent buffers, {name: {"shape", "b64"}}: float32,
    little-endian, base64, as `ToyNN.load` reads them."""
    out = {}
    for name, t in model.state_dict().items():
        if not t.is_floating_point():
            raise ValueError(f"{name} is {t.dtype}: a live board carries float weights only")
        a = t.detach().to("cpu", torch.float32).contiguous().numpy().astype("<f4")
        out[name] = {"shape": list(a.shape), "b64": base64.b64encode(a.tobytes()).decode("ascii")}
    return out


def source(path: str) -> str:
    """The text of one of toylib's scripts or style sheets, by its path inside the package."""
    return resources.files("toylib").joinpath(path).read_text(encoding="utf8")


class Live:
    """A live board: `html` is the whole output (the cell shows it through `_repr_html_`).

    chapter: the package whose `live.js` defines the board, under the global `api`, whose
    `mount(element, data)` builds it; data: what mount reads (JSON-serialisable), typically
    the weights and the config."""

    def __init__(self, chapter: str, api: str, data: dict):
        if not chapter.isidentifier() or not api.isidentifier():
            raise ValueError(f"chapter and api must be names, got {chapter!r}, {api!r}")
        self.chapter, self.data = chapter, data
        self.id = f"toy-live-{chapter}-{next(_ids)}"
        # "</" would end the script element early; JSON may say "<\/" instead
        payload = json.dumps(data, separators=(",", ":"), default=_plain).replace("</", "<\\/")
        scripts = "".join(f"<script>{source(p)}</script>" for p in (*SCRIPTS, f"{chapter}/live.js"))
        self.html = (f'<style>{source("js/live.css")}</style>\n<div class="toy-live" id="{self.id}">'
                     f"<noscript>This board needs JavaScript.</noscript></div>\n{scripts}\n"
                     f'<script>{api}.mount(document.getElementById("{self.id}"), {payload});</script>')

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return f"<live {self.chapter} board, {len(self.html) / 1e3:.0f} kB>"


def _plain(x):
    """JSON for numpy and torch values."""
    if isinstance(x, (np.ndarray, torch.Tensor)):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"cannot write {type(x).__name__} into a live board")
