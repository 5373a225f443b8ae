"""toylib: the shared library of the Toy Transformers book.

Core modules, used by every chapter:

- ``toylib.device``    device choice and seeding
- ``toylib.attention`` attention, multi-head attention, encoder/decoder blocks and stacks
- ``toylib.train``     the one training loop, its history, checkpoints
- ``toylib.plot``      attention grids, animations, training curves

One module per chapter: ``toylib.life`` (Conway's Game of Life), ``toylib.sequences``
(copy, reverse, rotate, filter), ``toylib.tictactoe`` (the game, minimax and its model).
"""

__version__ = "0.1.0"
