import dataclasses

import numpy as np
import pytest
import matplotlib.pyplot as plt
import torch

from toylib import cli
from toylib.attention import count_parameters
from toylib.life.config import ANY_SIZE, POST, POST_CHANGES, LifeConfig
from toylib.life.dataset import for_config, grid_hashes, neighbourhood_grids, random_grids, unseen_grids
from toylib.life.measure import attention_by_offset, measure, neighbour_attention, predict, summarise
from toylib.life import measure as life_measure
from toylib.life.net import SingleAttentionNet, neighbour_mask
from toylib.life.training import CHAPTER, main, train
from toylib.life.world import PATTERNS, check_grids, life_run, life_step, place
from toylib.targets import all_met, missed, over


def test_still_lifes_do_not_change():
    for name in ("block", "beehive"):
        g = place(name, 8)
        np.testing.assert_array_equal(life_step(g), g)


def test_oscillators_return_after_their_period():
    for name, period in (("blinker", 2), ("toad", 2), ("beacon", 2)):
        g = place(name, 16)
        run = life_run(g, period)
        assert not np.array_equal(run[1], g), name
        np.testing.assert_array_equal(run[period], g)


def test_blinker_by_hand():
    g = np.zeros((5, 5), np.uint8)
    g[2, 1:4] = 1
    expected = np.zeros((5, 5), np.uint8)
    expected[1:4, 2] = 1
    np.testing.assert_array_equal(life_step(g), expected)


def test_glider_crosses_the_wrap_around_edge():
    size = 8
    g = place("glider", size, top=5, left=5)  # heads down and right, over both edges
    run = life_run(g, 4 * size)
    # every 4 generations a glider is itself moved one cell down and one right
    for k in range(1, size + 1):
        np.testing.assert_array_equal(run[4 * k], np.roll(g, (k, k), axis=(0, 1)))
    np.testing.assert_array_equal(run[4 * size], g)  # all the way round the torus
    assert all(r.sum() == 5 for r in run[::4])


def test_birth_survival_and_death_rules_on_every_neighbourhood():
    grids, gi, r, c = neighbourhood_grids(6)
    nxt = life_step(grids)[gi, r, c]
    block = np.stack([grids[gi, (r + dr) % 6, (c + dc) % 6] for dr in (-1, 0, 1) for dc in (-1, 0, 1)], 1)
    centre, n = block[:, 4], block.sum(1) - block[:, 4]
    np.testing.assert_array_equal(nxt, (n == 3) | ((centre == 1) & (n == 2)))
    codes = (block * (1 << np.arange(9))).sum(1)
    assert len(np.unique(codes)) == 512  # every neighbourhood appears
    assert np.bincount(codes).min() == 36  # at every one of the 6*6 cells


def test_batched_step_equals_stepping_each_grid():
    x = random_grids(5, 7, np.random.default_rng(0))
    np.testing.assert_array_equal(life_step(x), np.stack([life_step(g) for g in x]))


def test_same_seed_same_grids_and_densities_span_the_range():
    a = random_grids(200, 8, np.random.default_rng(1))
    b = random_grids(200, 8, np.random.default_rng(1))
    np.testing.assert_array_equal(a, b)
    d = a.mean(axis=(1, 2))
    assert d.min() < 0.15 and d.max() > 0.85
    assert not np.array_equal(a, random_grids(200, 8, np.random.default_rng(2)))


def test_unseen_grids_leave_out_training_grids():
    rng = np.random.default_rng(0)
    seen = grid_hashes(np.zeros((1, 4, 4), np.uint8))  # the empty grid is common at low density
    x, dropped = unseen_grids(500, 4, rng, seen)
    assert len(x) == 500 and dropped > 0
    assert not (grid_hashes(x) & seen)


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.full((4, 4), 2), "only 0"),
        (np.zeros(4), "2-D"),
        (np.zeros((2, 2)), "at least 3x3"),
        (np.zeros((2, 9)), "at least 3x3"),
        (np.array([[0, 1, 0], [1, -1, 0], [0, 0, 0]]), "only 0"),
    ],
)
def test_bad_grids_raise_value_errors(bad, message):
    with pytest.raises(ValueError, match=message):
        life_step(bad)


