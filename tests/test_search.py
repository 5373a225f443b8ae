import dataclasses

import numpy as np
import pytest

from toylib.search import Path, astar, bfs, distances

MOVES = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}


@dataclasses.dataclass(frozen=True)
class Grid:
    """A hand-drawn maze: rows of "." (floor) and "#" (wall), and the goal cell."""

    rows: tuple[str, ...]
    goal: tuple[int, int]

    def is_floor(self, r: int, c: int) -> bool:
        return 0 <= r < len(self.rows) and 0 <= c < len(self.rows[0]) and self.rows[r][c] == "."


@dataclasses.dataclass(frozen=True)
class Walker:
    """A state of the search: where the walker stands. The grid is context, not state."""

    pos: tuple[int, int]
    grid: Grid = dataclasses.field(compare=False, repr=False)

    def legal_actions(self) -> list[str]:
        r, c = self.pos
        return [a for a, (dr, dc) in MOVES.items() if self.grid.is_floor(r + dr, c + dc)]

    def apply_action(self, action: str) -> "Walker":
        (r, c), (dr, dc) = self.pos, MOVES[action]
        return Walker((r + dr, c + dc), self.grid)

    def is_goal(self) -> bool:
        return self.pos == self.grid.goal


# The wall in column 3 has one gap in the top half, at (2, 3), and the bottom row goes round.
MAZE = (
    "...#...",
    ".#.#.#.",
    ".#...#.",
    ".#####.",
    ".......",
)
# Distances from the top-left corner, worked out by hand.
MAZE_DISTANCES = """
 0  1  2  #  8  9 10
 1  #  3  #  7  # 11
 2  #  4  5  6  # 12
 3  #  #  #  #  # 11
 4  5  6  7  8  9 10
"""
# Column 3 is all wall: the right-hand side cannot be reached from the left.
SPLIT = ("...#.", "...#.", "...#.")


def walker(rows, start, goal) -> Walker:
    return Walker(start, Grid(tuple(rows), goal))


def manhattan(state: Walker) -> int:
    (r, c), (gr, gc) = state.pos, state.grid.goal
    return abs(r - gr) + abs(c - gc)


def replay(start: Walker, path: Path) -> list[Walker]:
    states = [start]
    for action in path.actions:
        assert action in states[-1].legal_actions()
        states.append(states[-1].apply_action(action))
    return states


def test_bfs_finds_the_shortest_path_through_the_gap():
    start = walker(MAZE, (0, 0), (0, 6))
    path = bfs(start)
    assert len(path) == 10 and "".join(path.actions) == "RRDDRRUURR"
    assert path.states[0] == start and path.states[-1].pos == (0, 6) and len(path.states) == 11
    assert list(path.states) == replay(start, path)


def test_distances_match_the_hand_computed_grid():
    got = distances(walker(MAZE, (0, 0), (0, 6)))
    want = {
        (r, c): int(cell)
        for r, line in enumerate(MAZE_DISTANCES.strip().splitlines())
        for c, cell in enumerate(line.split())
        if cell != "#"
    }
    assert {s.pos: d for s, d in got.items()} == want


def test_astar_with_manhattan_matches_bfs_and_expands_no_more():
    start = walker(MAZE, (0, 0), (0, 6))
    by_bfs, by_astar = bfs(start), astar(start, manhattan)
    assert len(by_astar) == len(by_bfs) == 10
    assert list(by_astar.states) == replay(start, by_astar)
    # BFS takes off its queue the 19 cells nearer than the goal, then (4, 6) and the goal (both at 10);
    # A* takes only the 11 cells of the path and (1, 0), whose f = 1 + 7 beats the gap's f = 10
    assert by_bfs.expanded == 21 and by_astar.expanded == 12


def test_astar_with_a_zero_heuristic_is_as_short_as_bfs():
    start = walker(MAZE, (4, 6), (1, 2))
    assert len(astar(start, lambda s: 0)) == len(bfs(start)) == 11


def test_an_unreachable_goal_is_none_after_visiting_every_reachable_state():
    start = walker(SPLIT, (0, 0), (0, 4))
    assert bfs(start) is None and astar(start, manhattan) is None
    assert len(distances(start)) == 9
    assert bfs(start, max_states=9) is None  # room for all 9 states: the answer still stands
    with pytest.raises(RuntimeError, match="max_states=8"):
        bfs(start, max_states=8)


