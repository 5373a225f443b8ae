"""The Sokoban policy: the convolutional `BoardEncoder`, `SokobanPolicy` (a causal transformer
over the goal and the boards so far, with an action head and an nsteps head), `to_batch` (entries
as the tensors a loss reads), and its loss.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from toylib.attention import Encoder, KeysValues
from toylib.infer import model_device
from toylib.sokoban.config import SokobanConfig
from toylib.sokoban.dataset import N_NSTEPS, SokobanSet
from toylib.sokoban.world import ACTION_NAMES, CHANNELS
from toylib.train import set_nll

# ----------------------------------------------------------------------------- the policy


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
        return self.pool(self.features(planes)[-1], planes)  # (n, d_model)

    def features(self, planes: torch.Tensor) -> list[torch.Tensor]:
        """What the convolutions read, (n, 5 or 6 planes, rows, cols), then the feature map
        after each, (n, channels, rows, cols) (rows - 2, cols - 2 with `inside`): what a
        probe reads (`look.fit_probe`)."""
        x = planes.float()  # (n, 5, rows, cols)
        if self.region:
            x = torch.cat([x, walkable(x)], 1)  # (n, 6, rows, cols)
        if self.inside:
            x = x[..., 1:-1, 1:-1]  # (n, planes, rows - 2, cols - 2)
        maps = [x, F.gelu(self.first(x))]  # (n, channels, rows, cols) from the second on
        for conv in self.convs:
            maps.append(maps[-1] + F.gelu(conv(maps[-1])))  # each layer reaches one square further
        return maps

    def pool(self, x: torch.Tensor, planes: torch.Tensor) -> torch.Tensor:
        """The last feature map x (n, channels, rows, cols) of boards `planes` to their tokens
        (n, d_model)."""
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


def to_batch(data: SokobanSet, index: np.ndarray, n_ctx: int | None = None) -> tuple[torch.Tensor, ...]:
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
    # -log of P(any allowed action): logsumexp of their log-probabilities
    policy_loss = (set_nll(logp, allowed) * learn).sum() / learn.sum()
    # nsteps is -1 past the end of a history: not scored
    nsteps_loss = F.cross_entropy(nsteps_logits.flatten(0, -2),
                                  nsteps.flatten(), ignore_index=-1)
    # the metrics stay tensors: `fit` reads them when it records them
    return policy_loss + nsteps_loss, {"policy_loss": policy_loss.detach(),
                                       "nsteps_loss": nsteps_loss.detach()}


def start_loss(model: SokobanPolicy, starts: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """The cross-entropy of the nsteps class at start boards alone (a batch of one-board entries,
    as `to_batch` makes them): whether each can be solved, and in about how many moves, asked of
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
