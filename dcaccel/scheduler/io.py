"""I/O volume of a schedule (``STREAMING_MODEL.md`` §7): off-chip, on-chip and streamed elements.

* Buffer I/O (§7.1): what every buffer node receives and sends, pseudo-node edges excluded; it
  does not depend on the schedule (:func:`dcaccel.dag.io_volume`).
* Global I/O (§7.2): an edge that streams into a task moves its elements once from PE to PE
  (counted twice, as a write and a read, in ``streamed``); every other edge is written to memory
  and read back, each side on chip when its end node is placed on chip, off chip otherwise.
* On-chip placement (§7.3): per block, the buffer nodes of the block compete for the on-chip
  capacity (in elements): a 0/1 knapsack with the buffer's input volume as weight and its total
  traffic as value. Each block gets the whole capacity; the knapsack's cost follows the number of
  distinct weights the block's buffers can add up to, never the capacity: every row of the table is a
  numpy step function, built from the previous row by one linear merge.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from dcaccel.scheduler.graph import CanonicalGraph
from dcaccel.scheduler.order import python_set_order


@dataclass(frozen=True)
class IOVolume:
    """I/O of one schedule for one on-chip capacity (all volumes in elements)."""

    buffer: int  # §7.1: Σ over buffer nodes of volume in + out (the seed table's "I/Os")
    off_chip: int  # §7.2: elements read or written off chip
    on_chip: int  # §7.2: elements read or written on chip
    streamed: int  # §7.2: elements moved on streaming edges (counted at both ends)
    onchip_capacity: int  # on-chip memory per block, in elements
    onchip_buffers: tuple[int, ...]  # buffer nodes placed on chip, ascending


def onchip_placement(g: CanonicalGraph, blocks: list[list[int]], capacity: int) -> set[int]:
    """The buffer nodes placed on chip: per block, the knapsack choice of §7.3."""
    chosen: set[int] = set()
    if capacity <= 0:
        return chosen
    vol = g.vol
    for block in blocks:
        items = python_set_order(g, [v for v in block if g.is_buffer[v]])
        if not items:
            continue
        weights = [g.in_volume[b] for b in items]
        values = [sum(vol[e] for e in g.into(b)) + sum(vol[e] for e in g.out_of(b)) for b in items]
        chosen.update(items[i] for i in _knapsack(weights, values, capacity))
    return chosen


#: Rows with at least this many steps are merged with numpy; shorter ones in Python, where numpy's
#: per-call overhead would dominate (the many small blocks of a streaming schedule).
NUMPY_ROW_STEPS = 64


def _knapsack(weights: list[int], values: list[int], capacity: int) -> list[int]:
    """Indices of the items the 0/1 knapsack DP table takes, traced back from the last item (an item
    is taken where its row improves strictly on the previous one), in descending order.

    Row i of the table, ``best_i(c)`` (the most value of the first i items within weight c), is a
    non-decreasing step function of c and is kept as its steps (weights where it rises strictly, and
    its values there), so that time and memory follow the number of steps, never the capacity. A row
    is built from the previous one by one linear merge: in Python while short, then as numpy arrays
    of the narrowest unsigned type that holds the capacity and the total value. The trace-back reads
    row i only at weights of at least ``capacity`` minus the weights of items i.. that fit (what the
    later items can have taken), so each row keeps only the steps from the one in force there."""
    if sum(weights) <= capacity:
        return list(range(len(weights)))
    dtype = np.min_scalar_type(max(capacity, sum(values)))  # object beyond 64 bits
    fits = [weight <= capacity for weight in weights]
    lowest = [0] * len(weights)  # lowest[i]: the least weight at which the trace-back reads row i + 1
    later = 0
    for i in range(len(weights) - 1, -1, -1):
        lowest[i] = capacity - later
        later += weights[i] if fits[i] else 0
    row = ([0], [0])  # best_0: 0 from weight 0 on
    rows = [row]
    for i, (weight, value) in enumerate(zip(weights, values, strict=True)):
        if fits[i]:
            if isinstance(row[0], list) and len(row[0]) >= NUMPY_ROW_STEPS:
                row = (np.array(row[0], dtype), np.array(row[1], dtype))
            add_item = _add_item if isinstance(row[0], np.ndarray) else _add_item_short
            row = add_item(*row, weight, value, capacity, max(lowest[i], 0))
        rows.append(row)
    taken = []
    room = capacity
    for i in range(len(weights) - 1, -1, -1):
        at, best = rows[i]
        weight = weights[i]
        if weight <= room and _step(at, best, room - weight) + values[i] > _step(at, best, room):
            taken.append(i)
            room -= weight
    return taken


def _add_item(
    at: np.ndarray, best: np.ndarray, weight: int, value: int, capacity: int, lowest: int
) -> tuple[np.ndarray, np.ndarray]:
    """The next row, ``max(best(c), best(c - weight) + value)`` for c <= ``capacity``, as its steps from
    the one in force at ``lowest`` on. Both terms are sorted step functions: merged by position (two
    sorted runs), their running maximum is the new row at every step of either, of which it keeps the
    last per position and then only the strict rises."""
    shifted = at <= capacity - weight
    merged_at = np.concatenate((at, at[shifted] + weight))
    order = np.argsort(merged_at, kind="stable")
    merged_at = merged_at[order]
    reached = np.maximum.accumulate(np.concatenate((best, best[shifted] + value))[order])
    last = np.append(merged_at[1:] != merged_at[:-1], True)
    merged_at, reached = merged_at[last], reached[last]
    rises = np.insert(reached[1:] > reached[:-1], 0, True)
    merged_at, reached = merged_at[rises], reached[rises]
    first = max(int(np.searchsorted(merged_at, lowest, "right")) - 1, 0)
    return merged_at[first:], reached[first:]


def _add_item_short(
    at: list[int], best: list[int], weight: int, value: int, capacity: int, lowest: int
) -> tuple[list[int], list[int]]:
    """:func:`_add_item` on Python lists, for short rows: the same merge, one step at a time."""
    shifted = bisect.bisect_right(at, capacity - weight)
    steps_at: list[int] = []
    steps_best: list[int] = []
    i = j = 0
    running = -1
    while i < len(at) or j < shifted:
        if j == shifted or (i < len(at) and at[i] <= at[j] + weight):
            c, reached = at[i], best[i]
            i += 1
        else:
            c, reached = at[j] + weight, best[j] + value
            j += 1
        if reached > running:
            running = reached
            if steps_at and steps_at[-1] == c:
                steps_best[-1] = running
            else:
                steps_at.append(c)
                steps_best.append(running)
    first = max(bisect.bisect_right(steps_at, lowest) - 1, 0)
    return steps_at[first:], steps_best[first:]


def _step(at: list[int] | np.ndarray, best: list[int] | np.ndarray, c: int) -> int:
    """The value of the step function (``at``, ``best``) at weight ``c`` (>= its first step)."""
    return int(best[bisect.bisect_right(at, c) - 1])


def global_io(g: CanonicalGraph, streaming: bytearray, onchip: set[int]) -> tuple[int, int, int]:
    """``(off_chip, on_chip, streamed)`` of §7.2 for the final streaming flags and on-chip buffers: an edge
    that streams into a task counts twice in ``streamed``, every other edge once at each end, on chip at
    an end placed on chip (summed over the on-chip buffers' edges), off chip at the others."""
    dst, vol, is_buffer = g.dst, g.vol, g.is_buffer
    streams = {e for e in np.flatnonzero(np.frombuffer(streaming, np.uint8)).tolist() if not is_buffer[dst[e]]}
    streamed = sum(vol[e] for e in streams)
    stored = g.derived.get("volume")
    if stored is None:
        stored = g.derived["volume"] = sum(vol)
    stored -= streamed
    on = 0
    for b in onchip:
        on += sum(vol[e] for e in g.into(b) if e not in streams) + sum(vol[e] for e in g.out_of(b) if e not in streams)
    return 2 * stored - on, on, 2 * streamed
