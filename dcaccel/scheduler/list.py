"""The list scheduler (non-streaming): every task starts after all its predecessors have finished.

Tasks are taken in priority order — the topological order TOPO (§0.2) stably sorted by upward rank,
highest first — and each goes to the PE where it finishes earliest (the first such PE on ties).
With ``insertion=True`` a task may fill an idle gap left earlier on a PE (the insertion rule of
§4.3); this is the reference's EFT baseline (§6.1) and gives its ``eft_makespan``. With
``insertion=False`` a task only goes after the last task of a PE. ``bandwidth`` (elements per
cycle) adds ``ceil(volume / bandwidth)`` cycles to an edge whose two ends run on different PEs.

The reference scans every PE for every task. Here a segment tree over the PEs' last end times
answers "first PE free by time t" and "first PE free earliest" in O(log P), and only PEs whose last
idle gap ends late enough to hold the task (found by bisection in a list of the PEs with gaps sorted by
that end) are examined one by one (by bisection in their gap lists), which gives the same choices.
"""

from __future__ import annotations

import bisect
import math

from dcaccel.scheduler.graph import CanonicalGraph
from dcaccel.scheduler.timeline import Timing

_HEAD = -1  # lower end of the gap before a PE's first event: a task there must end strictly before it
_INF = math.inf


def priority_order(g: CanonicalGraph) -> list[int]:
    """TOPO(G) stably sorted by upward rank (own cost plus the most expensive path below), highest first;
    computed once per graph (it does not depend on P)."""
    order = g.derived.get("priority")
    if order is None:
        order = g.derived["priority"] = _priority_order(g)
    return order


def _priority_order(g: CanonicalGraph) -> list[int]:
    cost, dst = g.cost, g.dst
    order = g.dag.topological_order()
    rank = [0] * g.n
    out_start, out_edges = g.out_start, g.out_edges
    for v in reversed(order):
        below = 0
        for e in out_edges[out_start[v] : out_start[v + 1]]:
            r = rank[dst[e]]
            if r > below:
                below = r
        rank[v] = cost[v] + below
    return sorted(order, key=rank.__getitem__, reverse=True)


class _FreeTimes:
    """Segment tree over the PEs' last end times: leftmost PE free by a time, leftmost earliest free."""

    def __init__(self, pes: int):
        size = 1
        while size < pes:
            size *= 2
        self.size = size
        self.tree = [_INF] * (2 * size)
        for p in range(pes):
            self.tree[size + p] = -1
        for i in range(size - 1, 0, -1):
            self.tree[i] = min(self.tree[2 * i], self.tree[2 * i + 1])

    def set(self, p: int, value: int) -> None:
        tree = self.tree
        i = self.size + p
        tree[i] = value
        i //= 2
        while i:
            best = min(tree[2 * i], tree[2 * i + 1])
            if tree[i] == best:
                break
            tree[i] = best
            i //= 2

    def first_free_by(self, t: int) -> int:
        """The lowest PE whose last event ends by ``t`` (-1 if none)."""
        tree = self.tree
        if tree[1] > t:
            return -1
        i = 1
        while i < self.size:
            i = 2 * i if tree[2 * i] <= t else 2 * i + 1
        return i - self.size

    def earliest(self) -> tuple[int, int]:
        """(time, PE): the lowest PE among those whose last event ends first."""
        tree = self.tree
        i = 1
        while i < self.size:
            i = 2 * i if tree[2 * i] <= tree[2 * i + 1] else 2 * i + 1
        return tree[i], i - self.size


