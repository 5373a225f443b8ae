"""Plotting for the whole book: one attention grid, one animation helper, a labelled colour bar,
training curves, and the source listings that chapters show.

Animations are matplotlib FuncAnimations shown with `show_animation`, which embeds the
frames as JavaScript-driven HTML: it plays on the static site without a kernel and
without ffmpeg. `save_gif` writes the same animation as a GIF for a README.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import animation
from matplotlib.colorbar import Colorbar
from matplotlib.figure import Figure

from toylib.train import History


def _as_numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


# Text in every figure is at least LABEL_PT points at 100 dpi (about 12 screen pixels): a figure
# drawn no wider than the page's column (about 8 inches) keeps its labels readable there.
LABEL_PT = 9
TITLE_PT = 11
DPI = 100


# Every PNG of a figure that a chapter shows carries the size of its smallest text, in pixels
# of the PNG, as a PNG text chunk under this key (`smallest_text_px`): the site's phone layout
# and its test read it to keep every label legible on a phone's column (_ext/phonefigs.py).
TEXT_PX_KEY = "toybook:text_px"


def smallest_text_px(fig: Figure) -> float | None:
    """The size of the smallest text `fig` draws (tick labels, annotations, legends, titles),
    in pixels at the figure's own dpi; None where it draws no text. The figure is drawn once
    on a renderer of its own, which notes the size of each text as it is drawn, so that only
    what is really drawn counts (not a hidden axis's labels)."""
    from matplotlib.backends.backend_agg import RendererAgg

    renderer = RendererAgg(*fig.bbox.size, fig.dpi)
    sizes = []
    draw_text = renderer.draw_text

    def noting(gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if s.strip():
            sizes.append(prop.get_size_in_points())
        return draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    renderer.draw_text = noting
    fig.draw(renderer)
    return min(sizes) * fig.dpi / 72 if sizes else None


def figure_png(fig: Figure) -> bytes:
    """`fig` as the PNG a notebook shows (cropped to what it draws, at its own dpi), with its
    smallest text's size under TEXT_PX_KEY."""
    import io

    text_px = smallest_text_px(fig)
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=fig.dpi, bbox_inches="tight",
                metadata={TEXT_PX_KEY: f"{text_px:.2f}"} if text_px else None)
    return png.getvalue()


def _show_figures_with_their_text_size() -> None:
    """In IPython, show every figure as `figure_png` makes it. Installed again before each cell
    runs, since matplotlib's inline backend installs its own PNG maker the first time a cell
    draws."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or getattr(shell, "_toybook_png", False):
        return
    # matplotlib's inline backend installs its own PNG maker when pyplot first loads the
    # backend, which may be in the middle of a cell that then shows a figure: load it now
    getattr(plt, "_get_backend_mod", lambda: None)()
    png = shell.display_formatter.formatters["image/png"]

    def install(*_):
        png.for_type(Figure, figure_png)

    install()
    shell.events.register("pre_run_cell", install)
    shell.events.register("post_execute", install)  # before the inline backend shows this cell's figures
    shell._toybook_png = True


_show_figures_with_their_text_size()


def colorbar(fig: Figure, image, ax, label: str, **place) -> Colorbar:
    """A colour bar for `image` (what imshow returns) beside `ax` (one axes or several), its
    label and tick labels at LABEL_PT. place: how `fig.colorbar` sets it beside them (shrink,
    aspect, fraction, pad, location, ...)."""
    if not isinstance(label, str) or not label.strip():
        raise ValueError(f"a colour bar's label says what its colours measure, got {label!r}")
    bar = fig.colorbar(image, ax=ax, **place)
    bar.set_label(label, fontsize=LABEL_PT)
    bar.ax.tick_params(labelsize=LABEL_PT)
    return bar


def attention_grid(
    patterns,
    *,
    title: str | None = None,
    cmap: str = "viridis",
    size: float = 2.2,
    vmax: float | None = None,
    labels: Sequence[str] | None = None,
    columns: int | None = None,
) -> Figure:
    """Draw a (layers, heads, query_pos, key_pos) array of attention patterns as a grid of
    heatmaps titled "Layer r, Head c", on one colour scale from 0 to `vmax` (default: the
    largest weight drawn), with its colour bar. A 2-D array is one layer with one head.
    labels: a name per position, written along the left column and the bottom row of panels.
    columns: panels per row (default: one row per layer); more heads than that wrap onto
    further rows, so that a many-headed model stays wide enough to read."""
    p = _as_numpy(patterns)
    if p.ndim == 2:
        p = p[None, None]
    if p.ndim != 4:
        raise ValueError(f"patterns must be (layers, heads, query, key) or (query, key), got shape {p.shape}")
    n_layers, n_heads = p.shape[:2]
    if labels is not None and len(labels) != p.shape[-1]:
        raise ValueError(f"{len(labels)} labels for {p.shape[-1]} positions")
    columns = n_heads if columns is None else columns
    if columns < 1:
        raise ValueError(f"columns must be at least 1, got {columns}")
    panels = [(r, h) for r in range(n_layers) for h in range(n_heads)]
    n_cols = min(columns, len(panels))
    n_rows = -(-len(panels) // n_cols)
    vmax = float(np.nanmax(p)) if vmax is None else vmax
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(size * n_cols + 0.8, size * n_rows + 0.3 * bool(title)),
                             squeeze=False, dpi=DPI, layout="constrained")
    ticks = range(p.shape[-1]) if labels is not None else []
    image = None
    for i, ax in enumerate(axes.flat):
        if i >= len(panels):
            ax.axis("off")
            continue
        r, h = panels[i]
        image = ax.imshow(p[r, h], cmap=cmap, vmin=0, vmax=vmax, interpolation="nearest")
        ax.set_title(f"Layer {r}, Head {h}", fontsize=LABEL_PT)
        bottom, left = i + n_cols >= len(panels), i % n_cols == 0
        ax.set_xticks(ticks, labels if labels is not None and bottom else [""] * len(ticks), fontsize=LABEL_PT,
                      rotation=90)
        ax.set_yticks(ticks, labels if labels is not None and left else [""] * len(ticks), fontsize=LABEL_PT)
    axes[-1, 0].set_xlabel("key position", fontsize=LABEL_PT)
    axes[-1, 0].set_ylabel("query position", fontsize=LABEL_PT)
    return finish_attention_figure(fig, image, axes, n_rows, title)


def finish_attention_figure(fig: Figure, image, axes, rows: int, title: str | None = None, aspect: int = 30) -> Figure:
    """The end of every grid of attention panels: one colour bar beside them all, labelled
    "attention weight" at LABEL_PT (shorter for more rows of panels), and the figure's title."""
    colorbar(fig, image, axes, "attention weight", shrink=min(1.0, 0.9 / rows ** 0.5), aspect=aspect)
    if title:
        fig.suptitle(title, fontsize=TITLE_PT)
    return fig


def _panels(frames) -> tuple[list[np.ndarray], list[str] | None]:
    """`animate`'s frames as panels, each (n_frames, h, w) or RGB (n_frames, h, w, 3 or 4),
    and the titles a dict of panels gives them."""
    if isinstance(frames, dict):
        titles, panels = list(frames), [_as_numpy(p) for p in frames.values()]
        if not panels:
            raise ValueError("frames is an empty dict; give at least one panel")
    else:
        f = _as_numpy(frames)
        if f.ndim == 3:
            f = f[:, None]
        if f.ndim != 4 or len(f) == 0:
            raise ValueError(f"frames must be (n_frames, h, w) or (n_frames, panels, h, w), or a dict of "
                             f"panels, got shape {f.shape}")
        titles, panels = None, [f[:, i] for i in range(f.shape[1])]
    for p in panels:
        if not (p.ndim == 3 or p.ndim == 4 and p.shape[-1] in (3, 4)) or len(p) == 0:
            raise ValueError(f"a panel is (n_frames, h, w), or RGB (n_frames, h, w, 3), got shape {p.shape}")
    if len({len(p) for p in panels}) != 1:
        raise ValueError(f"every panel needs as many frames; got {[len(p) for p in panels]}")
    return panels, titles


def animate(
    frames,
    *,
    panel_titles: Sequence[str] | None = None,
    frame_titles: Sequence[str] | None = None,
    cmap: str | Sequence[str | None] = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    size: float = 2.5,
    interval: int = 200,
    dpi: int = DPI,
    width_ratios: Sequence[float] | None = None,
    decorate: Callable[[Figure, list], Callable[[int], object] | None] | None = None,
) -> animation.FuncAnimation:
    """Animate any sequence of 2-D arrays or RGB images: attention snapshots, Life
    generations, game states, a rendered board beside its attention.

    frames: (n_frames, height, width), or (n_frames, n_panels, height, width) to play several
        arrays side by side (a model's game beside the true game), or a dict of panels of
        shapes of their own, titled by their keys, each (n_frames, h, w) or an RGB image
        (n_frames, h, w, 3): a rendered board beside its attention.
    frame_titles: one title per frame, e.g. the training step or the generation.
    cmap: one colour map, or one per panel (RGB panels ignore theirs).
    The colour scale is fixed over the whole animation (vmin, vmax default to the range of
    the colour-mapped panels), so that a change of colour is a change of value.
    width_ratios: the panels' widths (by default equal).
    decorate: called once with the figure and its axes, for labels, ticks or marks of a
        chapter's own; it may return a function of the frame number that moves those marks.
    """
    panels, keys = _panels(frames)
    n_frames, n_panels = len(panels[0]), len(panels)
    panel_titles = keys if panel_titles is None else panel_titles
    if panel_titles is not None and len(panel_titles) != n_panels:
        raise ValueError(f"{len(panel_titles)} panel titles for {n_panels} panels")
    if frame_titles is not None and len(frame_titles) != n_frames:
        raise ValueError(f"{len(frame_titles)} frame titles for {n_frames} frames")
    cmaps = [cmap] * n_panels if cmap is None or isinstance(cmap, str) else list(cmap)
    if len(cmaps) != n_panels:
        raise ValueError(f"{len(cmaps)} colour maps for {n_panels} panels")
    ratios = [1.0] * n_panels if width_ratios is None else [float(r) for r in width_ratios]
    if len(ratios) != n_panels or min(ratios) <= 0:
        raise ValueError(f"width_ratios must be {n_panels} positive numbers, got {width_ratios}")
    mapped = [p.astype(float) for p in panels if p.ndim == 3]
    vmin = float(min(np.nanmin(p) for p in mapped)) if vmin is None and mapped else vmin
    vmax = float(max(np.nanmax(p) for p in mapped)) if vmax is None and mapped else vmax
    fig, axes = plt.subplots(1, n_panels, figsize=(size * sum(ratios), size + 0.4), squeeze=False, dpi=dpi,
                             gridspec_kw={"width_ratios": ratios})
    axes = list(axes[0])
    images = []
    for i, ax in enumerate(axes):
        images.append(ax.imshow(panels[i][0], cmap=cmaps[i], vmin=vmin, vmax=vmax, interpolation="nearest"))
        ax.set_xticks([])
        ax.set_yticks([])
        if panel_titles is not None:
            ax.set_title(panel_titles[i], fontsize=LABEL_PT)
    suptitle = fig.suptitle(frame_titles[0] if frame_titles else "", fontsize=TITLE_PT)
    move = decorate(fig, axes) if decorate is not None else None
    fig.tight_layout()

    def draw(k: int):
        for im, panel in zip(images, panels):
            im.set_data(panel[k])
        if frame_titles:
            suptitle.set_text(frame_titles[k])
        if move is not None:
            move(k)
        return images

    anim = animation.FuncAnimation(fig, draw, frames=n_frames, interval=interval, blit=False)
    plt.close(fig)  # the animation keeps the figure; closing it stops a stray static copy showing
    return anim


def show_animation(anim: animation.FuncAnimation, alt: str | None = None):
    """Display an animation as self-contained HTML with play and step controls. `alt` says
    what it shows, for a reader who cannot see it (the frames' image gets it as alt text)."""
    from html import escape

    from IPython.display import HTML

    text_px = smallest_text_px(anim._fig)  # the frames' labels, for the phone layout (TEXT_PX_KEY)
    html = anim.to_jshtml(default_mode="loop")
    if text_px:  # and the frames' width in pixels, since they are inside the animation's script
        width = round(anim._fig.get_figwidth() * anim._fig.dpi)
        html = html.replace('<img id="_anim_img', f'<img data-text-px="{text_px:.2f}" data-width="{width}" '
                            'id="_anim_img', 1)
    if alt is not None:
        if not alt.strip():
            raise ValueError("alt text must say what the animation shows, got an empty string")
        html = html.replace('<img id="_anim_img', f'<img alt="{escape(alt)}" id="_anim_img', 1)
    return HTML(html)


def save_gif(anim: animation.FuncAnimation, path: str, fps: int = 5) -> None:
    """Write an animation as a GIF (Pillow, no ffmpeg needed)."""
    anim.save(path, writer=animation.PillowWriter(fps=fps))


def training_curves(history: History, metrics: Sequence[str] = ("loss",), *, title: str | None = None, log: Sequence[str] = ("loss",)) -> Figure:
    """Plot metrics against training steps (left) and training seconds (right), one row each.

    Metrics named in `log` use a logarithmic y axis."""
    missing = [m for m in metrics if not history.column(m)]
    if missing:
        raise ValueError(f"history has no records of {missing}; it has {sorted(history.last)}")
    # 5.8 inches: narrow enough that a phone shows it whole with its labels legible
    fig, axes = plt.subplots(len(metrics), 2, figsize=(5.8, 2.2 * len(metrics)), squeeze=False, sharey="row")
    for row, m in enumerate(metrics):
        recs = [r for r in history.records if m in r]
        y = [r[m] for r in recs]
        for col, x_key in enumerate(("step", "seconds")):
            ax = axes[row, col]
            ax.plot([r[x_key] for r in recs], y, marker=".", markersize=3)
            ax.set_xlabel("training step" if x_key == "step" else "training time (s)")
            ax.grid(alpha=0.3)
            if m in log:
                ax.set_yscale("log")
        axes[row, 0].set_ylabel(m)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def attention_mosaic(patterns) -> np.ndarray:
    """(layers, heads, query, key) patterns -> one 2-D array with the heads side by side and
    the layers stacked, separated by NaN (drawn blank): a whole model in one animation panel."""
    p = _as_numpy(patterns).astype(float)
    if p.ndim != 4:
        raise ValueError(f"patterns must be (layers, heads, query, key), got shape {p.shape}")
    n_layers, n_heads, n_q, n_k = p.shape
    out = np.full((n_layers * (n_q + 1) - 1, n_heads * (n_k + 1) - 1), np.nan)
    for r in range(n_layers):
        for c in range(n_heads):
            out[r * (n_q + 1) : r * (n_q + 1) + n_q, c * (n_k + 1) : c * (n_k + 1) + n_k] = p[r, c]
    return out


def show_code(obj) -> "object":
    """Display the source of a function or class as a highlighted code block, so that the
    code a chapter shows is always the code it runs."""
    import inspect

    from IPython.display import Markdown

    return Markdown(f"```python\n{inspect.getsource(obj).rstrip()}\n```")


GLUE_PREFIX = "application/papermill.record/"  # myst-nb's mark of a value kept for the prose, not shown


def glue(name: str, value) -> None:
    """Keep `value` under `name` for the chapter's prose, without showing it here. A string or
    a number: on the built page, myst-nb's role {glue:text}`name` (or {glue:text}`name:.1f`)
    shows it, so a number in a sentence is the one this run computed. A matplotlib Figure (as
    a PNG) or anything with an HTML form (an animation from `show_animation`): the directive
    {glue:figure} `name` shows it with a caption, in this chapter or, by
    `{glue:any}` with `:doc:`, on another page (the landing page's pictures). Writes the
    output that `myst_nb.glue(name, value, display=False)` writes, without needing myst-nb
    where the notebook runs (Colab)."""
    import base64

    from IPython.display import display

    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a glue name is a Python identifier, got {name!r}")
    if isinstance(value, (str, int, float, np.integer, np.floating)):
        value = value.item() if isinstance(value, (np.integer, np.floating)) else value
        bundle = {"text/plain": repr(value)}
    elif isinstance(value, Figure):
        bundle = {"image/png": base64.b64encode(figure_png(value)).decode(), "text/plain": f"<figure {name}>"}
    elif hasattr(value, "_repr_html_"):
        bundle = {"text/html": value._repr_html_(), "text/plain": f"<{type(value).__name__} {name}>"}
    else:
        raise ValueError(f"glue takes a string, a number, a matplotlib Figure or an object with an HTML form, "
                         f"got {type(value).__name__}")
    display({GLUE_PREFIX + mime: data for mime, data in bundle.items()}, raw=True,
            metadata={"scrapbook": {"name": name, "mime_prefix": GLUE_PREFIX}})
