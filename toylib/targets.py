"""A chapter's targets as data: what is measured, the goal, the value, whether it is met.

Every chapter ends with a summary table, its command line prints the same table, and the
benchmark counts the seeds whose model meets every target. All three are built from a list
of `Target`s, so "all targets met" is computed from booleans, never read back from text.

A target whose value depends on the machine (a training time) is marked `machine=True`:
`table(..., machine=False)` leaves it out, so that the table nbval compares is the same on
every run, and `table(..., machine=True)` prints it in a cell of its own.

A goal is written once: `share_target`, `below_target` and `count_target` write a row's goal
text and its verdict from the same number, and show the measured value on the same side of the
goal as the value itself (99.0 % is never printed beside a miss of ">= 99 %").

`check` is what a chapter asserts when it runs: its targets met and the claims of its prose
true for the numbers just computed, so that re-executing a chapter on any machine (the book
build, nbval, Colab) fails loudly where a claim no longer holds. A goal the chapter does not
yet reach on every seed carries a `Floor` (`with_floor`): a lower figure, with its reason,
that `check` asserts in the goal's place, while the table and the benchmark still judge the goal.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import ROUND_CEILING, Decimal

import numpy as np

HEADER = ("measure", "target", "measured", "met")


def pct(share: float, digits: int = 2) -> str:
    """A share as the summaries print it: 0.98765 -> "98.77 %"."""
    return f"{100 * share:.{digits}f} %"


@dataclasses.dataclass(frozen=True)
class Floor:
    """The least a target's value must reach where its goal is not yet met on every seed:
    `check` asserts this in the goal's place. The goal stays what the table and the benchmark
    judge; the floor says what still holds, and `why` (for the reader) where the figure comes from."""

    goal: str  # as the reader sees it, e.g. ">= 97.7 %"
    met: bool
    why: str  # e.g. "the post's solvability accuracy"

    def __post_init__(self):
        if not isinstance(self.met, bool):
            raise ValueError(f"a floor's met must be True or False, got {self.met!r}")
        if not self.why.strip():
            raise ValueError(f"a floor needs a reason a reader can follow (floor {self.goal!r})")


@dataclasses.dataclass(frozen=True)
class Target:
    """One row of a chapter's summary."""

    measure: str  # what is measured, e.g. "exact next state, 10,000 unseen grids"
    goal: str  # the target as the reader sees it, e.g. "100 %" or "< 2 min"
    measured: str  # the value, formatted
    met: bool | None  # None: reported beside the targets, with no goal of its own
    machine: bool = False  # the value depends on the machine it ran on (times)
    floor: Floor | None = None  # what `check` asserts where the goal is not yet met on every seed
    where: str = ""  # a machine row's machine, shown beside its value ("AMD EPYC, 1 thread, ...")

    def __post_init__(self):
        if self.met is not None and not isinstance(self.met, bool):
            raise ValueError(f"met must be True, False or None, got {self.met!r} for {self.measure!r}")
        if self.floor is not None and (self.met is None or self.machine):
            raise ValueError(f"only a judged target of the model takes a floor, not {self.measure!r}")

    @property
    def verdict(self) -> str:
        """"yes", "NO", or "-" without a goal. A machine row over its budget says "over": the
        time is the machine's (its speed, and what else it ran), not a failure of the model."""
        if self.met is None:
            return "-"
        return "yes" if self.met else "over" if self.machine else "NO"


def seconds_text(seconds: float) -> str:
    """A duration as the book prints it: whole seconds from 10 s up, tenths from 1 s ("1.1 s"),
    milliseconds below ("40 ms")."""
    if seconds < 1:
        return f"{1000 * seconds:.0f} ms"
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"


def time_target(seconds: float, limit: float, measure: str = "training time", where: str | None = None) -> Target:
    """The row every chapter has: `seconds` against a budget of `limit` seconds, met when it
    is at most the budget. A machine row: it measures the computer as much as the model, so it
    says which (`where`; by default this process's device, `device.where`)."""
    if limit <= 0:
        raise ValueError(f"a time budget must be positive, got {limit}")
    if where is None:
        from toylib.device import where as this_machine  # torch loads only where a time is judged

        where = this_machine()
    goal = f"<= {limit / 60:.0f} min" if limit >= 60 and limit % 60 == 0 else f"<= {limit:.0f} s"
    return Target(measure, goal, seconds_text(seconds), bool(seconds <= limit), machine=True, where=where)