def test_the_rule_runs_on_any_rectangle_of_torus():
    """Every cell of a rows x columns torus, by its 8 neighbours counted one by one."""
    rng = np.random.default_rng(7)
    for shape in ((3, 3), (5, 7), (7, 5), (4, 16)):
        g = random_grids(2, shape, rng)
        assert g.shape == (2, *shape)
        rows, cols = shape
        want = np.zeros_like(g)
        for k, r, c in np.ndindex(g.shape):
            n = sum(g[k, (r + dr) % rows, (c + dc) % cols] for dr in (-1, 0, 1) for dc in (-1, 0, 1) if dr or dc)
            want[k, r, c] = n == 3 or (g[k, r, c] and n == 2)
        np.testing.assert_array_equal(life_step(g), want)
    glider = np.zeros((6, 9), np.uint8)
    glider[:3, :3] = place("glider", 3)
    np.testing.assert_array_equal(life_run(glider, 4)[-1], np.roll(glider, (1, 1), (0, 1)))  # it moves on
    assert check_grids(np.zeros((5, 7)), (5, 7)).shape == (5, 7)
    with pytest.raises(ValueError, match="expected 7x5 grids, got 5x7"):
        check_grids(np.zeros((5, 7)), (7, 5))
    with pytest.raises(ValueError, match="expected 16x16 grids"):
        check_grids(np.zeros((5, 7)), 16)
    with pytest.raises(ValueError, match="rows, columns"):
        random_grids(2, (5, 2), rng)


def test_bad_patterns_and_configs_raise_value_errors():
    with pytest.raises(ValueError, match="unknown pattern"):
        place("spaceship", 8)
    with pytest.raises(ValueError, match="does not fit"):
        place("diehard", 6)
    with pytest.raises(ValueError, match="mixer"):
        LifeConfig(mixer="conv")
    with pytest.raises(ValueError, match="positions must be one of"):
        LifeConfig(positions="diagonals")
    with pytest.raises(ValueError, match="density"):
        random_grids(3, 8, np.random.default_rng(0), density=(0.5, 0.2))


