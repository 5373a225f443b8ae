"""The maze models: what every maze model does (`MazeModel`), the chapter's looped `MazeNet`,
and the loss (`maze_loss`, with `wave_targets`). The config is in `config.py`, the post's model
in `post.py`, and `train` in `training.py`."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from toylib.attention import Decoder, EncoderBlock, KeysValues, Seq2SeqPatterns
from toylib.infer import model_device
from toylib.maze.config import BaseMazeConfig, MazeConfig
from toylib.maze.dataset import (N_MOVES, NO_WAY, PAD, connections, start_tiles, step_tiles, tile_grid, tile_view,
                                 walk_tiles, ways_to_end)
from toylib.maze.world import DIRECTIONS, STEP, TILE
from toylib.train import set_nll


# ----------------------------------------------------------------------------- when a looped encoder stops


SETTLED = 1e-3  # MazeNet with `squash`: solving stops passing once no state number moves further in a pass,
QUIET = 10  # or, with a way head, once no tile's way to the end has changed for this many passes
# MazeNet with a way head, solving: a tile takes a pass only while it or a neighbour it connects
# to moved by more than STILL in the pass before; the news of the end arrives as a jump of about 2 to 4.
# Without it, over a 32x32 maze's hundreds of passes settled states crept (0.003 to 0.3 a pass)
# until ways flipped, and waiting ones wobbled (0.02 to 0.07) into false waves (see Results)
STILL = 0.2


# ----------------------------------------------------------------------------- the models


class Memory(NamedTuple):
    """What an encoder made of a batch of mazes: the decoder reads it at every step."""

    states: torch.Tensor  # (batch, tiles, d_model): one per tile, row by row
    # the encoder's attention, (batch, layer, head, tiles, keys): MazeNet's over (the tile, its neighbour),
    # the post's over every tile; None if not kept
    patterns: torch.Tensor | None
    start: torch.Tensor  # (batch, 2) long: the start tile
    shape: tuple[int, int]  # (R, C): the maze's size in tiles
    passes: torch.Tensor | None = None  # (batch,) long: the passes a looped encoder ran on each maze
    # (batch, passes, tiles, d): the states after every pass (normalised as `states`), if asked for;
    # a maze that stopped before the last keeps its states
    trace: torch.Tensor | None = None


class MazeModel(nn.Module):
    """What every maze model does: encode a batch of mazes once, then decode any number of
    times against that memory (once per step when solving).

    forward(pixels (batch, R*TILE, C*TILE), moves (batch, T)) ->
        (logits (batch, T, N_MOVES): the move after each token, Seq2SeqPatterns)
    """

    config: BaseMazeConfig  # MazeNet's is a MazeConfig, PostMazeNet's a PostMazeConfig

    def encode(self, pixels: torch.Tensor, iterations: int | None = None, keep: bool = True) -> Memory:
        raise NotImplementedError

    def decode(self, moves: torch.Tensor, memory: Memory) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def decode_next(self, moves: torch.Tensor, memory: Memory, past=None) -> tuple[torch.Tensor, object]:
        """The logits (batch, N_MOVES) of the move after `moves` (batch, T), and what a next
        call, one move longer, may reuse (`past`). Here: `decode` over the whole walk again;
        a model that caches its decoder's keys and values pays for the new move alone."""
        return self.decode(moves, memory)[0][:, -1], None

    def forward(self, pixels: torch.Tensor, moves: torch.Tensor,
                iterations: int | None = None) -> tuple[torch.Tensor, Seq2SeqPatterns]:
        memory = self.encode(pixels, iterations)
        logits, self_patterns, cross_patterns = self.decode(moves, memory)  # (batch, T, N_MOVES), ...
        return logits, Seq2SeqPatterns(memory.patterns, self_patterns, cross_patterns)