def test_max_states_raises_instead_of_answering_none():
    start = walker(SPLIT, (0, 0), (0, 4))
    with pytest.raises(RuntimeError, match="max_states=5"):
        bfs(start, max_states=5)
    with pytest.raises(RuntimeError, match="max_states=5"):
        astar(start, manhattan, max_states=5)
    with pytest.raises(RuntimeError, match="max_states=5"):
        distances(start, max_states=5)
    with pytest.raises(ValueError, match="max_states"):
        bfs(start, max_states=0)


def test_starting_on_the_goal_is_an_empty_path():
    start = walker(MAZE, (2, 3), (2, 3))
    for path in (bfs(start), astar(start, manhattan)):
        assert path is not None and len(path) == 0 and path.actions == () and path.states == (start,)


def test_bad_heuristics_are_refused():
    start = walker(MAZE, (0, 0), (0, 6))
    with pytest.raises(ValueError, match=r"Walker\(pos=\(0, 0\)\)"):
        astar(start, lambda s: -1)
    with pytest.raises(ValueError, match="heuristic must be >= 0"):
        astar(start, lambda s: float("nan"))
    with pytest.raises(ValueError, match="function"):
        astar(start, 3)


def test_ties_are_broken_the_same_way_every_time():
    # two shortest ways round to (2, 6): over the top or along the bottom, 12 moves each
    start = walker(MAZE, (0, 0), (2, 6))
    first, again = bfs(start), bfs(start)
    assert len(first) == 12 and first == again
    # legal_actions lists U and D before L and R, so the first way found starts down column 0
    assert first.actions[0] == "D"
    assert astar(start, manhattan) == astar(start, manhattan)


@dataclasses.dataclass(frozen=True)
class Node:
    """A state of an explicit graph: `edges` lists each node's successors; actions name them."""

    name: str
    edges: dict = dataclasses.field(compare=False, repr=False)

    def legal_actions(self) -> list[str]:
        return self.edges[self.name]

    def apply_action(self, action: str) -> "Node":
        return Node(action, self.edges)

    def is_goal(self) -> bool:
        return self.name == "G"


def test_astar_skips_stale_entries_and_reopens_states_it_finds_a_shorter_way_to():
    # C is first pushed by the detour S B D C (g = 3), then again by S A C (g = 2) before it is
    # taken off; the stale entry (f = 3 + 1) is popped before the goal (f = 5) and skipped
    edges = {"S": ["B", "A"], "B": ["D"], "D": ["C"], "A": ["C"], "C": ["E"], "E": ["F"], "F": ["G"], "G": []}
    h = {"A": 2, "C": 1}
    path = astar(Node("S", edges), lambda n: h.get(n.name, 0))
    assert "".join(path.actions) == "ACEFG" and path.expanded == 8  # S B D A C E F G

    # admissible but not consistent: h(A) = 3 holds A back until C was expanded by the detour,
    # so C and E are expanded again from the shorter way in
    edges = {"S": ["A", "B"], "A": ["C"], "B": ["D"], "D": ["C"], "C": ["E"], "E": ["G"], "G": []}
    path = astar(Node("S", edges), lambda n: 3 if n.name == "A" else 0)
    assert "".join(path.actions) == "ACEG" and len(path) == len(bfs(Node("S", edges))) == 4
    assert path.expanded == 9  # S B D C E A C E G


def test_astar_is_as_short_as_bfs_on_random_grids():
    rng = np.random.default_rng(0)
    rows = tuple("".join("#" if w else "." for w in line) for line in rng.random((10, 10)) < 0.3)
    floor = [(r, c) for r in range(10) for c in range(10) if rows[r][c] == "."]
    reachable = 0
    for i, j in rng.integers(len(floor), size=(150, 2)):
        start = walker(rows, floor[i], floor[j])
        by_bfs, by_astar = bfs(start), astar(start, manhattan)
        assert (by_bfs is None) == (by_astar is None)
        if by_bfs is None:
            continue
        reachable += 1
        assert len(by_astar) == len(by_bfs) == distances(start)[Walker(floor[j], start.grid)]
        assert by_astar.expanded <= by_bfs.expanded
        assert list(by_astar.states) == replay(start, by_astar)
    assert reachable > 50  # the grid is mostly connected, so most pairs say something
