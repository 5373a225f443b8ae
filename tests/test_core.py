"""The core pieces every chapter stands on: targets as data, batched inference, training
options, attention snapshots, threads, the shared command line, the attention mosaic."""

import dataclasses
from typing import NamedTuple

import numpy as np
import pytest
import torch

from toylib import cli
from toylib.device import cpu_threads, flush_denormals, setup
from toylib.infer import infer, model_device
from toylib.plot import attention_mosaic
from toylib.targets import Target, all_met, check, config_table, format_table, missed, over, table
from toylib.train import History, Snapshots, TrainOptions, fit, forever, param_groups

# ----------------------------------------------------------------------------- targets


def rows():
    return [
        Target("accuracy", "100 %", "100.00 %", True),
        Target("attention, reported", "-", "97.1 %", None),
        Target("loss", "< 0.1", "0.3", False),
        Target("training time", "< 2 min", "75 s", True, machine=True),
    ]


def test_all_met_is_computed_from_the_booleans():
    assert not all_met(rows()) and missed(rows()) == ["loss"]
    fixed = [dataclasses.replace(t, met=True) if t.met is False else t for t in rows()]
    assert all_met(fixed) and missed(fixed) == []
    with pytest.raises(ValueError, match="no targets"):
        all_met([])
    with pytest.raises(ValueError, match="met must be"):
        Target("x", "y", "z", "yes")  # a string is not a verdict


def test_table_splits_machine_rows_from_the_rows_nbval_compares():
    compared = table(rows())
    assert compared.splitlines() == [
        "measure              target  measured  met",
        "-------------------  ------  --------  ---",
        "accuracy             100 %   100.00 %  yes",
        "attention, reported  -       97.1 %    -",
        "loss                 < 0.1   0.3       NO",
    ]
    assert table(rows(), machine=True).splitlines()[2] == "training time  < 2 min  75 s      yes"
    # a machine's time over its budget is said to be over, not a failure: all_met, missed and
    # check judge the model alone, and `over` names the row
    slow = Target("training time", "< 2 min", "182 s", False, machine=True)
    assert slow.verdict == "over" and missed([slow]) == [] and all_met([slow]) and over([slow]) == ["training time"]
    assert check([slow]) == "checked: nothing" and over(rows()) == []
    assert '<td class="met-over">over</td>' in table([slow], machine=True)._repr_html_()
    assert len(table(rows(), machine=None).splitlines()) == 2 + 4
    with pytest.raises(ValueError, match="one per column"):
        format_table([("a", "b")], ("one", "two", "three"))


def test_a_table_is_its_text_and_shows_as_html_with_the_verdicts_marked():
    shown = table(rows())
    assert str(shown) == shown and shown.rows[2] == ("loss", "< 0.1", "0.3", "NO")
    html = shown._repr_html_()
    assert html.count("<tr>") == 1 + 3 and '<td class="met-no">NO</td>' in html and "<th class=\"met\">met</th>" in html
    assert "&lt; 0.1" in html  # cells are escaped
    import pickle

    assert pickle.loads(pickle.dumps(shown)).rows == shown.rows
    settings = config_table(dataclasses.replace(rows()[0], goal="99 %"))
    assert settings.rows[1] == ("goal", "'99 %'") and settings.header == ("setting", "value")
    with pytest.raises(ValueError, match="dataclass instance"):
        config_table(Target)


# ----------------------------------------------------------------------------- inference


