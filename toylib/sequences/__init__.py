"""Copy, reverse, rotate and filter: one attention layer learning four small algorithms.

Retells and reproduces K. Rocki, "np-transformer" (2019): a single Transformer layer, one
head, no residual connection and no normalisation, reads a sequence of symbols as
[one-hot content | sinusoidal position] and writes the answer at every position at once.
The post found that this is enough for all four tasks, that the position encoding is what
makes it work, and that plain SGD trains poorly. The chapter is book/sequences.ipynb.

Symbols: 0 is the *empty* symbol, 1..vocab-1 are content. Inputs hold content only; 0
appears in outputs, where filter writes it in place of every value above `threshold`.
Held-out data is split by a stable hash of each sequence (`split_of`), so a test sequence
can never be drawn for training, at any length.

One change to the post's model, measured in the chapter: the queries read the position
encoding only (`queries="position"`). With queries from [content | position], as in the
post, copy is solved by matching content (each output attends to some key holding its own
symbol) rather than by reading its own position; it is still exact, but its attention is not
the copy program. Keys and values read [content | position] either way.

The same one-layer model is written twice: in PyTorch (`SeqTransformer`, trained by
toylib.train.fit) and in NumPy with a hand-written backward pass (`NumpyTransformer`).

Past the post: with sinusoids, a model trained on lengths up to 16 fails a few positions later.
`SeqConfig(scheme="relative")` replaces the position vectors with a learned attention bias by
clipped offset (`RelativeBias`, after T5's relative position buckets), plus a second bias by
the offset from the query's mirror n-1-i, which is what reverse needs: the length. The bias
grows as log n (`log_scale`), so that the keys beyond the window, which share one bias, never
drown the source. Trained on lengths 2-16 (`train_mixed`), it is exact at 64, 128 and 256,
and on every test sequence of 512 and 1,024, 64 times the longest it trained on
(`length_table`, `length_targets`).

The chapter's rooms, in the reader's order (each imports only from those above it):

- ``world.py``      the tasks: `check_task`, `check_sequences`, the ground truth `make_targets`,
                    and where each output reads from (`source_positions`); no torch
- ``config.py``     `SeqConfig`, and its named changes: the ablations (`ABLATIONS`), the
                    relative-position model (`RELATIVE`) and its variants (`RELATIVE_VARIANTS`)
- ``dataset.py``    the held-out split by a stable hash (`sequence_hash`, `split_of`,
                    `in_split`), the samplers (`sample_sequences`, `draw_sequences`,
                    `held_out`) and a config's data (`for_config`, `SeqData`)
- ``net.py``        `embed`, `RelativeBias`, `SeqTransformer` and the loss `sequence_loss`
- ``numpy_net.py``  the same model in NumPy with a hand-written backward pass and Adam
                    (`NumpyTransformer`), checked by `gradient_check`
- ``measure.py``    a model run and judged (`run_model`, `predict`, `exact_match`,
                    `attention_on_source`, `filter_attention`, `evaluate`, `evaluate_on`),
                    the exact match at other lengths (`length_table`), and the chapter's
                    targets (`suite_targets`, `claim_targets`, `length_targets`, `measure`)
- ``training.py``   `train` and its stopping rule `at_stop_rule`, the NumPy training loop
                    `train_numpy`, the suite (`train_suite`, judged into `measure.Run`s), the
                    ablations (`run_ablations`), the mixed-length runs (`train_mixed`),
                    `benchmark`, and the command line (`CHAPTER`, `main`)
- ``look.py``       what Q, K and V read (`weight_splits`, `plot_weight_splits`) and one
                    sequence drawn as the post draws it (`plot_example`)
- ``__main__.py``   python -m toylib.sequences
"""
