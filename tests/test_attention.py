import math

import pytest
import torch

from toylib.attention import (
    Decoder,
    DecoderBlock,
    Encoder,
    EncoderBlock,
    EncoderDecoder,
    KeysValues,
    MultiHeadAttention,
    Seq2SeqPatterns,
    attention,
    attention_beside,
    causal_mask,
    count_parameters,
    sinusoidal_positions,
)


def test_attention_rows_sum_to_one_and_output_is_the_weighted_values():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 5, 4), torch.randn(2, 7, 4), torch.randn(2, 7, 3)
    out, pattern = attention(q, k, v)
    assert pattern.shape == (2, 5, 7) and out.shape == (2, 5, 3)
    torch.testing.assert_close(pattern.sum(-1), torch.ones(2, 5))
    torch.testing.assert_close(out, pattern @ v)


def test_causal_mask_leaves_nothing_above_the_diagonal():
    torch.manual_seed(0)
    x = torch.randn(3, 6, 8)
    out, pattern = attention(x, x, x, causal_mask(6))
    assert torch.all(pattern.triu(diagonal=1) == 0)
    torch.testing.assert_close(pattern.sum(-1), torch.ones(3, 6))
    # the first position can only read itself
    torch.testing.assert_close(out[:, 0], x[:, 0])


def test_causal_attention_does_not_see_the_future():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, causal=True)
    x = torch.randn(1, 5, 16)
    y = x.clone()
    y[:, 3:] = torch.randn(1, 2, 16)  # change only positions 3 and 4
    out_x, _ = mha(x)
    out_y, _ = mha(y)
    torch.testing.assert_close(out_x[:, :3], out_y[:, :3])
    assert not torch.allclose(out_x[:, 3:], out_y[:, 3:])


def test_a_mask_that_lets_every_query_read_gives_the_gradients_it_always_gave():
    # nan_to_num is skipped where no query row is fully masked: outputs and gradients must be
    # those of the softmax with it
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4, requires_grad=True) for _ in range(3))
    mask = causal_mask(5)
    out, pattern = attention(q, k, v, mask)
    (out.square().sum() + pattern.sum()).backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    scores = (q @ k.transpose(-2, -1) / 2).masked_fill(~mask, float("-inf"))
    by_hand = torch.nan_to_num(torch.softmax(scores, -1), nan=0.0)
    ((by_hand @ v).square().sum() + by_hand.sum()).backward()
    assert torch.equal(pattern, by_hand)
    for mine, theirs in zip(grads, (q.grad, k.grad, v.grad)):
        assert torch.equal(mine, theirs)


@pytest.mark.parametrize("with_mask", [False, True])
def test_extending_a_causal_encoder_a_position_at_a_time_gives_what_forward_gives(with_mask):
    torch.manual_seed(0)
    enc = Encoder(3, 16, 4, 32, causal=True).eval()
    x = torch.randn(2, 7, 16)
    mask = torch.rand(7, 7) < 0.7 if with_mask else None
    if mask is not None:
        mask[:, 0] = True  # every query reads something
    with torch.no_grad():
        whole, patterns = enc(x, mask)
        first, first_patterns, past = enc.extend(x[:, :3], None, None if mask is None else mask[:3, :3])
        # four new positions at once, on top of the first three: the mask's rows 3 to 6
        rest = enc.extend(x[:, 3:], past, None if mask is None else mask[3:])[0]
        parts, last = [first], []
        for t in range(3, 7):
            out, pattern, past = enc.extend(x[:, t : t + 1], past, None if mask is None else mask[t : t + 1, : t + 1])
            parts.append(out)
            last.append(pattern)
    torch.testing.assert_close(torch.cat(parts, 1), whole)
    torch.testing.assert_close(rest, whole[:, 3:])
    torch.testing.assert_close(first_patterns, patterns[..., :3, :3])
    torch.testing.assert_close(last[-1], patterns[..., 6:, :])  # (batch, layer, head, 1, 7)
    assert len(past) == 3 and isinstance(past[0], KeysValues) and past[0].k.shape == (2, 4, 7, 4)
    assert torch.equal(past[1].take(torch.tensor([1, 1, 0])).v[2], past[1].v[0])


def test_only_a_causal_encoder_extends_and_its_layers_must_match():
    x = torch.randn(1, 2, 8)
    with pytest.raises(ValueError, match="causal"):
        Encoder(1, 8, 2, 16).extend(x)
    enc = Encoder(2, 8, 2, 16, causal=True)
    _, _, past = enc.extend(x)
    with pytest.raises(ValueError, match="1 layers for an encoder of 2"):
        enc.extend(x, past[:1])


