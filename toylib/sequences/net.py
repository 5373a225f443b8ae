"""The sequences chapter's model: the post's one-layer attention model in PyTorch
(`SeqTransformer`, with `RelativeBias` for relative positions) and its loss (`sequence_loss`).
Its config is in config.py, its training (`train`) in training.py.

One change to the post's model, measured in the chapter: the queries read the position
encoding only (`queries="position"`). With queries from [content | position], as in the
post, copy is solved by matching content (each output attends to some key holding its own
symbol) rather than by reading its own position; it is still exact, but its attention is not
the copy program. Keys and values read [content | position] either way.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from toylib.attention import Encoder, MultiHeadAttention, sinusoidal_positions
from toylib.infer import model_device
from toylib.sequences.config import SeqConfig


# ----------------------------------------------------------------------------- the model


def embed(tokens: torch.Tensor, vocab: int, d_pos: int, positions: bool = True, with_content: bool = True) -> torch.Tensor:
    """(batch, pos) symbols -> (batch, pos, vocab + d_pos): [one-hot content | position].

    with_content=False zeroes the content part: what a query that may only ask "which position?" sees."""
    b, n = tokens.shape
    content = F.one_hot(tokens, vocab).float() * with_content  # (batch, pos, vocab)
    # (pos, d_pos), for any length; positions=False: the same shapes, no position signal
    pe = sinusoidal_positions(n, d_pos).to(tokens.device) * positions
    return torch.cat([content, pe.expand(b, n, d_pos)], dim=-1)


class RelativeBias(nn.Module):
    """Where a query looks, learned as one score per head and offset, as in T5's relative
    attention bias: a number added to the attention scores that depends on where the key is
    *relative to the query*, never on where either of them is.

    start[h, o] is head h's bias for a key o places after the query (o = j - i; negative:
    before it). Offsets beyond +-max_offset share the bias of +-max_offset, so a sequence of
    any length uses only the 2 * max_offset + 1 numbers that training fitted. With from_end,
    end[h, o] is added for the key's offset from the query's *mirror*, slot i counted from
    the end: o = j - (n-1-i). That is the one place where the length n enters, and it is what
    reverse needs (slot i reads position n-1-i).

    The tables start at zero (uniform attention) and hold the bias in units of `scale`.

    With a `length`, the bias is multiplied by log(n) / log(length): the tables hold it at that
    length, and it scales with log n at any other. The keys beyond the window share one bias, so
    with a gap of g nats between the source and them their total weight against the source's
    is about n e^-g, which grows with n until it drowns the source. Scaled, it is about
    n^(1 - g / log(length)), which falls as n grows once g > log(length) (2.8 nats at 16). After
    D. Chiang and P. Cholak, "Overcoming a theoretical limitation of self-attention" (2022),
    who scale the scores by log n for the same reason.

    forward(n) -> bias (1, head, query_pos, key_pos), for `attention`'s float mask.
    """

    def __init__(self, n_heads: int, max_offset: int, from_end: bool = True, scale: float = 1.0,
                 length: int | None = None):
        super().__init__()
        if length is not None and length < 2:
            raise ValueError(f"length must be >= 2 (its log divides), got {length}")
        self.max_offset, self.scale, self.length = max_offset, scale, length
        self.start = nn.Parameter(torch.zeros(n_heads, 2 * max_offset + 1))
        self.end = nn.Parameter(torch.zeros(n_heads, 2 * max_offset + 1)) if from_end else None

    def bucket(self, offset: torch.Tensor) -> torch.Tensor:
        """Offsets -> columns of a table: clipped to +-max_offset."""
        m = self.max_offset
        return offset.clamp(-m, m) + m

    def forward(self, n: int) -> torch.Tensor:
        i = torch.arange(n, device=self.start.device)
        offset = i[None, :] - i[:, None]  # (query, key): j - i
        bias = self.start[:, self.bucket(offset)]  # (head, query, key)
        if self.end is not None:
            mirror = n - 1 - i[:, None]  # (query, 1): i counted from the end
            # (head, query, key): by j - (n-1-i), the offset from the mirror
            bias = bias + self.end[:, self.bucket(i[None, :] - mirror)]
        # 1 at `length` and more past it: the far keys' share falls with n
        grow = math.log(n) / math.log(self.length) if self.length else 1.0
        return self.scale * grow * bias[None]  # (1, head, query, key)


class SeqTransformer(nn.Module):
    """The post's model: [one-hot content | sinusoidal position] -> single-head attention ->
    a linear readout to one logit per symbol, at every position.

    With queries="position" (the default) the first layer's queries read the position part
    only: each output slot asks for an input *position*, and keys and values still read
    [content | position]. With queries="input" the queries read the whole token, as in the post.

    With scheme="relative" a token is its one-hot content alone, and each layer adds a
    `RelativeBias` to its scores instead: where to look is then a function of offsets only.
    (Position-only queries then see nothing, and the bias alone places the attention.)

    forward(tokens (batch, pos) of symbols 1..vocab-1) ->
        (logits (batch, pos, vocab), patterns (batch, layer, head, query_pos, key_pos))

    Without `residual`, layers are bare attentions one after the other (the post); with it,
    they are toylib's pre-LayerNorm EncoderBlocks. The model has no fixed context: the
    position encoding is computed for whatever length it is given.
    """

    def __init__(self, config: SeqConfig):
        super().__init__()
        self.config = config
        d = config.d_model
        if config.residual:
            self.encoder = Encoder(config.n_layers, d, config.n_heads, config.d_mlp)
        else:
            self.layers = nn.ModuleList(MultiHeadAttention(d, config.n_heads) for _ in range(config.n_layers))
        self.readout = nn.Linear(d, config.vocab)
        if config.relative:  # zeros at first: uniform attention; no random draw
            self.biases = nn.ModuleList(
                RelativeBias(config.n_heads, config.max_offset, config.from_end, config.bias_scale,
                             config.length if config.log_scale else None)
                for _ in range(config.n_layers))

    def attention_layer(self, layer: int = 0) -> MultiHeadAttention:
        """The MultiHeadAttention of one layer (its W_Q, W_K, W_V, W_O)."""
        return self.encoder.blocks[layer].attn if self.config.residual else self.layers[layer]

    def embed(self, tokens: torch.Tensor, with_content: bool = True) -> torch.Tensor:
        """(batch, pos) -> (batch, pos, d_model): `embed`, or with relative positions the
        one-hot content only."""
        c = self.config
        if c.relative:
            return F.one_hot(tokens, c.vocab).float() * with_content
        return embed(tokens, c.vocab, c.d_pos, c.positions, with_content)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be (batch, pos), "
                             f"got shape {tuple(tokens.shape)}")
        c = self.config
        tokens = tokens.long()
        # (batch, pos, d_model), in the weights' dtype (float64 too, for
        # checking the NumPy twin)
        x = self.embed(tokens).to(self.readout.weight.dtype)
        # relative: per layer a bias (1, head, query_pos, key_pos) added to
        # the scores; sinusoids: None, the position is in the tokens
        n = tokens.shape[1]
        biases = ([b(n).to(x.dtype) for b in self.biases] if c.relative
                  else [None] * c.n_layers)
        if c.residual:
            # patterns: (batch, layer, head, query_pos, key_pos)
            x, patterns = self.encoder(x, biases)
        else:
            patterns = []
            for i, (attn, bias) in enumerate(zip(self.layers, biases)):
                if i == 0 and c.queries == "position":
                    # queries from the positions only: (batch, pos, d_model)
                    slots = self.embed(tokens, with_content=False)
                    x, pattern = attn(slots.to(x.dtype), context=x,
                                      mask=bias)
                else:
                    # no residual: each layer sees only what the last one read
                    x, pattern = attn(x, mask=bias)
                patterns.append(pattern)
            # (batch, layer, head, query_pos, key_pos)
            patterns = torch.stack(patterns, dim=1)
        return self.readout(x), patterns  # logits: (batch, pos, vocab)


# ----------------------------------------------------------------------------- the loss


def sequence_loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Softmax cross-entropy at every position, averaged."""
    device = model_device(model)
    x, y = (t.to(device) for t in batch)
    logits, _ = model(x)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten())
