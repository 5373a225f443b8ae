"""Sokoban with one box: the world, its ground truth, the data, and a transformer policy
that plays it.

Retells T. A. Wheeler, "A Transformer Sokoban Policy" and "Transformers - How and Why They
Work" (2024). A board is an 8x8 grid of walls and floor with one goal, one box and the player.
The player moves up, down, left or right, pushing the box when it stands in the way, and may
undo a move; the board is solved when the box stands on the goal. The policy reads each board
as 5 channels (wall, floor, goal, player, box), one token per board, and a causal transformer
over the goal and the boards so far learns from shortest solutions which move to make and how
many moves are left ("nsteps"), or that no moves can solve the board at all.

Ground truth is `toylib.search`. With one box a board's states are (box square, player square)
pairs, about a thousand, so breadth-first search answers exhaustively, never with a time-out,
whether a board can be solved and in how few moves. Run backwards from the solved states, one
BFS gives every state's distance to the goal, and so the set of moves that keep a shortest
solution. A* with a push-distance heuristic, the post's solver, is the core's `astar`. Solving
with the policy goes through the core's `greedy_decode` and `beam_search` (see `Walks`), and
for many boards at once through `beam_search_batch` (see `Frontier`).

Unlike the original, every board comes from one seeded generator, solutions are shortest in
moves (the post's A* minimised pushes), the nsteps target counts the moves *left* (the post's
first code gave the whole solution's length at every step), no held-out board has a rotated or
mirrored twin among the training boards, training stops on validation boards of its own,
the policy learns every optimal move of a board, not the one its solver happened to take, its
encoder reads a sixth plane (where the player can walk), convolves only the squares inside
the border wall and reads the features where the box and the player stand, and a start loss
asks the verdict on 24,000 more start boards.

The chapter's rooms, in the reader's order:

- `world.py`    the board and its moves, `Play` (a board and its undo history), XSB text and
                the policy's 5 planes, ground truth (BFS's `shortest_solution`, the backward
                BFS of `moves_to_goal`, A* with `push_distance`), the 8 symmetries
                (`symmetric`), the post's generator, the book's second (`walked_board`),
                and `render_rgb`; no torch
- `env.py`      `SokobanEnv`, the board as a Gymnasium environment
- `config.py`   `SokobanConfig`, the policy and how to train it
- `dataset.py`  training entries (`make_entry`, `start_entry`, `replay`, the nsteps classes),
                `SokobanSet`, `augment`, `draw_boards`, `for_config`, `start_keys`, and
                `other_boards` (the second generator's, for judging only)
- `net.py`      `walkable` (the player's region, a sixth plane), `BoardEncoder`,
                `SokobanPolicy`, `to_batch` (entries as tensors), `sokoban_loss` (and
                `loss_from_logits`), `start_loss` and `loss_with_starts`
- `measure.py`  solving with the policy (`Walks`, `solve_greedy`, `solve_beam`; `Frontier`
                and `solve_beams` for many boards at once), the teacher-forced `accuracies`,
                `Solves`, the post's table (`POST_TABLE`), `sokoban_targets`, `other_scores`
                (the second generator's boards) and `measure`
- `training.py` `train`, `train_side_by_side` (two policies at once, in two processes) and the
                command line (`CHAPTER`, `main`)
- `look.py`     looking inside: `solve_frames`, `animate_solve`, `nsteps_along`,
                `first_deadlock`, `draw_nsteps`, and `live_board`, levels to play in the browser (`live.js`)

Run it as `python -m toylib.sokoban`.
"""
