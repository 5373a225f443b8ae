import dataclasses
from itertools import islice

import numpy as np
import pytest
import torch

from toylib.device import pick_device, seed_everything
from toylib.plot import LABEL_PT, animate, attention_grid, colorbar, save_gif, training_curves
from toylib.train import (
    History, Snapshots, TrainOptions, fit, forever, load_checkpoint, lr_factor, minibatch_indices, minibatches,
    prepare, rank, save_checkpoint, set_nll,
)


@dataclasses.dataclass(frozen=True)
class TinyConfig:
    n_in: int = 3
    sizes: tuple[int, ...] = (4,)


class Tiny(torch.nn.Module):
    def __init__(self, config: TinyConfig):
        super().__init__()
        self.config = config
        self.lin = torch.nn.Linear(config.n_in, 1)

    def forward(self, x):
        return self.lin(x).squeeze(-1)


def regression_task(seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.tensor([1.0, -2.0, 0.5])

    def batch():
        x = torch.randn(32, 3, generator=g)
        return x, x @ w

    def loss_fn(model, b):
        x, y = b
        loss = torch.nn.functional.mse_loss(model(x), y)
        return loss, {"rmse": loss.sqrt().item()}

    return forever(batch), loss_fn


def test_fit_learns_and_records_history():
    seed_everything(0)
    model = Tiny(TinyConfig())
    batches, loss_fn = regression_task()
    h = fit(model, batches, loss_fn, TrainOptions(steps=300, lr=0.05, eval_every=50), progress=False)
    assert [r["step"] for r in h.records] == [50, 100, 150, 200, 250, 300]
    assert h.column("loss")[-1] < 1e-3 < h.column("loss")[0]
    assert h.steps == 300 and h.seconds > 0 and h.stop_reason == "steps"
    assert "rmse" in h.last


def test_log_every_records_the_loss_between_evaluations_and_changes_nothing_else():
    def run(log_every):
        seed_everything(0)
        model = Tiny(TinyConfig())
        batches, loss_fn = regression_task()
        calls = []
        h = fit(model, batches, loss_fn, TrainOptions(steps=100, lr=0.05, eval_every=50, log_every=log_every),
                eval_fn=lambda m: {"val_w0": m.lin.weight[0, 0].item()}, progress=False,
                callback=lambda step, m, h: calls.append(step))
        return model, h, calls

    model, h, calls = run(10)
    assert h.column("step") == list(range(10, 101, 10))
    steps, values = h.series("val_w0")
    assert steps == [50, 100] == calls  # evaluations and callbacks at 50 and 100 only
    assert h.column("loss")[-1] < h.column("loss")[0]
    plain_model, plain, plain_calls = run(None)
    assert plain.column("step") == [50, 100] == plain_calls
    assert plain.column("val_w0") == values
    assert torch.equal(model.lin.weight, plain_model.lin.weight)  # logging does not change training
    with pytest.raises(ValueError, match="log_every"):
        TrainOptions(steps=10, log_every=0)


def test_watch_sees_the_model_from_step_0_and_changes_nothing():
    def run(watch, every):
        seed_everything(0)
        model = Tiny(TinyConfig())
        batches, loss_fn = regression_task()
        fit(model, batches, loss_fn, TrainOptions(steps=10, lr=0.05, eval_every=5), progress=False,
            watch=watch, watch_every=every)
        return model

    shots = Snapshots(lambda m: m.lin.weight[0, 0].item())
    watched = run(shots, 3)
    assert shots.steps == [0, 3, 6, 9, 10]  # before any step, every 3 steps, the model returned
    assert shots.frames[0] != shots.frames[-1]  # the first frame is the untrained model
    assert torch.equal(watched.lin.weight, run(None, None).lin.weight)  # watching does not change training
    shots = Snapshots(lambda m: 0)
    run(shots, 5)
    assert shots.steps == [0, 5, 10]  # the last step watched once
    with pytest.raises(ValueError, match="together"):
        run(shots, None)
    with pytest.raises(ValueError, match="positive"):
        run(shots, 0)


def test_same_seed_same_training():
    def run():
        seed_everything(3)
        model = Tiny(TinyConfig())
        batches, loss_fn = regression_task(seed=3)
        fit(model, batches, loss_fn, TrainOptions(steps=20, lr=0.01), progress=False)
        return model.lin.weight.detach().clone()

    torch.testing.assert_close(run(), run(), rtol=0, atol=0)


def test_callback_stops_training_and_sees_history():
    model = Tiny(TinyConfig())
    batches, loss_fn = regression_task()
    seen = []

    def callback(step, m, history):
        seen.append(step)
        return step >= 30

    h = fit(model, batches, loss_fn, TrainOptions(steps=1000, eval_every=10), callback=callback, progress=False)
    assert seen == [10, 20, 30] and h.steps == 30 and h.stop_reason == "callback"


def test_early_stopping_restores_the_best_weights():
    model = Tiny(TinyConfig())
    batches, loss_fn = regression_task()
    values = iter([5.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    snapshots = {}

    def eval_fn(m):
        v = next(values)
        snapshots[v] = m.lin.weight.detach().clone()
        return {"val_loss": v}

    h = fit(model, batches, loss_fn, TrainOptions(steps=100, eval_every=5, patience=3), eval_fn=eval_fn, progress=False)
    assert h.stop_reason == "early_stopping" and h.steps == 25
    torch.testing.assert_close(model.lin.weight, snapshots[1.0])


def test_plateau_lowers_the_learning_rate():
    model = Tiny(TinyConfig())
    batches, loss_fn = regression_task()
    h = fit(model, batches, loss_fn, TrainOptions(steps=60, lr=0.1, eval_every=5, plateau=(0.5, 1)), eval_fn=lambda m: {"val_loss": 1.0}, progress=False)
    # the best is the first evaluation; the rate halves after every second one since that is no better, as
    # torch's ReduceLROnPlateau(patience=1) lowers it
    assert h.column("lr") == [0.1] * 3 + [0.05] * 2 + [0.025] * 2 + [0.0125] * 2 + [0.00625] * 2 + [0.003125]


def test_rank_orders_evaluations_by_the_first_metric_then_the_next():
    assert rank({"wrong": 2, "val_loss": 0.5}, ("wrong", "val_loss")) == (2, 0.5)
    assert rank({"val_exact": 0.9, "attn": 0.5}, ("-val_exact", "-attn")) == (-0.9, -0.5)
    assert rank({"val_loss": 0.5}, "val_loss") == (0.5,)
    assert rank({"val_loss": 0.5}, ("wrong", "val_loss")) is None  # not evaluated by this monitor
    # one wrong answer fewer wins whatever the loss; an equal count goes by the loss
    assert rank({"wrong": 1, "l": 9.0}, ("wrong", "l")) < rank({"wrong": 2, "l": 0.0}, ("wrong", "l"))
    assert rank({"wrong": 1, "l": 0.2}, ("wrong", "l")) < rank({"wrong": 1, "l": 0.3}, ("wrong", "l"))
    for bad in ((), ("",), ("-",), 3):
        with pytest.raises(ValueError, match="monitor"):
            TrainOptions(steps=1, monitor=bad)


def test_a_ranked_monitor_restores_and_lowers_the_rate_by_its_order():
    model = Tiny(TinyConfig())
    batches, loss_fn = regression_task()
    # (exact, attention) per evaluation: the third is the best (most exact, whatever its attention), the
    # fifth ties it on exactness and loses on attention
    values = iter([(0.5, 0.9), (0.8, 0.1), (0.9, 0.2), (0.9, 0.3), (0.9, 0.1), (0.7, 1.0)])
    snapshots = {}

    def eval_fn(m):
        exact, attn = next(values)
        snapshots[exact, attn] = m.lin.weight.detach().clone()
        return {"val_exact": exact, "attn": attn}

    options = TrainOptions(steps=30, lr=0.1, eval_every=5, restore_best=True, plateau=(0.5, 1),
                           monitor=("-val_exact", "-attn"))
    h = fit(model, batches, loss_fn, options, eval_fn=eval_fn, progress=False)
    assert h.restored_step == 20  # (0.9, 0.3): better attention broke the tie with (0.9, 0.2)
    torch.testing.assert_close(model.lin.weight, snapshots[0.9, 0.3])
    assert h.column("lr") == [0.1] * 6  # every evaluation up to the fourth was better; two worse since


def test_plain_sgd_is_offered_and_other_optimizers_are_refused():
    seed_everything(0)
    model = Tiny(TinyConfig())
    batches, loss_fn = regression_task()
    before = model.lin.weight.detach().clone()
    x, y = next(regression_task()[0])
    grad = torch.autograd.grad(torch.nn.functional.mse_loss(model(x), y), model.lin.weight)[0]
    fit(model, regression_task()[0], lambda m, b: loss_fn(m, b)[0], TrainOptions(steps=1, lr=0.1, optimizer="sgd"), progress=False)
    # one plain SGD step on the same first batch: w <- w - lr * grad, nothing else
    torch.testing.assert_close(model.lin.weight.detach(), before - 0.1 * grad)
    h = fit(model, batches, loss_fn, TrainOptions(steps=300, lr=0.05, eval_every=100, optimizer="sgd"), progress=False)
    assert h.column("loss")[-1] < 1e-3
    with pytest.raises(ValueError, match="optimizer"):
        fit(model, batches, loss_fn, TrainOptions(steps=1, optimizer="adam"), progress=False)


def test_lr_schedules():
    assert lr_factor("constant", 0, 100, 10) == pytest.approx(0.1)
    assert lr_factor("constant", 50, 100, 10) == 1.0
    assert lr_factor("cosine", 10, 110, 10) == pytest.approx(1.0)
    assert lr_factor("cosine", 110, 110, 10) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="schedule"):
        lr_factor("linear", 0, 10, 0)


def test_minibatches_cover_every_example_each_epoch():
    x = torch.arange(10)
    it = minibatches(x, x * 2, batch_size=4, generator=torch.Generator().manual_seed(0))
    epoch = [next(it) for _ in range(3)]
    assert sorted(torch.cat([b[0] for b in epoch]).tolist()) == list(range(10))
    assert all(torch.equal(b[1], b[0] * 2) for b in epoch)
    with pytest.raises(ValueError, match="same length"):
        next(minibatches(x, x[:3], batch_size=2, generator=torch.Generator()))


def test_checkpoint_round_trip(tmp_path):
    model = Tiny(TinyConfig(sizes=(4, 5)))
    save_checkpoint(tmp_path / "m.pt", model, model.config, accuracy=0.5)
    loaded, config, extra = load_checkpoint(tmp_path / "m.pt", Tiny, TinyConfig)
    assert config == TinyConfig(sizes=(4, 5)) and extra == {"accuracy": 0.5}
    torch.testing.assert_close(loaded.lin.weight, model.lin.weight)
    with pytest.raises(ValueError, match="dataclass"):
        save_checkpoint(tmp_path / "x.pt", model, {"n_in": 3})


def test_device_and_seeding():
    assert pick_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="device"):
        pick_device("tpu")
    with pytest.raises(ValueError, match="seed"):
        seed_everything(-1)
    a = seed_everything(5).random(3)
    b = seed_everything(5).random(3)
    np.testing.assert_array_equal(a, b)


def test_attention_grid_titles_and_shapes():
    fig = attention_grid(np.random.rand(2, 3, 4, 4))
    titles = [ax.get_title() for ax in fig.axes[:-1]]  # the last axes is the colour bar
    assert titles[0] == "Layer 0, Head 0" and titles[-1] == "Layer 1, Head 2"
    assert fig.axes[-1].get_ylabel() == "attention weight"
    # every label is at least LABEL_PT, and one colour scale serves every panel
    assert min(t.get_fontsize() for ax in fig.axes for t in [ax.title, *ax.get_yticklabels()]) >= LABEL_PT
    assert {ax.images[0].get_clim() for ax in fig.axes[:-1]} == {(0.0, fig.axes[0].images[0].get_clim()[1])}
    # more heads than `columns` wrap onto further rows; spare panels are blank
    wrapped = attention_grid(np.random.rand(1, 6, 3, 3), columns=4)
    assert [ax.get_title() for ax in wrapped.axes[:6]][4] == "Layer 0, Head 4"
    assert sum(ax.axison for ax in wrapped.axes[:-1]) == 6
    with pytest.raises(ValueError, match="layers, heads"):
        attention_grid(np.zeros((2, 3, 4)))
    fig = attention_grid(np.random.rand(2, 2, 3, 3), labels=["a", "b", "c"])
    assert [t.get_text() for t in fig.axes[2].get_yticklabels()] == ["a", "b", "c"]  # left column, second row
    assert [t.get_text() for t in fig.axes[1].get_yticklabels()] == ["", "", ""]
    with pytest.raises(ValueError, match="labels"):
        attention_grid(np.zeros((1, 1, 3, 3)), labels=["a"])


def test_animation_plays_as_html_and_gif(tmp_path):
    frames = np.random.rand(4, 2, 5, 5)
    anim = animate(frames, panel_titles=["model", "truth"], frame_titles=[f"step {i}" for i in range(4)])
    html = anim.to_jshtml()
    assert html.count("data:image/png;base64") == 4
    save_gif(animate(frames[:, 0]), str(tmp_path / "a.gif"))
    assert (tmp_path / "a.gif").read_bytes()[:3] == b"GIF"
    with pytest.raises(ValueError, match="panel titles"):
        animate(frames, panel_titles=["one"])
    with pytest.raises(ValueError, match="frames"):
        animate(np.zeros((3, 3)))


def test_training_curves_need_recorded_metrics():
    h = History(records=[{"step": 1, "seconds": 0.1, "loss": 1.0}, {"step": 2, "seconds": 0.2, "loss": 0.5}])
    fig = training_curves(h, ["loss"])
    assert len(fig.axes) == 2
    with pytest.raises(ValueError, match="accuracy"):
        training_curves(h, ["accuracy"])


def test_restore_best_undoes_a_late_spike():
    model = Tiny(TinyConfig())
    batches, loss_fn = regression_task()
    values = iter([3.0, 1.0, 2.0, 9.0])
    snapshots = {}

    def eval_fn(m):
        v = next(values)
        snapshots[v] = m.lin.weight.detach().clone()
        return {"val_loss": v}

    h = fit(model, batches, loss_fn, TrainOptions(steps=20, eval_every=5, restore_best=True), eval_fn=eval_fn, progress=False)
    assert h.stop_reason == "steps" and h.restored_step == 10
    torch.testing.assert_close(model.lin.weight, snapshots[1.0])


def test_stop_when_stops_at_the_target_and_still_runs_the_callers_callback():
    from toylib.train import stop_when

    seen = []
    cb = stop_when(lambda r: r["loss"] < 1e-2, lambda step, m, h: seen.append(step))
    model = Tiny(TinyConfig())
    batches, loss_fn = regression_task()
    h = fit(model, batches, loss_fn, TrainOptions(steps=2000, lr=0.05, eval_every=50), callback=cb, progress=False)
    assert h.stop_reason == "callback" and h.last["loss"] < 1e-2 and h.steps < 2000
    assert seen == h.column("step")  # called at every evaluation, the last one included
    # the caller's callback can stop training on its own
    h = fit(Tiny(TinyConfig()), batches, loss_fn, TrainOptions(steps=2000, lr=0.05, eval_every=50), callback=stop_when(lambda r: False, lambda *a: True), progress=False)
    assert h.steps == 50 and h.stop_reason == "callback"


def test_animate_plays_rgb_panels_beside_colour_mapped_ones_and_moves_a_chapter_mark():
    rgb = np.zeros((3, 8, 8, 3))
    rgb[:, 2:4, 2:4, 0] = 1.0  # a red square
    values = np.random.default_rng(0).random((3, 2, 5))
    moved = []

    def decorate(fig, axes):
        assert len(axes) == 2
        return moved.append

    anim = animate({"board": rgb, "attention": values}, cmap=[None, "magma"], width_ratios=(1, 2),
                   frame_titles=["a", "b", "c"], decorate=decorate)
    anim._func(2)
    assert moved == [2]
    axes = anim._fig.axes
    assert [ax.get_title() for ax in axes] == ["board", "attention"]
    np.testing.assert_array_equal(axes[0].images[0].get_array(), rgb[2])
    assert axes[1].images[0].get_clim() == (values.min(), values.max())  # the scale of the mapped panel
    assert anim.to_jshtml().count("data:image/png;base64") == 3  # every frame drawn
    with pytest.raises(ValueError, match="every panel needs as many frames"):
        animate({"board": rgb, "attention": values[:2]})
    with pytest.raises(ValueError, match="a panel is"):
        animate({"board": np.zeros((3, 4, 4, 5))})
    with pytest.raises(ValueError, match="1 colour maps for 2 panels"):
        animate({"board": rgb, "attention": values}, cmap=["magma"])


def test_prepare_seeds_builds_moves_and_draws_alike_every_time():
    runs = [prepare(3, lambda: torch.nn.Linear(4, 2), "cpu") for _ in range(2)]
    (a, device, gen_a), (b, _, gen_b) = runs
    assert device == torch.device("cpu") and next(a.parameters()).device == device
    assert torch.equal(a.weight, b.weight)  # seeded before building
    # the generator is its own: what it draws does not depend on what the global one drew
    torch.rand(5)
    assert torch.equal(torch.randperm(10, generator=gen_a), torch.randperm(10, generator=gen_b))
    assert not torch.equal(prepare(4, lambda: torch.nn.Linear(4, 2))[0].weight, a.weight)
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        prepare(-1, lambda: torch.nn.Linear(4, 2))


def test_set_nll_is_minus_log_the_probability_of_the_set():
    logits = torch.tensor([[2.0, 0.5, -1.0, 0.0], [0.3, 0.1, 0.2, 4.0]], requires_grad=True)
    logp = torch.log_softmax(logits, -1)
    allowed = torch.tensor([[True, False, True, False], [False, False, False, True]])
    loss = set_nll(logp, allowed)
    p = logp.exp().detach()
    assert torch.allclose(loss, -torch.log(torch.stack([p[0, 0] + p[0, 2], p[1, 3]])), atol=1e-6)
    # one right answer: the cross-entropy
    assert torch.allclose(loss[1], torch.nn.functional.cross_entropy(logits[1:], torch.tensor([3])))
    # along another dimension, and with nothing allowed: inf
    assert torch.allclose(set_nll(logp.T, allowed.T, dim=0), loss)
    assert set_nll(logp, torch.zeros_like(allowed)).isinf().all()
    # an answer outside the set is pushed down, never up; every logit's gradient sums to 0
    loss.sum().backward()
    assert (logits.grad[~allowed] >= 0).all() and torch.allclose(logits.grad.sum(-1), torch.zeros(2), atol=1e-6)


def test_minibatch_indices_cover_every_item_once_an_epoch():
    batches = list(islice(minibatch_indices(10, 4, torch.Generator().manual_seed(0)), 6))  # 2 epochs
    assert [len(b) for b in batches] == [4, 4, 2, 4, 4, 2]
    assert sorted(torch.cat(batches[:3]).tolist()) == list(range(10))
    kept = list(islice(minibatch_indices(10, 4, torch.Generator().manual_seed(0), drop_last=True), 4))
    assert [len(b) for b in kept] == [4, 4, 4, 4]  # the short third batch of each epoch left out
    assert torch.equal(kept[0], batches[0]) and torch.equal(kept[2], batches[3])  # the same draws
    for n, size, drop, message in [(10, 0, False, "batch_size must be positive"),
                                   (3, 4, True, "a batch of 4 asks for more than the 3 there are"),
                                   (0, 4, False, "more than the 0 there are")]:
        with pytest.raises(ValueError, match=message):
            next(minibatch_indices(n, size, torch.Generator(), drop_last=drop))


def test_colorbar_passes_its_placement_on_and_writes_its_label_and_ticks_at_label_pt():
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2)
    image = axes[0].imshow(np.random.rand(3, 3))
    bar = colorbar(fig, image, axes, "attention weight", shrink=0.5, location="bottom")
    assert bar.ax.get_label() == "<colorbar>" and bar.orientation == "horizontal"  # placed by `location`
    assert bar.ax.get_position().width < 0.6 * (axes[1].get_position().x1 - axes[0].get_position().x0)  # shrunk
    label = bar.ax.xaxis.label
    assert label.get_text() == "attention weight" and label.get_fontsize() == LABEL_PT
    fig.canvas.draw()
    ticks = bar.ax.get_xticklabels()
    assert ticks and all(t.get_fontsize() == LABEL_PT for t in ticks)
    plt.close(fig)
    for bad in ("", "   ", None):
        with pytest.raises(ValueError, match="a colour bar's label says what its colours measure"):
            colorbar(fig, image, axes, bad)