class MazeNet(MazeModel):
    """The chapter's model, the same for a maze of any size: it holds nothing per row,
    column or step.

    Encoder: a token per tile, from its pixels (one-hot), and one EncoderBlock run
    `iterations` times. Head h may attend to the tile itself and to its neighbour along
    DIRECTIONS[h % 4], when the two tiles connect: the maze's corridors are the attention
    mask. Each iteration moves information one tile along the corridors, so a tile can learn
    which way the end lies from neighbours that already know: a breadth-first search from
    the end, one ring of tiles per iteration. Patterns are (batch, iteration, head, tile, 2):
    over the tile itself and that neighbour. With `ways`, a way head reads every tile's way
    to the end from its state (with `wave`, training holds it after every pass to what the
    end's news could have told the tile); with `squash`, the states are bounded, and without
    a given count the passes stop once the answer holds (`encode_until_settled`), each pass
    computing only the tiles still moving (`pass_woken`); else one pass per tile
    (`encode_fixed`).

    Decoder: a token per move so far, the move alone; where the walker stands enters only
    through cross-attention, whose score to each tile gets a learned bias (per head) for the
    offset from the walker's tile (with `window`, only tiles within `radius` of it; else
    offsets past `radius` share the bias at the edge). With a way head, the move's logits
    add the way of the walker's tile (`read_way`).
    """

    def __init__(self, config: MazeConfig = MazeConfig()):
        super().__init__()
        self.config = c = config
        self.tile_embed = nn.Linear(TILE * TILE * 4, c.d_model)  # a tile's pixels, one-hot
        self.step = EncoderBlock(c.d_model, c.n_heads, c.d_mlp)  # the encoder's one layer, looped
        self.look = nn.Parameter(torch.zeros(c.n_heads, 2))  # bias of each head on (the tile, its neighbour)
        self.ln_memory = nn.LayerNorm(c.d_model)
        self.move_embed = nn.Embedding(N_MOVES, c.d_model)
        self.decoder = Decoder(c.n_decoder_layers, c.d_model, c.n_heads, c.d_mlp)
        width = 2 * c.radius + 1
        # a bias per head and offset (rows, columns) from the walker's tile. At first every head reads mostly
        # the walker's own tile (e^3 = 20 times any other), where the encoder writes which way to go: from
        # zero, finding that tile took the decoder hundreds of steps
        offset_bias = torch.zeros(c.n_heads, width, width)
        offset_bias[:, c.radius, c.radius] = 3.0
        self.offset_bias = nn.Parameter(offset_bias)
        self.unembed = nn.Linear(c.d_model, N_MOVES)
        # every tile's way to the end (`ways_to_end`: a move, STOP, or NO_WAY), from its state; made
        # last, and only when trained, so that FIRST draws the same weights as before
        self.way_head = nn.Linear(c.d_model, N_MOVES + 1) if c.ways else None

    def neighbours(self, exits_: torch.Tensor) -> tuple[tuple[int, ...], torch.Tensor]:
        """Where each head may look in every pass, and its bias: offsets, one per head, from
        a tile to its neighbour along DIRECTIONS[h % 4] in the tokens' order (row by row), and
        bias (batch, head, tiles, 2) over (the tile itself, that neighbour), the head's learned
        `look`, -inf where the two tiles do not connect. exits_ (batch, R, C, 4) from
        `connections`."""
        b, rows, cols, _ = exits_.shape
        direction = [h % 4 for h in range(self.config.n_heads)]  # the arm each head looks along
        offsets = tuple(STEP[DIRECTIONS[k]][0] * cols + STEP[DIRECTIONS[k]][1] for k in direction)
        along = self.borders(exits_)[1][:, direction]  # (batch, head, tiles): connected?
        look = self.look[None, :, None]  # (1, head, 1, 2)
        bias = torch.stack((look[..., 0].expand(b, -1, rows * cols),
                            torch.where(along, look[..., 1], -math.inf)), -1)  # (batch, head, tiles, 2)
        return offsets, bias

    def borders(self, exits_: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each tile's neighbour along each of DIRECTIONS, (4, tiles) (the tile itself off
        the grid), and whether the two connect, (batch, 4, tiles). exits_ (batch, R, C, 4)."""
        rows, cols = exits_.shape[1:3]
        step = torch.tensor([STEP[m] for m in DIRECTIONS], device=exits_.device)  # (4, 2)
        there = tile_grid((rows, cols), exits_.device) + step[:, None]  # (4, tiles, 2)
        beside = there[..., 0].clamp(0, rows - 1) * cols + there[..., 1].clamp(0, cols - 1)
        return beside, exits_.flatten(1, 2).transpose(1, 2)

    def encode(self, pixels: torch.Tensor, iterations: int | None = None,
               keep: bool = True, trace: bool = False,
               exits_: torch.Tensor | None = None) -> Memory:
        """The memory of a batch of mazes, pixels (batch, R*TILE, C*TILE):
        with bounded states (`squash`) and no count given, each maze passes
        until its answer holds (`encode_until_settled`); else every maze
        passes `iterations` times, or once per tile (`encode_fixed`). keep:
        the patterns of every pass; trace: the states after every pass.
        exits_: the corridors the heads may read along, (batch, R, C, 4)
        as `connections` gives them from the pixels (the default); others
        are an intervention, the tiles' tokens still showing the pixels."""
        if iterations is None and self.config.squash > 0:
            return self.encode_until_settled(pixels, keep, trace, exits_)
        return self.encode_fixed(pixels, iterations, keep, trace, exits_)

    def encoder_inputs(self, pixels: torch.Tensor, exits_: torch.Tensor | None = None) -> tuple[
            torch.Tensor, torch.Tensor, tuple[int, ...], torch.Tensor]:
        """What every pass reads: each tile's token (batch, tiles, d) from
        its one-hot pixels, the maze's connections (batch, R, C, 4; read
        from the pixels unless given), and where each head may look
        (`neighbours`: the offsets, and the bias (batch, head, tiles, 2)
        over the tile and that neighbour). A tile reads two tokens, not
        every tile, so a pass costs as much per tile in a 32x32 maze as in
        a 5x5."""
        tiles = tile_view(pixels)  # (batch, R, C, TILE, TILE)
        one_hot = F.one_hot(tiles.long(), 4).flatten(3).float()
        tile = self.tile_embed(one_hot).flatten(1, 2)  # (batch, tiles, d)
        if exits_ is None:
            exits_ = connections(pixels)
        elif exits_.shape != (*tiles.shape[:3], 4) or exits_.dtype != torch.bool:
            raise ValueError(f"exits_ is bool (batch, R, C, 4) = {(*tiles.shape[:3], 4)}, got "
                             f"{exits_.dtype} {tuple(exits_.shape)}")
        offsets, bias = self.neighbours(exits_)
        return tile, exits_, offsets, bias

    def encode_fixed(self, pixels: torch.Tensor, iterations: int | None = None,
                     keep: bool = True, trace: bool = False,
                     exits_: torch.Tensor | None = None) -> Memory:
        """The encoder's block run `iterations` times on every tile of every
        maze (default: once per tile, plus `extra_passes`), each pass carrying
        the end's news one tile further along the corridors. Training takes
        this path, with a count drawn per batch, and so does solving with
        unbounded states (`squash` 0, as in FIRST): they never settle, so only
        a count can stop them."""
        tile, _, offsets, bias = self.encoder_inputs(pixels, exits_)
        rows, cols = (s // TILE for s in pixels.shape[1:])
        squash = self.config.squash
        n = iterations or rows * cols + self.config.extra_passes  # passes
        x, patterns, states = torch.zeros_like(tile), [], []
        for _ in range(n):
            # every pass sees the tile afresh beside what it has learned so
            # far ("recall"): many updates never dilute the tile's pixels
            y, pattern = self.step(x + tile, bias, offsets)
            x = y - tile  # (batch, tiles, d)
            if squash:  # a waiting state stops at the bound
                x = squash * torch.tanh(x / squash)
            if keep:  # (batch, head, tiles, 2): the tile, its neighbour
                patterns.append(pattern)
            if trace:
                states.append(x)
        kept = torch.stack(patterns, 1) if keep else None
        traced = self.ln_memory(torch.stack(states, 1)) if trace else None
        passes = torch.full((len(pixels),), n, device=x.device)
        return Memory(self.ln_memory(x), kept, start_tiles(pixels),
                      (rows, cols), passes, traced)

    def encode_until_settled(self, pixels: torch.Tensor, keep: bool = True,
                             trace: bool = False,
                             exits_: torch.Tensor | None = None) -> Memory:
        """The encoder's block run on each maze until its answer holds:
        once a pass moves none of its state numbers by more than SETTLED or,
        with a way head, once no tile's way has changed for QUIET passes; at
        most once per tile plus `extra_passes`. Only the mazes still moving
        pay for a pass. With a way head, a tile's state changes only while
        it or a neighbour it connects to moved by more than STILL in the
        pass before, and (unless the patterns are kept) only those tiles
        are computed (`pass_woken`): over the hundreds of passes a big maze
        needs, settled and waiting states would otherwise creep until some
        ways flipped. Solving takes this path (bounded states, `squash`)."""
        tile, exits_, offsets, bias = self.encoder_inputs(pixels, exits_)
        b, rows, cols = len(pixels), *(s // TILE for s in pixels.shape[1:])
        if self.way_head is not None and not keep and not trace:
            x, passes = self.settle_woken(tile, exits_, bias)
            return Memory(self.ln_memory(x), None, start_tiles(pixels),
                          (rows, cols), passes)
        x, patterns, states = torch.zeros_like(tile), [], []
        squash, search = self.config.squash, self.way_head is not None
        live = torch.arange(b, device=x.device)  # the mazes still passing
        passes = torch.zeros(b, dtype=torch.long, device=x.device)
        if search:
            ways = torch.full((b, rows * cols), -1, device=x.device)
            quiet = torch.zeros(b, dtype=torch.long, device=x.device)
            # (batch, tiles): how far each tile moved in the last pass
            moved = torch.full((b, rows * cols), math.inf, device=x.device)
            # (4, tiles): each tile's neighbour along each direction, and
            # (batch, 4, tiles): whether the two connect
            beside, border = self.borders(exits_)
            direction = [h % 4 for h in range(self.config.n_heads)]
        for _ in range(rows * cols + self.config.extra_passes):
            x_live, tile_live = x[live], tile[live]  # (live, tiles, d)
            if search:  # a tile moves if it or a neighbour moved last pass
                before = moved[live] > STILL  # (live, tiles)
                woken = before | (border[live] & before[:, beside]).any(1)
            if search and not keep:  # only they take the pass (a look sees all)
                y = self.pass_woken(x_live + tile_live, bias[live], woken,
                                    beside[direction])
            else:
                y, pattern = self.step(x_live + tile_live, bias[live], offsets)
            y = y - tile_live  # (live, tiles, d)
            passes[live] += 1
            y = squash * torch.tanh(y / squash)  # a waiting state stops there
            if search:
                y = torch.where(woken[..., None], y, x_live)
                moved[live] = (y - x_live).abs().amax(-1)
            if keep:  # a settled maze's pattern is zeros: no pass ran
                patterns.append(pattern.new_zeros(b, *pattern.shape[1:])
                                .index_copy(0, live, pattern))
            x = x.index_copy(0, live, y)
            if trace:  # a maze that stopped stays as it was
                states.append(x)
            still = (y - x_live).abs().flatten(1).amax(1) <= SETTLED  # (live,)
            if search:  # each tile's way to the end, so far
                way = self.way_head(self.ln_memory(y)).argmax(-1)  # live, tiles
                quiet[live] = (quiet[live] + 1) * (way == ways[live]).all(1)
                ways[live] = way
                still |= quiet[live] >= QUIET
            live = live[~still]
            if not len(live):
                break
        kept = torch.stack(patterns, 1) if keep else None
        traced = self.ln_memory(torch.stack(states, 1)) if trace else None
        return Memory(self.ln_memory(x), kept, start_tiles(pixels),
                      (rows, cols), passes, traced)

    def settle_woken(self, tile: torch.Tensor, exits_: torch.Tensor,
                     bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The passes of `encode_until_settled` when solving (a way head,
        neither patterns nor states kept), run on the woken tiles alone:
        the block, the bound, how far a tile moved and its way. A tile that
        sleeps keeps its state, so its way is known and it moved 0; and the
        tiles woken next are those that moved, and their neighbours, so a
        pass costs as the tiles still moving, not as the maze (a few of a
        128x128 maze's 16,384). Tiles are keys, maze * tiles + tile, in
        order, and every table is by key: a pass only gathers and scatters
        rows. tile (batch, tiles, d), exits_ and bias from
        `encoder_inputs`. Returns the states (batch, tiles, d) and the
        passes each maze ran (batch,)."""
        b, n, d = tile.shape
        squash, dev = self.config.squash, tile.device
        tile = tile.reshape(b * n, d)  # (keys, d)
        x = torch.zeros_like(tile)  # (keys, d): every tile's state
        alive = torch.ones(b, dtype=torch.bool, device=dev)  # still passing
        passes = torch.zeros(b, dtype=torch.long, device=dev)
        quiet = torch.zeros(b, dtype=torch.long, device=dev)
        ways = torch.full((b * n,), -1, device=dev)  # each tile's way so far
        # (4, keys): each tile's neighbour along each direction, and
        # whether the two connect
        beside, border = self.borders(exits_)
        beside, border = _keys(beside, b), border.transpose(0, 1).flatten(1)
        look = beside[[h % 4 for h in range(self.config.n_heads)]]
        bias = bias.transpose(1, 2).flatten(0, 1)  # (keys, head, 2)
        # (4, keys): each tile's neighbour the other way (DIRECTIONS go
        # round: arm k + 2 is arm k's opposite), whose arm k reaches it
        back = beside[[(k + 2) % 4 for k in range(4)]]
        woken = torch.arange(b * n, device=dev)  # all: none has moved yet
        for _ in range(n + self.config.extra_passes):
            out = self._woken_rows(  # (U, d)
                lambda k: x[k] + tile[k], bias, woken, look)
            was = x[woken]  # (U, d)
            now = squash * torch.tanh((out - tile[woken]) / squash)
            step = (now - was).abs().amax(-1)  # (U,): how far each moved
            x = (x.index_copy if torch.is_grad_enabled()  # else in place
                 else x.index_copy_)(0, woken, now)
            passes += alive.long()
            way = self.way_head(self.ln_memory(now)).argmax(-1)  # (U,)
            turned = (way != ways[woken]).long()  # (U,)
            ways[woken] = way
            # (batch,): how many of each maze's tiles changed their way,
            # and how far its furthest tile moved
            maze = woken // n
            changed = torch.zeros_like(quiet).index_add_(0, maze, turned)
            furthest = torch.zeros(b, device=dev).scatter_reduce(
                0, maze, step, "amax")
            quiet = torch.where(alive, (quiet + 1) * (changed == 0), quiet)
            settled = furthest <= SETTLED
            alive &= ~(settled | (quiet >= QUIET))
            if not alive.any():
                break
            # a tile moves next if it, or a neighbour it connects to,
            # moved by more than STILL in this pass
            moving = woken[step > STILL]  # keys, in order
            near = back[:, moving]  # (4, M): the tiles that may read them
            reads = border.gather(1, near)  # (4, M): and do
            near = torch.unique(torch.cat([moving, near[reads]]))
            woken = near[alive[near // n]]
        return x.view(b, n, d), passes

    def _woken_rows(self, read: Callable[[torch.Tensor], torch.Tensor],
                    bias: torch.Tensor, woken: torch.Tensor,
                    look: torch.Tensor) -> torch.Tensor:
        """`pass_woken`'s work: the block's output (U, d) at the `woken`
        tiles (U keys, maze * tiles + tile, in order). read(keys) gives the
        tokens at those keys as `step` reads them, bias (keys, head, 2)
        the bias over each tile and its neighbour, look (head, keys) each
        head's neighbour of each tile, as a key."""
        # the woken tiles and the tiles they read, gathered into one
        # sequence, each head reading its neighbour by an offset within it
        need = torch.unique(torch.cat([woken, look[:, woken].flatten()]))  # (K,)
        want = look[:, need]  # (head, K): each head's neighbour
        there = torch.searchsorted(need, want)  # (head, K): its place, if gathered
        found = need[there.clamp(max=len(need) - 1)] == want
        # a gathered tile whose neighbour was not gathered is not woken: it
        # reads itself, and its output is dropped
        offsets = torch.where(found, there - torch.arange(len(need), device=need.device), 0)
        out = self.step(read(need)[None], bias[need].transpose(0, 1)[None], offsets)[0][0]  # (K, d)
        return out[torch.searchsorted(need, woken)]

    def pass_woken(self, h: torch.Tensor, bias: torch.Tensor, woken: torch.Tensor,
                   beside: torch.Tensor) -> torch.Tensor:
        """One pass of the encoder's block for the `woken` tiles (mazes, tiles) alone: h
        (mazes, tiles, d) as `step` reads it, its bias (mazes, head, tiles, 2), beside (head,
        tiles) each head's neighbour of each tile. The woken tiles and their neighbours are
        gathered into one sequence, each head reading its neighbour by a per-token offset, so
        the pass costs as the tiles still moving, not the maze. Returns h with the woken rows
        replaced by the block's output (the rest are the caller's to keep)."""
        b, n, d = h.shape
        keys = woken.flatten().nonzero()[:, 0]  # (U,) maze * tiles + tile, in order
        look = _keys(beside, b)  # (head, keys)
        rows = h.reshape(b * n, d)
        out = self._woken_rows(lambda k: rows[k], bias.transpose(1, 2).flatten(0, 1), keys, look)
        return rows.index_copy(0, keys, out).view(b, n, d)

    def cross_bias(self, here: torch.Tensor, memory: Memory) -> torch.Tensor:
        """(batch, head, T, tiles): the learned bias for the offset from
        the walker's tile `here` (batch, T, 2) to every tile, clipped to
        `radius`."""
        r = self.config.radius
        grid = tile_grid(memory.shape, here.device)  # (tiles, 2)
        # (batch, T, tiles, 2): each tile's offset, shifted to 0..2r
        offset = (grid - here[:, :, None]).clamp(-r, r) + r
        # (batch, T, tiles): the offset's place in the flattened window
        index = offset[..., 0] * (2 * r + 1) + offset[..., 1]
        bias = self.offset_bias.flatten(1)[:, index]  # (head, batch, T, tiles)
        if self.config.window:  # far tiles cannot add up to drown the window
            far = (grid - here[:, :, None]).abs().amax(-1) > r  # (b, T, tiles)
            bias = bias.masked_fill(far, -math.inf)
        return bias.transpose(0, 1)

    def decode(self, moves: torch.Tensor, memory: Memory) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = self.move_embed(moves.clamp(min=0))  # (batch, T, d)
        here = walk_tiles(moves, memory.start, memory.shape)  # (batch, T, 2)
        # (batch, T, d), (batch, layer, head, T, T), (batch, layer, head, T, tiles)
        x, self_patterns, cross_patterns = self.decoder(x, memory.states, self.cross_bias(here, memory))
        return self.read_way(self.unembed(x), here, memory), self_patterns, cross_patterns

    def decode_next(self, moves: torch.Tensor, memory: Memory,
                    past: tuple[list[KeysValues], list[KeysValues], torch.Tensor] | None = None
                    ) -> tuple[torch.Tensor, tuple[list[KeysValues], list[KeysValues], torch.Tensor]]:
        # past: None at the first move, then what the call before returned: the cross-attention's
        # keys and values of the memory (the same at every move, so found once: on a 32x32 maze
        # they cost more than the rest of a step), the decoder's of every move but the last, and
        # the walker's tile before the last move (walking the whole walk again at every move
        # cost as much as the attention)
        if past is None:
            read, before = self.decoder.memory_keys_values(memory.states), None
            here = walk_tiles(moves, memory.start, memory.shape)[:, -1:]  # (batch, 1, 2)
        else:
            read, before, here = past
            here = step_tiles(here[:, 0], moves[:, -1], memory.shape)[:, None]
        if (0 if before is None else before[0].k.shape[2]) != moves.shape[1] - 1:
            raise ValueError("past must hold the keys and values of every move but the last")
        x = self.move_embed(moves[:, -1:].clamp(min=0))  # (batch, 1, d)
        if self.config.window:  # the tiles within `radius` alone: the rest get no weight
            near, bias = self.window_tiles(here[:, 0], memory.shape)  # (batch, W), (batch, head, 1, W)
            at = near[:, None, :, None]  # (batch, 1, W, 1)
            keys = [KeysValues(*(t.gather(2, at.expand(-1, t.shape[1], -1, t.shape[3])) for t in r)) for r in read]
            x, _, _, before = self.decoder.extend(x, keys, before, bias)
        else:
            x, _, _, before = self.decoder.extend(x, read, before, self.cross_bias(here, memory))
        return self.read_way(self.unembed(x), here, memory)[:, -1], (read, before, here)  # (batch, N_MOVES)

    def window_tiles(self, here: torch.Tensor, shape: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
        """The tiles within `radius` of the walker's tile `here` (batch, 2), row by row, (batch,
        W) with W = (2 radius + 1)^2 (a place off the grid names tile 0), and the cross-attention's
        bias over them, (batch, head, 1, W): `cross_bias` at those tiles, -inf off the grid. With
        `window` every other tile gets -inf, so reading these alone gives each step the weights
        it would give reading every tile, at a cost that does not grow with the maze."""
        r, cols = self.config.radius, shape[1]
        # (batch, W, 2): each place's (row, column), the window row by row
        at = here[:, None] + _window(r, here.device)
        on = ((at >= 0) & (at < at.new_tensor(shape))).all(-1)  # (batch, W)
        bias = self.offset_bias.flatten(1)[None, :, None]  # (1, head, 1, W)
        return torch.where(on, at[..., 0] * cols + at[..., 1], 0), bias.masked_fill(~on[:, None, None], -math.inf)

    def read_way(self, logits: torch.Tensor, here: torch.Tensor, memory: Memory) -> torch.Tensor:
        """With a way head, the logits (batch, T, N_MOVES) of each move plus the way head's
        log-probabilities on the walker's tile `here` (batch, T, 2): the move follows the way
        the search found there. The decoder alone misread it now and then on a long walk
        (one seed walked 3 of 30 32x32 mazes with no loops into a dead end and back, where
        the way head was right on every tile). Without a way head, the logits as they are."""
        if self.way_head is None:
            return logits
        tile = here[..., 0] * memory.shape[1] + here[..., 1]  # (batch, T)
        states = memory.states.gather(1, tile[..., None].expand(-1, -1, memory.states.shape[-1]))  # (batch, T, d)
        return logits + F.log_softmax(self.way_head(states), -1)[..., :N_MOVES]


@functools.lru_cache(maxsize=8)
def _window(r: int, device: torch.device) -> torch.Tensor:
    """(W, 2): the offsets (rows, columns) of the tiles within `r` of a tile, row by row.
    Cached: a decoding step asks for them at every move (made outside inference mode, so that
    any step may use them)."""
    with torch.inference_mode(False):
        return tile_grid((2 * r + 1, 2 * r + 1), device) - r


def _keys(beside: torch.Tensor, mazes: int) -> torch.Tensor:
    """A table of neighbours, beside (directions, tiles), as keys (maze * tiles + tile) of
    `mazes` mazes: (directions, mazes * tiles)."""
    n = beside.shape[1]
    return (torch.arange(mazes, device=beside.device)[:, None] * n + beside[:, None]).flatten(1)


# ----------------------------------------------------------------------------- loss


def maze_loss(model: MazeModel, batch: tuple[torch.Tensor, torch.Tensor], iterations: int | None = None,
              ways: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Cross-entropy of each next move with teacher forcing, and the share of them right.
    batch: pixels (batch, R*TILE, C*TILE) and solutions (batch, T) padded with PAD, on the
    CPU as the loader gives them (what depends on their values is found there, so a step on a
    GPU reads nothing back). Padding is left out of both, unless the config trains it as STOP
    (as the post does), up to the batch's longest solution. ways: `ways_to_end(pixels)`, when
    the caller has it already (training does); it is found here otherwise."""
    device = model_device(model)
    pixels, tokens = batch
    tokens = _real_columns_on_cpu(tokens)  # (batch, T)
    # the weights of the looped model's way losses; the post's model has no way head
    ways_weight, wave_weight = (model.config.ways, model.config.wave) if isinstance(model, MazeNet) else (0.0, 0.0)
    wave = wave_weight and iterations is not None
    if (ways_weight or wave) and ways is None:
        ways = ways_to_end(pixels)  # exact (booleans and whole numbers), wherever it is found
    pixels, tokens = pixels.to(device), tokens.to(device)
    inputs, targets = tokens[:, :-1].clamp(min=0), tokens[:, 1:]  # padding reads as STOP, after the real STOP
    if model.config.pad_as_stop:  # STOP up to the longest solution; a device batch keeps its columns past it
        past = torch.arange(1, tokens.shape[1], device=device) >= (tokens != PAD).sum(1).max()  # (T - 1,)
        targets = targets.clamp(min=0).masked_fill(past, PAD)
    # the loss reads no pattern; with the wave, the states after every pass
    memory = (model.encode(pixels, iterations, keep=False, trace=True) if wave
              else model.encode(pixels, iterations, keep=False))
    logits = model.decode(inputs, memory)[0]  # (batch, T - 1, N_MOVES)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=PAD)
    real = targets != PAD
    # tensors, read when recorded
    metrics = {"token_acc": ((logits.argmax(-1) == targets) & real).sum() / real.sum()}
    if ways is not None:  # (batch, tiles, N_MOVES + 1), (batch, tiles)
        right, distance = (t.to(device) for t in ways)
    if ways_weight:  # every tile's state says its way to the end: any of its right ways
        logp = F.log_softmax(model.way_head(memory.states), -1)  # (batch, tiles, N_MOVES + 1)
        way_loss = set_nll(logp, right).mean()
        loss = loss + ways_weight * way_loss
        metrics["way_loss"] = way_loss.detach()
    if wave:  # every pass but the last: the ways known so far, NO_WAY where the news is still on its way
        targets = wave_targets(right, distance, iterations - 1)  # (batch, passes, tiles, N_MOVES + 1)
        logp = F.log_softmax(model.way_head(memory.trace[:, :-1]), -1)  # (batch, passes, tiles, N_MOVES + 1)
        wave_loss = set_nll(logp, targets).mean()
        loss = loss + wave_weight * wave_loss
        metrics["wave_loss"] = wave_loss.detach()
    return loss, metrics


def wave_targets(ways: torch.Tensor, distance: torch.Tensor, passes: int) -> torch.Tensor:
    """What each tile may know after each of the first `passes` passes, (batch, passes, tiles,
    N_MOVES + 1) bool: after pass k (from 1) the tiles fewer than k moves from the end know
    their ways (`ways`, (batch, tiles, N_MOVES + 1)); every other tile says NO_WAY, since a
    pass carries news one tile. `distance` (batch, tiles), inf where the end is not reached."""
    if passes < 0:
        raise ValueError(f"passes must be >= 0, got {passes}")
    after = torch.arange(1, passes + 1, device=ways.device)  # (passes,)
    known = distance[:, None] < after[None, :, None]  # (batch, passes, tiles)
    waiting = torch.zeros_like(ways[0, 0])  # (N_MOVES + 1,): NO_WAY alone
    waiting[NO_WAY] = True
    return torch.where(known[..., None], ways[:, None], waiting)


def _real_columns_on_cpu(tokens: torch.Tensor) -> torch.Tensor:
    """Solutions (batch, T) without the columns that hold padding only, cut on the CPU; a
    batch elsewhere keeps them (finding its longest solution would wait for the device), and
    the loss leaves them out."""
    if tokens.device.type != "cpu":
        return tokens
    return tokens[:, : int((tokens != PAD).sum(1).max())]