def test_a_fully_masked_query_reads_nothing_instead_of_nan():
    q = k = v = torch.randn(1, 3, 4)
    mask = torch.tensor([[False, False, False], [True, True, False], [True, True, True]])
    out, pattern = attention(q, k, v, mask)
    assert torch.isfinite(out).all()
    assert torch.all(pattern[0, 0] == 0)


def test_multi_head_shapes_and_cross_attention():
    torch.manual_seed(0)
    mha = MultiHeadAttention(24, 3)
    x, memory = torch.randn(2, 5, 24), torch.randn(2, 9, 24)
    out, pattern = mha(x)
    assert out.shape == (2, 5, 24) and pattern.shape == (2, 3, 5, 5)
    out, pattern = mha(x, context=memory)
    assert out.shape == (2, 5, 24) and pattern.shape == (2, 3, 5, 9)
    torch.testing.assert_close(pattern.sum(-1), torch.ones(2, 3, 5))


def test_padding_mask_blocks_the_masked_keys():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 4, 8)
    keep = torch.tensor([[True, True, False, False], [True, True, True, True]])
    _, pattern = mha(x, mask=keep[:, None, :].expand(2, 4, 4))
    assert torch.all(pattern[0, :, :, 2:] == 0)


def test_a_float_mask_is_a_bias_added_to_the_scores():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
    bias = torch.randn(3, 4, 5)  # one bias per head, query and key
    _, plain = attention(q, k, v)
    _, biased = attention(q, k, v, bias)
    expected = torch.softmax(torch.log(plain) + bias, dim=-1)  # the softmax of (scores + bias)
    torch.testing.assert_close(biased, expected)
    # a causal block accepts a bias too, and still never looks ahead
    mha = MultiHeadAttention(8, 2, causal=True)
    _, pattern = mha(torch.randn(1, 4, 8), mask=torch.randn(1, 2, 4, 4))
    assert torch.all(pattern.triu(1) == 0)


def test_bad_sizes_raise_value_errors():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="causal"):
        MultiHeadAttention(8, 2, causal=True)(torch.randn(1, 3, 8), context=torch.randn(1, 4, 8))
    with pytest.raises(ValueError, match="n_layers"):
        Encoder(0, 8, 2, 16)
    with pytest.raises(ValueError, match="n_ctx"):
        sinusoidal_positions(0, 8)


def test_encoder_and_decoder_stacks_return_patterns_by_layer_and_head():
    torch.manual_seed(0)
    enc, dec = Encoder(3, 16, 4, 32), Decoder(2, 16, 4, 32)
    src, tgt = torch.randn(2, 7, 16), torch.randn(2, 5, 16)
    memory, enc_patterns = enc(src)
    out, self_patterns, cross_patterns = dec(tgt, memory)
    assert memory.shape == (2, 7, 16) and enc_patterns.shape == (2, 3, 4, 7, 7)
    assert out.shape == (2, 5, 16)
    assert self_patterns.shape == (2, 2, 4, 5, 5) and cross_patterns.shape == (2, 2, 4, 5, 7)
    assert torch.all(self_patterns.triu(diagonal=1) == 0)  # decoder self-attention is causal
    torch.testing.assert_close(cross_patterns.sum(-1), torch.ones(2, 2, 4, 5))


def test_blocks_are_pre_layernorm_residual():
    block = EncoderBlock(8, 2, 16)
    for p in block.parameters():
        torch.nn.init.zeros_(p)  # zero weights: attention and MLP add nothing
    x = torch.randn(2, 3, 8)
    out, _ = block(x)
    torch.testing.assert_close(out, x)
    dblock = DecoderBlock(8, 2, 16)
    out, sp, cp = dblock(x, torch.randn(2, 4, 8))
    assert sp.shape == (2, 2, 3, 3) and cp.shape == (2, 2, 3, 4)


def test_sinusoidal_positions_match_the_formula():
    table = sinusoidal_positions(50, 16)
    assert table.shape == (50, 16)
    pos, i = 7, 3
    expected_sin = torch.sin(torch.tensor(pos / 10000 ** (2 * i / 16)))
    expected_cos = torch.cos(torch.tensor(pos / 10000 ** (2 * i / 16)))
    torch.testing.assert_close(table[pos, 2 * i], expected_sin)
    torch.testing.assert_close(table[pos, 2 * i + 1], expected_cos)
    assert sinusoidal_positions(4, 7).shape == (4, 7)  # odd widths work too


def test_count_parameters():
    assert count_parameters(torch.nn.Linear(3, 2)) == 8


