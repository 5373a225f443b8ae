"""The Sokoban board as a Gymnasium environment: observations are the policy's 5 planes,
actions the four moves and UNDO.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from toylib.sokoban.world import (
    ACTION_NAMES,
    CHANNELS,
    SIZE,
    Board,
    Play,
    from_xsb,
    random_board,
    render_rgb,
    shortest_solution,
    to_channels,
    to_xsb,
)


class SokobanEnv(gym.Env):
    """Sokoban with Gymnasium's API. Observations are a board's 5 planes (5, 8, 8) uint8;
    actions are UP, DOWN, LEFT, RIGHT and UNDO. A move that is not legal leaves the board as it
    is, and UNDO goes back one move (nothing at the start). The reward is 1 on the step that
    solves the board, 0 otherwise (the post's R); an episode is truncated after `max_steps`.

    `reset` plays `options["board"]` if given (a Board or XSB text), else the `board` given to
    the constructor, else a random board that can be solved, drawn from the environment's
    seeded generator.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(self, board: Board | str | None = None, render_mode: str | None = None, max_steps: int = 100):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode is one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        if not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
        self.level = None if board is None else self._board(board)
        self.render_mode, self.max_steps = render_mode, max_steps
        self.observation_space = gym.spaces.Box(0, 1, (len(CHANNELS), SIZE, SIZE), np.uint8)
        self.action_space = gym.spaces.Discrete(len(ACTION_NAMES))
        self.play: Play | None = None  # the board and its undo history, from `reset`
        self.steps = 0

    @staticmethod
    def _board(board: Board | str) -> Board:
        board = from_xsb(board) if isinstance(board, str) else board
        if not isinstance(board, Board) or board.shape != (SIZE, SIZE):
            raise ValueError(f"the environment plays {SIZE}x{SIZE} Boards (or their XSB text), got {board!r}")
        return board

    @property
    def board(self) -> Board:
        return self.play.board

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        board = (options or {}).get("board", self.level)
        if board is None:
            while shortest_solution(board := random_board(self.np_random)) is None:
                pass
        self.play, self.steps = Play(self._board(board)), 0
        return to_channels(self.board), {}

    def step(self, action):
        if self.play is None:
            raise RuntimeError("call reset before step")
        if not self.action_space.contains(action):
            raise ValueError(f"actions are 0..{len(ACTION_NAMES) - 1} ({', '.join(ACTION_NAMES)}), got {action!r}")
        action = int(action)
        moved = action in self.play.legal_actions()  # UNDO too, once there is a move to take back
        if moved:
            self.play = self.play.step(action)
        self.steps += 1
        solved = self.board.is_goal()
        truncated = not solved and self.steps >= self.max_steps
        return to_channels(self.board), float(solved), solved, truncated, {"moved": moved}

    def render(self):
        if self.render_mode == "ansi":
            return to_xsb(self.board) + "\n"
        if self.render_mode == "rgb_array":
            return render_rgb(self.board)
        return None
