import dataclasses
import math

import numpy as np
import pytest
import torch

from toylib import cli
from toylib.sequences.config import SeqConfig
from toylib.sequences.dataset import for_config, in_split, sample_sequences, sequence_hash, split_of
from toylib.sequences.look import weight_splits
from toylib.sequences.measure import attention_on_source, evaluate, filter_attention
from toylib.sequences.net import SeqTransformer, sequence_loss
from toylib.sequences.numpy_net import NumpyTransformer
from toylib.sequences.training import CHAPTER, main, train, train_numpy
from toylib.sequences.world import make_targets, source_positions
from toylib.targets import all_met, missed



# ----------------------------------------------------------------------------- the tasks


def test_tasks_by_hand():
    x = np.array([[1, 2, 3, 4], [7, 5, 9, 6]])
    np.testing.assert_array_equal(make_targets("copy", x), x)
    np.testing.assert_array_equal(make_targets("reverse", x), [[4, 3, 2, 1], [6, 9, 5, 7]])
    np.testing.assert_array_equal(make_targets("rotate", x), [[2, 3, 4, 1], [5, 9, 6, 7]])
    np.testing.assert_array_equal(make_targets("filter", x, threshold=5), [[1, 2, 3, 4], [0, 5, 0, 0]])
    np.testing.assert_array_equal(make_targets("filter", x, threshold=3), [[1, 2, 3, 0], [0, 0, 0, 0]])


def test_length_one_and_source_positions():
    x = np.array([[3]])
    for task in ("copy", "reverse", "rotate"):
        np.testing.assert_array_equal(make_targets(task, x), x)
    np.testing.assert_array_equal(source_positions("reverse", 5), [4, 3, 2, 1, 0])
    np.testing.assert_array_equal(source_positions("rotate", 5), [1, 2, 3, 4, 0])
    np.testing.assert_array_equal(source_positions("filter", 3), [0, 1, 2])


def test_targets_read_from_source_positions():
    x = sample_sequences(50, 7, 10, np.random.default_rng(0))
    for task in ("copy", "reverse", "rotate"):
        np.testing.assert_array_equal(make_targets(task, x), x[:, source_positions(task, 7)])


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(task="sort"), "unknown task"),
        (dict(length=0), "length"),
        (dict(task="filter", vocab=10, threshold=9), "threshold"),  # nothing would ever be filtered
        (dict(task="filter", vocab=10, threshold=0), "threshold"),  # everything would be
        (dict(task="filter", vocab=2, threshold=1), "threshold"),  # one value: cannot keep some and drop some
        (dict(vocab=1), "vocab"),
        (dict(optimizer="adagrad"), "optimizer"),
        (dict(queries="content"), "queries"),
        (dict(residual=True), "queries"),  # position-only queries are for the bare layers
    ],
)
def test_bad_settings_raise(kwargs, words):
    with pytest.raises(ValueError, match=words):
        SeqConfig(**kwargs)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="unknown task"):
        make_targets("sort", np.ones((1, 3), int))
    with pytest.raises(ValueError, match="length"):
        source_positions("copy", 0)
    with pytest.raises(ValueError, match="empty symbol"):
        make_targets("copy", np.array([[1, 0, 2]]))
    with pytest.raises(ValueError, match="2-D"):
        make_targets("copy", np.array([1, 2, 3]))
    with pytest.raises(ValueError, match="split"):
        in_split(np.ones((1, 3), int), "training")
    with pytest.raises(ValueError, match="empty"):
        sample_sequences(5, 1, 2, np.random.default_rng(0), "test")  # the one sequence [1] is not test


# ----------------------------------------------------------------------------- held-out data


def test_hash_is_stable_and_depends_on_length():
    x = np.array([[1, 2, 3], [3, 2, 1]])
    np.testing.assert_array_equal(sequence_hash(x), sequence_hash(x.copy()))
    assert sequence_hash(x)[0] != sequence_hash(x)[1]
    assert sequence_hash(np.array([[1, 2]]))[0] != sequence_hash(np.array([[1, 2, 1]]))[0]
    # fixed values: the split must not change between machines, runs or numpy versions
    assert int(sequence_hash(np.array([[1, 2, 3, 4]]))[0]) == 13481510965010605220
    assert split_of(np.array([[1, 2, 3, 4], [4, 3, 2, 1]])).tolist() == ["test", "train"]


