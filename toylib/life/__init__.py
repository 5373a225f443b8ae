"""Conway's Game of Life, and a one-head transformer that learns to compute it.

Retells and reproduces S. Radcliffe, "Training a Simple Transformer Neural Net on Conway's
Game of Life" (2024): SingleAttentionNet reads a Life grid as one token per cell and
predicts every cell's next state. The chapter is book/life.ipynb.

Ground truth is `life_step` on a torus (the edges wrap around, as in the post). Everything
the model is judged on is generated here from seeded generators.

The chapter's rooms, in the reader's order:

- ``world.py``    the rules on a torus (`check_grids`, `neighbour_counts`, `life_step`,
                  `life_run`) and the famous patterns (`PATTERNS`, `place`); no model
- ``config.py``   `LifeConfig` (with `MIXERS`, `POSITIONS`), and its presets: `ANY_SIZE`,
                  and the post's `POST` from `POST_CHANGES`
- ``dataset.py``  random grids (`random_grids`), what a model trains and is validated on
                  (`for_config`, `LifeData`, whose `seen` holds the training grids' hashes),
                  test grids never seen in training (`unseen_grids`, `grid_hashes`), and the
                  512 3x3 neighbourhoods tiled onto grids (`neighbourhood_grids`)
- ``net.py``      `SingleAttentionNet` (the post's, with `neighbour_mask` for its fixed
                  averages), `OffsetAttentionNet` (any grid size), `build_model`, and the
                  loss (`life_loss`)
- ``measure.py``  what validation reads (`predict`, `exact_fraction`, `neighbour_attention`,
                  `attention_by_offset`), the model run on its own outputs (`model_run`), the
                  any-size check, the 512 neighbourhoods, and the chapter's targets
                  (`summarise`, `Summary`, `measure`)
- ``training.py`` `train`, and the command line (`CHAPTER`, `main`)
- ``look.py``     pictures of attention, and the board to draw on in the browser
                  (`live_board`, with `live.js`)
- ``__main__.py`` python -m toylib.life
"""
