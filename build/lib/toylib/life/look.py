"""Looking at a trained Life model: an interactive board it steps beside the true rule."""

from __future__ import annotations

import numpy as np

from toylib.life.dataset import random_grids
from toylib.life.measure import model_run
from toylib.life.net import SingleAttentionNet
from toylib.life.world import PATTERNS, life_run, place


# ----------------------------------------------------------------------------- for readers with a kernel


def life_widget(model: SingleAttentionNet):
    """A board to draw on (click a cell to flip it) or fill with a famous pattern, stepped by
    the model beside the true rule; returns the widget (the last expression of a cell
    displays it). Needs a running kernel (Jupyter, Colab)."""
    import ipywidgets as w
    from IPython.display import display

    from toylib.plot import animate, show_animation
    from toylib.widgets import BoardGrid

    size = model.config.grid_size
    board = BoardGrid(np.zeros((size, size), np.uint8), style=lambda v: ("", "black" if v else "white"), cell_px=26)
    board.on_click = lambda r, c: board.set_cell(r, c, 1 - board.values[r, c])
    fits = [name for name, rows in PATTERNS.items() if len(rows) <= size and max(map(len, rows)) <= size]
    choose = w.Dropdown(options=["(draw your own)", "random"] + fits, description="pattern")
    steps = w.IntSlider(value=8, min=1, max=40, description="steps")
    go = w.Button(description="step with the model", button_style="primary")
    out = w.Output()

    def on_choose(change):
        if change["new"] == "random":
            board.set(random_grids(1, size, np.random.default_rng(), (0.2, 0.5))[0])
        elif change["new"] in PATTERNS:
            board.set(place(change["new"], size))

    def on_go(_):
        g = board.values.astype(np.uint8)
        ours, truth = model_run(model, g, steps.value), life_run(g, steps.value)
        wrong = (ours != truth).reshape(len(ours), -1).sum(1)  # cells that differ, per step
        anim = animate(np.stack([ours, truth], 1), panel_titles=("the model", "the rule"), cmap="Greys",
                       frame_titles=[f"step {t}: {n} cells differ" for t, n in enumerate(wrong)])
        with out:
            out.clear_output(wait=True)
            display(show_animation(anim))
        board.set(ours[-1])

    choose.observe(on_choose, names="value")
    go.on_click(on_go)
    return w.VBox([w.HBox([choose, steps, go]), board.widget, out])