class _Processors:
    """The PEs' event lists, their idle gaps and the free-time tree."""

    def __init__(self, pes: int, insertion: bool):
        self.pes = pes
        self.insertion = insertion
        self.last_end = [-1] * pes
        self.free = _FreeTimes(pes)
        # Events per PE sorted by (end, start); as they never overlap, starts are sorted too.
        self.starts: list[list[int]] = [[] for _ in range(pes)]
        self.ends: list[list[int]] = [[] for _ in range(pes)]
        self.gap_lo: list[list[int]] = [[] for _ in range(pes)]
        self.gap_hi: list[list[int]] = [[] for _ in range(pes)]
        self.last_gap_end: list[float] = [-_INF] * pes  # upper end of every PE's last gap (-inf: no gap)
        self.gap_ends: list[tuple[int, int]] = []  # (last gap's upper end, PE) of the PEs with gaps, ascending

    def start_on(self, p: int, est: int, duration: int) -> int:
        """Where the placement rule puts a task of ``duration`` ready at ``est`` on PE ``p``."""
        tail = max(est, self.last_end[p])
        if not self.insertion:
            return tail
        if duration == 0:
            return self._zero_start(p, est)
        gap = self._gap_start(p, est, duration)
        return tail if gap is None else min(gap, tail)

    def _zero_start(self, p: int, est: int) -> int:
        """Start of a zero-length node on PE ``p``: ``est`` unless it falls strictly inside an event
        (or on the start of the first one), then the end of that event."""
        starts, ends = self.starts[p], self.ends[p]
        if not starts or starts[0] > est:
            return est
        k = bisect.bisect_right(ends, est)
        if k >= 1 and (k == len(ends) or starts[k] >= est):
            return est
        return ends[k]

    def _gap_start(self, p: int, est: int, duration: int) -> int | None:
        """Earliest start from ``est`` in an idle gap of PE ``p`` (None if no gap holds the task). A
        gap ``(lo, hi)`` lies between an event ending at lo and one starting at hi; before the first
        event (lo = _HEAD) the task must end strictly before hi."""
        lows, highs = self.gap_lo[p], self.gap_hi[p]
        if not lows or highs[-1] < est + duration:
            return None
        i = bisect.bisect_right(lows, est) - 1
        if i >= 0:
            if est + duration < highs[i] or (lows[i] != _HEAD and est + duration == highs[i]):
                return est
        for j in range(i + 1, len(lows)):
            if highs[j] - lows[j] >= duration:
                return lows[j]
        return None

    def best(self, est: int, duration: int) -> tuple[int, int]:
        """(start, PE) with the earliest start over all PEs (the lowest PE on ties)."""
        p_free = self.free.first_free_by(est)
        best_start, best_pe = (est, p_free) if p_free >= 0 else self.free.earliest()
        if not self.insertion:
            return max(best_start, est), best_pe
        if duration == 0:
            for p in range(p_free if p_free >= 0 else self.pes):
                start = self._zero_start(p, est)
                if start < best_start or (start == best_start and p < best_pe):
                    best_start, best_pe = start, p
                    if start == est:
                        break
            return best_start, best_pe
        # A PE whose last gap ends before est + duration has no gap that holds the task (_gap_start): the
        # others, in PE order (most tasks find none).
        gap_ends = self.gap_ends
        if not gap_ends or gap_ends[-1][0] < est + duration:
            return best_start, best_pe
        for p in sorted([p for _, p in gap_ends[bisect.bisect_left(gap_ends, (est + duration, -1)) :]]):
            if best_start == est and p >= best_pe:
                break
            start = self._gap_start(p, est, duration)
            if start is not None and (start < best_start or (start == best_start and p < best_pe)):
                best_start, best_pe = start, p
        return best_start, best_pe

    def _insert(self, p: int, start: int, end: int) -> None:
        """Record the event ``[start, end)`` on PE ``p`` when it does not follow all of its events: by
        bisection, splitting the gap it falls in."""
        starts, ends = self.starts[p], self.ends[p]
        first_start = starts[0] if starts else None
        index = bisect.bisect_right(ends, end)
        while index and ends[index - 1] == end and starts[index - 1] > start:
            index -= 1
        starts.insert(index, start)
        ends.insert(index, end)
        lows, highs = self.gap_lo[p], self.gap_hi[p]
        if first_start is None:
            if start >= 1:
                lows.append(_HEAD)
                highs.append(start)
            return
        i = bisect.bisect_right(lows, start) - 1
        if i >= 0 and start <= highs[i] and (lows[i] != _HEAD or start < highs[i]):
            lo, hi = lows[i], highs[i]
            pieces = []
            if lo == _HEAD:
                if start >= 1:
                    pieces.append((_HEAD, start))
            elif start > lo:
                pieces.append((lo, start))
            if hi > end:
                pieces.append((end, hi))
            lows[i : i + 1] = [a for a, _ in pieces]
            highs[i : i + 1] = [b for _, b in pieces]

    def place(self, p: int, start: int, end: int) -> None:
        """Record the event ``[start, end)`` on PE ``p`` and update its gaps."""
        if end > self.last_end[p]:
            last = self.last_end[p]
            self.last_end[p] = end
            self.free.set(p, end)
        else:
            last = None
        if not self.insertion:
            return
        starts, ends = self.starts[p], self.ends[p]
        lows, highs = self.gap_lo[p], self.gap_hi[p]
        if last is not None and starts and start >= last:
            # After the PE's last event (most tasks): appended, with the gap it leaves before it if any.
            starts.append(start)
            ends.append(end)
            if start == last:
                return
            lows.append(last)
            highs.append(start)
        else:
            self._insert(p, start, end)
        before, after = self.last_gap_end[p], highs[-1] if highs else -_INF
        if after != before:
            self.last_gap_end[p] = after
            gap_ends = self.gap_ends
            if before != -_INF:
                del gap_ends[bisect.bisect_left(gap_ends, (before, p))]
            if after != -_INF:
                bisect.insort(gap_ends, (after, p))


def list_schedule(
    g: CanonicalGraph, pes: int, insertion: bool = True, bandwidth: float | None = None
) -> tuple[Timing, list[int]]:
    """Schedule ``g`` on ``pes`` PEs (see module docstring); returns the timing and the priority order."""
    n = g.n
    pe = [-1] * n
    start = [0] * n
    end = [0] * n
    src, vol, cost = g.src, g.vol, g.cost
    in_start, in_edges = g.in_start, g.in_edges
    processors = _Processors(pes, insertion)
    best, place, predecessors = processors.best, processors.place, g.predecessors()
    order = priority_order(g)
    for v in order:
        duration = cost[v]
        if bandwidth is None:
            est = 0
            for p in predecessors[v]:
                if end[p] > est:
                    est = end[p]
            begin, where = best(est, duration)
        else:
            preds = in_edges[in_start[v] : in_start[v + 1]]
            begin, where = _best_with_transfers(processors, preds, src, vol, pe, end, duration, bandwidth)
        pe[v], start[v], end[v] = where, begin, begin + duration
        place(where, begin, begin + duration)
    return Timing(pe, start, end, end.copy()), list(order)


def _best_with_transfers(processors: _Processors, preds, src, vol, pe, end, duration, bandwidth) -> tuple[int, int]:
    """(start, PE) when an edge between two PEs costs ``ceil(volume / bandwidth)`` cycles: the PEs
    hosting a predecessor are evaluated one by one, all others share the latest arrival time."""
    arrival = 0
    for e in preds:
        arrival = max(arrival, end[src[e]] + math.ceil(vol[e] / bandwidth))
    candidates = [processors.best(arrival, duration)]
    for host in sorted({pe[src[e]] for e in preds}):
        est = 0
        for e in preds:
            p = src[e]
            est = max(est, end[p] if pe[p] == host else end[p] + math.ceil(vol[e] / bandwidth))
        candidates.append((processors.start_on(host, est, duration), host))
    return min(candidates)