def test_model_shapes_and_wrong_grid_size():
    model = SingleAttentionNet(LifeConfig(grid_size=6, d_model=8))
    logits, pattern = model(torch.zeros(3, 6, 6, dtype=torch.long))
    assert logits.shape == (3, 6, 6) and pattern.shape == (3, 1, 1, 36, 36)
    torch.testing.assert_close(pattern.sum(-1), torch.ones(3, 1, 1, 36))
    assert torch.all(pattern[0, 0, 0].diagonal() == 0)  # mask_self: no cell reads itself
    with pytest.raises(ValueError, match=r"\(batch, 6, 6\)"):
        model(torch.zeros(3, 8, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="expected 6x6"):
        predict(model, np.zeros((8, 8), np.uint8))


def test_row_and_column_positions_are_shared_along_rows_and_columns():
    cells = SingleAttentionNet(LifeConfig(grid_size=6, d_model=8, positions="cells"))
    rows_cols = SingleAttentionNet(LifeConfig(grid_size=6, d_model=8, positions="rows_cols"))
    # 36 position vectors against 6 + 6: the rest of the model is the same
    assert count_parameters(cells) - count_parameters(rows_cols) == (36 - 12) * 8
    pos = rows_cols.positions().view(6, 6, 8)
    # cell (r, c) = row r + column c, so two cells of one row differ by their columns alone
    torch.testing.assert_close(pos[2, 4] - pos[2, 1], rows_cols.W_col[4] - rows_cols.W_col[1])
    torch.testing.assert_close(pos[5, 3] - pos[0, 3], rows_cols.W_row[5] - rows_cols.W_row[0])
    logits, pattern = rows_cols(torch.zeros(2, 6, 6, dtype=torch.long))
    assert logits.shape == (2, 6, 6) and pattern.shape == (2, 1, 1, 36, 36)


def test_the_state_embedding_starts_at_its_own_scale():
    torch.manual_seed(0)
    small = SingleAttentionNet(LifeConfig(grid_size=6, d_model=256, state_init=0.1))
    assert 0.08 < small.W_state.std().item() < 0.12 and 0.9 < small.W_row.std().item() * 2**0.5 < 1.1
    post = SingleAttentionNet(dataclasses.replace(POST, grid_size=6, d_model=256))
    assert 0.9 < post.W_state.std().item() < 1.1 and 0.9 < post.W_pos.std().item() < 1.1
    assert not post.config.mask_self and not post.log_scale.requires_grad and post.config.label_smoothing == 0


def test_pool_mixers_are_fixed_3x3_averages():
    for mixer, n in (("pool", 9), ("pool_no_centre", 8)):
        model = SingleAttentionNet(LifeConfig(grid_size=5, d_model=4, mixer=mixer))
        _, pattern = model(torch.zeros(1, 5, 5, dtype=torch.long))
        p = pattern[0, 0, 0]
        assert torch.all((p == 0) | torch.isclose(p, torch.tensor(1 / n)))
        assert not hasattr(model, "W_Q")
    mask = neighbour_mask(5)
    assert mask.sum(1).eq(8).all() and not mask.diagonal().any()
    # cell (0, 0) neighbours (4, 4) across both edges of the torus
    assert mask[0, 24]


def test_a_hand_built_pattern_scores_full_neighbour_attention():
    model = SingleAttentionNet(LifeConfig(grid_size=5, d_model=4, mixer="pool_no_centre"))
    assert neighbour_attention(model, np.zeros((2, 5, 5), np.uint8)) == pytest.approx(1.0)


def test_tiny_training_run_learns_and_is_deterministic():
    config = LifeConfig(grid_size=5, steps=300, eval_every=100, seed=3, val_grids=64, stop_at_target=False)
    data = for_config(config)
    _, h1 = train(config, data, device="cpu", progress=False)
    _, h2 = train(config, device="cpu", progress=False)  # builds the same data itself
    assert h1.column("loss") == h2.column("loss")  # same seed, same metrics, to the last bit
    assert h1.column("loss")[-1] < h1.column("loss")[0] - 0.05  # the mean loss between validations falls
    seen = data.seen  # a hash per training grid; few repeat
    assert 0.8 * 300 * config.batch_size < len(seen) <= 300 * config.batch_size


def test_watching_training_takes_snapshots_from_step_0_and_changes_nothing():
    from toylib.device import seed_everything
    from toylib.infer import infer
    from toylib.train import Snapshots

    config = LifeConfig(grid_size=5, steps=120, eval_every=50, seed=3, val_grids=16, stop_at_target=False)
    grid = random_grids(1, 5, np.random.default_rng(1))
    seen = Snapshots(lambda m: infer(m, grid, numpy=True)[1][0, 0, 0])  # (cells, cells)
    model, watched = train(config, device="cpu", progress=False, watch=seen, watch_every=20)
    _, plain = train(config, device="cpu", progress=False)

    def untimed(h):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in h.records]

    assert untimed(watched) == untimed(plain)  # looking at the model does not change its training
    # from before the first step to the last, then the weights train returns: out of steps,
    # it restores the best validated ones (step 100 here)
    assert seen.steps == [0, 20, 40, 60, 80, 100, 120, 100] and watched.restored_step == 100
    assert seen.titles[0] == "step 0"
    seed_everything(config.seed)  # as train does before it builds the model
    fresh = infer(SingleAttentionNet(config), grid, numpy=True)[1][0, 0, 0]
    np.testing.assert_allclose(seen.frames[0], fresh)  # step 0 is the untrained model
    np.testing.assert_allclose(seen.frames[-1], infer(model, grid, numpy=True)[1][0, 0, 0])
    with pytest.raises(ValueError, match="go together"):
        train(config, device="cpu", progress=False, watch=seen)
    with pytest.raises(ValueError, match="positive"):
        train(config, device="cpu", progress=False, watch=seen, watch_every=0)


