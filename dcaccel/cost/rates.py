"""An architecture's rates as exact ratios, and the cycles a task's run takes at them.

A throughput (elements per cycle), a MAC rate (operations per cycle) or a bandwidth (bytes per cycle)
is kept as ``(numerator, denominator)`` with a denominator of at most :data:`DENOMINATOR` (exact for
the decimal values of a YAML file), so that every count of cycles is an exact ceiling. ``None`` is an
unlimited rate: anything takes 0 cycles at it. The HEFT scheduler places tasks by these run times and
the schedule costing (:mod:`dcaccel.cost.schedule`) re-times them with the same rule.
"""

from __future__ import annotations

from fractions import Fraction

#: Largest denominator a throughput or bandwidth is approximated with (exact for decimal YAML values).
DENOMINATOR = 1 << 20
#: The rate of one element per cycle (the abstract model's), as :func:`ratio` writes it.
ONE_PER_CYCLE = (1, 1)

Rate = tuple[int, int] | None


def ratio(value: float | None) -> Rate:
    """A rate as an exact ratio (numerator, denominator); None stays unlimited."""
    if value is None:
        return None
    fraction = Fraction(value).limit_denominator(DENOMINATOR)
    return fraction.numerator, fraction.denominator


def cycles(amount: int, rate: Rate) -> int:
    """⌈amount / rate⌉ (0 for an unlimited rate)."""
    if rate is None or amount == 0:
        return 0
    return -(-amount * rate[1] // rate[0])


def run_cycles(abstract: int, operations: int, throughput: Rate, mac_rate: Rate) -> int:
    """A task's run on a unit: ``max(⌈abstract / throughput⌉, ⌈operations / MAC rate⌉)`` cycles, its
    ``abstract`` cycles being those of the one-element-per-cycle model and ``operations`` its arithmetic."""
    runs = abstract if throughput == ONE_PER_CYCLE else cycles(abstract, throughput)
    if mac_rate is None:
        return runs
    at_rate = cycles(operations, mac_rate)
    return at_rate if at_rate > runs else runs
