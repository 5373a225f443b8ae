import subprocess
import sys

import numpy as np
import pytest

ipywidgets = pytest.importorskip("ipywidgets")

from toylib.widgets import BoardGrid  # noqa: E402

LOOKS = {0: (" ", None), 1: ("#", "#333333"), 2: ("o", "#ffcc00")}


def style(value: int) -> tuple[str, str | None]:
    return LOOKS[value]


def start() -> np.ndarray:
    return np.array([[0, 1, 2, 0], [1, 1, 0, 2], [2, 0, 0, 1]])  # 3 x 4


def button(board: BoardGrid, row: int, col: int):
    return board.widget.children[row * 4 + col]


def looks(board: BoardGrid) -> list[list[tuple[str, str | None]]]:
    return [[(button(board, r, c).description, button(board, r, c).style.button_color) for c in range(4)]
            for r in range(3)]


def test_a_board_is_a_grid_of_buttons_drawn_by_style():
    board = BoardGrid(start(), style, cell_px=30)
    assert isinstance(board.widget, ipywidgets.GridBox)
    assert len(board.widget.children) == 12
    assert all(isinstance(b, ipywidgets.Button) for b in board.widget.children)
    assert board.widget.layout.grid_template_columns == "repeat(4, 30px)"
    assert looks(board) == [[LOOKS[v] for v in row] for row in start()]
    np.testing.assert_array_equal(board.values, start())


def test_values_is_a_copy():
    values = start()
    board = BoardGrid(values, style)
    values[0, 0] = 2  # the caller's array is not the board's
    board.values[0, 1] = 2  # nor is the one it hands out
    np.testing.assert_array_equal(board.values, start())


def test_a_click_calls_on_click_with_the_row_and_column():
    clicks = []
    board = BoardGrid(start(), style, on_click=lambda r, c: clicks.append((r, c)))
    button(board, 1, 2).click()
    button(board, 2, 3).click()
    button(board, 0, 0).click()
    assert clicks == [(1, 2), (2, 3), (0, 0)]
    later = []
    board.on_click = lambda r, c: later.append((r, c))  # a handler given after the board is built
    button(board, 2, 1).click()
    assert later == [(2, 1)] and len(clicks) == 3
    BoardGrid(start(), style).widget.children[0].click()  # no handler: a click does nothing


def test_set_redraws_the_cells_as_style_says():
    board = BoardGrid(start(), style)
    new = np.array([[2, 2, 2, 2], [0, 1, 0, 2], [1, 1, 1, 1]])
    board.set(new)
    np.testing.assert_array_equal(board.values, new)
    assert looks(board) == [[LOOKS[v] for v in row] for row in new]
    board.set(start().astype(np.uint8))  # any integer dtype
    assert looks(board) == [[LOOKS[v] for v in row] for row in start()]


def test_set_redraws_only_the_cells_that_changed():
    drawn = []

    def counting_style(value: int) -> tuple[str, str | None]:
        drawn.append(value)
        return style(value)

    board = BoardGrid(start(), counting_style)
    drawn.clear()
    new = start()
    new[1, 3] = 0
    board.set(new)
    assert drawn == [0]
    assert button(board, 1, 3).description == " "


def test_set_cell_changes_one_cell():
    board = BoardGrid(start(), style)
    board.set_cell(2, 1, 1)
    expected = start()
    expected[2, 1] = 1
    np.testing.assert_array_equal(board.values, expected)
    assert looks(board) == [[LOOKS[v] for v in row] for row in expected]
    with pytest.raises(ValueError, match=r"\(3, 0\) is outside the 3 x 4 board"):
        board.set_cell(3, 0, 1)
    with pytest.raises(ValueError, match="integer"):
        board.set_cell(0, 0, 1.5)


def test_enable_with_a_mask_disables_exactly_the_other_cells():
    board = BoardGrid(start(), style)
    assert not any(b.disabled for b in board.widget.children)
    mask = start() == 0
    board.enable(mask)
    assert [b.disabled for b in board.widget.children] == list(~mask.ravel())
    board.enable(False)
    assert all(b.disabled for b in board.widget.children)
    board.enable(True)
    assert not any(b.disabled for b in board.widget.children)
    with pytest.raises(ValueError, match=r"\(3, 4\) bool array"):
        board.enable(np.ones((4, 3), bool))
    with pytest.raises(ValueError, match="bool array"):
        board.enable(start())


def test_bad_values_and_style_raise_value_errors():
    with pytest.raises(ValueError, match="2-D"):
        BoardGrid([1, 2, 3], style)
    with pytest.raises(ValueError, match="2-D"):
        BoardGrid(np.zeros((2, 2, 2), int), style)
    with pytest.raises(ValueError, match="integers"):
        BoardGrid(np.zeros((2, 2)), style)
    with pytest.raises(ValueError, match="style must be a function"):
        BoardGrid(start(), LOOKS)
    board = BoardGrid(start(), style)
    with pytest.raises(ValueError, match=r"shape \(3, 4\), got \(4, 3\)"):
        board.set(start().T)
    with pytest.raises(ValueError, match="integers"):
        board.set(start() * 1.0)
    np.testing.assert_array_equal(board.values, start())  # a refused set changes nothing


def test_without_ipywidgets_toylib_imports_and_a_board_says_how_to_install_it(monkeypatch):
    code = "import sys; sys.modules['ipywidgets'] = None; import toylib.widgets"
    subprocess.run([sys.executable, "-c", code], check=True)
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # makes `import ipywidgets` fail
    with pytest.raises(ImportError, match="pip install ipywidgets"):
        BoardGrid(start(), style)
