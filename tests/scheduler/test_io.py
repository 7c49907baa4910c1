"""The on-chip knapsack (§7.3): the same choice as the dense DP table, at a cost independent of the capacity,
and the same choice as the earlier pure-Python step-function implementation on every input."""

from __future__ import annotations

import bisect
import tracemalloc
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcaccel.dag import generators as gen
from dcaccel.scheduler import io, schedule
from dcaccel.scheduler.io import _knapsack


def dense_knapsack(weights: list[int], values: list[int], capacity: int) -> list[int]:
    """The textbook table (one row per item, one column per weight 0..capacity), traced back from
    the last item: an item is taken where its row improves on the previous one."""
    if sum(weights) <= capacity:
        return list(range(len(weights)))
    best = [0] * (capacity + 1)
    improves = []
    for weight, value in zip(weights, values, strict=True):
        row = [False] * (capacity + 1)
        updated = best.copy()
        for c in range(weight, capacity + 1):
            if best[c - weight] + value > best[c]:
                row[c] = True
                updated[c] = best[c - weight] + value
        improves.append(row)
        best = updated
    taken, room = [], capacity
    for i in range(len(weights) - 1, -1, -1):
        if improves[i][room]:
            taken.append(i)
            room -= weights[i]
    return taken


def bisect_knapsack(weights: list[int], values: list[int], capacity: int) -> list[int]:
    """The previous implementation of ``_knapsack`` (Python lists, one sort and two bisections per
    candidate step), kept as the reference the faster one must agree with on every input."""
    if sum(weights) <= capacity:
        return list(range(len(weights)))

    def step(at, best, c):
        return best[bisect.bisect_right(at, c) - 1]

    rows = [([0], [0])]
    for weight, value in zip(weights, values, strict=True):
        at, best = rows[-1]
        if weight > capacity:
            rows.append(rows[-1])
            continue
        candidates = sorted({*at, *(c + weight for c in at if c + weight <= capacity)})
        steps_at, steps_best = [], []
        for c in candidates:
            reached = max(step(at, best, c), step(at, best, c - weight) + value if c >= weight else -1)
            if not steps_best or reached > steps_best[-1]:
                steps_at.append(c)
                steps_best.append(reached)
        rows.append((steps_at, steps_best))
    taken, room = [], capacity
    for i in range(len(weights) - 1, -1, -1):
        at, best = rows[i]
        if weights[i] <= room and step(at, best, room - weights[i]) + values[i] > step(at, best, room):
            taken.append(i)
            room -= weights[i]
    return taken


def item_lists(max_weight: int, max_value: int, max_size: int):
    """Items as (weight, value) pairs, zero weights and values included."""
    return st.lists(st.tuples(st.integers(0, max_weight), st.integers(0, max_value)), max_size=max_size)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(items=item_lists(40, 60, 10), capacity=st.integers(0, 120))
def test_same_choice_as_the_dense_table(items, capacity):
    weights, values = [w for w, _ in items], [v for _, v in items]
    taken = _knapsack(weights, values, capacity)
    assert taken == dense_knapsack(weights, values, capacity)
    assert taken == bisect_knapsack(weights, values, capacity)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(items=item_lists(40, 60, 10), capacity=st.integers(0, 120), numpy_from=st.sampled_from([0, 1, 3, 10**9]))
def test_same_choice_by_either_merge(items, capacity, numpy_from):
    """Rows merged in numpy from the first (0), after a few steps, or never: the same choice."""
    weights, values = [w for w, _ in items], [v for _, v in items]
    with mock.patch.object(io, "NUMPY_ROW_STEPS", numpy_from):
        assert _knapsack(weights, values, capacity) == dense_knapsack(weights, values, capacity)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    items=st.lists(st.tuples(st.integers(0, 600).map(lambda w: 8 * w), st.integers(0, 10**6)), max_size=30),
    fill=st.floats(0, 1),
)
def test_same_choice_as_before_on_many_items(items, fill):
    """Many items of few distinct weights (multiples of 8, as the buffers of a network): many steps."""
    weights, values = [w for w, _ in items], [v for _, v in items]
    capacity = int(sum(weights) * fill)
    assert _knapsack(weights, values, capacity) == bisect_knapsack(weights, values, capacity)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    items=st.lists(st.tuples(st.integers(0, 2**66), st.integers(0, 2**70)), max_size=8),
    capacity=st.integers(0, 2**66),
)
def test_same_choice_as_before_beyond_64_bits(items, capacity):
    """Weights, capacities and total values beyond what a 64-bit integer holds."""
    weights, values = [w for w, _ in items], [v for _, v in items]
    assert _knapsack(weights, values, capacity) == bisect_knapsack(weights, values, capacity)


@pytest.mark.parametrize(
    ("weights", "values", "capacity", "taken"),
    [
        ([], [], 0, []),  # nothing to place
        ([], [], 7, []),
        ([3, 4], [5, 6], 0, []),  # no room at all
        ([0, 0, 5], [2, 3, 4], 0, [1, 0]),  # weightless items fit even without room
        ([0, 5, 5], [0, 4, 4], 5, [1]),  # a weightless item of no value is never taken
        ([2, 3, 4], [0, 0, 0], 5, []),  # items of no value are never taken
        ([9, 12], [5, 6], 8, []),  # every item heavier than the capacity
        ([9, 4, 12, 3], [50, 2, 60, 1], 8, [3, 1]),  # the heavy items are skipped, the rest all fit
        ([4, 4, 4], [7, 7, 7], 8, [1, 0]),  # ties: an item is taken only where its row improves strictly,
        ([5, 5], [3, 3], 5, [0]),  # so the earlier items win
        ([2, 3, 5], [3, 4, 7], 5, [1, 0]),  # 2 + 3 ties 5 in value
        ([3, 4, 5], [4, 5, 6], 7, [1, 0]),
        ([5, 4, 3], [6, 5, 4], 7, [2, 1]),
        ([2**64, 1, 2**63], [2**65, 1, 2**64], 2**64, [0]),  # beyond 64 bits
        ([2**64, 1, 2**63], [2**65, 1, 2**65], 2**64, [2, 1]),
    ],
)
def test_degenerate_and_tied_choices(weights, values, capacity, taken):
    assert _knapsack(weights, values, capacity) == taken
    assert bisect_knapsack(weights, values, capacity) == taken
    if capacity <= 100:
        assert dense_knapsack(weights, values, capacity) == taken


@pytest.mark.parametrize("capacity", [10**12, 2**62])
def test_huge_capacity_costs_nothing(capacity):
    weights, values = [capacity, capacity // 2, capacity // 2 - 1], [3, 2, 2]
    tracemalloc.start()
    try:
        taken = _knapsack(weights, values, capacity)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sorted(taken) == [1, 2]  # value 4 beats the single item of value 3
    assert peak < 100_000  # bytes; a table over the capacity would need terabytes


def test_schedule_with_a_huge_onchip_capacity():
    dag = gen.mmm("op", 2, 3, 2)
    result = schedule(dag, 2, onchip=10**15)
    assert result.io.onchip_capacity == 10**15
    assert result.io.off_chip + result.io.on_chip + result.io.streamed > 0