@pytest.mark.parametrize("length", [3, 8])
def test_splits_are_disjoint_and_cover_everything(length):
    rng = np.random.default_rng(1)
    splits = {s: sample_sequences(3000, length, 10, rng, s) for s in ("train", "val", "test")}
    keys = {s: {row.tobytes() for row in x} for s, x in splits.items()}
    assert not keys["train"] & keys["test"] and not keys["train"] & keys["val"] and not keys["val"] & keys["test"]
    for s, x in splits.items():
        assert (split_of(x) == s).all() and x.min() >= 1 and x.max() <= 9
    # every sequence of length 3 belongs to exactly one split, about 80/10/10
    all3 = np.stack(np.meshgrid(*[np.arange(1, 10)] * 3, indexing="ij"), -1).reshape(-1, 3)
    counts = {s: int(in_split(all3, s).sum()) for s in ("train", "val", "test")}
    assert sum(counts.values()) == len(all3) and 50 <= counts["test"] <= 110


def test_sampling_is_seeded():
    a = sample_sequences(20, 6, 10, np.random.default_rng(7), "test")
    b = sample_sequences(20, 6, 10, np.random.default_rng(7), "test")
    np.testing.assert_array_equal(a, b)


def test_for_config_draws_the_same_data_from_the_config_seed():
    cfg = SeqConfig(task="rotate", length=5, val_size=300, batch=16)
    data, again = for_config(cfg), for_config(cfg)
    assert data.config == cfg and data.lengths == (5,)
    (val_x, val_y), = data.val
    assert val_x.shape == (300, 5) and in_split(val_x, "val").all()
    np.testing.assert_array_equal(val_y, val_x[:, source_positions("rotate", 5)])
    test_x, test_y = data.test
    assert test_x.shape == (10_000, 5) and in_split(test_x, "test").all()
    np.testing.assert_array_equal(val_x, again.val[0][0])
    np.testing.assert_array_equal(test_x, again.test[0])
    # the training stream starts again from the seed on every call, within the train split
    first, second = data.batches(), again.batches()
    for _ in range(3):
        (x, _), (x2, _) = next(first), next(second)
        assert x.shape == (16, 5) and in_split(x, "train").all()
        np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(next(data.batches())[0], next(again.batches())[0])
    # the config's seed draws the training and validation data; the test set is every seed's
    other = for_config(dataclasses.replace(cfg, seed=1))
    assert not np.array_equal(other.val[0][0], val_x)
    assert not np.array_equal(next(other.batches())[0], next(data.batches())[0])
    np.testing.assert_array_equal(other.test[0], test_x)


def test_for_config_shares_validation_among_mixed_lengths():
    data = for_config(SeqConfig(length=4, val_size=90, batch=8), lengths=(2, 3, 4))
    assert [x.shape for x, _ in data.val] == [(30, 2), (30, 3), (30, 4)] and data.test[0].shape[1] == 4
    batches = data.batches()
    assert {next(batches)[0].shape[1] for _ in range(30)} == {2, 3, 4}  # each batch draws its length
    with pytest.raises(ValueError, match="lengths"):
        for_config(SeqConfig(), lengths=(0, 3))
    with pytest.raises(ValueError, match="another config"):
        train(SeqConfig(lr=0.02), for_config(SeqConfig()), progress=False)


# ----------------------------------------------------------------------------- the model


def test_forward_shapes_and_weight_splits():
    cfg = SeqConfig(length=5, d_pos=6)
    model = SeqTransformer(cfg)
    logits, patterns = model(torch.ones(3, 5, dtype=torch.long))
    assert logits.shape == (3, 5, 10) and patterns.shape == (3, 1, 1, 5, 5)
    torch.testing.assert_close(patterns.sum(-1), torch.ones(3, 1, 1, 5))
    assert model(torch.ones(2, 9, dtype=torch.long))[1].shape == (2, 1, 1, 9, 9)  # any length
    w = weight_splits(model)
    assert set(w) == {"W_Q", "W_K", "W_V"}
    assert w["W_K"]["content"].shape == (10, 16) and w["W_K"]["position"].shape == (6, 16)
    deep = SeqTransformer(dataclasses.replace(cfg, n_layers=2, residual=True, queries="input"))
    assert deep(torch.ones(2, 5, dtype=torch.long))[1].shape == (2, 2, 1, 5, 5)
    assert weight_splits(deep, layer=1)["W_V"]["position"].shape == (6, 16)


def test_position_queries_ignore_content():
    model = SeqTransformer(SeqConfig(length=5))
    _, a = model(torch.tensor([[1, 2, 3, 4, 5]]))
    _, b = model(torch.tensor([[1, 2, 3, 4, 5]]))
    _, c = model(torch.tensor([[5, 4, 3, 2, 1]]))
    # the pattern changes with the content only through the keys, so it does change...
    assert not torch.allclose(a, c)
    # ...but a model whose keys ignore content too attends the same way to every sequence
    with torch.no_grad():
        model.layers[0].W_K.weight[:, :10] = 0
    torch.testing.assert_close(model(torch.tensor([[1, 2, 3, 4, 5]]))[1], model(torch.tensor([[5, 4, 3, 2, 1]]))[1])
    with torch.no_grad():
        model.layers[0].W_Q.weight[:, :10] += 1.0  # the content rows of W_Q are never read
    torch.testing.assert_close(model(torch.tensor([[1, 2, 3, 4, 5]]))[1], model(torch.tensor([[5, 4, 3, 2, 1]]))[1])


