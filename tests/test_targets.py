"""A goal written once: `share_target`, `below_target` and `count_target` write a row's goal text
and its verdict from one number, and never show a value on the wrong side of its goal."""

import numpy as np
import pytest

from toylib.targets import Target, below_target, count_target, share_target


@pytest.mark.parametrize("floor, goal", [(0.995, ">= 99.5 %"), (0.99, ">= 99 %"), (0.985, ">= 98.5 %"),
                                         (0.98, ">= 98 %"), (0.999, ">= 99.9 %"), (0.95, ">= 95 %"), (1.0, "100 %")])
def test_goal_text_is_written_from_the_floor(floor, goal):
    # the chapters' stored tables hold these strings: nbval compares them
    assert share_target("m", 0.5, floor).goal == goal
    assert share_target("m", 0.5, np.float64(floor)).goal == goal


def test_values_away_from_the_goal_show_as_pct_always_did():
    assert share_target("m", 0.9425, 0.98) == Target("m", ">= 98 %", "94.25 %", False)
    assert share_target("m", 0.99396, 0.995).measured == "99.40 %"
    assert share_target("m", 0.99267, 0.99, digits=1) == Target("m", ">= 99 %", "99.3 %", True)
    assert share_target("m", 1.0) == Target("m", "100 %", "100.00 %", True)
    assert share_target("m", 0.98765, 0.9).measured == "98.77 %"  # nearest, not floored


def test_a_share_that_misses_never_shows_as_meeting_its_goal():
    assert share_target("m", 0.98996, 0.99, digits=1) == Target("m", ">= 99 %", "98.9 %", False)
    assert share_target("m", 0.99996) == Target("m", "100 %", "99.99 %", False)
    assert share_target("m", 0.999999999).measured == "99.99 %"
    assert share_target("m", 0.994999, 0.995) == Target("m", ">= 99.5 %", "99.49 %", False)
    assert share_target("m", 0.9999, digits=0).measured == "99 %"


def test_met_at_the_boundary():
    assert share_target("m", 0.99, 0.99).met is True and share_target("m", 0.99, 0.99).measured == "99.00 %"
    assert share_target("m", 199 / 200, 0.995).met is True  # 0.995 as the chapters compute it
    assert share_target("m", np.nextafter(0.99, 0)).met is False
    assert share_target("m", np.float32(1.0)).met is True  # numpy scalars give a plain bool
    assert share_target("m", float("nan"), 0.99) == Target("m", ">= 99 %", "nan %", False)


def test_below_target_reads_as_a_number_or_as_a_share():
    assert below_target("m", 2e-7, 1e-6) == Target("m", "< 1e-6", "< 1e-6", True)
    assert below_target("m", 3e-6, 1e-6) == Target("m", "< 1e-6", "1e-6 or more", False)
    assert below_target("m", 1e-6, 1e-6).met is False  # strictly under
    assert below_target("m", 1e-12, 1e-10).goal == "< 1e-10"
    assert below_target("m", 0.0, 0.01, share=True) == Target("m", "< 1 %", "0.00 %", True)
    assert below_target("m", 0.0123, 0.01, share=True) == Target("m", "< 1 %", "1.23 %", False)
    # either side of the line shows on its own side
    assert below_target("m", 0.0099999, 0.01, share=True) == Target("m", "< 1 %", "0.99 %", True)
    assert below_target("m", 0.01, 0.01, share=True) == Target("m", "< 1 %", "1.00 %", False)


def test_count_target_needs_exactly_its_goal():
    assert count_target("m", 4, 4) == Target("m", "4 of 4", "4 of 4", True)
    assert count_target("m", 3, 4) == Target("m", "4 of 4", "3 of 4", False)
    assert count_target("m", 0, 8, goal=0) == Target("m", "0 of 8", "0 of 8", True)
    assert count_target("m", np.int64(2), 8, goal=0) == Target("m", "0 of 8", "2 of 8", False)


@pytest.mark.parametrize("call, match", [
    (lambda: share_target("m", 0.5, 1.5), r"floor of a share must be in \[0, 1\]"),
    (lambda: share_target("m", 0.5, -0.1), r"floor of a share must be in \[0, 1\]"),
    (lambda: share_target("m", 1.5), r"must be a share in \[0, 1\]"),
    (lambda: share_target("m", -0.2, 0.5), r"must be a share in \[0, 1\]"),
    (lambda: share_target("m", 0.5, 0.995, digits=0), "0 decimals cannot show a goal of 99.5 %"),
    (lambda: share_target("m", 0.5, 0.99, digits=-1), "cannot show"),
    (lambda: below_target("m", 0.5, 0), "ceiling must be positive"),
    (lambda: below_target("m", 0.5, float("inf")), "ceiling must be positive"),
    (lambda: below_target("m", 0.5, 2.0, share=True), r"ceiling must be in \(0, 1\] for a share"),
    (lambda: below_target("m", 1.5, 0.01, share=True), r"must be a share in \[0, 1\]"),
    (lambda: count_target("m", 5, 4), r"must be in \[0, 4\]"),
    (lambda: count_target("m", 1, 4, goal=5), r"must be in \[0, 4\]"),
    (lambda: count_target("m", 1.0, 4), "whole numbers"),
])
def test_bad_goals_and_values_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()