def test_for_config_builds_the_same_data_from_the_same_seed():
    config = LifeConfig(grid_size=6, batch_size=4, val_grids=32, seed=5)
    a, b = for_config(config), for_config(config)
    np.testing.assert_array_equal(a.val_x, b.val_x)
    np.testing.assert_array_equal(a.val_y, life_step(a.val_x))
    first = [next(a.batches()) for _ in range(2)]  # every call starts the stream again
    torch.testing.assert_close(first[0], first[1])
    x, y = first[0]
    assert x.shape == (4, 6, 6) and torch.equal(y, torch.from_numpy(life_step(x.numpy())))
    assert a.seen == grid_hashes(x.numpy()) and not b.seen  # seen holds what was drawn, nothing more
    # the seed moves both streams; the validation stream is never the training stream
    other = for_config(dataclasses.replace(config, seed=6))
    assert not np.array_equal(other.val_x, a.val_x) and not torch.equal(next(other.batches())[0], x)
    assert not np.array_equal(a.val_x[:4], x.numpy())
    # the training grids are those the config's seed draws, at the config's densities
    np.testing.assert_array_equal(x.numpy(), random_grids(4, 6, np.random.default_rng(5), config.density))


def test_presets_are_the_post_and_any_size():
    assert POST == LifeConfig(**POST_CHANGES) and not POST.mask_self and POST.positions == "cells"
    assert cli.configure(CHAPTER, preset="any_size") == ANY_SIZE
    assert cli.configure(CHAPTER, {"grid_size": 6}, "post") == dataclasses.replace(POST, grid_size=6)
    text = " ".join(cli.parser(CHAPTER).format_help().split())
    assert "--preset {post,any_size}" in text and "--mixer" in text


class Oracle(torch.nn.Module):
    """A stand-in model that answers with the rule itself (or with 'all dead'), attending
    to exactly the 8 neighbours: what summarise must score as perfect (or not)."""

    def __init__(self, size: int, right: bool = True):
        super().__init__()
        self.config = LifeConfig(grid_size=size)
        self.right = right
        self.dummy = torch.nn.Parameter(torch.zeros(()))  # gives the model a device
        mask = neighbour_mask(size).float()
        self.register_buffer("pattern", mask / mask.sum(-1, keepdim=True))

    def forward(self, grids):
        nxt = torch.from_numpy(life_step(grids.cpu().numpy())).float() if self.right else torch.zeros(grids.shape)
        pattern = self.pattern.expand(len(grids), 1, 1, -1, -1)  # (batch, 1, 1, cells, cells)
        return (2 * nxt - 1).to(grids.device), pattern


def test_summary_passes_the_rule_itself_and_fails_a_model_that_kills_everything():
    good = summarise(Oracle(6), set(), test_grids=200, games=5, game_steps=10)
    assert (good.test_exact, good.games_exact, good.neighbourhoods_right) == (1.0, 1.0, 1.0)
    assert good.neighbour_attention == pytest.approx(1.0) and good.neighbourhood_errors == 0
    assert all_met(good.targets(train_seconds=10, grid_size=6))
    bad = summarise(Oracle(6, right=False), set(), test_grids=200, games=5, game_steps=10)
    assert bad.test_exact < 0.5 and bad.games_exact < 1 and bad.neighbourhoods_right < 0.8
    targets = bad.targets(train_seconds=10, grid_size=6)
    assert not all_met(targets)
    assert missed(targets) == [t.measure for t in targets[:3]]
    # a training time over the budget (3 minutes for the post's 16x16 grid on a 2-core CPU) is
    # the machine's: reported as over, not a miss of the model
    assert all_met(good.targets(train_seconds=180, grid_size=6))
    slow = good.targets(train_seconds=181, grid_size=6)
    assert all_met(slow) and missed(slow) == [] and over(slow) == ["training time"] and slow[-1].machine


def test_measure_prints_its_details_only_when_asked(capsys):
    config = LifeConfig(grid_size=6, val_grids=8)
    data = for_config(config)
    next(data.batches())  # training saw one batch
    targets = measure(Oracle(6), config, data, 1.0, details=False)
    assert capsys.readouterr().out == "" and all_met(targets)
    assert [t.measured for t in measure(Oracle(6), config, data, 1.0)] == [t.measured for t in targets]
    assert "left out as seen in training" in capsys.readouterr().out


