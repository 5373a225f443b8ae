"""toylib: the shared library of the Toy Transformers book.

Core modules, used by every chapter:

- ``toylib.device``    device choice, CPU threads and seeding
- ``toylib.attention`` attention, multi-head attention, encoder/decoder blocks and stacks
- ``toylib.train``     the one training loop, its options and history, snapshots, checkpoints
- ``toylib.infer``     running a model on many inputs: batched, eval mode, no gradients
- ``toylib.decode``    greedy decoding and beam search for autoregressive models
- ``toylib.search``    breadth-first search and A* over a small state interface
- ``toylib.targets``   a chapter's targets as data, and the summary table built from them
- ``toylib.plot``      attention grids, animations, training curves, code listings
- ``toylib.widgets``   one clickable board for every chapter's interactive cell
- ``toylib.cli``       the command line every chapter shares: python -m toylib.<chapter>

One package per chapter, each with the same rooms (its ``__init__`` docstring is its map):
``world`` (rules, ground truth, generators; no learning), ``dataset`` (splits, dedupe,
batches), ``net`` (config, model, loss, training), ``measure`` (the model at work, scored
against the chapter's targets, and the command line), ``look`` (attention analyses,
animations, the interactive board), and extra rooms where a chapter has them. The chapters:
``toylib.life`` (Conway's Game of Life), ``toylib.sequences`` (copy, reverse, rotate,
filter), ``toylib.tictactoe`` (the game, minimax and its model), ``toylib.maze`` (mazes of
tiles, BFS, the post's model and a looped one that searches), ``toylib.sokoban`` (one-box
Sokoban, BFS and A*, the policy and its beam search). ``toylib.how`` holds the measurements
of the chapter "How transformers work".
"""

__version__ = "0.1.0"