@pytest.mark.parametrize("queries", ["position", "input"])
def test_no_positions_means_no_position_signal(queries):
    model = SeqTransformer(SeqConfig(positions=False, queries=queries))
    x = torch.tensor([[1, 2, 3, 4]])
    logits, _ = model(x)
    logits_perm, _ = model(x[:, [3, 2, 1, 0]])
    # without positions, attention is blind to order: permuting the input permutes the output
    torch.testing.assert_close(logits_perm, logits[:, [3, 2, 1, 0]])


# ----------------------------------------------------------------------------- NumPy, by hand


def _small_numpy_model(seed=0, length=4, queries="position"):
    cfg = SeqConfig(task="reverse", length=length, vocab=5, threshold=2, d_pos=4, queries=queries)
    model = NumpyTransformer(cfg, np.random.default_rng(seed))
    rng = np.random.default_rng(seed + 1)
    for k in model.params:  # larger weights than at initialisation: a sharper, harder softmax
        model.params[k] = rng.normal(0, 0.7, model.params[k].shape)
    x = sample_sequences(3, length, cfg.vocab, rng)
    return model, x, make_targets(cfg.task, x)


@pytest.mark.parametrize("queries", ["position", "input"])
def test_numpy_gradients_match_finite_differences(queries):
    model, x, y = _small_numpy_model(queries=queries)
    _, grads = model.backward(model.forward(x)[2], y)
    rng = np.random.default_rng(2)
    eps = 1e-6
    for name, p in model.params.items():
        for idx in [tuple(rng.integers(s) for s in p.shape) for _ in range(6)]:
            old = p[idx]
            p[idx] = old + eps
            up = model.backward(model.forward(x)[2], y)[0]
            p[idx] = old - eps
            down = model.backward(model.forward(x)[2], y)[0]
            p[idx] = old
            assert grads[name][idx] == pytest.approx((up - down) / (2 * eps), rel=1e-5, abs=1e-8), (name, idx)