def test_cli_trains_saves_and_loads(tmp_path, capsys):
    path = tmp_path / "life.pt"
    trained = main(["--size", "5", "--steps", "50", "--quiet", "--save", str(path), "--device", "cpu"])
    out = capsys.readouterr().out
    assert path.exists() and trained[0].measure.startswith("exact next state") and "targets missed" in out
    loaded = main(["--load", str(path), "--quiet"])
    assert "not checked against them" in capsys.readouterr().out
    # the same weights: the same answers on all 512 neighbourhoods (which do not depend on the test draw)
    assert loaded[2] == trained[2]


def test_patterns_are_rectangular_strings():
    for name, rows in PATTERNS.items():
        assert set("".join(rows)) <= set("#."), name
        check_grids(place(name, 16))


def test_attention_share_on_self_and_bad_choice():
    model = SingleAttentionNet(LifeConfig(grid_size=5, d_model=4, mixer="pool"))
    grids = np.zeros((2, 5, 5), np.uint8)
    assert neighbour_attention(model, grids, on="self") == pytest.approx(1 / 9)
    assert neighbour_attention(model, grids) == pytest.approx(8 / 9)
    with pytest.raises(ValueError, match="on must be"):
        neighbour_attention(model, grids, on="diagonal")


def test_attention_by_offset_of_a_fixed_average():
    model = SingleAttentionNet(LifeConfig(grid_size=7, d_model=4, mixer="pool_no_centre"))
    grids = random_grids(5, 7, np.random.default_rng(0))
    ring = np.full((3, 3), 1 / 8)
    ring[1, 1] = 0
    expected = np.pad(ring, 1)  # offsets -2..2: nothing two cells away
    np.testing.assert_allclose(attention_by_offset(model, grids), expected, atol=1e-6)
    np.testing.assert_allclose(attention_by_offset(model, grids[0], radius=1), ring, atol=1e-6)
    with pytest.raises(ValueError, match="radius"):
        attention_by_offset(model, grids, radius=4)


# ----------------------------------------------------------------------------- any size: attention by offset


def test_offset_attention_is_the_same_at_every_cell_and_any_size():
    from toylib.life.net import OffsetAttentionNet

    torch.manual_seed(0)
    model = OffsetAttentionNet(LifeConfig(mixer="offset", grid_size=8, d_model=8))
    with torch.no_grad():
        model.offset_scores.normal_()
    for size in (5, 11, 24):
        g = torch.from_numpy(random_grids(3, size, np.random.default_rng(size)))
        logits, pattern = model(g)
        assert logits.shape == (3, size, size) and pattern.shape == (1, 1, 1, 5, 5)
        # moving the grid round the torus moves the answer with it: no cell is special
        moved, _ = model(g.roll((2, -3), dims=(1, 2)))
        torch.testing.assert_close(moved, logits.roll((2, -3), dims=(1, 2)))
    p = pattern[0, 0, 0]
    assert p[2, 2] == 0 and torch.isclose(p.sum(), torch.tensor(1.0))  # a cell may not attend to itself
    with pytest.raises(ValueError, match="at least 3x3"):
        model(torch.zeros(1, 2, 7))
    # on a 3x3 torus two rows down is one row up: the model reads that cell under both offsets
    g = torch.from_numpy(random_grids(2, 3, np.random.default_rng(3)))
    p = pattern[0, 0, 0]
    on_alive = sum(p[dr + 2, dc + 2] * g.roll((-(dr % 3), -(dc % 3)), (1, 2)).float()
                   for dr in range(-2, 3) for dc in range(-2, 3))
    x = model.W_state[g.long()]
    torch.testing.assert_close(model(g)[0], model.readout(x, on_alive))
    with pytest.raises(ValueError, match="radius"):
        LifeConfig(mixer="offset", grid_size=8, radius=4)


