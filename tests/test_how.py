"""The measurements of the chapter "How transformers work" (toylib.how)."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from toylib.attention import EncoderDecoder, MultiHeadAttention, attention, sinusoidal_positions
from toylib import how
from toylib.how import (
    greedy_decode_work,
    gradient_norms_by_depth,
    head_shapes,
    softmax_saturation,
)


def test_unscaled_softmax_saturates_as_d_head_grows_and_scaled_does_not():
    scaled = softmax_saturation(scaled=True)
    raw = softmax_saturation(scaled=False)
    assert [r.d_head for r in raw] == [2, 8, 32, 128, 512]
    tops = [r.max_weight for r in raw]
    assert tops == sorted(tops) and tops[-1] > 0.9
    assert raw[-1].one_hot > 0.5
    assert raw[-1].grad < 0.01 * scaled[-1].grad  # the gradient is gone
    # with the scale, the score's variance is 1 whatever d_head is
    assert all(abs(r.max_weight - scaled[0].max_weight) < 0.05 for r in scaled)
    assert all(r.one_hot == 0 for r in scaled)
    assert raw[-1].max_weight > scaled[-1].max_weight + 0.5


def test_saturation_grad_is_the_softmax_jacobian_norm():
    """The closed form in softmax_saturation against autograd's Jacobian, at
    d_head 1 and 2 keys, where the (single) query's scores can be rebuilt."""
    row = softmax_saturation(d_heads=(1,), n_keys=2, n_queries=1, seed=3)[0]
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(1, 1, 1, generator=gen)
    k = torch.randn(1, 2, 1, generator=gen)
    scores = (q @ k.transpose(-2, -1)).reshape(2)  # d_head 1: no scale
    jac = torch.autograd.functional.jacobian(lambda s: s.softmax(-1), scores)
    assert row.grad == pytest.approx(jac.norm().item(), rel=1e-5)
    assert row.max_weight == pytest.approx(scores.softmax(-1).max().item(), rel=1e-5)


@pytest.mark.parametrize("kwargs", [dict(d_heads=()), dict(d_heads=(8, 0)), dict(n_keys=1), dict(n_queries=0)])
def test_softmax_saturation_refuses_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        softmax_saturation(**kwargs)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_without_residuals_or_norm_the_gradient_vanishes_towards_the_input(seed):
    res = gradient_norms_by_depth(residual=True, norm=True, seed=seed)
    res_only = gradient_norms_by_depth(residual=True, norm=False, seed=seed)
    plain = gradient_norms_by_depth(residual=False, norm=False, seed=seed)
    assert len(res) == len(plain) == 32
    for norms in (res, res_only):
        assert max(norms) < 10 * min(norms)  # flat across depth
    assert plain[0] < 1e-2 * res[0]
    assert plain[0] < 1e-10 * plain[-1]
    # the decay is steady, not one bad layer: each half of the stack loses
    half = len(plain) // 2
    assert plain[0] < 1e-3 * plain[half] and plain[half] < 1e-3 * plain[-1]


def test_gradient_norms_leave_the_global_seed_alone_and_repeat():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = gradient_norms_by_depth(n_layers=3, seed=5)
    assert torch.equal(torch.rand(1), before)
    assert a == gradient_norms_by_depth(n_layers=3, seed=5)
    assert a != gradient_norms_by_depth(n_layers=3, seed=6)


@pytest.mark.parametrize("kwargs", [dict(n_layers=0), dict(d_model=1), dict(batch=0)])
def test_gradient_norms_refuse_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        gradient_norms_by_depth(**kwargs)


@pytest.mark.parametrize("key_pos", [None, 7])
def test_head_shapes_follow_the_real_forward_and_leave_no_hooks(key_pos):
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=12, n_heads=3)
    x = torch.randn(2, 5, 12)
    context = None if key_pos is None else torch.randn(2, key_pos, 12)
    m = 5 if key_pos is None else key_pos
    shapes = head_shapes(mha, x, context)
    out, pattern = mha(x, context)
    names = [name for name, _ in shapes]
    assert names[0] == "x" and names[-1].startswith("output")
    assert shapes[-1][1] == tuple(out.shape) == (2, 5, 12)
    assert dict(shapes)["pattern"] == tuple(pattern.shape) == (2, 3, 5, m)
    splits = [s for name, s in shapes if "split" in name]
    assert splits == [(2, 3, 5, 4), (2, 3, m, 4), (2, 3, m, 4)]
    assert dict(shapes)["heads side by side"] == (2, 5, 12)
    # the module is as it was: its own _heads, no hooks left behind
    assert "_heads" not in vars(mha)
    assert not any(layer._forward_hooks or layer._forward_pre_hooks for layer in mha.children())
    torch.testing.assert_close(mha(x, context)[0], out)


