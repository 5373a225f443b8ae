"""The Sokoban policy: its config, the convolutional `BoardEncoder`, `SokobanPolicy` (a causal
transformer over the goal and the boards so far, with an action head and an nsteps head),
its loss, the teacher-forced `accuracies`, `train`, and `train_side_by_side` (two policies at once).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from toylib.attention import Encoder, KeysValues
from toylib.device import pick_device, seed_everything
from toylib.infer import evaluating, model_device
from toylib.sokoban.dataset import N_NSTEPS, UNSOLVABLE, SokobanSet, for_config
from toylib.sokoban.world import ACTION_NAMES, CHANNELS
from toylib.train import Callback, History, TrainOptions, fit, side_by_side

# ----------------------------------------------------------------------------- the policy


@dataclasses.dataclass(frozen=True)
class SokobanConfig:
    """A policy and how to train it. The defaults reach the chapter's targets."""

    d_model: int = 32  # width of every token (the post: 16)
    n_heads: int = 8
    n_layers: int = 3  # transformer blocks over the history (the post: 3)
    channels: int = 16  # width of the convolutional board encoder
    conv_layers: int = 6  # 3x3 convolutions per board, all but the first residual
    region: bool = True  # a sixth plane, where the player can walk (`walkable`); False: the post's 5
    inside: bool = True  # convolve only the squares inside the border wall, which every board has
    pieces: bool = True  # the token also reads the features at the box's and the player's squares
    n_ctx: int = 32  # boards a history holds, the goal board not counted (the post: 32)
    history: bool = True  # False: the baseline, each board sees only itself and the goal
    dropout: float = 0.0
    steps: int = 2_200  # batches (cosine decay over them)
    batch_size: int = 32  # entries per batch (the post: 32)
    lr: float = 6e-3  # peak learning rate (AdamW): 3e-3 learns more slowly, 1e-2 no better
    warmup: int = 100
    weight_decay: float = 0.0
    grad_clip: float | None = 1.0
    eval_every: int = 1_000  # steps between validations
    log_every: int = 100  # steps between records of the training loss, for its curve
    n_solvable: int = 4_000  # training boards that can be solved (the post: 4,000) ...
    n_unsolvable: int = 4_000  # ... and that cannot (the post: 4,000), each under 8 symmetries
    n_held_out: int = 4_000  # held-out boards, half of them solvable (the post: 4,000)
    n_starts: int = 24_000  # start boards alone, half solvable, each under 8 symmetries, for the start loss
    start_batch: int = 64  # start boards per batch, beside the entries: their nsteps class (0: none)
    data_seed: int = 0  # which boards: `dataset.for_config` seeds its generator with it
    seed: int = 0  # initial weights and batch order

    def __post_init__(self):
        if self.d_model < 1 or self.n_heads < 1 or self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a positive multiple of n_heads ({self.n_heads})")
        if min(self.n_layers, self.channels, self.conv_layers, self.n_ctx, self.batch_size) < 1:
            raise ValueError("n_layers, channels, conv_layers, n_ctx and batch_size must be at least 1")
        if self.n_starts < 0 or self.start_batch < 0 or (self.start_batch > 0) != (self.n_starts > 0):
            raise ValueError(f"n_starts ({self.n_starts}) and start_batch ({self.start_batch}) are both 0 (no start "
                             "loss) or both positive")

    def train_options(self) -> TrainOptions:
        return TrainOptions.from_config(self, schedule="cosine", monitor="val_loss", restore_best=True)


def _beside(region: torch.Tensor) -> torch.Tensor:
    """(n, 1, rows, cols) -> the same shape: at each square, the largest value of its four
    neighbours (0 past the edge)."""
    p = F.pad(region, (1, 1, 1, 1))  # (n, 1, rows + 2, cols + 2)
    return torch.maximum(torch.maximum(p[..., :-2, 1:-1], p[..., 2:, 1:-1]),
                         torch.maximum(p[..., 1:-1, :-2], p[..., 1:-1, 2:]))