def test_offset_attention_sums_the_values_it_attends_to():
    """The forward pass's shortcut (values are one of two) gives what summing each cell's
    attended values one by one gives."""
    from toylib.life.net import OffsetAttentionNet

    torch.manual_seed(1)
    model = OffsetAttentionNet(LifeConfig(mixer="offset", grid_size=8, d_model=4, radius=1))
    with torch.no_grad():
        model.offset_scores.normal_()
    g = torch.from_numpy(random_grids(1, 6, np.random.default_rng(0)))[0]
    logits, pattern = model(g[None])
    x = model.W_state[g.long()]  # (6, 6, d)
    v = x @ model.W_V
    z = torch.zeros_like(x)
    for i in range(6):
        for j in range(6):
            for dr in (-1, 0, 1):
                for dc in (-1, 0, 1):
                    z[i, j] += pattern[0, 0, 0, dr + 1, dc + 1] * v[(i + dr) % 6, (j + dc) % 6]
    h = x + z
    h = h + torch.nn.functional.silu(h @ model.W_hidden)
    torch.testing.assert_close(logits[0], (h @ model.W_class)[..., 0])


def test_any_size_model_trains_small_and_is_exact_on_large_grids():
    from toylib.life.measure import any_size_check, any_size_targets, small_tori_check, window_margins

    model, history = train(dataclasses.replace(ANY_SIZE, seed=0), device="cpu", progress=False)
    assert history.stop_reason == "callback"  # exact on validation, attention on the neighbours
    by_offset = attention_by_offset(model, None)
    assert by_offset.shape == (5, 5) and by_offset[1:4, 1:4].sum() - by_offset[2, 2] >= 0.99
    assert neighbour_attention(model, None) == pytest.approx(by_offset[1:4, 1:4].sum() - by_offset[2, 2])
    result = any_size_check(model, grids=20, shapes=(64, (5, 7), (9, 31)), games=((40, 30), ((12, 50), 40)))
    assert result == {("grids", 64): 1.0, ("grids", (5, 7)): 1.0, ("grids", (9, 31)): 1.0,
                      ("game", 40, 30): 1.0, ("game", (12, 50), 40): 1.0}
    # tori narrower than its reach: exact on every 3x3 and 4x4 grid, and on 3- and 4-wide ones
    small = small_tori_check(model, grids=20)
    assert small == {("every", (3, 3)): 1.0, ("every", (4, 4)): 1.0, ("grids", (100, 3)): 1.0,
                     ("grids", (4, 100)): 1.0}
    windows = window_margins(model)  # why: right on every window a cell can meet
    assert windows["windows"] == 2 ** 25 and windows["wrong"] == 0 and windows["margin"] > 0.1
    small_rows = any_size_targets({**small, ("windows", 2 ** 25): 1.0}, history.seconds, grids=20)
    assert [t.measure for t in small_rows[:2]] == ["exact next state, all 512 3x3 grids",
                                                   "exact next state, all 65,536 4x4 grids"]
    assert small_rows[4].measure.startswith("right on all 33,554,432 windows") and all_met(small_rows)
    targets = any_size_targets(result, history.seconds, grids=20)
    assert all_met(targets) and [t.measure for t in targets[1:5]] == [
        "exact next state, 20 random 5x7 grids", "exact next state, 20 random 9x31 grids",
        "exact 40x40 game, 30 steps on own outputs", "exact 12x50 game, 40 steps on own outputs"]
    wrong = any_size_targets({("grids", (5, 7)): 0.99, ("game", (64, 200), 200): 0.0}, 1.0)
    assert missed(wrong) == [t.measure for t in wrong[:2]]
    # the model that learned positions takes its own square size only
    with pytest.raises(ValueError, match="expected 8x8 grids, got 5x7"):
        predict(SingleAttentionNet(LifeConfig(grid_size=8, d_model=8)), np.zeros((1, 5, 7), np.uint8))


def test_cell_attention_draws_one_panel_per_cell_with_one_colour_bar():
    import matplotlib.pyplot as plt

    from toylib.life.look import cell_attention

    pattern = neighbour_mask(5).float().numpy() / 8  # (cells, cells): each cell reads its 8 neighbours
    fig = cell_attention(pattern, [0, (2, 3), 24], grid=place("blinker", 5), columns=2)
    panels = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in panels] == ["cell (0, 0)", "cell (2, 3)", "cell (4, 4)"]
    np.testing.assert_allclose(panels[1].images[0].get_array(), pattern[13].reshape(5, 5))
    assert any(ax.get_ylabel() == "attention weight" for ax in fig.axes)  # the colour bar
    plt.close(fig)
    with pytest.raises(ValueError, match="square grid"):
        cell_attention(np.ones((25, 24)), [0])
    with pytest.raises(ValueError, match="inside a 5x5 grid"):
        cell_attention(pattern, [(5, 0)])
    with pytest.raises(ValueError, match="5x5 like the pattern"):
        cell_attention(pattern, [0], grid=np.zeros((6, 6), np.uint8))


