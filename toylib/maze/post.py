"""The post's model, `PostMazeNet` (an encoder-decoder fed raw numbers, or embedded); its config,
`PostMazeConfig`, and its recipe, `POST`, are in `config.py`."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from toylib.attention import EncoderDecoder
from toylib.maze.config import PostMazeConfig
from toylib.maze.dataset import N_MOVES, start_tiles, tile_grid, tile_view, walk_tiles
from toylib.maze.net import MazeModel, Memory
from toylib.maze.world import TILE


# The embedded post model (`embed=True`) has a vector for each row and column up to this many,
# and for each step of a walk through every tile of such a maze: the chapter's mazes go up to
# 8x8. Bigger mazes are refused, since their rows and steps would have no vector at all.
EMBED_SIDE = 8


class PostMazeNet(MazeModel):
    """The post's model, on the core's blocks: an encoder of `n_encoder_layers` layers over the
    tiles and a decoder of `n_decoder_layers` over the moves, both fed raw numbers with no
    embedding. A tile's token is its 25 pixel values, then its row and its column, then
    zeros; a move's token is the move id, the number of moves so far (1 for START), and the
    row and column it leads to, then zeros. (The post uses torch's nn.Transformer, whose
    blocks normalise after each residual addition; the core's normalise before.)

    With `embed=True` the same inputs go in through learned embeddings instead, summed: a
    tile's pixels one-hot through a linear map, its row and its column each through an
    `nn.Embedding`; the move, the step and the row and column reached, each through its own.
    Mazes are then limited to EMBED_SIDE tiles a side.
    """

    def __init__(self, config: PostMazeConfig):
        super().__init__()
        self.config = c = config
        self.transformer = EncoderDecoder(c.n_encoder_layers, c.n_decoder_layers, c.d_model, c.n_heads, c.d_mlp)
        self.unembed = nn.Linear(c.d_model, N_MOVES)
        if c.embed:  # made last, so that the blocks start from the same weights as the raw model's of the same seed
            self.pixel_embed = nn.Linear(TILE * TILE * 4, c.d_model)  # a tile's pixels, one-hot
            self.row_embed, self.col_embed = nn.Embedding(EMBED_SIDE, c.d_model), nn.Embedding(EMBED_SIDE, c.d_model)
            self.move_embed = nn.Embedding(N_MOVES, c.d_model)
            self.step_embed = nn.Embedding(EMBED_SIDE * EMBED_SIDE, c.d_model)  # steps 1 .. R*C of a walk
            self.reached_row_embed = nn.Embedding(EMBED_SIDE, c.d_model)
            self.reached_col_embed = nn.Embedding(EMBED_SIDE, c.d_model)

    def tile_tokens(self, pixels: torch.Tensor) -> torch.Tensor:
        """The encoder's input: (batch, R*C, d_model), a token per tile, row by row."""
        tiles = tile_view(pixels)  # (batch, R, C, TILE, TILE)
        b, rows, cols = tiles.shape[:3]
        grid = tile_grid((rows, cols), pixels.device)  # (tiles, 2)
        if self.config.embed:
            if max(rows, cols) > EMBED_SIDE:
                raise ValueError(f"the embedded post model has rows and columns up to {EMBED_SIDE} tiles, "
                                 f"got a {rows}x{cols} maze")
            one_hot = F.one_hot(tiles.long(), 4).flatten(3).flatten(1, 2).float()  # (batch, tiles, TILE*TILE*4)
            return self.pixel_embed(one_hot) + self.row_embed(grid[:, 0]) + self.col_embed(grid[:, 1])
        x = torch.zeros(b, rows * cols, self.config.d_model, device=pixels.device)  # (batch, tiles, d)
        x[..., : TILE * TILE] = tiles.flatten(3).flatten(1, 2).float()
        x[..., TILE * TILE : TILE * TILE + 2] = grid.to(x)
        return x

    def move_tokens(self, moves: torch.Tensor, memory: Memory) -> torch.Tensor:
        """The decoder's input: (batch, T, d_model), a token per move so far."""
        b, t = moves.shape
        reached = walk_tiles(moves, memory.start, memory.shape)  # (batch, T, 2)
        if self.config.embed:
            if t > EMBED_SIDE * EMBED_SIDE:
                raise ValueError(f"the embedded post model has steps up to {EMBED_SIDE * EMBED_SIDE}, got {t}")
            steps = torch.arange(t, device=moves.device)  # (T,): step 1 .. T, from 0
            return (self.move_embed(moves.clamp(min=0)) + self.step_embed(steps)
                    + self.reached_row_embed(reached[..., 0]) + self.reached_col_embed(reached[..., 1]))
        x = torch.zeros(b, t, self.config.d_model, device=moves.device)  # (batch, T, d)
        x[..., 0] = moves.clamp(min=0)
        x[..., 1] = torch.arange(1, t + 1, device=moves.device)
        x[..., 2:4] = reached.to(x)
        return x

    def encode(self, pixels: torch.Tensor, iterations: int | None = None, keep: bool = True) -> Memory:
        rows, cols = (s // TILE for s in pixels.shape[1:])
        # (batch, tiles, d), (batch, layer, head, tiles, tiles)
        states, patterns = self.transformer.encode(self.tile_tokens(pixels))
        return Memory(states, patterns if keep else None, start_tiles(pixels), (rows, cols))

    def decode(self, moves: torch.Tensor, memory: Memory) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # (batch, T, d), (batch, layer, head, T, T), (batch, layer, head, T, tiles)
        x, self_patterns, cross_patterns = self.transformer.decode(self.move_tokens(moves, memory), memory.states)
        return self.unembed(x), self_patterns, cross_patterns