def _decimal(x: float) -> Decimal:
    """`x` as the decimal its writer typed: 0.995 -> Decimal("0.995"), not the binary float's
    0.99499999999999999555910790149937..."""
    return Decimal(str(float(x)))


def _text(x: Decimal) -> str:
    """A goal's number as the book prints it: "99.5", "99", "1e-6"."""
    x = x.normalize()
    if x.adjusted() < -4:  # small numbers in e-notation, without a leading zero in the exponent
        mantissa, exponent = f"{x:e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return f"{x:f}"


def _check_share(share: float, name: str) -> None:
    # a float32 sum of attention weights can pass 1 by a rounding or two
    if not -1e-6 <= share <= 1 + 1e-6 and not math.isnan(share):
        raise ValueError(f"{name} must be a share in [0, 1], got {share}")


def _percent_goal(share_goal: float, digits: int, measure: str) -> Decimal:
    """A share's goal in percent (0.995 -> 99.5), checked to be one that `digits` decimals can show."""
    goal = 100 * _decimal(share_goal)
    if not isinstance(digits, int) or digits < 0 or goal.normalize().as_tuple().exponent < -digits:
        raise ValueError(f"{digits} decimals cannot show a goal of {_text(goal)} % ({measure!r})")
    return goal


def _shown(share: float, goal: Decimal, under: bool, digits: int) -> str:
    """`share` in percent at `digits` decimals: rounded to the nearest, but never across `goal`
    (a percent). A share `under` the goal shows under it (0.98996 beside 99: "98.9 %", not
    "99.0 %"); one at or over it shows at or over it."""
    if math.isnan(share):
        return pct(share, digits)
    unit = Decimal(1).scaleb(-digits)
    shown = Decimal(f"{100 * max(share, 0.0):.{digits}f}")  # never "-0.00 %"
    if (shown < goal) != under:
        line = (goal / unit).to_integral_value(ROUND_CEILING) * unit  # the least shown value at or over the goal
        shown = line - unit if under else line
    return f"{shown:.{digits}f} %"


def share_target(measure: str, share: float, floor: float = 1.0, digits: int = 2) -> Target:
    """A share that must reach `floor`: goal ">= 99.5 %" for a floor of 0.995, "100 %" for 1.
    Met when share >= floor; shown in percent at `digits` decimals, on its side of the goal (a
    share of 0.99996 against 100 % shows "99.99 %", never "100.00 %")."""
    if not 0 <= floor <= 1:
        raise ValueError(f"the floor of a share must be in [0, 1], got {floor} for {measure!r}")
    _check_share(share, f"the share of {measure!r}")
    goal = _percent_goal(floor, digits, measure)
    met = bool(share >= floor)
    text = "100 %" if floor == 1 else f">= {_text(goal)} %"
    return Target(measure, text, _shown(share, goal, not met, digits), met)


def below_target(measure: str, value: float, ceiling: float, share: bool = False, digits: int = 2) -> Target:
    """A value that must stay under `ceiling`: met when value < ceiling. A `share` reads in
    percent (goal "< 1 %", measured at `digits` decimals on its side of the goal); any other
    value reads as a number and is shown by the side it is on (goal "< 1e-6", measured "< 1e-6"
    or "1e-6 or more")."""
    if not math.isfinite(ceiling) or ceiling <= 0 or (share and ceiling > 1):
        raise ValueError(f"a ceiling must be {'in (0, 1] for a share' if share else 'positive'}, "
                         f"got {ceiling} for {measure!r}")
    met = bool(value < ceiling)
    if not share:
        text = _text(_decimal(ceiling))
        return Target(measure, f"< {text}", f"< {text}" if met else f"{text} or more", met)
    _check_share(value, f"the share of {measure!r}")
    goal = _percent_goal(ceiling, digits, measure)
    return Target(measure, f"< {_text(goal)} %", _shown(value, goal, met, digits), met)