def test_hero_shows_the_models_step_beside_the_rules_and_one_cells_attention():
    import matplotlib.pyplot as plt

    from toylib.life.look import hero

    model = SingleAttentionNet(LifeConfig(grid_size=6, d_model=8))
    grid = place("glider", 6)
    fig = hero(model, grid, cell=(1, 2))
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 4 and panels[3].get_title() == "where cell (1, 2) looks"
    np.testing.assert_array_equal(panels[2].images[0].get_array(), life_step(grid))
    wrong = int((predict(model, grid) != life_step(grid)).sum())
    assert panels[1].get_xlabel() == f"{wrong} cells differ from the rule"
    assert max(fig.get_size_inches()) <= 7.5
    plt.close(fig)
    fig = hero(model, grid, cell=(1, 2), columns=2)  # for a phone: two rows of two
    panels = [ax for ax in fig.axes if ax.images]
    assert panels[3].get_title() == "where cell (1, 2) looks" and max(fig.get_size_inches()) <= 4.8
    assert panels[2].get_position().y1 < panels[0].get_position().y0  # the second row below the first
    plt.close(fig)
    with pytest.raises(ValueError, match="columns must be 4"):
        hero(model, grid, columns=3)
    with pytest.raises(ValueError, match="takes 6x6 grids"):
        hero(model, np.zeros((5, 5), np.uint8))
    with pytest.raises(ValueError, match=r"only 0 \(dead\) and 1"):
        hero(model, np.full((6, 6), 2))


# ----------------------------------------------------------------------------- the prose's claims
def ring_table(ring: float = 0.125, beyond: float = 0.0, centre: float = 0.0) -> np.ndarray:
    """An attention-by-offset table of radius 2: `ring` on each neighbour, `beyond` further out."""
    table = np.full((5, 5), beyond)
    table[1:4, 1:4] = ring
    table[2, 2] = centre
    return table


def test_the_attention_claims_hold_for_the_rule_s_pattern_and_fail_otherwise():
    cells, readable = 25, 24
    uniform = np.full((cells, cells), 1 / readable) * (1 - np.eye(cells))
    assert all(life_measure.attention_claims(uniform, ring_table(), readable).values())
    peaked = uniform.copy()
    peaked[0, 1] = 3 / readable
    spread = life_measure.attention_claims(peaked, ring_table(ring=0.1, beyond=0.02, centre=0.05), readable)
    assert not any(spread.values()), spread
    with pytest.raises(ValueError, match="square and odd"):
        life_measure.attention_claims(uniform, np.zeros((3, 3)), readable)


def test_the_game_claims_hold_for_the_rule_and_fail_for_a_model_that_kills_everything():
    start = place("glider", 8)
    games = {"glider": start, "blinker": place("blinker", 8)}
    assert all(life_measure.game_claims(Oracle(8), games, start, generations=6).values())
    wrong = life_measure.game_claims(Oracle(8, right=False), games, start, generations=6)
    assert not wrong["both 6-generation games match the rule"] and not wrong[
        "the opening picture: the model's step is the rule's"]