def test_an_encoder_takes_one_bias_per_layer():
    torch.manual_seed(0)
    enc = Encoder(3, 16, 4, 32)
    x = torch.randn(2, 5, 16)
    biases = [torch.randn(1, 4, 5, 5), None, torch.randn(1, 4, 5, 5)]  # per layer: (1, head, query, key)
    out, patterns = enc(x, biases)
    h, expected = x, []
    for block, bias in zip(enc.blocks, biases):
        h, pattern = block(h, bias)
        expected.append(pattern)
    torch.testing.assert_close(out, enc.ln_final(h))
    torch.testing.assert_close(patterns, torch.stack(expected, dim=1))
    # the bias of each layer reaches that layer only: not the same as the first bias everywhere
    assert not torch.allclose(patterns, enc(x, biases[0])[1])
    # a tuple works as a list; one mask for all layers is still one mask
    torch.testing.assert_close(enc(x, tuple(biases))[1], patterns)
    torch.testing.assert_close(enc(x, [biases[0]] * 3)[1], enc(x, biases[0])[1])
    with pytest.raises(ValueError, match="2 per-layer masks .* 3 layers"):
        enc(x, biases[:2])


def _seq2seq() -> EncoderDecoder:
    torch.manual_seed(0)
    return EncoderDecoder(2, 3, 16, 4, 32).eval()


def test_encoder_decoder_shapes_and_forward_is_encode_then_decode():
    model = _seq2seq()
    src, tgt = torch.randn(2, 7, 16), torch.randn(2, 5, 16)
    x, patterns = model(src, tgt)
    assert isinstance(patterns, Seq2SeqPatterns)
    assert x.shape == (2, 5, 16)
    assert patterns.encoder.shape == (2, 2, 4, 7, 7)
    assert patterns.decoder_self.shape == (2, 3, 4, 5, 5)
    assert patterns.cross.shape == (2, 3, 4, 5, 7)
    memory, encoder_patterns = model.encode(src)
    assert memory.shape == (2, 7, 16)
    x2, self_patterns, cross_patterns = model.decode(tgt, memory)
    assert torch.equal(x, x2)
    assert torch.equal(patterns.encoder, encoder_patterns)
    assert torch.equal(patterns.decoder_self, self_patterns)
    assert torch.equal(patterns.cross, cross_patterns)


def test_extending_a_decoder_a_position_at_a_time_gives_what_forward_gives():
    model = _seq2seq()
    src, tgt = torch.randn(2, 6, 16), torch.randn(2, 5, 16)
    memory, _ = model.encode(src)
    bias = torch.randn(2, 4, 5, 6)  # a cross-attention bias per target position, as the maze's walker has
    x, self_patterns, cross_patterns = model.decoder(tgt, memory, bias)
    past, outs = None, []
    for t in range(5):
        out, sp, cp, past = model.decoder.extend(tgt[:, t : t + 1], memory, past, bias[:, :, t : t + 1])
        torch.testing.assert_close(sp[..., 0, :], self_patterns[..., t, : t + 1])
        torch.testing.assert_close(cp[..., 0, :], cross_patterns[..., t, :])
        outs.append(out)
    torch.testing.assert_close(torch.cat(outs, 1), x)
    first = outs
    assert past[0].k.shape == (2, 4, 5, 4)  # (batch, head, positions so far, d_head), one per layer
    with pytest.raises(ValueError, match="1 layers for a decoder of 3"):
        model.decoder.extend(tgt[:, :1], memory, past[:1])
    # the memory's keys and values found once give, token by token, the same numbers as the memory
    read, cached, outs = model.decoder.memory_keys_values(memory), None, []
    assert len(read) == 3 and read[0].k.shape == (2, 4, 6, 4) and read[0].k.is_contiguous()
    for t in range(5):
        out, sp, cp, cached = model.decoder.extend(tgt[:, t : t + 1], read, cached, bias[:, :, t : t + 1])
        outs.append(out)
    assert torch.equal(torch.cat(outs, 1), torch.cat(first, 1))  # the very same numbers
    with pytest.raises(ValueError, match="keys and values of 2 layers for a decoder of 3"):
        model.decoder.extend(tgt[:, :1], read[:2])
    with pytest.raises(ValueError, match="offsets are for self-attention"):  # a context read before is cross-attention
        model.decoder.blocks[0].cross_attn(tgt, context=read[0], offsets=(1, 1, 1, 1))


def test_encoder_decoder_decodes_causally_and_reads_the_memory():
    model = _seq2seq()
    src, tgt = torch.randn(1, 6, 16), torch.randn(1, 5, 16)
    memory, _ = model.encode(src)
    x, self_patterns, _ = model.decode(tgt, memory)
    assert torch.all(self_patterns.triu(diagonal=1) == 0)
    later = tgt.clone()
    later[:, 3:] = torch.randn(1, 2, 16)  # change only target positions 3 and 4
    x_later, _, _ = model.decode(later, memory)
    torch.testing.assert_close(x_later[:, :3], x[:, :3])
    assert not torch.allclose(x_later[:, 3:], x[:, 3:])
    x_other, _ = model(torch.randn(1, 6, 16), tgt)  # another source, the same target
    assert not torch.allclose(x_other, x)


