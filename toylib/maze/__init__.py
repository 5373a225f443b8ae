"""Mazes of tiles: the world, its shortest paths, and the data a transformer learns to solve them from.

Retells M. Mozafari, "A Mazing Transformer" (2023): a maze is an image of R x C tiles, each
a 5x5 square of pixels with 0 to 4 arms from its centre, and a transformer reads the image
and writes the moves from the start tile to the end tile: START, then UP, RIGHT, DOWN or
LEFT one tile at a time, then STOP. The chapter is book/maze.ipynb.

Ground truth is breadth-first search (`toylib.search.bfs`) over `MazeState`. The generator
follows the post: a random self-avoiding walk, a grid of random tiles laid over it, and the
walk replaced by a shortest path when the random tiles opened a shorter way. Unlike the
original, the train, validation and test mazes are deduplicated, so no maze is in two splits.

Two models read the pixels and write the moves: `PostMazeNet`, the post's encoder-decoder fed
raw numbers, and `MazeNet`, the chapter's, which holds nothing tied to a maze's size (its
encoder runs one layer along the corridors as many times as the maze needs), so that a model
trained on 5x5 mazes can be asked to solve bigger ones. Both are solved greedily with every
move checked against the maze (`solve_greedy`, `score`).

The chapter's map, one room per file, in the reader's order; each room imports only rooms
above it (a notebook imports the rooms: `from toylib.maze import world, dataset, net, measure,
training`, and the config's names: `from toylib.maze.config import MazeConfig, POST`):

- `world.py`: tiles and pixels (`to_pixels`, `from_pixels`), moves (`exits`, `open_path`,
  `follow_moves`), the ground truth (`MazeState`, `shortest_path`, `check_solution`), the
  post's generator (`random_maze`), mazes with no loops or with a share of loops
  (`spanning_tree_maze`, carved by `backtracker_arms` or `kruskal_arms`) and `draw_maze`.
- `config.py`: one config per model, each with only what its model reads, on `BaseMazeConfig`
  (the widths and how to train): `MazeConfig` (the chapter's looped model), `FIRST` (its first
  version, before it was taught to search), `PostMazeConfig` (the post's model) and `POST`
  (its defaults: the post's model and recipe).
- `dataset.py`: maze keys, `MazeSet`, the splits (`make_splits`; a config's: `for_config`) and
  the mazes beyond them (`make_mazes`, of every kind in `KINDS`); the tensor views the models read
  (`tile_view`, `connections`, `walk_tiles`, `invalid_last_move`, `solution_tensor`, ...).
- `net.py`: what every maze model does (`Memory`, `MazeModel`), the chapter's `MazeNet` (taught
  every tile's way to the end, after every pass as far as the end's news has reached:
  `wave_targets`, and walking by it), the thresholds that stop its search (`SETTLED`, `QUIET`,
  `STILL`), and the loss (`maze_loss`).
- `post.py`: the post's model, `PostMazeNet`.
- `measure.py`: solving (`solve_greedy`; one maze alone, timed: `solve_timed`), `token_accuracy`, `Scores` and `score` (training
  validates by them), `no_causal_mask`, `length_table`, the chapter's targets (`beyond_sets`,
  `far_sets` for a model that searches, `maze_targets`, `measure`).
- `training.py`: `build_model` (the model a config's class names), `train`, and the command line
  (`python -m toylib.maze`, `--preset post`, `--preset first`).
- `look.py`: the encoder's search read through the decoder (`encoder_search`) and through the
  way head (`wave`), where the decoder's heads look (`where_heads_look`), ablating them
  (`without_cross_heads`), the frames of a model solving a maze (`solve_frames`), and a maze to
  edit and watch the model walk, in the browser (`live_board`, with `live.js`).
"""