def test_the_variant_claims_follow_the_table():
    exact = {"ours": 1.0, life_measure.CELL: 0.2, life_measure.STATE: 0.8, life_measure.ITSELF: 1.0, life_measure.NO_SCALE: 0.9,
             life_measure.NO_SMOOTHING: 0.9, life_measure.POST: 0.0, "fixed 3x3 average": 1.0}
    first = {"ours": 400, life_measure.CELL: np.inf, life_measure.STATE: 600, life_measure.ITSELF: 500, life_measure.NO_SCALE: 500,
             life_measure.NO_SMOOTHING: 500, life_measure.POST: np.inf, "fixed 3x3 average": 100}
    on = {"ours": 0.9, life_measure.CELL: 0.1, life_measure.STATE: 0.8, life_measure.ITSELF: 0.85, life_measure.NO_SCALE: 0.7,
          life_measure.NO_SMOOTHING: 0.7, life_measure.POST: 0.15}
    assert all(life_measure.variant_claims(exact, first, on, self_share=0.02).values())
    late_pool = life_measure.variant_claims(exact, {**first, "fixed 3x3 average": 300}, on, self_share=0.02)
    assert [k for k, v in late_pool.items() if not v] == ["the pools: 100 % exact, first exact in half ours' steps or less"]
    sharp = life_measure.variant_claims(exact, first, {**on, life_measure.NO_SMOOTHING: 0.95}, self_share=0.005)
    assert [k for k, v in sharp.items() if not v] == [
        "self allowed: >= 1 % on itself, >= 99 % exact", "no learned scale, no smoothing: less on the neighbours than ours"]
    with pytest.raises(ValueError, match="lacks some of its rows"):
        life_measure.variant_claims(exact, first, {"ours": 0.9}, 0.02)


def test_two_steps_away_is_small_but_never_zero():
    assert all(life_measure.two_away_claims(ring_table(ring=0.12, beyond=0.002)).values())
    assert not any(life_measure.two_away_claims(ring_table()).values())  # nothing beyond: the claim is false
    assert not any(life_measure.two_away_claims(ring_table(beyond=0.02)).values())


def test_window_margins_find_a_model_that_breaks_the_rule():
    """An untrained model is wrong on some window, and every window is run: 2 states times
    2 ** 24 neighbourhoods for a reach of two."""
    from toylib.life.measure import window_margins
    from toylib.life.net import OffsetAttentionNet

    torch.manual_seed(0)
    result = window_margins(OffsetAttentionNet(LifeConfig(mixer="offset", grid_size=8, d_model=8)))
    assert result["windows"] == 2 ** 25 and result["wrong"] > 0 and result["margin"] < 0


def test_the_rule_written_by_hand_steps_life_everywhere_and_switches_half_way():
    from toylib.life.look import hand_set
    from toylib.life.measure import mechanism_claims, readout_crossings, small_tori_check, window_margins

    hand = hand_set()
    windows = window_margins(hand)
    assert windows["wrong"] == 0 and windows["margin"] == pytest.approx(0.5, abs=1e-3)
    g = random_grids(20, (13, 29), np.random.default_rng(4))
    assert (predict(hand, g) == life_step(g)).all()
    assert set(small_tori_check(hand, grids=20).values()) == {1.0}
    crossings = readout_crossings(hand)
    assert crossings[0] == pytest.approx([2.5, 3.5], abs=0.01) and crossings[1] == pytest.approx([1.5, 3.5], abs=0.01)
    assert all(mechanism_claims(crossings, windows, windows).values())
    # a readout that switches a whole number late is caught, and so is a wrong window
    late = {0: [3.2, 3.5], 1: [1.5, 3.5]}
    claims = mechanism_claims(late, windows, {**windows, "wrong": 3})
    assert [k for k, v in claims.items() if not v] == [
        "the trained model is right on every window",
        "the trained readout turns a dead cell on between 2 and 3 live neighbours, off between 3 and 4"]
    assert not mechanism_claims({0: [2.5], 1: [1.5, 3.5]}, windows, windows)[
        "the trained readout turns a dead cell on between 2 and 3 live neighbours, off between 3 and 4"]
    with pytest.raises(ValueError, match="offset model"):
        hand_set(LifeConfig())
    with pytest.raises(ValueError, match="d_model >= 7"):
        hand_set(LifeConfig(mixer="offset", grid_size=8, d_model=4))


def test_the_readout_picture_draws_each_model_for_a_dead_and_a_live_cell():
    from toylib.life.look import hand_set, readout_picture

    fig = readout_picture({"written by hand": hand_set()})
    assert [ax.get_title() for ax in fig.axes] == ["a dead cell", "a live cell"]
    assert all(len(ax.lines) == 2 for ax in fig.axes)  # the model, and the zero line
    plt.close(fig)
