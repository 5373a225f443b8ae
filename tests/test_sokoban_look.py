"""The Sokoban chapter's look inside (attention during a solve, nsteps along a solution) and its
playable board. The models are tiny and untrained: these check shapes, the truth the plots
mark, and what the widget's buttons do, not what a trained policy says."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib import animation

from toylib.plot import LABEL_PT
from toylib.sokoban import dataset, net, world
from toylib.sokoban.config import SokobanConfig
from toylib.sokoban.look import (
    NSTEPS_WORDS,
    ROLES,
    animate_solve,
    attention_roles,
    board_xy,
    draw_nsteps,
    first_deadlock,
    nsteps_along,
    solve_frames,
    solve_picture,
)

# The player walks round to the right of the box and pushes it three squares left onto the goal.
OPEN = """
########
#      #
# .  $ #
#   @  #
#      #
#      #
#      #
########"""
CORNER = OPEN.replace(" .  $", " .   ").replace("#      #\n# .", "#$     #\n# .")  # a box no push can move


def tiny(n_ctx: int = 32, **kw) -> net.SokobanPolicy:
    torch.manual_seed(0)
    return net.SokobanPolicy(SokobanConfig(d_model=16, channels=8, conv_layers=2, n_heads=2, n_ctx=n_ctx, **kw))


def test_the_levels():
    board = world.from_xsb(OPEN)
    assert len(world.shortest_solution(board)) == 6
    assert world.shortest_solution(world.from_xsb(CORNER)) is None


def test_nsteps_words_name_the_classes_of_nsteps_class():
    assert len(NSTEPS_WORDS) == dataset.N_NSTEPS and NSTEPS_WORDS[dataset.UNSOLVABLE] == "unsolvable"
    for n in range(200):
        words = NSTEPS_WORDS[dataset.nsteps_class(n)]
        if words == "solved":
            assert n == 0
        elif words.endswith("+"):
            assert n >= int(words[:-1])
        else:
            lo, hi = map(int, words.split(".."))
            assert lo <= n <= hi


def test_solve_frames_have_one_shape_and_each_row_sums_to_one_over_what_it_sees():
    model, board = tiny(), world.from_xsb(OPEN)
    actions = world.shortest_solution(board)
    frames = solve_frames(model, board, actions, width=12, px=4)
    t = len(actions) + 1
    assert frames.images.shape == (t, 32, 32, 3) and frames.images.dtype == np.uint8
    assert frames.attention.shape == (t, 2, 12)
    for k in range(t):  # board k sees the goal and boards 0..k: keys 0..k + 1
        np.testing.assert_allclose(frames.attention[k, :, : k + 2].sum(-1), 1, atol=1e-5)
        assert (frames.attention[k, :, k + 2 :] == 0).all()
    assert frames.solved and frames.boards[-1].is_goal() and frames.actions == actions
    assert len(frames.titles) == t and frames.titles[0].startswith("step 0: nsteps ")
    assert frames.titles[-1].endswith("solved") and "then left" in frames.titles[-2]
    assert frames.nsteps.shape == (t,) and set(frames.nsteps) <= set(range(dataset.N_NSTEPS))
    np.testing.assert_array_equal(frames.images[0], world.render_rgb(board, 4))
    first = solve_frames(model, board, actions, layer=0)
    assert first.attention.shape == (t, 2, t + 1)  # the default width: this solve's
    assert not np.allclose(first.attention, frames.attention[:, :, : t + 1])  # another layer


def test_solve_frames_play_greedily_and_keep_a_failed_walk():
    model = tiny(n_ctx=6)  # untrained: it wanders until its history is full
    frames = solve_frames(model, OPEN)
    assert 1 < len(frames.boards) <= 6 and len(frames.actions) == len(frames.boards) - 1
    assert frames.attention.shape[0] == len(frames.boards)
    assert frames.solved == frames.boards[-1].is_goal()
    if not frames.solved:
        assert frames.titles[-1].endswith("not solved")
    anim = animate_solve(frames, dpi=30)
    assert isinstance(anim, animation.FuncAnimation)
    assert anim.to_jshtml().count("data:image/png;base64") == len(frames.boards)  # every frame drawn


def test_solve_frames_refuse_bad_input():
    model = tiny()
    with pytest.raises(ValueError, match="8x8"):
        solve_frames(model, "#####\n#@$.#\n#####")
    with pytest.raises(ValueError, match="walled all round"):
        solve_frames(model, "\n".join(["#@$. ###"] + ["########"] * 7))
    with pytest.raises(ValueError, match="a Board or its XSB text"):
        solve_frames(model, np.zeros((8, 8)))
    with pytest.raises(ValueError, match="width"):
        solve_frames(model, OPEN, [world.RIGHT], width=2)
    with pytest.raises(ValueError, match="layer"):
        solve_frames(model, OPEN, [world.RIGHT], layer=3)
    with pytest.raises(ValueError, match="action 2: up is not a legal move"):
        solve_frames(model, OPEN, [world.UP, world.UP, world.UP])
    with pytest.raises(ValueError, match="action 0: undo has no move to take back"):
        solve_frames(model, OPEN, [world.UNDO])
    with pytest.raises(ValueError, match="1 to 32 boards"):
        solve_frames(model, OPEN, [world.LEFT, world.RIGHT] * 16)


def test_the_solve_animation_labels_are_readable_and_it_has_a_colour_bar():
    model, board = tiny(), world.from_xsb(OPEN)
    frames = solve_frames(model, board, world.shortest_solution(board))
    anim = animate_solve(frames, dpi=30)  # points do not depend on the dpi
    assert anim.to_jshtml().count("data:image/png;base64") == len(frames.boards)
    fig = anim._fig
    att = fig.axes[1]
    labels = [*att.get_xticklabels(), *att.get_yticklabels(), att.xaxis.label]
    assert labels and min(t.get_fontsize() for t in labels) >= LABEL_PT
    assert len(fig.axes) == 3 and fig.axes[2].get_ylabel() == "attention weight"  # the colour bar
    plt.close(fig)