@pytest.mark.parametrize("queries", ["position", "input"])
def test_numpy_matches_torch_autograd(queries):
    model, x, y = _small_numpy_model(seed=3, queries=queries)
    logits_np, patterns_np, cache = model.forward(x)
    loss_np, grads = model.backward(cache, y)
    torch_model = SeqTransformer(model.config).double()
    torch_model.load_state_dict(model.torch_state_dict(torch.float64))
    torch_model.double()
    batch = (torch.from_numpy(x), torch.from_numpy(y))
    logits, patterns = torch_model(batch[0])
    np.testing.assert_allclose(patterns.detach().numpy(), patterns_np, atol=1e-6)
    loss = sequence_loss(torch_model, batch)
    loss.backward()
    assert loss.item() == pytest.approx(loss_np, rel=1e-5)
    names = {"W_Q": "layers.0.W_Q", "W_K": "layers.0.W_K", "W_V": "layers.0.W_V", "W_O": "layers.0.W_O", "W_R": "readout"}
    params = dict(torch_model.named_parameters())
    for ours, theirs in names.items():
        np.testing.assert_allclose(params[f"{theirs}.weight"].grad.numpy().T, grads[ours], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(params[f"{theirs}.bias"].grad.numpy(), grads["b" + ours[1:]], rtol=1e-9, atol=1e-12)


def test_numpy_model_rejects_what_it_does_not_implement():
    with pytest.raises(ValueError, match="one layer"):
        NumpyTransformer(SeqConfig(n_layers=2), np.random.default_rng(0))


# ----------------------------------------------------------------------------- training


def test_short_training_reaches_copy_and_is_deterministic():
    cfg = SeqConfig(task="reverse", length=4, steps=400, val_size=500, eval_every=25)
    model, history = train(cfg, device="cpu", progress=False)
    assert history.stop_reason == "callback" and history.last["val_exact"] == 1.0
    result = evaluate(model, n=2000)
    assert result["exact"] == 1.0 and result["attention_on_source"] > 0.99
    _, history2 = train(dataclasses.replace(cfg, steps=50), device="cpu", progress=False)
    assert history2.column("loss") == history.column("loss")[:2]
    # stop_loss=0: no validation loss is below it, so training runs all its steps
    _, history3 = train(dataclasses.replace(cfg, steps=60, stop_loss=0.0), device="cpu", progress=False)
    assert history3.stop_reason == "steps" and history3.steps == 60


def test_numpy_training_is_deterministic_and_learns():
    cfg = SeqConfig(task="reverse", length=4, steps=300, val_size=500, eval_every=25)
    a, ha = train_numpy(cfg, progress=False)
    _, hb = train_numpy(cfg, for_config(cfg), progress=False)
    assert ha.column("loss") == hb.column("loss")
    assert ha.last["val_exact"] == 1.0 and evaluate(a, n=1000)["exact"] == 1.0


def test_suite_targets_pass_trained_models_and_fail_untrained_ones():
    from toylib.sequences.measure import Run, suite_targets
    from toylib.sequences.training import train_suite

    runs = train_suite(seed=0, lengths=[4], tasks=["rotate"], n_test=500, device="cpu")
    targets = suite_targets(runs, {})
    assert [t.measure for t in targets] == ["PyTorch exact match, rotate, length 4",
                                            "PyTorch attention on source, rotate, length 4",
                                            "PyTorch training per task, slowest of 1"]
    assert all_met(targets) and targets[-1].machine and not targets[0].machine
    untrained = SeqTransformer(SeqConfig(task="rotate", length=4))
    bad = {("rotate", 4): Run(untrained, runs["rotate", 4].history, evaluate(untrained, 500))}
    assert missed(suite_targets(bad, {}))[:2] == [t.measure for t in targets[:2]]


def test_gradient_check_is_tight_and_catches_a_wrong_backward(monkeypatch):
    from toylib.sequences.numpy_net import NumpyTransformer, gradient_check

    fd, ag = gradient_check("position")
    assert fd < 1e-6 and ag < 1e-10
    right = NumpyTransformer.backward

    def off_by_one_percent(self, cache, targets):
        loss, grads = right(self, cache, targets)
        grads["W_V"] = grads["W_V"] * 1.01
        return loss, grads

    monkeypatch.setattr(NumpyTransformer, "backward", off_by_one_percent)
    fd, ag = gradient_check("position")
    assert fd > 1e-4 and ag > 1e-4


def test_filter_attention_of_a_trained_model_reads_its_own_position():
    model, history = train(SeqConfig(task="filter", length=4, val_size=500), device="cpu", progress=False)
    assert history.stop_reason == "callback"
    x = sample_sequences(300, 4, 10, np.random.default_rng(0), "test")
    stats = filter_attention(model, x)
    # position queries: every slot, kept or blanked, attends most to its own position
    assert stats["kept_argmax_self"] == 1.0 and stats["removed_argmax_self"] == 1.0
    assert stats["kept_argmax_on_kept_same_value"] == 1.0
    # a position holding the source's symbol includes the source itself
    assert attention_on_source(model, x, same_value=True) >= attention_on_source(model, x) == 1.0


def test_cli_trains_saves_and_loads(tmp_path, capsys):
    ckpt = tmp_path / "m.pt"
    r = main(["-t", "rotate", "-S", "4", "--steps", "400", "--save", str(ckpt), "--quiet"])
    assert ckpt.exists() and r[0].measure == "exact match, rotate, length 4, 10,000 held-out sequences"
    assert r[-1].measure == "training time" and r[-1].goal == "<= 1 min"
    r2 = main(["--load", str(ckpt)])  # the length comes with the model's config
    assert [t.measured for t in r2[:3]] == [t.measured for t in r[:3]]  # the same weights, the same answers
    r3 = main(["-t", "copy", "-S", "3", "--steps", "20", "--queries", "input", "--set", "stop_loss=0.0", "lr=0.02"])
    assert r3[0].measure.startswith("exact match, copy, length 3")
    assert "trained 20 steps" in capsys.readouterr().out  # stop_loss=0: every step


def test_cli_benchmark_trains_the_whole_suite_and_refuses_unknown_fields():
    tiny = {"steps": 2, "eval_every": 1, "val_size": 20, "batch": 8}
    targets, seconds = cli.benchmark(CHAPTER, seed=0, device="cpu", **tiny)
    measures = [t.measure for t in targets]
    assert "PyTorch exact match, filter, length 16" in measures and "NumPy exact match, reverse, length 8" in measures
    assert "relative, trained on 2-16: exact, rotate, length 64" in measures and seconds > 0
    far = next(t for t in targets if t.measure == "relative, trained on 2-16: exact, rotate, length 1024 (250 sequences)")
    assert far.goal == "100 %"  # 64 times the longest training length: every sequence
    assert [t.measure for t in targets if t.machine] == ["PyTorch training per task, slowest of 8",
                                                         "NumPy training per task, slowest of 4"]
    with pytest.raises(ValueError, match="no field no_such_field"):
        cli.benchmark(CHAPTER, seed=0, device="cpu", no_such_field=1)
    with pytest.raises(ValueError, match="sets task"):
        cli.benchmark(CHAPTER, seed=0, device="cpu", task="copy")


def test_mixed_length_training_learns_every_training_length():
    cfg = SeqConfig(length=3, steps=600, eval_every=20, val_size=200)
    model, history = train(cfg, for_config(cfg, lengths=(2, 3)), device="cpu", progress=False)
    assert history.stop_reason == "callback" and history.last["val_attention_on_source"] == 1.0
    # copy, at the lengths it trained on: batches of both lengths were drawn
    assert evaluate(model, 200, length=2)["exact"] == evaluate(model, 200, length=3)["exact"] == 1.0


# ----------------------------------------------------------------------------- relative positions


def _random_bias(max_offset=3, from_end=True, n_heads=2, seed=0):
    from toylib.sequences.net import RelativeBias

    bias = RelativeBias(n_heads, max_offset, from_end)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in bias.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    return bias


def test_relative_bias_depends_on_offsets_only():
    start_only = _random_bias(from_end=False)
    short, long = start_only(10)[0], start_only(40)[0]  # (head, query, key)
    assert short.shape == (2, 10, 10) and long.shape == (2, 40, 40)
    for s in (0, 7, 30):  # the same pair of positions, shifted: the same bias
        torch.testing.assert_close(long[:, s:s + 10, s:s + 10], short)
    # with the end bias, the offsets are from i and from n-1-i: shifting both positions by
    # s and growing the sequence by 2s keeps both
    both = _random_bias(from_end=True)
    for s in (1, 5, 20):
        torch.testing.assert_close(both(10 + 2 * s)[0, :, s:s + 10, s:s + 10], both(10)[0])
    assert not torch.allclose(both(12)[0, :, 1:11, 1:11], both(11)[0, :, 1:11, 1:11])  # n counts


def test_relative_bias_is_clipped_past_its_window():
    bias = _random_bias(max_offset=3, from_end=False, n_heads=1)
    row = bias(30)[0, 0, 10]  # query 10: keys at offsets -10..19
    table = bias.start[0].detach()  # offsets -3..3
    torch.testing.assert_close(row[7:14], table)  # offsets -3..3, each its own
    assert torch.all(row[:7] == table[0]) and torch.all(row[14:] == table[-1])  # beyond: shared
    end = _random_bias(max_offset=2, from_end=True, n_heads=1)
    with torch.no_grad():
        end.start.zero_()
    b = end(9)[0, 0]  # (query, key): now only the end bias, by j - (8 - i)
    assert b[0, 8] == end.end[0, 2] and b[3, 5] == end.end[0, 2] and b[0, 0] == end.end[0, 0]
    assert b[8, 0] == end.end[0, 2] and b[1, 7] == end.end[0, 2]  # the mirror of slot i is 8 - i


def test_relative_attention_is_the_same_at_any_position_and_grows_as_log_length():
    model = SeqTransformer(SeqConfig(scheme="relative", from_end=False, max_offset=3))  # length 8
    with torch.no_grad():
        model.biases[0].start.copy_(torch.linspace(-1, 1, 7))
    for n in (12, 16, 40):  # a constant sequence: only positions could tell queries apart
        log_p = model(torch.full((1, n), 4))[1][0, 0, 0].log()  # (query, key)
        # log p[i, j] - log p[i, i] is the score difference: a function of j - i alone
        for d in (-4, -3, -1, 1, 2, 3, 5):
            diffs = torch.stack([log_p[i, i + d] - log_p[i, i] for i in range(4, n - 5)])
            torch.testing.assert_close(diffs, torch.full_like(diffs, diffs[0].item()))
            # the table steps by 1/3 per offset, in units of bias_scale = 10, at the config's
            # length 8, and grows as log n past it
            expected = 10 * max(-3, min(d, 3)) / 3 * math.log(n) / math.log(8)
            assert diffs[0].item() == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("log_scale", [True, False])
def test_log_scale_keeps_the_keys_beyond_the_window_from_drowning_the_source(log_scale):
    # copy's table with a gap of 4 nats at length 16 between the slot's own position and every
    # other key; a constant sequence, so that the keys' content cannot tell them apart
    model = SeqTransformer(SeqConfig(scheme="relative", from_end=False, length=16, log_scale=log_scale))
    with torch.no_grad():
        model.biases[0].start.copy_(torch.tensor([0.0, 0.0, 0.4, 0.0, 0.0]))  # units of 10 nats
    weight = {}
    for n in (16, 64, 256, 1024):
        gap = 4 * (math.log(n) / math.log(16) if log_scale else 1)
        weight[n] = model(torch.full((1, n), 4))[1][0, 0, 0, n // 2, n // 2].item()  # the middle slot on itself
        assert weight[n] == pytest.approx(1 / (1 + (n - 1) * math.exp(-gap)), rel=1e-4)
    if log_scale:  # (n - 1) e^-gap = (n - 1) n^(-4 / log 16): it falls, and the source's weight rises
        assert weight[16] < weight[64] < weight[256] < weight[1024] and weight[1024] > 0.95
    else:  # (n - 1) e^-4 grows with n: at 256 the far keys hold most of the weight
        assert weight[16] > weight[64] > weight[256] > weight[1024] and weight[256] < 0.25


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(scheme="rotary"), "scheme"),
        (dict(scheme="relative", max_offset=0), "max_offset"),
        (dict(scheme="relative", bias_scale=0.0), "bias_scale"),
        (dict(scheme="relative", length=1), "log_scale"),  # log 1 = 0 would divide
        (dict(scheme="relative", positions=False), "positions"),
        (dict(scheme="relative", n_heads=3), "divisible"),  # d_model is vocab alone: 10
    ],
)
def test_bad_relative_settings_raise(kwargs, words):
    with pytest.raises(ValueError, match=words):
        SeqConfig(**kwargs)


