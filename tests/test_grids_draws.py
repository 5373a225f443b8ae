"""The core's grid symmetries and random draws, which tic-tac-toe and Sokoban (symmetries) and
Life, sequences, maze and Sokoban (streams, distinct draws) build on."""

import itertools

import numpy as np
import pytest

from toylib import draws, grids


def test_the_eight_symmetries_are_the_eight_distinct_images_of_a_square():
    grid = np.arange(9).reshape(3, 3)
    images = [grids.turn(grid, s) for s in range(grids.N_SYMMETRIES)]
    assert len({im.tobytes() for im in images}) == 8
    np.testing.assert_array_equal(images[0], grid)
    np.testing.assert_array_equal(images[1], np.rot90(grid))
    np.testing.assert_array_equal(images[4], grid.T)
    # the group is closed: the image of an image is one of the 8
    for a, b in itertools.product(range(8), repeat=2):
        assert grids.turn(images[a], b).tobytes() in {im.tobytes() for im in images}


def test_square_map_and_cell_order_agree_with_turn_on_a_rectangle():
    shape = (2, 5)
    cells = np.arange(10).reshape(shape) * 7 + 3  # values unlike their indices
    for s in range(8):
        image = grids.turn(cells, s)
        where, new_shape = grids.square_map(shape, s)
        assert image.shape == new_shape
        flat = image.ravel()
        assert all(flat[where[i]] == cells.ravel()[i] for i in range(10))
        order = grids.cell_order(shape, s)
        assert [cells.ravel()[j] for j in order] == flat.tolist()


def test_turn_acts_on_the_last_two_axes_of_a_stack():
    stack = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    for s in range(8):
        turned = grids.turn(stack, s)
        for k in range(2):
            np.testing.assert_array_equal(turned[k], grids.turn(stack[k], s))


@pytest.mark.parametrize("bad", [-1, 8, 2.0, True, "1"])
def test_a_symmetry_is_an_int_0_to_7(bad):
    with pytest.raises(ValueError, match="a symmetry is an int 0..7"):
        grids.turn(np.zeros((3, 3)), bad)


def test_streams_are_named_separate_and_reproducible():
    a = draws.stream(5, "val").random(4)
    np.testing.assert_array_equal(a, draws.stream(5, "val").random(4))
    assert not np.array_equal(a, draws.stream(5, "test").random(4))
    assert not np.array_equal(a, draws.stream(6, "val").random(4))
    # with no name, the seed's own stream
    np.testing.assert_array_equal(draws.stream(5).random(3), np.random.default_rng(5).random(3))
    np.testing.assert_array_equal(draws.stream(5, "val").random(3), np.random.default_rng([5, 1]).random(3))
    with pytest.raises(ValueError, match="unknown stream 'vali'"):
        draws.stream(5, "vali")
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        draws.stream(-1, "val")


def test_distinct_never_repeats_a_key_skips_refused_items_and_fails_past_its_budget():
    rng = np.random.default_rng(0)
    seen = {0, 1}
    fresh = draws.distinct(lambda: int(rng.integers(10)), key=lambda x: x, seen=seen, max_draws=1_000,
                           keep=lambda x: x != 9)
    got = list(itertools.islice(fresh, 7))
    assert sorted(got) == [2, 3, 4, 5, 6, 7, 8] and seen == set(range(9))
    more = draws.distinct(lambda: int(rng.integers(10)), key=lambda x: x, seen=seen, max_draws=50,
                          what="of 2 new digits")
    with pytest.raises(RuntimeError, match="found only 1 of 2 new digits in 50 draws"):
        list(itertools.islice(more, 2))
    assert draws.budget(10) == 2_000
