"""The on-chip knapsack (§7.3): the same choice as the dense DP table, at a cost independent of the capacity."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcaccel.dag import generators as gen
from dcaccel.scheduler import schedule
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


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(st.tuples(st.integers(1, 40), st.integers(1, 60)), max_size=8),
    capacity=st.integers(0, 120),
)
def test_same_choice_as_the_dense_table(items, capacity):
    weights, values = [w for w, _ in items], [v for _, v in items]
    assert _knapsack(weights, values, capacity) == dense_knapsack(weights, values, capacity)


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