class Doubler(torch.nn.Module):
    """Returns (2x, x summed over the last axis) and records the batch sizes it saw."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(2.0))
        self.drop = torch.nn.Dropout(0.9)  # would scramble the output in train mode
        self.sizes = []

    def forward(self, x):
        self.sizes.append(len(x))
        assert not torch.is_grad_enabled()
        return self.drop(x * self.scale), x.sum(-1)


def test_infer_batches_in_eval_mode_without_gradients_and_restores_the_mode():
    model = Doubler().train()
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    doubled, sums = infer(model, x, batch_size=4)
    assert model.sizes == [4, 4, 2] and model.training
    torch.testing.assert_close(doubled, torch.from_numpy(2 * x))  # dropout off
    assert isinstance(sums, torch.Tensor) and sums.tolist() == x.sum(-1).tolist()
    kept = infer(model, x, batch_size=3, keep=lambda out, batch: out[1] + batch[:, 0], numpy=True)
    assert isinstance(kept, np.ndarray) and kept.tolist() == (x.sum(-1) + x[:, 0]).tolist()
    assert model_device(model) == torch.device("cpu")
    with pytest.raises(ValueError, match="first axis"):
        infer(model, x, x[:3])
    with pytest.raises(ValueError, match="empty"):
        infer(model, x[:0])
    with pytest.raises(ValueError, match="batch_size"):
        infer(model, x, batch_size=0)


def test_infer_runs_any_function_of_the_model_and_restores_its_mode():
    for mode in (True, False):
        model = Doubler().train(mode)
        seen = []

        def run(m, a, b):  # in eval mode, without gradients, on one batch of both inputs
            seen.append((m.training, torch.is_grad_enabled(), len(a)))
            return m(a)[1] - b

        x = np.arange(20, dtype=np.float32).reshape(10, 2)
        out = infer(model, x, x[:, 0], batch_size=4, run=run)
        assert out.tolist() == x[:, 1].tolist() and seen == [(False, False, 4), (False, False, 4), (False, False, 2)]
        assert model.training is mode


class Pair(NamedTuple):
    doubled: torch.Tensor
    sums: torch.Tensor


def test_infer_keeps_named_tuples_whole_across_batches():
    # Seq2SeqPatterns comes back from an encoder-decoder as a named tuple: batches are joined
    # field by field and the type is kept, also when converted to NumPy
    model = Doubler()
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    out = infer(model, x, batch_size=4, keep=lambda o, batch: Pair(*o))
    assert isinstance(out, Pair) and out.sums.tolist() == x.sum(-1).tolist() and out.doubled.shape == (6, 2)
    as_numpy = infer(model, x, batch_size=5, keep=lambda o, batch: Pair(*o), numpy=True)
    assert isinstance(as_numpy, Pair) and isinstance(as_numpy.sums, np.ndarray)


# ----------------------------------------------------------------------------- training options


class Affine(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.norm = torch.nn.LayerNorm(2)

    def forward(self, x):
        return self.norm(self.lin(x))


def test_weight_decay_spares_biases_and_gains_only_when_asked():
    model = Affine()
    everything = param_groups(model, 0.5)
    assert len(everything) == 1 and everything[0]["weight_decay"] == 0.5 and len(everything[0]["params"]) == 4
    decayed, spared = param_groups(model, 0.5, decay_all=False)
    assert [p.shape for p in decayed["params"]] == [torch.Size([2, 3])] and decayed["weight_decay"] == 0.5
    assert len(spared["params"]) == 3 and spared["weight_decay"] == 0.0
    # with a zero gradient, AdamW's only change is the decay: the bias moves under decay_all, not otherwise
    for decay_all, bias_moves in ((True, True), (False, False)):
        torch.manual_seed(0)
        m = Affine()
        before = m.lin.bias.detach().clone()
        opts = TrainOptions(steps=1, lr=0.1, weight_decay=0.5, decay_all=decay_all)
        fit(m, forever(lambda: torch.zeros(1, 3)), lambda mod, b: 0 * mod(b).sum(), opts, progress=False)
        assert (not torch.equal(m.lin.bias, before)) == bias_moves


def test_train_options_refuse_bad_values():
    with pytest.raises(ValueError, match="steps"):
        TrainOptions(steps=0)
    with pytest.raises(ValueError, match="schedule"):
        TrainOptions(steps=5, schedule="linear")
    with pytest.raises(ValueError, match="optimizer"):
        TrainOptions(steps=5, optimizer="adam")
    # a plateau sets the rate itself: a warm-up or a schedule beside it would do nothing, unsaid
    with pytest.raises(ValueError, match="warmup=100"):
        TrainOptions(steps=5, plateau=(0.5, 2), warmup=100)
    with pytest.raises(ValueError, match="schedule='cosine'"):
        TrainOptions(steps=5, plateau=(0.5, 2), schedule="cosine")


def test_snapshots_keep_a_frame_per_evaluation_in_eval_mode():
    torch.manual_seed(0)
    model = Affine()
    modes = []

    def take(m):
        modes.append(m.training)
        return m.lin.weight.detach().clone()

    snaps = Snapshots(take, title=lambda step, h: f"step {step}: loss {h.last['loss']:.3f}")
    batches = forever(lambda: torch.randn(8, 3))
    h = fit(model, batches, lambda m, b: m(b).pow(2).mean(), TrainOptions(steps=30, eval_every=10),
            callback=snaps, progress=False)
    assert snaps.steps == [10, 20, 30] == h.column("step") and modes == [False] * 3
    assert not torch.equal(snaps.frames[0], snaps.frames[-1])  # the weights moved between frames
    assert snaps.titles[0] == f"step 10: loss {h.records[0]['loss']:.3f}"
    assert Snapshots(take).titles == [] and model.training


def test_threads():
    before = torch.get_num_threads()
    with cpu_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    assert setup(threads=1, prefer="cpu") == torch.device("cpu") and torch.get_num_threads() == 1
    with pytest.raises(ValueError, match="threads"):
        setup(threads=0)
    torch.set_num_threads(2)
    assert setup(threads=1, prefer="cuda") == torch.device("cuda") and torch.get_num_threads() == 2  # CPU left as is
    torch.set_num_threads(before)


def test_flush_denormals_rounds_them_to_zero_inside_the_block_only():
    tiny = torch.tensor([1e-39])  # a float32 denormal
    if not torch.set_flush_denormal(False):
        pytest.skip("this CPU cannot flush denormals")
    assert (tiny * 1.0).item() > 0
    with flush_denormals():
        assert (tiny * 1.0).item() == 0.0
    assert (tiny * 1.0).item() > 0  # off again, as torch starts


# ----------------------------------------------------------------------------- the command line


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    width: int = 3
    rate: float = 0.5
    shuffle: bool = True
    seed: int = 0


class ToyModel(torch.nn.Module):
    def __init__(self, config: ToyConfig):
        super().__init__()
        self.config = config
        self.w = torch.nn.Parameter(torch.full((config.width,), float(config.seed)))


def toy_chapter(calls):
    def for_config(config):
        calls.append(("data", config.width))
        return {"rows": config.width}

    def train(config, data=None, device=None, callback=None, progress=True):
        calls.append(("train", config, data))
        return ToyModel(config), History(steps=7, seconds=1.5)

    def measure(model, config, data, seconds, details=True):
        calls.append(("measure", model.w.sum().item(), data, seconds, details))
        return [Target("width", "3", str(config.width), config.width == 3),
                Target("time", "< 2 s", f"{seconds} s", seconds < 2, machine=True)]

    return cli.Chapter(
        name="toy", description="a toy", config_cls=ToyConfig, build_model=ToyModel, for_config=for_config,
        train=train, measure=measure,
        options=(cli.Option(("-w", "--width"), "width", "how wide"), cli.Option("--rate", "rate"),
                 cli.Option("--shuffle", "shuffle")),
        presets={"wide": ToyConfig(width=9)},
    )


def test_cli_trains_measures_saves_and_loads(tmp_path, capsys):
    calls = []
    path = tmp_path / "toy.pt"
    targets = cli.run(["-w", "4", "--rate", "0.25", "--no-shuffle", "--seed", "2", "--save", str(path)],
                      toy_chapter(calls))
    config = ToyConfig(width=4, rate=0.25, shuffle=False, seed=2)
    assert calls[:3] == [("data", 4), ("train", config, {"rows": 4}), ("measure", 8.0, {"rows": 4}, 1.5, True)]
    assert [t.met for t in targets] == [False, True]
    out = capsys.readouterr().out
    assert "trained 7 steps in 1.5 s" in out and "targets missed: width" in out and path.exists()
    calls.clear()
    cli.run(["--load", str(path)], toy_chapter(calls))
    assert calls == [("data", 4), ("measure", 8.0, {"rows": 4}, 1.5, True)]  # no training: the data rebuilt
    assert "every target met" not in capsys.readouterr().out
    # defaults come from the config; a bool option defaults to the config's value
    cli.run([], toy_chapter(calls))
    assert calls[-2][1] == ToyConfig()


def test_cli_presets_and_set_change_any_field_and_refuse_unknown_ones(capsys):
    calls = []
    cli.run(["--preset", "wide", "--set", "rate=0.125", "shuffle=False"], toy_chapter(calls))
    assert calls[1][1] == ToyConfig(width=9, rate=0.125, shuffle=False)
    cli.run(["--preset", "wide", "-w", "5"], toy_chapter(calls))  # an option changes the preset
    assert calls[-2][1] == ToyConfig(width=5)
    with pytest.raises(SystemExit):
        cli.run(["--set", "depth=2"], toy_chapter(calls))
    assert "ToyConfig has no field depth" in capsys.readouterr().err
    with pytest.raises(ValueError, match="FIELD=VALUE"):
        cli.parse_changes(["rate"])
    with pytest.raises(ValueError, match="no preset 'narrow'"):
        cli.configure(toy_chapter(calls), preset="narrow")


def test_cli_benchmark_skips_the_details_and_takes_changes():
    calls = []
    targets, seconds = cli.benchmark(toy_chapter(calls), seed=4, width=3)
    assert calls[-1] == ("measure", 12.0, {"rows": 3}, 1.5, False) and seconds == 1.5
    assert all(t.met for t in targets if not t.machine)


def test_time_target_is_a_machine_row_met_at_the_budget():
    from toylib.targets import time_target

    assert time_target(180, 180, where="a test") == Target("training time", "<= 3 min", "180 s", True, machine=True,
                                                           where="a test")
    assert time_target(3.25, 30, "suite").goal == "<= 30 s" and time_target(3.25, 30).measured == "3.2 s"
    assert time_target(181, 180).met is False
    assert time_target(0.04, 60).measured == "40 ms"  # never "0 s" or "0.0 s"
    with pytest.raises(ValueError, match="positive"):
        time_target(1, 0)


def test_a_time_row_says_where_it_ran_and_is_never_red():
    from toylib.device import where
    from toylib.targets import time_target

    row = time_target(181, 180)  # on this process's machine
    assert row.where == where() and row.where.split(", ")[1].endswith(("thread", "threads"))
    assert table([row], machine=True).splitlines()[2].split("  ")[-1] == "over"
    shown = table([row], machine=True).rows[0]
    assert shown[2] == f"181 s on {where()}" and shown[3] == "over"
    assert 'class="met-over"' in table([row], machine=True)._repr_html_()  # grey, not a miss's red
    assert table([time_target(3, 60, where="")], machine=True).rows[0][2] == "3.0 s"


def test_train_options_from_a_config_take_its_fields_then_the_overrides():
    @dataclasses.dataclass(frozen=True)
    class Config:
        steps: int = 50
        lr: float = 0.01
        d_model: int = 8  # not a training option: left out

    options = TrainOptions.from_config(Config(), monitor="val_shortfall", restore_best=True)
    assert options == TrainOptions(steps=50, lr=0.01, monitor="val_shortfall", restore_best=True)


def test_evaluating_runs_without_gradients_in_eval_mode_and_restores_the_mode():
    from toylib.infer import evaluating

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5)).train()
    with evaluating(model) as device:
        assert not model.training and not torch.is_grad_enabled() and device == torch.device("cpu")
    assert model.training and torch.is_grad_enabled()


# ----------------------------------------------------------------------------- plotting


def test_attention_mosaic_lays_heads_across_and_layers_down():
    p = np.arange(2 * 3 * 2 * 2, dtype=float).reshape(2, 3, 2, 2)  # (layers, heads, q, k)
    m = attention_mosaic(p)
    assert m.shape == (2 * 3 - 1, 3 * 3 - 1)
    np.testing.assert_array_equal(m[3:5, 6:8], p[1, 2])  # layer 1, head 2: bottom right
    assert np.isnan(m[2]).all() and np.isnan(m[:, 2]).all()  # blank lines between
    with pytest.raises(ValueError, match="layers, heads"):
        attention_mosaic(np.zeros((3, 3)))


def test_cli_seed_help_says_what_the_seed_changes():
    from toylib import cli
    from toylib.life import training as life
    from toylib.sokoban import training as sokoban

    assert "seed of the weights and the data" in " ".join(cli.parser(life.CHAPTER).format_help().split())
    text = " ".join(cli.parser(sokoban.CHAPTER).format_help().split())
    assert "seed of the weights and the batch order (--data-seed: the data)" in text


def test_cli_benchmark_trains_and_measures_a_chapter_reproducibly():
    from toylib import cli
    from toylib.life import training as life

    runs = [cli.benchmark(life.CHAPTER, seed=3, device="cpu", grid_size=6, d_model=8, steps=40) for _ in range(2)]
    (targets, seconds), (again, _) = runs
    assert targets[0].measure == "exact next state, 10,000 unseen grids" and seconds > 0
    assert [t.measure for t in targets if t.machine] == ["training time"]
    assert [t.measured for t in targets if not t.machine] == [t.measured for t in again if not t.machine]
    with pytest.raises(ValueError, match="no field no_such_field"):  # a field the config does not have
        cli.benchmark(life.CHAPTER, seed=0, device="cpu", no_such_field=1)