def with_floor(target: Target, share: float, floor: float, why: str, digits: int = 1) -> Target:
    """`target` (a share's, from `share_target`) with a floor: `share` must reach `floor` (a
    share, below the goal), for the reason `why`. `check` asserts the floor instead of the goal."""
    if not 0 <= floor <= 1:
        raise ValueError(f"the floor of a share must be in [0, 1], got {floor} for {target.measure!r}")
    _check_share(share, f"the share of {target.measure!r}")
    goal = _percent_goal(floor, digits, target.measure)
    return dataclasses.replace(target, floor=Floor(f">= {_text(goal)} %", bool(share >= floor), why))


def count_target(measure: str, count: int, total: int, goal: int | None = None) -> Target:
    """`count` of `total` that must be exactly `goal` (all of them unless given): goal
    "4 of 4" or "0 of 8", measured "3 of 4"."""
    try:
        count, total = operator.index(count), operator.index(total)
        goal = total if goal is None else operator.index(goal)
    except TypeError:
        raise ValueError(f"counts must be whole numbers, got {count!r} of {total!r} (goal {goal!r}) "
                         f"for {measure!r}") from None
    if not (0 <= count <= total and 0 <= goal <= total):
        raise ValueError(f"count {count} and goal {goal} must be in [0, {total}] for {measure!r}")
    return Target(measure, f"{goal} of {total}", f"{count} of {total}", count == goal)


def all_met(targets: Iterable[Target]) -> bool:
    """True when no target of the model is missed: the same verdict as `check`'s. Rows without
    a goal and machine rows (a time over its budget says "over") are not judged."""
    targets = list(targets)
    if not targets:
        raise ValueError("no targets to judge")
    return not missed(targets)


def missed(targets: Iterable[Target]) -> list[str]:
    """The measures of the model's targets that are not met (machine rows are not judged)."""
    return [t.measure for t in targets if t.met is False and not t.machine]


def over(targets: Iterable[Target]) -> list[str]:
    """The machine rows over their budget on the machine that ran them: reported, not judged."""
    return [t.measure for t in targets if t.met is False and t.machine]