def test_attention_roles_sum_each_heads_attention_by_what_each_board_is():
    model, board = tiny(), world.from_xsb(OPEN)
    frames = solve_frames(model, board, world.shortest_solution(board))
    roles = attention_roles(frames)
    assert roles.shape == (2, len(ROLES))
    np.testing.assert_allclose(roles.sum(-1), 1, atol=1e-5)
    one = frames._replace(attention=np.zeros_like(frames.attention))
    one.attention[:, :, 0] = 1  # every board looks only at the goal
    np.testing.assert_allclose(attention_roles(one), [[1, 0, 0, 0, 0]] * 2)
    for k in range(len(frames.boards)):
        one.attention[k] = 0
        one.attention[k, :, k + 1] = 1  # ... and now only at itself
    np.testing.assert_allclose(attention_roles(one), [[0, 0, 0, 0, 1]] * 2)
    with pytest.raises(ValueError, match="at least 3 boards"):
        attention_roles(solve_frames(model, board, [world.RIGHT]))


def test_board_xy_is_the_centre_of_a_square():
    assert board_xy(0, 16) == (8.0, 8.0)
    assert board_xy(8 * 2 + 5, 10) == (55.0, 25.0)  # row 2, column 5
    for bad in (-1, 64, 1.5):
        with pytest.raises(ValueError, match="a square is 0..63"):
            board_xy(bad, 16)


def test_solve_picture_draws_the_route_and_each_heads_share():
    model, board = tiny(), world.from_xsb(OPEN)
    frames = solve_frames(model, board, world.shortest_solution(board))
    fig = solve_picture(frames)
    ax, att, bar = fig.axes
    assert ax.get_title() == "solved in 6 moves" and len(ax.lines) == 4  # two routes, two end marks
    assert [t.get_text() for t in att.get_yticklabels()] == ["head 0", "head 1"]
    assert len(att.texts) == 2 * len(ROLES) and bar.get_ylabel() == "share of attention"
    texts = [*att.texts, *att.get_xticklabels(), *att.get_yticklabels(), *ax.get_xticklabels()]
    assert min(t.get_fontsize() for t in texts) >= LABEL_PT
    w, h = fig.get_size_inches()
    assert w <= 7 and h <= 4
    plt.close(fig)
    fig = solve_picture(frames, stacked=True)  # for a phone: the board above the heads
    ax, att, bar = fig.axes
    assert ax.get_position().y0 > att.get_position().y1 and fig.get_size_inches()[0] <= 4.5
    plt.close(fig)
    with pytest.raises(ValueError, match="at least 2 moves"):
        solve_picture(solve_frames(model, board, [world.RIGHT]))


def test_nsteps_along_a_solution_marks_bfs_moves_left():
    board = world.from_xsb(OPEN)
    solution = world.shortest_solution(board)
    along = nsteps_along(tiny(), board)
    assert along.actions == solution and along.probs.shape == (len(solution) + 1, dataset.N_NSTEPS)
    np.testing.assert_allclose(along.probs.sum(-1), 1, atol=1e-5)
    left = [len(solution) - k for k in range(len(solution) + 1)]
    np.testing.assert_array_equal(along.moves_left, left)
    np.testing.assert_array_equal(along.truth, [dataset.nsteps_class(n) for n in left])
    np.testing.assert_array_equal(along.target, along.truth)  # no bad move: training agrees


def test_a_bad_push_is_unsolvable_on_its_own_but_one_undo_from_the_way_in_training():
    board = world.from_xsb(OPEN)
    solution = world.shortest_solution(board)
    step, move = first_deadlock(board)
    assert (step, move) == (1, world.UP)  # right, then up pushes the box against the top wall
    before = board.apply_action(solution[0])
    dead = before.apply_action(move)
    assert dead.box != before.box and world.shortest_solution(dead) is None
    detour = solution[:step] + [move, world.UNDO] + solution[step:]
    along = nsteps_along(tiny(), board, detour)
    assert along.boards[step + 1] == dead and along.boards[step + 2] == along.boards[step]
    assert along.truth[step + 1] == dataset.UNSOLVABLE and along.moves_left[step + 1] == -1
    left_before = len(solution) - step
    assert along.target[step + 1] == dataset.nsteps_class(left_before + 1)  # undo, then the way
    assert (np.delete(along.truth, step + 1) == np.delete(along.target, step + 1)).all()
    assert first_deadlock(board, []) is None  # no push from the start
    assert first_deadlock(CORNER) is None  # already dead
    alone = nsteps_along(tiny(), dead)  # the dead board as a start: nothing to undo
    assert alone.actions == [] and list(alone.truth) == list(alone.target) == [dataset.UNSOLVABLE]
    corner = nsteps_along(tiny(), CORNER, [world.LEFT])
    assert list(corner.truth) == list(corner.target) == [dataset.UNSOLVABLE] * 2
    fig, ax = plt.subplots()
    draw_nsteps(ax, along, "a detour")
    assert ax.get_title() == "a detour" and len(ax.collections) == 2  # truth, and the one target apart
    plt.close(fig)


# ----------------------------------------------------------------------------- the widget

ipywidgets = pytest.importorskip("ipywidgets")


def parts(widget) -> list:
    """Every widget inside `widget`, depth first."""
    found = [widget]
    for child in getattr(widget, "children", ()):
        found += parts(child)
    return found


def button(widget, description: str):
    (b,) = [w for w in parts(widget) if isinstance(w, ipywidgets.Button) and w.description == description]
    return b