def test_relative_model_shapes_and_what_it_rejects():
    cfg = SeqConfig(scheme="relative")
    model = SeqTransformer(cfg)
    assert cfg.d_model == 10
    logits, patterns = model(torch.ones(3, 64, dtype=torch.long))
    assert logits.shape == (3, 64, 10) and patterns.shape == (3, 1, 1, 64, 64)
    deep = SeqTransformer(SeqConfig(scheme="relative", n_layers=2, n_heads=2, residual=True, queries="input"))
    assert deep(torch.ones(2, 5, dtype=torch.long))[1].shape == (2, 2, 2, 5, 5)
    assert len(deep.biases) == 2 and deep.biases[1].start.shape == (2, 5)
    with pytest.raises(ValueError, match="sinusoid"):
        weight_splits(model)
    with pytest.raises(ValueError, match="sinusoid"):
        NumpyTransformer(cfg, np.random.default_rng(0))


def test_relative_models_trained_on_short_lengths_are_exact_at_sixteen_times_them():
    from toylib.sequences.config import RELATIVE
    from toylib.sequences.measure import length_table, length_targets
    from toylib.sequences.training import train_mixed

    # rotate's last slot reads position 0, far from it: the source the far keys crowd most
    runs = train_mixed(tasks=("reverse", "rotate"), lengths=range(2, 9), device="cpu", **RELATIVE)
    assert all(history.stop_reason == "callback" for _, history in runs.values())
    table = length_table({task: model for task, (model, _) in runs.items()}, lengths=(8, 128), n=500)
    assert table == {"reverse": {8: 1.0, 128: 1.0}, "rotate": {8: 1.0, 128: 1.0}}
    targets = length_targets(table, lengths=(128,), trained_on=range(2, 9))
    assert [t.measure for t in targets] == [f"relative, trained on 2-8: exact, {task}, length 128"
                                            for task in ("reverse", "rotate")] and all_met(targets)


