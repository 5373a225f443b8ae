"""The sequences chapter's model: its config, the post's one-layer attention model in PyTorch
(`SeqTransformer`, with `RelativeBias` for relative positions), the loss, and training (`train`).

One change to the post's model, measured in the chapter: the queries read the position
encoding only (`queries="position"`). With queries from [content | position], as in the
post, copy is solved by matching content (each output attends to some key holding its own
symbol) rather than by reading its own position; it is still exact, but its attention is not
the copy program. Keys and values read [content | position] either way.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from toylib.attention import Encoder, MultiHeadAttention, sinusoidal_positions
from toylib.device import pick_device, seed_everything
from toylib.infer import model_device
from toylib.sequences.dataset import SeqData, for_config
from toylib.sequences.world import check_task, source_positions
from toylib.train import Callback, History, TrainOptions, fit, stop_when

OPTIMIZERS = ("adamw", "sgd")
QUERIES = ("position", "input")
POSITION_SCHEMES = ("sinusoid", "relative")


# ----------------------------------------------------------------------------- the model


@dataclasses.dataclass(frozen=True)
class SeqConfig:
    task: str = "copy"  # copy, reverse, rotate or filter
    length: int = 8  # sequence length trained on (the model itself takes any length)
    vocab: int = 10  # symbols 0..9: 0 is empty, 1..9 are content
    threshold: int = 5  # filter: values above this become 0
    d_pos: int = 16  # width of the sinusoidal position encoding appended to the one-hot content
    positions: bool = True  # False zeroes the position encoding (the post's first finding)
    scheme: str = "sinusoid"  # "relative": no position vectors; a learned bias per head by the
    # key's offset from the query, clipped to +-max_offset, added to the scores (`RelativeBias`)
    max_offset: int = 2  # relative: offsets beyond +-max_offset share the bias of +-max_offset
    from_end: bool = True  # relative: a second bias by the key's offset from the query's mirror
    # n-1-i (the query counted from the end): the one place where the length n enters
    bias_scale: float = 10.0  # relative: the bias is learned in units of this many nats, so that
    # Adam's steps (about lr each) reach the margins a long sequence's softmax needs
    log_scale: bool = True  # relative: the bias times log(n) / log(length) at length n, so that the
    # keys beyond the window, which share one bias, keep a share that falls as n grows (`RelativeBias`)
    queries: str = "position"  # first layer's queries from the position encoding only; "input": from
    # [content | position] as in the post, which lets copy attend by content instead of by position
    n_layers: int = 1  # the post: one layer is enough
    n_heads: int = 1  # and one head
    residual: bool = False  # True: pre-LayerNorm EncoderBlocks (residual + LayerNorm + MLP)
    d_mlp: int = 64  # MLP width, used only with residual=True
    optimizer: str = "adamw"  # or "sgd": the post's "vanilla SGD did not work that well"
    lr: float = 1e-2
    steps: int = 3000  # at most; training stops at the first validation that meets the target
    batch: int = 256  # sequences per step
    eval_every: int = 50  # steps between validations
    val_size: int = 5000  # validation sequences (the "val" hash split: never trained or tested on)
    stop_loss: float = 1e-4  # the target: every validation sequence exact AND validation loss below this,
    # a margin so that rare sequences the validation lacks (one value repeated 7 times) come out right too;
    # 0: never stop early
    seed: int = 0  # seeds the weights and the training data

    def __post_init__(self):
        check_task(self.task, self.length, self.vocab, self.threshold)
        if self.queries not in QUERIES:
            raise ValueError(f"queries must be one of {QUERIES}, got {self.queries!r}")
        if self.queries == "position" and self.residual:
            raise ValueError("queries='position' is for the bare attention layers; with residual=True use queries='input'")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.d_pos < 2 or self.n_layers < 1 or self.n_heads < 1:
            raise ValueError(f"need d_pos >= 2, n_layers >= 1, n_heads >= 1; got {self.d_pos}, {self.n_layers}, {self.n_heads}")
        if self.scheme not in POSITION_SCHEMES:
            raise ValueError(f"scheme must be one of {POSITION_SCHEMES}, got {self.scheme!r}")
        if self.relative and not self.positions:
            raise ValueError("positions=False zeroes the sinusoids; with scheme='relative' there are none to zero")
        if not isinstance(self.max_offset, (int, np.integer)) or self.max_offset < 1:
            raise ValueError(f"max_offset must be an integer >= 1, got {self.max_offset!r}")
        if not self.bias_scale > 0:
            raise ValueError(f"bias_scale must be > 0, got {self.bias_scale!r}")
        if self.relative and self.log_scale and self.length < 2:
            raise ValueError(f"log_scale divides by log(length): length must be >= 2, got {self.length}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model = {self.d_model} (vocab, plus d_pos with sinusoids) must be divisible by "
                             f"n_heads = {self.n_heads}")

    @property
    def relative(self) -> bool:
        return self.scheme == "relative"

    @property
    def d_model(self) -> int:
        """Width of a token: one-hot content, then the sinusoidal position (none with relative)."""
        return self.vocab + (0 if self.relative else self.d_pos)

    def train_options(self) -> TrainOptions:
        """steps, lr, eval_every and optimizer, restoring the weights of the best val_loss."""
        return TrainOptions.from_config(self, monitor="val_loss", restore_best=True)


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


# ----------------------------------------------------------------------------- training


def sequence_loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Softmax cross-entropy at every position, averaged."""
    device = model_device(model)
    x, y = (t.to(device) for t in batch)
    logits, _ = model(x)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten())