class Table(str):
    """A table that is its plain text (what a terminal prints, what tests and nbval compare)
    and that a notebook shows as an HTML table: its columns wrap to fit the page, and a
    "met" column stays in view (and in colour) however narrow the page is.

    Made by `format_table`; `header` and `rows` keep the cells."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def __new__(cls, rows: Iterable[Sequence], header: Sequence[str]) -> Table:
        rows = tuple(tuple(str(c) for c in r) for r in rows)
        header = tuple(str(h) for h in header)
        if any(len(r) != len(header) for r in rows):
            raise ValueError(f"every row needs {len(header)} cells, one per column of {header}")
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

        def line(r):
            return "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()

        text = "\n".join([line(header), line(tuple("-" * w for w in widths)), *map(line, rows)])
        table = super().__new__(cls, text)
        table.header, table.rows = header, rows
        return table

    def __reduce__(self):  # copies and pickles rebuild it from its cells
        return Table, (self.rows, self.header)

    def _repr_pretty_(self, printer, cycle: bool) -> None:  # IPython's text/plain: the text, not its repr
        printer.text(str(self))

    def _repr_html_(self) -> str:
        from html import escape

        met = [h == "met" for h in self.header]

        def cell(tag: str, text: str, column: int) -> str:
            classes = []
            if met[column]:
                classes.append("met" + {"yes": "-yes", "NO": "-no", "over": "-over"}.get(text, ""))
            elif tag == "td" and _NUMBER.fullmatch(text):
                classes.append("num")
            attribute = f' class="{" ".join(classes)}"' if classes else ""
            return f"<{tag}{attribute}>{escape(text)}</{tag}>"

        head = "".join(cell("th", h, i) for i, h in enumerate(self.header))
        body = "".join("<tr>" + "".join(cell("td", c, i) for i, c in enumerate(r)) + "</tr>" for r in self.rows)
        return f'<div class="toy-table"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


_NUMBER = re.compile(r"[-+<>=~ ]*[\d.,]+ ?(%|s|ms|min|x)?")  # a cell to right-align: "98.50 %", "1,204", "75 s"


def format_table(rows: Iterable[Sequence], header: Sequence[str]) -> Table:
    """A table of `rows` under `header` (any values; each cell is its str): plain text for the
    terminal and for nbval to compare, shown as HTML in a notebook (`Table`)."""
    return Table(rows, header)


def config_table(config, header: Sequence[str] = ("setting", "value")) -> Table:
    """A config dataclass as a table of its settings, one row each (its repr is one line,
    thousands of pixels long on the page)."""
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise ValueError(f"config_table takes a dataclass instance, got {type(config).__name__}")
    return Table([(f.name, repr(getattr(config, f.name))) for f in dataclasses.fields(config)], header)


def table(targets: Iterable[Target], machine: bool | None = False) -> Table:
    """The summary as text: the machine-independent rows (machine=False, the default, what
    nbval compares), the machine-dependent ones (True), or all of them (None)."""
    rows = [t for t in targets if machine is None or t.machine == machine]
    return format_table([(t.measure, goal_text(t), measured_text(t), t.verdict) for t in rows], HEADER)


def measured_text(target: Target) -> str:
    """A row's value as the summary shows it, with the machine of a machine row:
    "126 s on AMD EPYC, 1 thread, the ordinary profile (AVX2)"."""
    return f"{target.measured} on {target.where}" if target.where else target.measured


def goal_text(target: Target) -> str:
    """A row's goal as the summary shows it, with its floor where it has one: ">= 99 %, floor 97.7 %"."""
    return target.goal if target.floor is None else f"{target.goal}, floor {target.floor.goal.removeprefix('>= ')}"


class ClaimError(AssertionError):
    """A chapter's target missed, or a sentence of its prose false for the numbers just computed."""


def check(
    targets: Iterable[Target] = (),
    claims: Mapping[str, bool] | None = None,
) -> str:
    """What a chapter asserts when it runs: every target in `targets` is met, and every claim
    of its prose holds. Raises `ClaimError` naming each failure; returns one line saying what
    was checked, the same on every machine (the notebook prints it, and nbval compares it).

    targets: the summary's rows. Rows with no goal (met=None) say nothing to check. Rows that
        measure the machine (a training time) are not asserted: they depend on the CPU and on
        what else runs beside the chapter (the test command runs chapters side by side), not
        on the model; the summary prints them, and the benchmark reports them per seed.
        A target with a `floor` (a goal not yet met on every seed) has its floor asserted
        instead of its goal.
    claims: {sentence of the prose, as a checkable statement: whether it holds}.
    """
    targets, claims = list(targets), dict(claims or {})
    bad = [f"claim {name!r}: {holds!r} is not a bool" for name, holds in claims.items()
           if not isinstance(holds, (bool, np.bool_))]
    if bad:
        raise ValueError("; ".join(bad))
    judged = [t for t in targets if t.met is not None and not t.machine]
    asserted = [t for t in judged if t.floor is None]
    floored = [t for t in judged if t.floor is not None]
    failures = [f"target missed: {t.measure} (goal {t.goal}, measured {t.measured})" for t in asserted if not t.met]
    failures += [f"floor missed: {t.measure} (floor {t.floor.goal}, {t.floor.why}; measured {t.measured})"
                 for t in floored if not t.floor.met]
    failures += [f"claim false: {name}" for name, holds in claims.items() if not holds]
    if failures:
        raise ClaimError("\n".join(failures))
    parts = []
    if asserted:
        parts.append(f"{len(asserted)} target{'s' * (len(asserted) != 1)} met")
    if floored:
        parts.append(f"{len(floored)} floor{'s' * (len(floored) != 1)} held")
    if claims:
        parts.append("1 claim holds" if len(claims) == 1 else f"{len(claims)} claims hold")
    return "checked: " + "; ".join(parts) if parts else "checked: nothing"