# ----------------------------------------------------------------------------- the opening picture


def test_plot_task_attention_draws_a_panel_per_model_and_refuses_bad_input():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from toylib.sequences.look import plot_task_attention

    models = {task: SeqTransformer(SeqConfig(task=task)) for task in ("copy", "reverse", "rotate")}
    x = np.array([3, 8, 1, 6, 2, 9, 5, 7])
    fig = plot_task_attention(models, x, columns=2, title="t")
    panels = [ax for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]
    assert [ax.get_title() for ax in panels] == ["copy", "reverse", "rotate"]
    # short sequences: the bottom ticks name the input's symbols; a colour bar from 0 to 1
    assert [t.get_text() for t in panels[-1].get_xticklabels()] == [str(v) for v in x]
    assert panels[0].images[0].get_clim() == (0, 1)
    assert any("attention weight" in ax.get_ylabel() for ax in fig.axes)
    plt.close(fig)
    fig = plot_task_attention({"copy": models["copy"]}, np.arange(1, 33)[None] % 9 + 1)  # (1, pos), long
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["0", "8", "16", "24"]
    plt.close(fig)
    with pytest.raises(ValueError, match="empty"):
        plot_task_attention({}, x)
    with pytest.raises(ValueError, match="one sequence"):
        plot_task_attention(models, np.stack([x, x]))
    with pytest.raises(ValueError, match="columns"):
        plot_task_attention(models, x, columns=0)


def test_plot_examples_draws_input_target_output_for_each_model():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from toylib.sequences.look import plot_examples

    models = {task: SeqTransformer(SeqConfig(task=task)) for task in ("copy", "filter")}
    fig = plot_examples(models, np.array([3, 8, 1, 6, 2, 9, 5, 7]))
    assert len(fig.axes) == 6 and [ax.get_title() for ax in fig.axes[:3]] == ["input", "target", "output"]
    # the target row of filter: values above 5 become the empty symbol 0
    target = fig.axes[4].images[0].get_array()  # (symbol, position)
    np.testing.assert_array_equal(np.asarray(target).argmax(0), [3, 0, 1, 0, 2, 0, 5, 0])
    plt.close(fig)
    with pytest.raises(ValueError, match="empty"):
        plot_examples({}, np.array([1, 2]))


