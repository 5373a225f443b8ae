"""The sequences chapter's model in NumPy: `NumpyTransformer` is the default SeqTransformer
(one layer, one head, no residual) with its backward pass written out by hand and an Adam
optimiser, and `gradient_check` checks that backward pass against finite differences and
against PyTorch's autograd. Its training loop, `train_numpy`, is in training.py, beside
`train`."""

from __future__ import annotations

import math

import numpy as np
import torch

from toylib.sequences.config import SeqConfig
from toylib.sequences.dataset import sample_sequences
from toylib.sequences.net import SeqTransformer, embed, sequence_loss
from toylib.sequences.world import check_sequences, make_targets


# ----------------------------------------------------------------------------- NumPy, by hand


class NumpyTransformer:
    """The default SeqTransformer (one layer, one head, no residual) in NumPy, with its
    backward pass written out by hand and an Adam optimiser.

    Weights are (input, output), as in the post: a token row-vector x maps to x @ W + b.
    forward(x (batch, pos)) -> (logits (batch, pos, vocab), patterns (batch, 1, 1, q, k), cache)
    backward(cache, targets) -> (loss, {name: gradient}) for the mean cross-entropy.
    `torch_state_dict()` gives the same weights in SeqTransformer's layout.
    """

    NAMES = ("W_Q", "W_K", "W_V", "W_O", "W_R")
    # where SeqTransformer keeps each of these weights (nn.Linear's weight and bias)
    TORCH_NAMES = {"W_Q": "layers.0.W_Q", "W_K": "layers.0.W_K", "W_V": "layers.0.W_V", "W_O": "layers.0.W_O",
                   "W_R": "readout"}

    def __init__(self, config: SeqConfig, rng: np.random.Generator):
        if config.n_layers != 1 or config.n_heads != 1 or config.residual or config.relative:
            raise ValueError("the NumPy model is one layer, one head, no residual, sinusoids: set n_layers=1, "
                             "n_heads=1, residual=False, scheme='sinusoid'")
        self.config = config
        d, v = config.d_model, config.vocab
        shapes = {"W_Q": (d, d), "W_K": (d, d), "W_V": (d, d), "W_O": (d, d), "W_R": (d, v)}
        self.params: dict[str, np.ndarray] = {}
        for name, (n_in, n_out) in shapes.items():
            bound = 1 / math.sqrt(n_in)  # torch.nn.Linear's default initialisation
            self.params[name] = rng.uniform(-bound, bound, (n_in, n_out))
            self.params["b" + name[1:]] = rng.uniform(-bound, bound, n_out)
        self.m = {k: np.zeros_like(p) for k, p in self.params.items()}  # Adam's moments
        self.v = {k: np.zeros_like(p) for k, p in self.params.items()}
        self.t = 0

    def embed(self, x: np.ndarray) -> np.ndarray:
        """(batch, pos) -> (batch, pos, d_model) in float64: the same [one-hot | position]
        as SeqTransformer's (`embed`), which the NumPy model has no weights for anyway."""
        c = self.config
        return embed(torch.from_numpy(x), c.vocab, c.d_pos, c.positions).double().numpy()

    def forward(self, x) -> tuple[np.ndarray, np.ndarray, dict]:
        P = self.params
        x = check_sequences(x, self.config.vocab)
        e = self.embed(x)  # (B, n, d)
        e_q = e.copy()
        if self.config.queries == "position":
            # the query reads the position part only
            e_q[:, :, : self.config.vocab] = 0.0
        q = e_q @ P["W_Q"] + P["b_Q"]  # (B, n, d)
        k, v = (e @ P[f"W_{s}"] + P[f"b_{s}"] for s in "KV")  # (B, n, d)
        scale = 1 / math.sqrt(q.shape[-1])
        scores = q @ k.transpose(0, 2, 1) * scale  # (B, query, key)
        a = np.exp(scores - scores.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)  # pattern (B, query, key)
        z = a @ v  # (B, n, d)
        o = z @ P["W_O"] + P["b_O"]  # (B, n, d)
        logits = o @ P["W_R"] + P["b_R"]  # (B, n, vocab)
        cache = {"e": e, "e_q": e_q, "q": q, "k": k, "v": v, "a": a, "z": z,
                 "o": o, "logits": logits, "scale": scale}
        return logits, a[:, None, None], cache

    def backward(self, cache: dict, targets) -> tuple[float, dict]:
        P = self.params
        y = np.asarray(targets)
        logits, a, e = cache["logits"], cache["a"], cache["e"]
        n_tok = y.size
        p = np.exp(logits - logits.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)  # (B, n, vocab)
        picked = np.take_along_axis(p, y[..., None], -1)[..., 0]
        loss = float(-np.log(picked).mean())
        # d(mean cross-entropy) / d logits = (softmax - one-hot) / tokens
        d_logits = p.copy()
        np.put_along_axis(d_logits, y[..., None], picked[..., None] - 1, -1)
        d_logits /= n_tok
        g = {}

        def linear_back(inp, d_out, name):
            # out = inp @ W + b: the gradients of W and b, and d inp
            g["W" + name] = np.einsum("bni,bno->io", inp, d_out)
            g["b" + name] = d_out.sum((0, 1))
            return d_out @ P["W" + name].T

        d_o = linear_back(cache["o"], d_logits, "_R")  # (B, n, d)
        d_z = linear_back(cache["z"], d_o, "_O")  # (B, n, d)
        d_a = d_z @ cache["v"].transpose(0, 2, 1)  # (B, query, key)
        d_v = a.transpose(0, 2, 1) @ d_z  # (B, key, d)
        # softmax backward, row by row: dS = A * (dA - sum_k dA * A)
        d_a_mean = (d_a * a).sum(-1, keepdims=True)  # (B, query, 1)
        d_scores = a * (d_a - d_a_mean) * cache["scale"]
        d_q = d_scores @ cache["k"]  # (B, query, d)
        d_k = d_scores.transpose(0, 2, 1) @ cache["q"]  # (B, key, d)
        # the inputs' own gradients are not needed: they are fixed data
        for inp, name, d in ((cache["e_q"], "_Q", d_q), (e, "_K", d_k),
                             (e, "_V", d_v)):
            linear_back(inp, d, name)
        return loss, g

    def adam_step(self, grads: dict[str, np.ndarray], lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        """One Adam update (no weight decay: as fit's AdamW with its default weight_decay=0)."""
        b1, b2 = betas
        self.t += 1
        for k, gk in grads.items():
            self.m[k] = b1 * self.m[k] + (1 - b1) * gk
            self.v[k] = b2 * self.v[k] + (1 - b2) * gk * gk
            m_hat = self.m[k] / (1 - b1**self.t)
            v_hat = self.v[k] / (1 - b2**self.t)
            self.params[k] -= lr * m_hat / (np.sqrt(v_hat) + eps)

    def torch_state_dict(self, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
        """These weights under SeqTransformer's names and layout (nn.Linear keeps (output, input)).

        dtype=torch.float64 keeps them exact, for checking gradients against autograd."""
        return {k: torch.tensor(v, dtype=dtype) for k, v in self.torch_layout(self.params).items()}

    @classmethod
    def torch_layout(cls, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Weights, or their gradients, keyed and shaped as in SeqTransformer's state dict."""
        out = {}
        for ours, theirs in cls.TORCH_NAMES.items():
            out[f"{theirs}.weight"], out[f"{theirs}.bias"] = arrays[ours].T, arrays["b" + ours[1:]]
        return out

    def to_torch(self) -> SeqTransformer:
        """A SeqTransformer holding these weights (to save, plot or evaluate with PyTorch)."""
        model = SeqTransformer(self.config)
        model.load_state_dict(self.torch_state_dict())
        return model.eval()


# ----------------------------------------------------------------------------- checks


def gradient_check(queries: str = "position", seed: int = 0,
                   eps: float = 1e-6) -> tuple[float, float]:
    """Check NumpyTransformer's hand-written backward pass on a small model
    with large random weights (a sharp softmax is where mistakes show), in
    float64: every weight's gradient against a central finite difference,
    and every gradient against PyTorch's autograd on the same weights.
    Returns the two relative errors |a - b| / (|a| + |b|), each over all
    gradients flattened and joined."""
    cfg = SeqConfig(task="reverse", length=5, vocab=5, threshold=2, d_pos=4,
                    queries=queries)
    model = NumpyTransformer(cfg, np.random.default_rng(seed))
    rng = np.random.default_rng(seed + 1)
    for k in model.params:
        model.params[k] = rng.normal(0, 0.7, model.params[k].shape)
    x = sample_sequences(4, 5, cfg.vocab, rng)
    y = make_targets(cfg.task, x)

    def loss() -> float:
        return model.backward(model.forward(x)[2], y)[0]

    _, grads = model.backward(model.forward(x)[2], y)
    numeric = {}
    for name, p in model.params.items():
        numeric[name] = np.zeros_like(p)
        for idx in np.ndindex(p.shape):  # every single weight
            old = p[idx]
            p[idx] = old + eps
            up = loss()
            p[idx] = old - eps
            down = loss()
            p[idx] = old
            numeric[name][idx] = (up - down) / (2 * eps)
    twin = SeqTransformer(cfg).double()
    twin.load_state_dict(model.torch_state_dict(torch.float64))
    batch = (torch.from_numpy(x), torch.from_numpy(y))
    sequence_loss(twin, batch).backward()
    autograd = {name: p.grad.numpy() for name, p in twin.named_parameters()}
    return (_relative_error(grads, numeric),
            _relative_error(model.torch_layout(grads), autograd))


def _relative_error(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    """|a - b| / (|a| + |b|) over every array of a and b, flattened and joined."""
    va = np.concatenate([a[n].ravel() for n in sorted(a)])
    vb = np.concatenate([b[n].ravel() for n in sorted(a)])
    return float(np.linalg.norm(va - vb) / (np.linalg.norm(va) + np.linalg.norm(vb)))
