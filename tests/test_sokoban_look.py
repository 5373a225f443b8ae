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




# ----------------------------------------------------------------------------- the probe of the box's square

# A corridor to the goal off a room two squares wide: the box reaches the goal along row 2 or up
# column 5 then along it; the room's right column, its top and bottom squares are dead.
ROOM = """
########
#####  #
#.  $  #
#####  #
#####  #
#####@ #
#####  #
########"""


def test_live_squares_are_where_pushes_can_still_bring_the_box_to_the_goal():
    from toylib.sokoban.look import box_live

    board = world.from_xsb(ROOM)
    live = world.live_squares(board)
    assert live[2, 1:6].all() and live[3:6, 5].all()  # the goal, the row to it, the column up to the row
    assert not live[:, 6].any()  # against the right wall: no push can bring a box off it
    assert not live[1, 5] and not live[6, 5]  # the room's top and bottom: no room below or above to push from
    assert not live[board.grid.astype(bool)].any()  # walls never
    for square in range(64):  # the same as push_distance
        if not board.walls[square]:
            moved = world.Board(board.walls, board.goal, square, board.player if square != board.player else 21)
            assert bool(live.reshape(-1)[square]) == (world.push_distance(moved) < float("inf"))
    boards = [world.Board(board.walls, board.goal, s, 45) for s in (20, 13)]
    assert box_live(boards).tolist() == [True, False]


def test_the_encoder_is_its_maps_then_its_pooling():
    model = tiny().eval()
    planes = torch.from_numpy(world.to_channels(world.from_xsb(OPEN)))[None]
    with torch.no_grad():
        maps = model.encoder.features(planes)
        assert len(maps) == 1 + model.config.conv_layers and maps[0].shape == (1, 6, 6, 6)
        assert all(m.shape == (1, 8, 6, 6) for m in maps[1:])  # inside the wall
        torch.testing.assert_close(model.encoder.pool(maps[-1], planes), model.encoder(planes), rtol=0, atol=0)


def test_a_probe_is_logistic_regression_and_comes_out_the_same_every_time():
    from toylib.sokoban.look import fit_probe

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(400, 5, generator=gen)
    live = x[:, 0] * 3 - x[:, 2] + 0.5 > 0  # separable along a direction
    probe = fit_probe(x, live)
    assert ((probe.read(x) > 0) == live).double().mean() > 0.98  # the penalty leaves a few at the edge wrong
    truth = torch.tensor([3.0, 0, -1, 0, 0], dtype=torch.float64)
    assert torch.cosine_similarity(probe.weight, truth, 0) > 0.99  # the direction that separates them
    again = fit_probe(x, live)
    assert torch.equal(probe.weight, again.weight) and torch.equal(probe.bias, again.bias)
    with pytest.raises(ValueError, match="live"):
        fit_probe(x[0], live)


def test_a_count_probe_is_least_squares_and_finds_a_linear_count():
    from toylib.sokoban.look import fit_count_probe

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(500, 4, generator=gen) * torch.tensor([1.0, 10.0, 0.1, 1.0])  # features of unlike scales
    counts = 2 * x[:, 0] - 0.5 * x[:, 1] + 7
    probe = fit_count_probe(x, counts)
    torch.testing.assert_close(probe.read(x), counts.double(), rtol=0, atol=0.05)  # the ridge shrinks a little
    noisy = counts + torch.randn(500, generator=gen)
    assert (probe.read(x) - counts).abs().mean() < (noisy - counts).abs().mean()
    with pytest.raises(ValueError, match=r"counts \(n,\), got \(500, 4\) and \(10,\)"):
        fit_count_probe(x, counts[:10])


def test_an_edit_moves_the_probe_reading_to_its_target_and_the_control_is_blind_to_it():
    from toylib.sokoban.look import Probe, probe_edits

    probe = Probe(torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64), torch.tensor(0.3, dtype=torch.float64))
    features = torch.randn(6, 3)
    along, control = probe_edits(probe, features, to=-4.0)
    torch.testing.assert_close(probe.read(features + along), torch.full((6,), -4.0, dtype=torch.float64),
                               rtol=0, atol=1e-5)
    torch.testing.assert_close(probe.read(features + control), probe.read(features), rtol=0, atol=1e-5)
    torch.testing.assert_close(control.norm(dim=1), along.norm(dim=1))