# ----------------------------------------------------------------------------- the prose's claims
from types import SimpleNamespace as Ns  # noqa: E402

from toylib.sequences import config as seq_config, measure as seq_measure  # noqa: E402
from toylib.sequences.world import TASKS  # noqa: E402


def ablation_table(changes=None):
    """run_ablations' results as the chapter reads them, every row as the chapter reports it."""
    exact = {seq_config.ABLATIONS_OURS: 1.0, seq_config.POST_QUERIES: 0.9995, seq_config.RESIDUAL: 1.0,
             seq_config.SGD: 0.001}
    runs = {}
    for name in seq_config.ABLATIONS:
        for t in TASKS:
            e = exact.get(name, 1.0 if t in ("copy", "filter") else 0.0)
            src = 0.6 if name == seq_config.POST_QUERIES else 1.0
            steps = 500 if name == seq_config.POST_QUERIES else 300
            runs[name, t] = Ns(result={"exact": e, "attention_on_source": src},
                               history=Ns(stop_reason="callback", steps=steps, last={"val_loss": 2.0}))
    return {**runs, **(changes or {})}


def test_the_ablation_claims_follow_the_table():
    sgd = {0.01: 2.1, 1.0: float("nan")}
    assert all(seq_measure.ablation_claims(ablation_table(), 1000, sgd).values())
    learnt = Ns(result={"exact": 0.5, "attention_on_source": 0.9}, history=Ns(stop_reason="steps", steps=1000,
                                                                              last={"val_loss": 0.1}))
    claims = seq_measure.ablation_claims(ablation_table({(seq_config.SGD, "copy"): learnt}), 1000, {0.01: 1.0, 1.0: 1.5})
    assert [k for k, v in claims.items() if not v] == [
        "plain SGD, lr 0.1: every task < 1 % exact", "plain SGD, lr 0.01: reverse's loss ends > 2 (ln 9 = 2.2)",
        "plain SGD, lr 0.1: loss > 1.5 on copy, reverse, rotate", "plain SGD, lr 1: the loss diverges (nan, or > ln 9)"]


def test_the_filter_claims_follow_where_the_slots_look():
    ours = {"kept_argmax_self": 1.0, "removed_argmax_self": 1.0}
    post = {"kept_argmax_self": 0.6, "kept_argmax_on_kept_same_value": 0.8, "removed_argmax_self": 0.1,
            "removed_argmax_on_removed": 0.5}
    assert all(seq_measure.filter_claims(ours, post).values())
    assert not any(seq_measure.filter_claims({**ours, "removed_argmax_self": 0.9}, {
        "kept_argmax_self": 0.9, "kept_argmax_on_kept_same_value": 0.95, "removed_argmax_self": 0.5,
        "removed_argmax_on_removed": 0.6}).values())


def test_the_sinusoid_claims_follow_exact_shares_and_one_pattern():
    exact = {t: {n: (1.0 if n <= 16 and t != "reverse" else 0.0) for n in range(2, 33)} for t in TASKS}
    exact["reverse"].update({2: 1.0, 3: 1.0})
    astray = np.eye(32)
    astray[[3, 20, 21, 22, 23, 24, 25, 26, 27]] = np.eye(32)[[30] * 9]  # 9 of 32 slots to key 30
    assert all(seq_measure.sinusoid_claims(exact, astray).values())
    far = {t: {n: 0.5 for n in range(2, 33)} for t in TASKS}
    assert not any(seq_measure.sinusoid_claims(far, np.eye(32)).values())


def test_the_relative_variant_claims_follow_the_table():
    lengths = (8, 16, 32, 64, 128, 256)
    exact_at = {(seq_config.NO_END, "reverse"): dict.fromkeys(lengths, 0.0),
                (seq_config.NO_END, "rotate"): dict.fromkeys(lengths, 0.2),
                (seq_config.WIDE, "rotate"): {8: 1.0, 16: 1.0, 32: 0.5, 64: 0.1, 128: 0.0, 256: 0.0},
                (seq_config.UNIT, "copy"): dict.fromkeys(lengths, 1.0), (seq_config.UNIT, "filter"): dict.fromkeys(lengths, 1.0)}
    weight = {(seq_config.FLAT, "rotate"): [0.99, 0.9, 0.7], ("relative", "rotate"): [0.99, 0.99, 0.985],
              (seq_config.UNIT, "copy"): [0.8, 0.85, 0.9], ("relative", "copy"): [0.999, 0.999, 0.995]}
    assert all(seq_measure.relative_variant_claims(exact_at, weight, unit_span=3.0).values())
    wrong = seq_measure.relative_variant_claims({**exact_at, (seq_config.UNIT, "copy"): dict.fromkeys(lengths, 0.9)},
                                                {**weight, ("relative", "copy"): [0.98, 0.99, 0.99]}, unit_span=6.0)
    assert [k for k, v in wrong.items() if not v] == [
        "units of 1: copy's bias spans < 5 nats", "units of 1: copy and filter exact at every length",
        "units of 10: copy's weight on the source >= 0.99 at 16 to 256"]


