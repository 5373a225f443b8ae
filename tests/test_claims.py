"""What a chapter asserts when it runs (`targets.check`), and the numbers it glues into its
prose (`plot.glue`), as myst-nb reads them."""

import ast

import numpy as np
import pytest

from toylib.plot import GLUE_PREFIX, glue
from toylib.targets import ClaimError, Target, check


def rows():
    """A met target, a reported row, a missed target, and a missed time (a machine row)."""
    met, reported = Target("accuracy", "100 %", "100.00 %", True), Target("attention", "-", "97.1 %", None)
    missed = Target("solvability", ">= 99 %", "95.9 %", False)
    return [met, reported, missed, Target("training time", "< 2 min", "175 s", False, machine=True)]


def test_check_passes_when_every_target_is_met_and_every_claim_holds():
    line = check(rows()[:2], claims={"the heads are redundant": True, "a numpy verdict": np.bool_(True)})
    assert line == "checked: 1 target met; 2 claims hold"


def test_check_names_each_missed_target_and_false_claim():
    with pytest.raises(ClaimError) as err:
        check(rows(), claims={"layer 0 reads the lines": False, "holds": True})
    text = str(err.value)
    assert "target missed: solvability (goal >= 99 %, measured 95.9 %)" in text
    assert "claim false: layer 0 reads the lines" in text and "holds" not in text.replace("holds:", "")
    assert isinstance(err.value, AssertionError)  # a failing check cell fails nbval and the book build


def test_check_does_not_assert_the_machine():
    line = check([rows()[0], rows()[3]])
    assert line == "checked: 1 target met"


def test_check_asserts_a_floor_in_place_of_a_goal_not_yet_met_on_every_seed():
    from toylib.targets import share_target, table, with_floor

    short = with_floor(share_target("solvability", 0.985, 0.99), 0.985, 0.977, "the post's figure")
    assert short.met is False and short.floor.met and short.floor.goal == ">= 97.7 %"
    assert check([rows()[0], short]) == "checked: 1 target met; 1 floor held"
    assert ">= 99 %, floor 97.7 %" in table([short])  # the reader sees both, and the goal's verdict
    assert table([short]).rows[0][-1] == "NO"
    under = with_floor(share_target("solvability", 0.97, 0.99), 0.97, 0.977, "the post's figure")
    with pytest.raises(ClaimError, match=r"floor missed: solvability \(floor >= 97.7 %, the post's figure"):
        check([under])
    with pytest.raises(ValueError, match="reason"):
        with_floor(share_target("solvability", 0.97, 0.99), 0.97, 0.9, " ")
    with pytest.raises(ValueError, match="only a judged target"):
        Target("training time", "< 2 min", "3 min", False, machine=True, floor=short.floor)


def test_check_refuses_a_claim_that_is_not_a_verdict():
    with pytest.raises(ValueError, match="not a bool"):
        check(claims={"share": 0.97})  # a number is not a claim


def test_the_checked_line_carries_no_measured_value():
    """nbval compares it on every machine: the measured digits must not be in it."""
    line = check(rows()[:1], claims={"accuracy is perfect": True})
    assert "100.00" not in line


def test_glue_writes_what_myst_nb_reads(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: shown.append((a, k)))
    glue("t3_heads", "11")
    glue("maze_share", np.float64(0.25))
    (data,), kw = shown[0]
    assert kw["raw"] and kw["metadata"] == {"scrapbook": {"name": "t3_heads", "mime_prefix": GLUE_PREFIX}}
    # the {glue:text} role literal-evaluates text/plain: a glued string shows without quotes
    assert ast.literal_eval(data[GLUE_PREFIX + "text/plain"]) == "11"
    assert shown[1][0][0][GLUE_PREFIX + "text/plain"] == "0.25"  # a NumPy number as a plain one
    with pytest.raises(ValueError, match="identifier"):
        glue("t3 heads", 1)
    with pytest.raises(ValueError, match="a string, a number, a matplotlib Figure"):
        glue("t3_table", [1, 2])


def test_glue_keeps_a_figure_as_a_png_and_an_animation_as_html(monkeypatch):
    """What {glue:figure} and the landing page's {glue:any} show: the figure's picture, not its repr."""
    import base64

    import matplotlib.pyplot as plt
    from IPython.display import HTML

    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: shown.append((a, k)))
    fig, ax = plt.subplots(figsize=(2, 1))
    ax.plot([0, 1])
    glue("life_hero", fig)
    plt.close(fig)
    glue("maze_hero", HTML("<b>a maze</b>"))
    png = base64.b64decode(shown[0][0][0][GLUE_PREFIX + "image/png"])
    assert png.startswith(b"\x89PNG") and shown[0][1]["metadata"]["scrapbook"]["name"] == "life_hero"
    assert shown[1][0][0][GLUE_PREFIX + "text/html"] == "<b>a maze</b>"


def test_glue_matches_myst_nb_own_glue(monkeypatch):
    """The same output as myst_nb.glue(name, value, display=False), which Colab lacks."""
    myst_glue = pytest.importorskip("myst_nb.ext.glue")
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: shown.append((a, k)))
    monkeypatch.setattr(myst_glue, "ipy_display", lambda *a, **k: shown.append((a, k)))
    for value in ("36 %", 4520, 0.5):
        shown.clear()
        glue("life_value", value)
        myst_glue.glue("life_value", value, display=False)
        ours, theirs = shown
        assert ours == theirs