def walkable(planes: torch.Tensor) -> torch.Tensor:
    """Planes (n, 5, rows, cols) -> (n, 1, rows, cols) float: 1 on every
    square the player can walk to without pushing the box, its own square
    included, 0 elsewhere (everywhere on the goal board, which has no
    player). A flood fill from the player over the floor, the box in the
    way, one square further a pass, until a pass changes nothing: as many
    passes as the board needs, at most one per floor square. It has no
    weights: it is how the player moves, as the legal moves are, and a few
    convolutions cannot follow a corridor that winds further than they see.
    On a GPU it makes every pass a board could need (one per square), rather
    than wait after each pass to ask whether it changed anything.
    """
    x = planes.float()
    free = x[:, 1:2] * (1 - x[:, 4:5])  # (n, 1, rows, cols): floor, no box
    region = x[:, 3:4]  # the player's square
    for _ in range(free.shape[-2] * free.shape[-1]):
        grown = torch.maximum(region, _beside(region) * free)
        if _still_on_cpu(grown, region):
            break
        region = grown
    return region


def _still_on_cpu(grown: torch.Tensor, region: torch.Tensor) -> bool:
    """On the CPU, whether a pass of the flood changed nothing (then it is done); elsewhere
    False without asking, as the answer would wait for the device."""
    return grown.device.type == "cpu" and torch.equal(grown, region)


class BoardEncoder(nn.Module):
    """A board's planes to one token: a 3x3 convolution, then `layers - 1` more that each add
    their output to their input (residual, so that a stack deep enough to see across the board
    still trains), then each channel's maximum and mean over the squares, and a linear map of
    those to the token. With `region`, the 5 planes gain a sixth, where the player can walk
    (`walkable`), before the first convolution.

    Pooling over the squares, rather than mapping the whole feature map, makes the token the
    same wherever on the board a pattern sits, so what the encoder learns in one place holds in
    every place: after six layers each square's features already describe what lies within six
    squares of it (the box, the player, the walls beside them), which is what the moves depend
    on. The maximum says whether a feature fires anywhere (a box stuck in a corner), the mean
    how much of the board it covers. Against a linear map of the whole feature map (this
    encoder's earlier form) it picks more shortest-solution moves, with fewer parameters.

    With `pieces`, the token also reads each channel where the box stands and where the player
    stands (the box and player planes as weights, so a piece that is absent reads 0): the two
    squares the next move turns on, still wherever they are on the board: with them 16
    channels come close to what 32 learned without. With `inside`, the convolutions see only the
    squares inside the border wall, which every board has, so it tells nothing: 36 squares of
    an 8x8 board in place of 64, and the zeros the convolutions pad with stand for the wall."""

    def __init__(self, channels: int, layers: int, d_model: int, region: bool = False, inside: bool = False,
                 pieces: bool = False):
        super().__init__()
        self.region, self.inside, self.pieces = region, inside, pieces
        self.first = nn.Conv2d(len(CHANNELS) + region, channels, 3, padding=1)
        self.convs = nn.ModuleList(nn.Conv2d(channels, channels, 3, padding=1) for _ in range(layers - 1))
        self.out = nn.Linear((4 if pieces else 2) * channels, d_model)

    def forward(self, planes: torch.Tensor) -> torch.Tensor:
        x = planes.float()  # (n, 5, rows, cols)
        if self.region:
            x = torch.cat([x, walkable(x)], 1)  # (n, 6, rows, cols)
        if self.inside:
            x = x[..., 1:-1, 1:-1]  # (n, planes, rows - 2, cols - 2)
        x = F.gelu(self.first(x))  # (n, channels, rows, cols)
        for conv in self.convs:
            x = x + F.gelu(conv(x))  # each layer reaches one square further
        pooled = [x.amax((2, 3)), x.mean((2, 3))]  # (n, channels) each
        if self.pieces:  # the box plane and the player plane as weights: zero where the piece is absent
            pooled += [(x * planes[:, 4:5, 1:-1, 1:-1] if self.inside else x * planes[:, 4:5]).sum((2, 3)),
                       (x * planes[:, 3:4, 1:-1, 1:-1] if self.inside else x * planes[:, 3:4]).sum((2, 3))]
        pooled = torch.cat(pooled, 1)  # (n, 2 or 4 * channels)
        return self.out(pooled)  # (n, d_model)


