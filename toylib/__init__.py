"""toylib: the shared library of the Toy Transformers book.

Core modules, used by every chapter:

- ``toylib.device``    device choice, CPU threads and seeding
- ``toylib.draws``     named random streams of a seed, and draws that never repeat
- ``toylib.grids``     the 8 symmetries of a grid (tic-tac-toe, Sokoban)
- ``toylib.attention`` attention, multi-head attention, encoder/decoder blocks and stacks
- ``toylib.train``     the one training loop, its options, how it ranks evaluations, its history,
                        snapshots, checkpoints, and what every chapter's training starts with
- ``toylib.infer``     running a model on many inputs: batched, eval mode, no gradients
- ``toylib.decode``    greedy decoding and beam search for autoregressive models, one search or many at once
- ``toylib.search``    breadth-first search and A* over a small state interface
- ``toylib.targets``   a chapter's targets as data (each goal written once), and the summary table
- ``toylib.plot``      attention grids, animations, training curves, colour bars, code listings
- ``toylib.live``      live boards: a chapter's trained model run in the reader's browser
- ``toylib.cli``       the command line every chapter shares: python -m toylib.<chapter>
- ``toylib.chapters``  the one list of chapters, in reading order, and each one's contract

One package per chapter, each with the same rooms, every import pointing up this list (its
``__init__`` docstring is its map; ``CONTRIBUTING.md`` says how to add a chapter): ``world``
(rules, ground truth, generators; no learning), ``config`` (the config and its presets),
``dataset`` (splits, dedupe, batches), ``net`` (the model and its loss), ``measure`` (the model
at work, scored against the chapter's targets), ``training`` (training, the side experiments,
the command line), ``look`` (attention analyses, animations, the interactive board), and extra
rooms where a chapter has them. The chapters:
``toylib.life`` (Conway's Game of Life), ``toylib.sequences`` (copy, reverse, rotate,
filter), ``toylib.tictactoe`` (the game, minimax and its model), ``toylib.maze`` (mazes of
tiles, BFS, the post's model and a looped one that searches), ``toylib.sokoban`` (one-box
Sokoban, BFS and A*, the policy and its beam search). ``toylib.how`` holds the measurements
of the chapter "How transformers work".

The same words mean the same thing in every chapter:

- *ground truth*: what the rules say, computed exactly, never learnt: ``life_step``,
  ``minimax``, ``optimal_moves`` (every move that keeps the best outcome),
  ``shortest_path`` / ``shortest_solution`` (breadth-first search). No function that runs a
  model shares a name with one of these.
- *the model's answers*: ``predict`` (one output per input, batched), ``model_moves``,
  ``solve_greedy`` / ``solve_beam`` (the model decoding a whole solution), judged by
  ``score(model, data) -> Scores``.
- *targets*: the rows of a chapter's summary (``toylib.targets.Target``); *claims*: the
  sentences of its prose, checked as numbers when it runs (``toylib.targets.check``).
- *config*: a frozen dataclass whose defaults reach the targets; ``POST`` is the post's
  config, ``for_config(config)`` the data a config trains on, ``train(config, data=None,
  device=None, callback=None, progress=True) -> (model, history)`` the one way to train.
- *attention scores* and *pattern*: attention before and after the softmax; *held out*:
  never trained on, and no symmetric twin of a training example either.
"""

__version__ = "0.1.0"
