"""Tic-tac-toe: the game, minimax, every reachable position, and a transformer that plays.

Retells "tic-tac-transformer" (S. Mullinix, 2025): a stack of transformer blocks reads the
board (9 cells, three symbols) and writes the optimal next board, one 3-way classification
per cell, trained on minimax's moves. Its measure was whole-board exact match against one
minimax label on a random split; this chapter measures what matters for a player instead:
whether the move keeps the game's minimax value, on positions whose rotated or mirrored
twins were never trained on, and whether the model ever loses. Its model reads the 9 cells
and the 8 lines as tokens, with an attention bias per relation between them, so that it
answers a rotated or mirrored board exactly alike.

The game follows the conventions of game libraries (OpenSpiel, Gymnasium): an immutable
state with `legal_actions`, `apply_action`, `is_terminal`, `winner`, `returns`, `__str__`.
Cells are numbered 0..8 row by row; a board is a tuple of 9 symbols, EMPTY, X or O.

The chapter's rooms, in the reader's order:

- `world.py`: the game (`TicTacToe`, `parse_board`, `to_move`, `child`), minimax and the moves
  it calls optimal, every reachable position, the 8 symmetries (`permute`, `canonical`) and
  `split_by_symmetry`, kinds of position (`threats`, `kind_of`), and `board_image`. No torch.
- `config.py`: `TicTacToeConfig` (a model and how to train it), the post's four configs
  (`POST_CONFIGS`, trained its way: `POST_RECIPE`) and `POST_SMALLEST`.
- `dataset.py`: `Positions` (a set of positions as tensors, with every optimal move) and
  `Dataset`, every open position split by symmetry class, built by `for_config`.
- `net.py`: the tokens and their relations (`TOKEN_NAMES`, `TOKEN_KIND`, `TOKEN_RELATIONS`),
  `TicTacToeNet` and `tictactoe_loss`.
- `measure.py`: the model's moves and scores on a set of positions (`model_moves`, `score`,
  which training watches), whole games (`model_policy`, `play_exhaustively`, `play_random`)
  and the chapter's targets (`Summary`, `summarise`, `measure`).
- `training.py`: `train`, and the command line (`CHAPTER`, `main`: `python -m
  toylib.tictactoe`, `--preset post1` to `post4` for the post's configs).
- `look.py`: what the heads look at (`attention_profile`), a game as frames
  (`game_frames`), and a board to play on in the browser
  (`live_board`, with `live.js`).
"""