def test_encoder_decoder_memory_mask_hides_source_positions():
    model = _seq2seq()
    src, tgt = torch.randn(2, 6, 16), torch.randn(2, 4, 16)
    _, patterns = model(src, tgt)
    torch.testing.assert_close(patterns.cross.sum(-1), torch.ones(2, 3, 4, 4))
    keep = torch.tensor([[True, True, True, True, False, False], [True] * 6])  # (batch, src_pos)
    _, masked = model(src, tgt, memory_mask=keep[:, None, :])
    torch.testing.assert_close(masked.cross.sum(-1), torch.ones(2, 3, 4, 4))
    assert torch.all(masked.cross[0, ..., 4:] == 0)
    assert torch.all(masked.cross[1] > 0)
    torch.testing.assert_close(masked.encoder, patterns.encoder)  # the mask is for cross-attention only


def test_encoder_decoder_needs_a_layer_on_each_side():
    with pytest.raises(ValueError, match="n_encoder_layers .* got 0 and 2"):
        EncoderDecoder(0, 2, 16, 4, 32)
    with pytest.raises(ValueError, match="got 2 and 0"):
        EncoderDecoder(2, 0, 16, 4, 32)


def test_attention_beside_is_attention_masked_to_the_query_and_one_key_per_head():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 6, 4), torch.randn(2, 3, 6, 4), torch.randn(2, 3, 6, 5)
    offsets = (1, -2, 3)  # head 1 looks back; some keys beside fall off either end
    bias = torch.randn(2, 3, 6, 2)
    beside = torch.arange(6)[None, :] + torch.tensor(offsets)[:, None]  # (head, pos)
    off = (beside < 0) | (beside >= 6)
    bias[..., 1] = bias[..., 1].masked_fill(off | (torch.rand(2, 3, 6) < 0.3), -math.inf)
    dense = torch.full((2, 3, 6, 6), -math.inf)
    dense.scatter_(-1, beside.clamp(0, 5)[None, :, :, None].expand(2, -1, -1, -1), bias[..., 1:])
    dense.scatter_(-1, torch.arange(6)[None, None, :, None].expand(2, 3, -1, -1), bias[..., :1])
    out, pattern = attention_beside(q, k, v, offsets, bias)
    want_out, want_pattern = attention(q, k, v, dense)
    torch.testing.assert_close(out, want_out)
    torch.testing.assert_close(pattern[..., 0], want_pattern.diagonal(dim1=-2, dim2=-1))
    assert torch.all(pattern[..., 1][bias[..., 1] == -math.inf] == 0)
    allowed = torch.ones(2, 3, 6, 2, dtype=torch.bool)
    allowed[..., 1] = bias[..., 1] > -math.inf  # a boolean mask reads as a bias of 0 or -inf
    torch.testing.assert_close(attention_beside(q, k, v, offsets, allowed)[1],
                               attention_beside(q, k, v, offsets, torch.where(allowed, 0.0, -math.inf))[1])
    with pytest.raises(ValueError, match="one int per head"):
        attention_beside(q, k, v, (1, 2), bias)
    # offsets per head and query: the same as per head where they agree, and each query its own otherwise
    per_query = torch.tensor(offsets)[:, None].expand(3, 6).contiguous()
    torch.testing.assert_close(attention_beside(q, k, v, per_query, bias), (out, pattern))
    shuffled = torch.randperm(6)  # the tokens in another order, each still reading the same key
    back = torch.argsort(shuffled)  # where each token went
    there = back[beside.clamp(0, 5)] - back[None]  # (head, pos) in the new order, as offsets
    moved, moved_pattern = attention_beside(q[..., shuffled, :], k[..., shuffled, :], v[..., shuffled, :],
                                            there[:, shuffled], bias[..., shuffled, :])
    torch.testing.assert_close(moved, out[..., shuffled, :])
    torch.testing.assert_close(moved_pattern, pattern[..., shuffled, :])
    with pytest.raises(ValueError, match=r"\(head, pos\)"):
        attention_beside(q, k, v, torch.tensor([1, 2, 3]), bias)
    with pytest.raises(ValueError, match=r"\(head, pos\)"):
        attention_beside(q, k, v, per_query.float(), bias)
    causal = MultiHeadAttention(8, 2, causal=True)
    with pytest.raises(ValueError, match="causal"):
        causal(torch.randn(1, 4, 8), offsets=(1, 1))