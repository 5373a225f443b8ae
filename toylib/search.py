"""Breadth-first search and A* over a small state space: the ground truth of the maze chapter
(shortest paths between tiles) and of the Sokoban chapter (is a board solvable, and in how
few moves).

A world plugs in by being a `State`, with OpenSpiel's method names as in `toylib.tictactoe.world`;
the solvers are pure functions of it. Every action costs 1, so a path's length is its number
of actions. Both solvers test for the goal when a state is taken off the frontier, not when
it is first generated, so that `Path.expanded` counts the same thing in both: with a
consistent heuristic (Manhattan distance on a grid) A* never expands more states than BFS.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol, TypeVar


class State(Protocol):
    """What the solvers need of a world: an immutable, hashable state (a frozen dataclass,
    say) that lists its legal actions, returns the state an action leads to, and knows
    whether it is a goal. `legal_actions()` fixes the order in which ties are broken."""

    def __hash__(self) -> int: ...

    def legal_actions(self) -> Sequence[Any]: ...

    def apply_action(self, action: Any) -> State: ...

    def is_goal(self) -> bool: ...


S = TypeVar("S", bound=State)
Parents = dict[Hashable, "tuple[Any, Any] | None"]  # state -> (parent, action); None for the start


@dataclasses.dataclass(frozen=True)
class Path:
    """A solution: `states` runs from the start to the goal, one more than `actions`.

    `expanded` is how many states the search took off its frontier, the goal included: the
    measure of how much work a search did. `len(path)` is the number of actions, so an empty
    path (the start is a goal) is falsy: test for "no path" with `path is None`."""

    actions: tuple[Any, ...]
    states: tuple[Any, ...]
    expanded: int

    def __len__(self) -> int:
        return len(self.actions)


def _check_max_states(max_states: int | None) -> None:
    if max_states is not None and max_states < 1:
        raise ValueError(f"max_states must be at least 1, or None for no limit, got {max_states}")


def _admit(n_seen: int, max_states: int | None) -> None:
    """Refuse to store a state beyond `max_states`. Raising, rather than returning None, keeps
    None meaning one thing only: no goal is reachable."""
    if max_states is not None and n_seen >= max_states:
        raise RuntimeError(
            f"search gave up after reaching max_states={max_states} states; the goal may still be "
            "reachable, so raise max_states (or pass None) for an exhaustive answer"
        )


def _path(parents: Parents, goal: Any, expanded: int) -> Path:
    """Walk the parent links back from `goal` to the start."""
    states, actions = [goal], []
    while parents[states[-1]] is not None:
        parent, action = parents[states[-1]]
        states.append(parent)
        actions.append(action)
    return Path(tuple(reversed(actions)), tuple(reversed(states)), expanded)


def _breadth_first(start: S, max_states: int | None, stop_at_goal: bool) -> tuple[Parents, dict[S, int], S | None, int]:
    """Visit the states reachable from `start` in order of distance.

    Returns (parents, depth, goal, expanded): `goal` is the first goal taken off the queue, or
    None when there is none or `stop_at_goal` is False (then every reachable state is visited).
    """
    _check_max_states(max_states)
    parents: Parents = {start: None}
    depth = {start: 0}
    queue = deque([start])
    expanded = 0
    while queue:
        state = queue.popleft()
        expanded += 1
        if stop_at_goal and state.is_goal():
            return parents, depth, state, expanded
        for action in state.legal_actions():
            child = state.apply_action(action)
            if child in depth:
                continue  # already reached at this distance or nearer
            _admit(len(depth), max_states)
            parents[child], depth[child] = (state, action), depth[state] + 1
            queue.append(child)
    return parents, depth, None, expanded


def bfs(start: State, max_states: int | None = None) -> Path | None:
    """The shortest action sequence from `start` to a goal state, or None when no goal is
    reachable at all (every reachable state was visited).

    Among equally short paths the one found first wins, actions being tried in the order
    `legal_actions()` gives them, so the answer is the same on every run. `max_states` caps
    the number of distinct states stored; past it a RuntimeError is raised.
    """
    parents, _, goal, expanded = _breadth_first(start, max_states, stop_at_goal=True)
    return None if goal is None else _path(parents, goal, expanded)


def distances(start: S, max_states: int | None = None) -> dict[S, int]:
    """The number of actions from `start` to every state reachable from it (start: 0).

    Goal states are not special here: the search goes on through them. `max_states` as in `bfs`.
    """
    return _breadth_first(start, max_states, stop_at_goal=False)[1]


def astar(start: State, heuristic: Callable[[Any], float], max_states: int | None = None) -> Path | None:
    """A* with unit action costs: a shortest path to a goal, or None when none is reachable.

    `heuristic(state)` estimates the actions still needed, and must never be negative. When
    it never overestimates (admissible), the path is as short as `bfs`'s; a state is expanded
    again if a shorter way to it turns up later, so that holds even for a heuristic that is
    admissible but not consistent. Ties in f = g + h go to the state with the smaller h (the
    one nearer the goal), then to the one pushed first; states are never compared.
    `max_states` as in `bfs`.
    """
    if not callable(heuristic):
        raise ValueError(f"heuristic must be a function of a state, got {type(heuristic).__name__}")
    _check_max_states(max_states)

    def h(state: Any) -> float:
        value = heuristic(state)
        if not value >= 0:  # also catches NaN
            raise ValueError(f"heuristic must be >= 0, got {value!r} for state {state!r}")
        return value

    parents: Parents = {start: None}
    g = {start: 0}
    order = itertools.count()  # the last tie-break, so that the heap never compares two states
    h_start = h(start)
    frontier = [(h_start, h_start, next(order), 0, start)]  # (f, h, tie, g, state)
    expanded = 0
    while frontier:
        *_, g_state, state = heapq.heappop(frontier)
        if g_state > g[state]:
            continue  # a stale entry: the state was pushed again with a shorter path since
        expanded += 1
        if state.is_goal():
            return _path(parents, state, expanded)
        for action in state.legal_actions():
            child = state.apply_action(action)
            g_child = g_state + 1
            if g_child >= g.get(child, math.inf):
                continue
            if child not in g:
                _admit(len(g), max_states)
            parents[child], g[child] = (state, action), g_child
            h_child = h(child)
            heapq.heappush(frontier, (g_child + h_child, h_child, next(order), g_child, child))
    return None