def train(config: SeqConfig = SeqConfig(), data: SeqData | None = None,
          device: torch.device | str | None = None, callback: Callback | None = None,
          progress: bool = True) -> tuple[SeqTransformer, History]:
    """Build a SeqTransformer from `config` and train it with toylib.train.fit on the fresh
    batches of `data` (by default `for_config(config)`: length `config.length`;
    `for_config(config, lengths)`: mixed lengths, the position encoding computed for
    whatever length comes).

    Every `eval_every` steps it is validated on the validation sets of `data`: val_exact,
    val_loss, val_attention_on_source. Training stops at the first validation that meets
    `at_stop_rule` (never with stop_loss=0). `callback(step, model, history)` runs after
    every validation (for attention snapshots); returning True stops training.
    """
    data = for_config(config) if data is None else data
    if data.config != config:
        raise ValueError(f"the data was built for another config: {data.config}, not {config}")
    seed_everything(config.seed)
    device = device or pick_device()
    model = SeqTransformer(config).to(device)
    val = [[torch.from_numpy(a).to(device) for a in xy] for xy in data.val]
    batches = (tuple(map(torch.from_numpy, xy)) for xy in data.batches())

    def evaluate_val(m):
        right, loss, on_src = 0, 0.0, 0.0
        for x, y in val:
            logits, patterns = m(x)  # (batch, pos, vocab), (batch, layer, head, query, key)
            right += (logits.argmax(-1) == y).all(-1).sum().item()
            loss += F.cross_entropy(logits.flatten(0, 1), y.flatten()).item() / len(val)
            src = torch.from_numpy(source_positions(config.task, x.shape[1])).to(device)
            on_src += (patterns[:, 0, 0].argmax(-1) == src).float().mean().item() / len(val)
        n_val = sum(len(x) for x, _ in val)
        return {"val_exact": right / n_val, "val_loss": loss, "val_attention_on_source": on_src}

    at_target = stop_when(lambda r: at_stop_rule(config, r), callback)
    history = fit(model, batches, sequence_loss, config.train_options(), eval_fn=evaluate_val,
                  callback=at_target, device=device, progress=progress)
    return model, history


def at_stop_rule(cfg: SeqConfig, record: dict[str, float]) -> bool:
    """The stopping rule of every sequence model: every validation sequence exact, and the
    validation loss below `stop_loss` (which no loss is with stop_loss=0)."""
    return record["val_exact"] == 1.0 and record["val_loss"] < cfg.stop_loss