class SokobanPolicy(nn.Module):
    """The goal board and the boards so far as tokens, a causal transformer over them, and
    two heads at every board: the next action (MOVES and UNDO) and the nsteps class.

    tokens(planes (n, 5, rows, cols)) -> (n, d_model): a board's token; solving caches them.
    attend(goal (B, d), boards (B, T, d)) -> (action logits (B, T, 5), nsteps logits
        (B, T, N_NSTEPS), patterns (B, layer, head, T + 1, T + 1)); position 0 is the goal.
    forward(goal planes (B, 5, rows, cols), board planes (B, T, 5, rows, cols), lengths=None)
        does both; with `lengths` (B,) only real boards go through the encoder.
    With config.history False (the baseline) each board attends only to the goal and itself.
    """

    def __init__(self, config: SokobanConfig = SokobanConfig()):
        super().__init__()
        self.config = c = config
        self.encoder = BoardEncoder(c.channels, c.conv_layers, c.d_model, c.region, c.inside, c.pieces)
        self.position = nn.Embedding(c.n_ctx + 1, c.d_model)  # 0: the goal, then the boards in order
        self.blocks = Encoder(c.n_layers, c.d_model, c.n_heads, 4 * c.d_model, c.dropout, causal=True)
        self.action_head = nn.Linear(c.d_model, len(ACTION_NAMES))
        self.nsteps_head = nn.Linear(c.d_model, N_NSTEPS)

    def tokens(self, planes: torch.Tensor) -> torch.Tensor:
        return self.encoder(planes)  # (n, d_model)

    def attend(
        self, goal: torch.Tensor, boards: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, t, _ = boards.shape
        if t > self.config.n_ctx:
            raise ValueError(f"the policy holds {self.config.n_ctx} boards, "
                             f"got a history of {t}")
        x = torch.cat([goal[:, None], boards], 1)  # (B, T + 1, d)
        x = x + self.position.weight[: t + 1]
        mask = None
        if not self.config.history:
            # the goal (column 0) and the board itself; the blocks add the
            # causal mask
            mask = torch.eye(t + 1, dtype=torch.bool, device=x.device)
            mask[:, 0] = True
        # (B, T + 1, d), (B, layer, head, T + 1, T + 1)
        x, patterns = self.blocks(x, mask)
        x = x[:, 1:]  # (B, T, d): the boards
        return self.action_head(x), self.nsteps_head(x), patterns

    def attend_more(
        self, boards: torch.Tensor, past: list[KeysValues] | None = None, goal: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, list[KeysValues]]:
        """`attend` at boards appended to a history: boards (B, n, d) are the next n boards'
        tokens, `past` the blocks' keys and values of the goal and the boards before them
        (from the last call), or None to start a history with `goal` (B, d). Returns (action
        logits (B, n, 5), nsteps logits (B, n, N_NSTEPS), keys and values with these boards
        appended): what `attend` gives at those boards, computed for them alone, so that a
        search that adds a board per step pays for one board per step."""
        if (past is None) == (goal is None):
            raise ValueError("give either the keys and values of a history so far, or the goal that starts one")
        before = 0 if past is None else past[0].k.shape[2]  # positions so far, the goal's included
        x = boards
        if past is None:
            x = torch.cat([goal[:, None], boards], 1)  # (B, 1 + n, d)
        after = before + x.shape[1]
        if after > self.config.n_ctx + 1:
            raise ValueError(f"the policy holds {self.config.n_ctx} boards, got a history of {after - 1}")
        x = x + self.position.weight[before:after]
        mask = None
        if not self.config.history:  # the goal and the board itself, as in attend
            mask = torch.eye(after, dtype=torch.bool, device=x.device)[before:]  # (new, after)
            mask[:, 0] = True
        x, _, cache = self.blocks.extend(x, past, mask)
        x = x[:, x.shape[1] - boards.shape[1]:]  # (B, n, d): the boards
        return self.action_head(x), self.nsteps_head(x), cache

    def forward(self, goal: torch.Tensor, boards: torch.Tensor,
                lengths: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.read((goal, boards, lengths))[0]

    def read(self, *batches: tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]
             ) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """`forward` on several batches at once, (goal, boards, lengths or None) each: the goal
        boards and boards of every batch go through the encoder in one pass, which costs less
        than a pass for each (a training step reads a batch of entries and a batch of start
        boards: one pass instead of four saves a fifth of the step), then each batch through
        the transformer alone."""
        planes, real = [], []
        for goal, boards, lengths in batches:
            picked, r = _real_boards_on_cpu(boards, lengths)
            planes += [goal, picked]
            real.append(r)
        tokens = self.tokens(torch.cat(planes)).split([len(p) for p in planes])  # (n, d) each
        return [self.attend(goal_tokens, _placed_on_cpu(board_tokens, r, boards.shape[:2]))
                for goal_tokens, board_tokens, (_, boards, _), r in zip(tokens[::2], tokens[1::2], batches, real)]


def _real_boards_on_cpu(boards: torch.Tensor, lengths: torch.Tensor | None
                        ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Boards (B, T, 5, rows, cols) -> the planes to encode (n, 5, rows, cols), and which of
    the (B, T) places they fill. Padding never reaches a real board (attention is causal), so
    on the CPU, given the `lengths` (B,), only real boards are picked (None: every board).
    A GPU encodes the padding too, rather than wait to count the real boards."""
    if lengths is None or boards.device.type != "cpu":
        return boards.flatten(0, 1), None
    real = torch.arange(boards.shape[1], device=boards.device) < lengths[:, None]  # (B, T)
    return boards[real], real


def _placed_on_cpu(tokens: torch.Tensor, real: torch.Tensor | None, shape: tuple[int, int]) -> torch.Tensor:
    """Tokens (n, d) of the boards `_real_boards_on_cpu` picked -> (B, T, d), zero where it
    picked none."""
    if real is None:
        return tokens.view(*shape, -1)
    placed = tokens.new_zeros(*shape, tokens.shape[-1])
    placed[real] = tokens
    return placed


def _batch(data: SokobanSet, index: np.ndarray, n_ctx: int | None = None) -> tuple[torch.Tensor, ...]:
    """Entries `index` as tensors, cut to their longest: goal planes (B, 5, R, C), board
    planes (B, T, 5, R, C), lengths (B,), actions, policy mask, nsteps (B, T), optimal (B, T, 5).
    With `n_ctx`, an entry longer than a policy's history keeps its first `n_ctx` boards: the
    labels of those boards do not depend on the rest, and a policy never reads further."""
    lengths = data.lengths[index] if n_ctx is None else np.minimum(data.lengths[index], n_ctx)  # (B,)
    t = int(lengths.max())
    goal, boards = data.inputs(index)
    return (torch.from_numpy(goal), torch.from_numpy(boards[:, :t]), torch.from_numpy(lengths),
            torch.from_numpy(data.actions[index, :t]).long(), torch.from_numpy(data.policy_mask[index, :t]),
            torch.from_numpy(data.nsteps[index, :t]).long(), torch.from_numpy(data.optimal[index, :t]))


def sokoban_loss(
    model: SokobanPolicy, batch: tuple[torch.Tensor, ...]
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The policy's loss on a batch of entries (`loss_from_logits`)."""
    device = model_device(model)
    goal, boards, lengths, actions, mask, nsteps, optimal = (
        x.to(device) for x in batch)
    # (B, T, 5), (B, T, N_NSTEPS)
    action_logits, nsteps_logits, _ = model(goal, boards, lengths)
    return loss_from_logits(action_logits, nsteps_logits, mask, nsteps,
                            optimal)


def loss_from_logits(
    action_logits: torch.Tensor, nsteps_logits: torch.Tensor,
    mask: torch.Tensor, nsteps: torch.Tensor, optimal: torch.Tensor,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The policy's loss: -log of the probability it gives to the optimal
    actions together (any shortest solution is right), where the mask lets
    the action be learned, plus the cross-entropy of the nsteps class at
    every real board. Logits (B, T, 5) and (B, T, N_NSTEPS), the rest as
    a batch holds them (B, T) and (B, T, 5)."""
    learn = mask & optimal.any(-1)  # (B, T)
    # where no action is learned every action counts as right:
    # -log 1 = 0, and no gradient
    allowed = optimal | ~learn[..., None]  # (B, T, 5)
    logp = torch.log_softmax(action_logits, -1)  # (B, T, 5)
    logp = logp.masked_fill(~allowed, -math.inf)
    policy_loss = -(torch.logsumexp(logp, -1) * learn).sum() / learn.sum()
    # nsteps is -1 past the end of a history: not scored
    nsteps_loss = F.cross_entropy(nsteps_logits.flatten(0, -2),
                                  nsteps.flatten(), ignore_index=-1)
    # the metrics stay tensors: `fit` reads them when it records them
    return policy_loss + nsteps_loss, {"policy_loss": policy_loss.detach(),
                                       "nsteps_loss": nsteps_loss.detach()}


def start_loss(model: SokobanPolicy, starts: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """The cross-entropy of the nsteps class at start boards alone (a batch of one-board entries,
    as `_batch` makes them): whether each can be solved, and in about how many moves, asked of
    the goal and the start board, as the policy asks it before its first move. A start board
    costs the encoder two boards and the transformer two positions, a tenth of a history."""
    device = model_device(model)
    goal, boards, nsteps = starts[0].to(device), starts[1].to(device), starts[5].to(device)
    nsteps_logits = model(goal, boards[:, :1])[1]  # (B, 1, N_NSTEPS)
    return F.cross_entropy(nsteps_logits[:, 0], nsteps[:, 0])


def loss_with_starts(
    model: SokobanPolicy, batch: tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """`sokoban_loss` on a batch of entries plus `start_loss` on a batch of start boards, with
    the boards of both through the encoder in one pass (`SokobanPolicy.read`)."""
    device = model_device(model)
    goal, boards, lengths, _, mask, nsteps, optimal = (x.to(device) for x in batch[0])
    start_goal, start_boards, start_nsteps = (batch[1][i].to(device) for i in (0, 1, 5))
    # (B, T, 5), (B, T, N_NSTEPS); (B', 1, N_NSTEPS) at the start boards
    (action_logits, nsteps_logits, _), (_, start_logits, _) = model.read(
        (goal, boards, lengths), (start_goal, start_boards[:, :1], None))
    loss, metrics = loss_from_logits(action_logits, nsteps_logits, mask, nsteps, optimal)
    at_start = F.cross_entropy(start_logits[:, 0], start_nsteps[:, 0])
    return loss + at_start, {**metrics, "start_loss": at_start.detach()}


def _entries(data: SokobanSet, batch_size: int, generator: torch.Generator,
             n_ctx: int | None = None) -> Iterator[tuple[torch.Tensor, ...]]:
    """Endless shuffled batches of entries, epoch after epoch, each cut to `n_ctx` boards."""
    if len(data) < batch_size:
        raise ValueError(f"a batch of {batch_size} entries asks for more than the {len(data)} there are")
    while True:
        order = torch.randperm(len(data), generator=generator).numpy()
        for i in range(0, len(order) - batch_size + 1, batch_size):
            yield _batch(data, np.sort(order[i : i + batch_size]), n_ctx)


@dataclasses.dataclass(frozen=True)
class Accuracies:
    """What teacher forcing on held-out entries measures (the post's supervised metrics, and ours)."""

    solvability: float  # the start board's nsteps says "unsolvable" exactly when it is
    policy_top1: float  # the most likely action is the entry's action (the post's one label)
    policy_top2: float  # the entry's action is among the two most likely
    optimal: float  # the most likely action keeps a shortest solution (any of them)
    nsteps_top1: float  # the most likely nsteps class is right, at every board
    nsteps_top2: float
    loss: float  # the training loss on these entries


def accuracies(model: SokobanPolicy, data: SokobanSet, batch_size: int = 500) -> Accuracies:
    """Teacher-forced measures of `model` on every entry of `data`, each cut to the boards the
    policy's history holds (`config.n_ctx`)."""
    sums, counts, losses = {}, {}, []

    def add(name, hits):
        sums[name] = sums.get(name, 0) + int(hits.sum())
        counts[name] = counts.get(name, 0) + hits.numel()

    with evaluating(model) as device:
        for i in range(0, len(data), batch_size):
            batch = _batch(data, np.arange(i, min(i + batch_size, len(data))), model.config.n_ctx)
            goal, boards, lengths, actions, mask, nsteps, optimal = (x.to(device) for x in batch)
            action_logits, nsteps_logits = model(goal, boards, lengths)[:2]
            loss = loss_from_logits(action_logits, nsteps_logits, mask, nsteps, optimal)[0]  # the same forward pass
            losses.append((loss.item(), len(goal)))
            top2 = action_logits.topk(2, -1).indices  # (B, T, 2)
            learn = mask & optimal.any(-1)
            add("policy_top1", (top2[..., 0] == actions)[learn])
            add("policy_top2", (top2 == actions[..., None]).any(-1)[learn])
            add("optimal", optimal.gather(-1, top2[..., :1]).squeeze(-1)[learn])
            n2 = nsteps_logits.topk(2, -1).indices
            real = nsteps >= 0
            add("nsteps_top1", (n2[..., 0] == nsteps)[real])
            add("nsteps_top2", (n2 == nsteps[..., None]).any(-1)[real])
            add("solvability", (n2[:, 0, 0] == UNSOLVABLE) == (nsteps[:, 0] == UNSOLVABLE))
    loss = sum(l * n for l, n in losses) / sum(n for _, n in losses)
    return Accuracies(**{k: sums[k] / counts[k] for k in sums}, loss=loss)


def train(config: SokobanConfig, data: dict[str, SokobanSet] | None = None,
          device: torch.device | str | None = None, callback: Callback | None = None,
          progress: bool = True) -> tuple[SokobanPolicy, History]:
    """Build a policy from `config` and train it on `data["train"]` (default:
    `dataset.for_config(config)`), and with `config.start_batch` on `data["starts"]` too
    (`loss_with_starts`), validating on `data["val"]` every `eval_every` steps (the
    held-out boards are never looked at). Out of steps, the best validated weights are
    restored."""
    data = for_config(config) if data is None else data
    seed_everything(config.seed)
    device = device or pick_device()
    model = SokobanPolicy(config).to(device)
    gen = torch.Generator().manual_seed(config.seed)

    def evaluate(m):
        a = accuracies(m, data["val"])
        return {"val_loss": a.loss, "val_optimal": a.optimal, "val_solvability": a.solvability}

    batches, loss = _entries(data["train"], config.batch_size, gen, config.n_ctx), sokoban_loss
    if config.start_batch:
        if "starts" not in data:
            raise ValueError("config.start_batch asks for start boards: data has no \"starts\" set")
        batches, loss = zip(batches, _entries(data["starts"], config.start_batch, gen, 1)), loss_with_starts
    history = fit(model, batches, loss, config.train_options(),
                  eval_fn=evaluate, callback=callback, device=device, progress=progress)
    return model, history


def _train_quietly(config: SokobanConfig, data: dict[str, SokobanSet], device: str) -> tuple[SokobanPolicy, History]:
    return train(config, data, device=device, progress=False)


def train_side_by_side(
    configs: Sequence[SokobanConfig], data: dict[str, SokobanSet], device: torch.device | str | None = None,
    workers: int | None = None,
) -> list[tuple[SokobanPolicy, History]]:
    """`train` for each config on the same data, without progress bars (the chapter trains the
    transformer and its baseline so). On a CPU the policies train side by side, each in a
    process of its own on one thread (`side_by_side`; `workers` processes at once, by default
    one per CPU core), and each learns exactly what it would learn alone on one thread. On a
    GPU they train there, one after another."""
    device = torch.device(device or pick_device())
    if device.type != "cpu":
        return [_train_quietly(c, data, device) for c in configs]
    return side_by_side(_train_quietly, [(c, data, "cpu") for c in configs], workers)