def test_the_relative_claims_read_each_task_s_program_in_its_bias_tables(monkeypatch):
    from toylib.sequences import look as seq_look
    from toylib.sequences.world import source_positions

    k = 4  # offsets -4..4

    def model(task, start_peak, end_peak, flat_start=False):
        start, end = torch.zeros(1, 2 * k + 1), torch.zeros(1, 2 * k + 1)
        if not flat_start:
            start[0, k + start_peak] = 1.0
        end[0, k + end_peak] = 1.0
        return Ns(biases=[Ns(start=start, end=end)], config=Ns(max_offset=k, bias_scale=10.0, task=task))

    def run_model(m, x, source=True):  # attention straight at each slot's source (or at slot 0)
        n = x.shape[1]
        pattern = np.zeros((1, 1, 1, n, n))
        pattern[0, 0, 0, np.arange(n), source_positions(m.config.task, n) if source else 0] = 1
        return None, pattern

    models = {"copy": model("copy", 0, 2), "filter": model("filter", 0, 3), "rotate": model("rotate", 1, 0),
              "reverse": model("reverse", 0, 0, flat_start=True)}
    exact = {t: dict.fromkeys((32, 64, 128, 256), 1.0) for t in TASKS}
    x32 = np.zeros((1, 32), int)
    monkeypatch.setattr(seq_look, "run_model", run_model)
    assert all(seq_look.relative_claims(models, exact, x32).values())
    models["rotate"] = model("rotate", 0, 2)  # a copy's table: not rotate's program
    monkeypatch.setattr(seq_look, "run_model", lambda m, x: run_model(m, x, source=False))
    claims = seq_look.relative_claims(models, {**exact, "copy": {**exact["copy"], 256: 0.99}}, x32)
    assert [c for c, v in claims.items() if v] == ["reverse peaks at 0 from its mirror, its slot table < 1/3 as wide"]
    with pytest.raises(ValueError, match="part must be"):
        seq_look.bias_table(models["copy"], "middle")


def test_the_rule_and_source_claims_can_fail(monkeypatch):
    fast = Ns(history=Ns(stop_reason="callback", steps=300))
    assert seq_measure.rule_met_within({("copy", 8): fast}, 1000)
    assert not seq_measure.rule_met_within({("copy", 8): fast, ("reverse", 8): Ns(history=Ns(stop_reason="steps",
                                                                                             steps=1000))}, 1000)
    with pytest.raises(ValueError, match="runs"):
        seq_measure.rule_met_within({}, 1000)
    from toylib.sequences.world import source_positions

    def run_model(m, x):  # attention at each slot's source for model "right", at slot 0 otherwise
        n = x.shape[1]
        pattern = np.zeros((len(x), 1, 1, n, n))
        pattern[:, 0, 0, np.arange(n), source_positions(m, n) if m != "wrong" else 0] = 1
        return None, pattern

    monkeypatch.setattr(seq_measure, "run_model", run_model)
    x = np.zeros((2, 8), int)
    assert seq_measure.reads_its_source({"reverse": "reverse", "rotate": "rotate"}, x)
    monkeypatch.setattr(seq_measure, "source_positions", lambda t, n: source_positions("reverse", n))
    assert not seq_measure.reads_its_source({"copy": "copy"}, x)


def test_the_weight_claims_hold_for_a_trained_model_and_fail_for_a_moved_query():
    from toylib.sequences import look as seq_look, training

    model, _ = training.train(SeqConfig(task="copy", length=8, steps=150, eval_every=50, val_size=200), device="cpu",
                              progress=False)
    assert seq_look.weight_claims({"copy": model})["the queries' content rows keep their initial values"]
    vocab = model.config.vocab
    with torch.no_grad():
        model.attention_layer(0).W_Q.weight[:, :vocab] += 0.1  # the content rows moved
        model.attention_layer(0).W_K.weight[:, vocab:] = 0.0  # keys blind to position
    moved = seq_look.weight_claims({"copy": model})
    assert not moved["the queries' content rows keep their initial values"]
    assert not moved["keys: position rows' norm >= 2x the content rows'"]


def test_the_share_on_other_copies_of_a_symbol():
    from toylib.sequences import look as seq_look

    x = np.array([4, 7, 4, 2])
    pattern = np.eye(4)
    pattern[0] = [0.5, 0, 0.5, 0]  # slot 0 (a 4) puts half on the other 4
    assert seq_look.other_copies_share(pattern, x) == pytest.approx(0.25)  # slots 0 and 2: 0.5 and 0
    with pytest.raises(ValueError, match="repeated"):
        seq_look.other_copies_share(np.eye(3), np.array([1, 2, 3]))