def test_head_shapes_refuses_a_wrong_width():
    with pytest.raises(ValueError, match="must be"):
        head_shapes(MultiHeadAttention(12, 3), torch.randn(2, 5, 8))
    with pytest.raises(ValueError):
        head_shapes(MultiHeadAttention(12, 3), torch.randn(5, 12))


def _seq2seq(seed=0, d=16, vocab=7):
    torch.manual_seed(seed)
    model = EncoderDecoder(2, 2, d, 2, 32).eval()
    return model, nn.Embedding(vocab, d), nn.Linear(d, vocab)


def test_greedy_decoding_encodes_once_and_reencoding_changes_nothing_but_the_work():
    model, embed, unembed = _seq2seq()
    src = torch.randn(3, 9, 16, generator=torch.Generator().manual_seed(1))
    once = greedy_decode_work(model, embed, unembed, src, n_steps=6)
    again = greedy_decode_work(model, embed, unembed, src, n_steps=6, reencode=True)
    assert once.tokens.shape == (3, 6)
    assert torch.equal(once.tokens, again.tokens)
    assert (once.encoder_calls, once.decoder_calls) == (1, 6)
    assert (again.encoder_calls, again.decoder_calls) == (6, 6)
    assert once.encoder_positions == 9 and again.encoder_positions == 6 * 9
    # no cache: step t runs the decoder over all t target positions so far
    assert once.decoder_positions == again.decoder_positions == 1 + 2 + 3 + 4 + 5 + 6
    assert not model.encoder._forward_hooks and not model.decoder._forward_hooks


def test_greedy_decoding_is_the_models_own_next_token():
    """The first token is the argmax of one plain forward pass on the start token."""
    model, embed, unembed = _seq2seq(seed=2)
    src = torch.randn(4, 5, 16, generator=torch.Generator().manual_seed(3))
    work = greedy_decode_work(model, embed, unembed, src, n_steps=1, start=2)
    with torch.no_grad():
        tgt = embed(torch.full((4, 1), 2)) + sinusoidal_positions(2, 16)[:1]
        x, _ = model(src, tgt)
        want = unembed(x[:, -1]).argmax(-1)
    assert torch.equal(work.tokens[:, 0], want)


@pytest.mark.parametrize("kwargs", [dict(n_steps=0), dict(start=7), dict(src=torch.randn(2, 5, 8))])
def test_greedy_decoding_refuses_bad_arguments(kwargs):
    model, embed, unembed = _seq2seq()
    args = dict(src=torch.randn(2, 5, 16), n_steps=3) | kwargs
    with pytest.raises(ValueError):
        greedy_decode_work(model, embed, unembed, **args)


def test_scale_of_scores_is_what_attention_divides_by():
    """softmax_saturation's unscaled case relies on attention dividing by sqrt(d_head)."""
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 3, 8, generator=gen), torch.randn(1, 4, 8, generator=gen)
    _, pattern = attention(q * math.sqrt(8), k, k)
    torch.testing.assert_close(pattern, (q @ k.transpose(-2, -1)).softmax(-1))


def test_the_depth_claims_follow_the_spread_of_the_gradients():
    steady, fading = [1.0, 1.2, 1.5], [1.0, 0.01, 1e-4]
    norms = {("residual + LayerNorm", 0): steady, ("residual only", 0): steady, ("LayerNorm only", 0): [1.0, 5.0],
             ("neither", 0): fading}
    assert how.depth_spread(fading) == pytest.approx(1e4)
    assert all(how.depth_claims(norms).values())
    worse = how.depth_claims({**norms, ("residual only", 1): [1.0, 3.0], ("LayerNorm only", 2): fading})
    assert not any(worse.values())
    with pytest.raises(ValueError, match="positive"):
        how.depth_spread([1.0, 0.0])


def test_the_opening_picture_shows_a_soft_look_up_and_the_look_ahead_mask():
    look = how.soft_look_up()
    assert look.weights.argmax() == look.nearest and abs(look.weights.sum() - 1) < 1e-6
    assert (look.weights > 0).all() and look.weights.max() < 0.99  # soft: every key read a little
    assert look.scores.argmax() == look.nearest
    assert np.triu(look.causal, 1).max() == 0  # nothing read after itself
    np.testing.assert_allclose(look.causal.sum(1), 1, rtol=1e-6)
    for columns in (3, 1):
        fig = how.opening_picture(columns=columns)
        assert len(fig.axes) == 4  # three panels and the colour bar
    with pytest.raises(ValueError, match="columns"):
        how.opening_picture(columns=2)
    with pytest.raises(ValueError, match="nearest"):
        how.soft_look_up(n=4, nearest=4)