def test_the_verdict_reads_the_box_square_and_an_edit_there_moves_it():
    from toylib.sokoban.look import at_box, encoder_maps, verdicts

    model = tiny().eval()
    boards = [world.from_xsb(OPEN), world.from_xsb(CORNER)]
    plain = verdicts(model, boards)
    with torch.no_grad():
        planes = torch.from_numpy(np.stack([world.to_channels(b) for b in boards]))[:, None]
        goal = torch.from_numpy(np.stack([world.encode(b.grid, b.goal, b.goal, -1) for b in boards]))
        nsteps = model(goal, planes)[1][:, 0]
    np.testing.assert_allclose(plain, torch.softmax(nsteps, -1)[:, dataset.UNSOLVABLE].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(verdicts(model, boards, torch.zeros(2, 8)), plain, rtol=0, atol=1e-6)
    again, tokens, states = verdicts(model, boards, states=True)  # and what the transformer read and wrote
    np.testing.assert_array_equal(again, plain)
    with torch.no_grad():
        torch.testing.assert_close(tokens, model.tokens(planes[:, 0]))
    assert states.shape == (2, 16) and not model.nsteps_head._forward_pre_hooks  # the hook is gone
    assert (np.abs(verdicts(model, boards, torch.full((2, 8), 5.0)) - plain) > 1e-4).all()
    with pytest.raises(RuntimeError):  # an edit of the wrong width fails the pass, and the hook still comes off
        verdicts(model, boards, torch.zeros(2, 3))
    assert not model.nsteps_head._forward_pre_hooks
    maps = encoder_maps(model, boards)
    box = [divmod(b.box, 8) for b in boards]
    for i, (r, c) in enumerate(box):
        assert torch.equal(at_box(model, maps[-1], boards)[i], maps[-1][i, :, r - 1, c - 1])


def test_the_box_map_reads_every_floor_square_but_the_players_and_is_drawn_with_deads_crossed():
    from toylib.sokoban.look import Probe, box_map, draw_box_map

    model = tiny().eval()
    board = world.from_xsb(ROOM)
    probe = Probe(torch.ones(8, dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64))
    p = box_map(model, probe, board)
    floor = ~board.grid.astype(bool)
    floor[divmod(board.player, 8)] = False
    assert np.isnan(p[~floor]).all() and ((p[floor] >= 0) & (p[floor] <= 1)).all()
    fig, ax = plt.subplots()
    draw_box_map(ax, board, p, "title")
    crosses = [line for line in ax.lines if line.get_marker() == "x"]
    assert len(crosses) == int((floor & ~world.live_squares(board)).sum() + (~world.live_squares(board).reshape(-1)[board.player]))
    plt.close(fig)


def test_the_verdicts_errors_are_counted_by_what_the_box_square_was_read():
    from toylib.sokoban.look import probe_claims, verdict_errors

    said = np.array([True, True, False, False, False, False, True])  # unsolvable, says the verdict
    solvable = np.array([True, True, False, False, False, True, False])
    live = np.array([True, True, False, True, False, True, False])
    read = np.array([False, True, True, True, False, True, False])
    errors = verdict_errors(said, solvable, live, read)
    assert list(errors.values()) == [2, 1, 3, 1, 1]
    off = (1.4, 1.3, 2.2)  # moves left, mean error: token, transformer's output, distances
    good = probe_claims([0.5, 0.8, 0.95], 0.52, (0.5, 0.02), (0.9, 0.1), errors, off)
    assert not good["a misread box or a player that cannot get behind it: 8 in 10 of the errors on unsolvable boards"]
    assert sum(good.values()) == 6
    assert not all(probe_claims([0.6, 0.8, 0.95], 0.52, (0.5, 0.02), (0.9, 0.1), errors, off).values())
    assert not probe_claims([0.5, 0.8, 0.95], 0.52, (0.05, 0.02), (0.9, 0.1), errors, off)[
        "writing 'dead' turns the verdict on 5 times as many solvable boards as a random edit"]
    worse = probe_claims([0.5, 0.8, 0.95], 0.52, (0.5, 0.02), (0.9, 0.1), errors, (2.0, 1.0, 2.2))
    assert [k for k, v in worse.items() if not v and k.startswith(("the token", "the transformer"))] == [
        "the token reads moves left with a fifth less error than the distances",
        "the transformer's output reads them less than a fifth better"]
