"""One clickable board for every chapter's interactive cell: Life's grid to draw on,
tic-tac-toe to play, a maze to edit, a Sokoban level to push boxes around.

A BoardGrid is a grid of buttons, each holding an integer; the chapter says how a value
looks (its label and colour) and what a click does. Widgets need a running kernel
(Jupyter, Colab), and ipywidgets is an optional extra (`pip install ipywidgets`), imported
only when a board is built. Only APIs present in both ipywidgets 7.7 (Colab) and 8 are used.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def _ipywidgets():
    try:
        import ipywidgets
    except ImportError as e:
        raise ImportError("toylib's widgets need ipywidgets: pip install ipywidgets") from e
    return ipywidgets


def _check_values(values) -> np.ndarray:
    v = np.asarray(values)
    if v.ndim != 2 or v.size == 0:
        raise ValueError(f"values must be a non-empty 2-D array (rows, cols), got shape {v.shape}")
    if not (np.issubdtype(v.dtype, np.integer) or v.dtype == np.bool_):
        raise ValueError(f"values must be integers, got dtype {v.dtype}")
    return v.astype(np.int64)  # a copy: the caller's array is never shared


class BoardGrid:
    """A rows x cols grid of buttons, one integer per cell.

    values: (rows, cols) integers.
    style(value) -> (label, colour): the text and background colour (a CSS colour, or None
        for the default) of a cell holding that value.
    on_click(row, col): called when a cell is clicked; it typically works out the new board
        and calls `set` or `set_cell`. It may also be assigned after the board is built.
    `widget` is the GridBox to display or to put in a VBox with the chapter's controls.
    """

    def __init__(
        self,
        values,
        style: Callable[[int], tuple[str, str | None]],
        on_click: Callable[[int, int], None] | None = None,
        cell_px: int = 28,
    ):
        w = _ipywidgets()
        if not callable(style):
            raise ValueError(f"style must be a function value -> (label, colour), got {type(style).__name__}")
        self._values = _check_values(values)
        self.style, self.on_click = style, on_click
        rows, cols = self._values.shape
        self._buttons = [
            [w.Button(layout=w.Layout(width=f"{cell_px}px", height=f"{cell_px}px", padding="0")) for _ in range(cols)]
            for _ in range(rows)
        ]
        for r in range(rows):
            for c in range(cols):
                self._buttons[r][c].on_click(self._clicked(r, c))
                self._draw(r, c)
        self.widget = w.GridBox(
            [b for row in self._buttons for b in row],
            layout=w.Layout(grid_template_columns=f"repeat({cols}, {cell_px}px)", grid_gap="1px"),
        )

    def _clicked(self, row: int, col: int):
        def handler(_button):
            if self.on_click is not None:
                self.on_click(row, col)

        return handler

    def _draw(self, row: int, col: int) -> None:
        label, colour = self.style(int(self._values[row, col]))
        button = self._buttons[row][col]
        button.description = label
        button.style.button_color = colour

    @property
    def values(self) -> np.ndarray:
        """The board, (rows, cols) int64: a copy, so changing it changes nothing on screen."""
        return self._values.copy()

    def set(self, values) -> None:
        """Show a new board of the same shape, redrawing only the cells that changed."""
        new = _check_values(values)
        if new.shape != self._values.shape:
            raise ValueError(f"values must keep the board's shape {self._values.shape}, got {new.shape}")
        changed = np.argwhere(new != self._values)  # (n_changed, 2)
        self._values = new
        for r, c in changed:
            self._draw(r, c)

    def set_cell(self, row: int, col: int, value: int) -> None:
        """Put `value` in one cell and redraw it."""
        rows, cols = self._values.shape
        if not (0 <= row < rows and 0 <= col < cols):
            raise ValueError(f"cell ({row}, {col}) is outside the {rows} x {cols} board")
        if not isinstance(value, (int, np.integer)):
            raise ValueError(f"a cell's value must be an integer, got {value!r}")
        self._values[row, col] = value
        self._draw(row, col)

    def enable(self, mask) -> None:
        """Let the cells where `mask` is True be clicked and disable the others; a single
        bool enables (True) or disables (False) every cell."""
        shape = self._values.shape
        if isinstance(mask, (bool, np.bool_)):
            m = np.full(shape, bool(mask))
        else:
            m = np.asarray(mask)
            if m.shape != shape or m.dtype != np.bool_:
                raise ValueError(f"mask must be a bool or a {shape} bool array, got {m.dtype} of shape {m.shape}")
        for r in range(shape[0]):
            for c in range(shape[1]):
                self._buttons[r][c].disabled = not m[r, c]
