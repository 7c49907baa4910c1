"""Gang scheduling (``STREAMING_MODEL.md`` §4): the blocks run one after another, all tasks of a
block together, each on its own PE.

Within a block, nodes are placed in the block's topological order (TOPO, §0.2); the i-th task
goes to PE i, a buffer node to the PE of one of its predecessors, pseudo nodes to the current PE.
No task of a block starts before the previous block has finished. A task may start as soon as
every non-streaming predecessor has finished and every streaming predecessor on another PE has
produced its first element. Its duration follows from the streaming intervals of its edges.

Reference behaviour kept by default (``reference=True``), see ``docs/scheduler.md``:

* a buffer node goes to the PE of its *last-listed* predecessor (§8 B1); ``reference=False``
  takes the latest-finishing one, as the reference intended;
* the upsampler correction and the downsampler's first output use double-precision ratios
  (§8 B6); ``reference=False`` computes them exactly.
"""

from __future__ import annotations

import bisect
import math

from dcaccel.scheduler.graph import CanonicalGraph
from dcaccel.scheduler.intervals import Intervals
from dcaccel.scheduler.order import induced_topological_orders
from dcaccel.scheduler.timeline import Timing, insertion_start

_BASE_LATENCY = 1
_SENTINEL = (-1, -1)  # stands for all events of earlier blocks, which end before the current block starts


def _ceil_ratio_minus_one(num: int, den: int, scale_num: int, scale_den: int, reference: bool) -> int:
    """ceil((num/den - 1) * scale), with the reference's double arithmetic or exactly."""
    if reference:
        return math.ceil((num / den - 1.0) * (scale_num / scale_den))
    return -(-(num - den) * scale_num // (den * scale_den))


def task_duration(g: CanonicalGraph, v: int, intervals: Intervals, reference: bool = True) -> tuple[int, int]:
    """D(v) of §4.2 as an exact ratio ``(numerator, denominator)``: the time ``v`` occupies its PE
    given the streaming intervals of its edges; 0 for pseudo and buffer nodes."""
    if v == g.source or v == g.pseudo_sink or g.is_buffer[v]:
        return 0, 1
    vol, num, den = g.vol, intervals.num, intervals.den
    in_edges = g.in_edges[g.in_start[v] : g.in_start[v + 1]]
    best_num, best_den = 0, 1
    for e in in_edges:
        a, b = num[e], den[e]
        candidate = (a if a > b else b) * (vol[e] - 1)
        if candidate * best_den > best_num * b:
            best_num, best_den = candidate, b
    first_out = g.out_start[v]
    if first_out < g.out_start[v + 1]:
        volume_in, volume_out = g.in_volume[v], g.out_volume[v]
        e = g.out_edges[first_out]
        out_num, out_den = num[e] * (volume_out - 1), den[e]
        if out_num * best_den > best_num * out_den:
            best_num, best_den = out_num, out_den
        if volume_out > volume_in:
            last = in_edges[-1]
            a, b = num[last], den[last]
            if out_num * b < (a if a > b else b) * (volume_in - 1) * out_den:
                best_num += best_den * _ceil_ratio_minus_one(volume_out, volume_in, num[e], den[e], reference)
    return best_num + _BASE_LATENCY * best_den, best_den


def first_output_time(g: CanonicalGraph, v: int, start: int, end: int, intervals: Intervals, reference: bool = True):
    """f(v) of §4.4: when ``v`` emits its first element: 0 for the pseudo source; its end for the
    exit and buffer nodes; for a downsampler, once it has read enough input for one output element
    (at the slowest input interval); else one cycle after it starts."""
    if v == g.source:
        return 0
    if v == g.exit or g.is_buffer[v]:
        return end
    volume_in, volume_out = g.in_volume[v], g.out_volume[v]
    if volume_out >= volume_in:
        return start + _BASE_LATENCY
    num, den = intervals.num, intervals.den
    pace_num, pace_den = 1, 1
    for e in g.in_edges[g.in_start[v] : g.in_start[v + 1]]:
        if num[e] * pace_den > pace_num * den[e]:
            pace_num, pace_den = num[e], den[e]
    steps = _ceil_ratio_minus_one(volume_in, volume_out, 1, 1, reference)
    return start + _BASE_LATENCY - (-pace_num * steps // pace_den)


def timing_terms(g: CanonicalGraph, intervals: Intervals, reference: bool = True) -> tuple[list, list, list]:
    """Per node, ⌊D(v)⌋ and ⌈D(v)⌉ (:func:`task_duration`) and the lead from its start to its first
    output (:func:`first_output_time` less the start; 0 where that is not start-based: the pseudo source,
    the exit, buffers). Only nodes at the ends of :attr:`Intervals.paced` edges differ from their terms
    under unit intervals, which are computed once per graph (``g.derived``)."""
    key = ("timing_terms", reference)
    unit = g.derived.get(key)
    if unit is None:
        ones = [1] * g.m
        unit = g.derived[key] = _terms_of(
            g, range(g.n), Intervals(ones, ones, []), reference, ([0] * g.n, [0] * g.n, [0] * g.n)
        )
    if not intervals.paced:
        return unit
    src, dst = g.src, g.dst
    nodes = {src[e] for e in intervals.paced} | {dst[e] for e in intervals.paced}
    return _terms_of(g, nodes, intervals, reference, tuple(list(terms) for terms in unit))


def _terms_of(g: CanonicalGraph, nodes, intervals: Intervals, reference: bool, terms: tuple[list, list, list]):
    """``terms`` (floor, ceil, lead lists) with the entries of ``nodes`` computed under ``intervals``."""
    floor, ceil, lead = terms
    source, sink, exit_node, is_buffer = g.source, g.pseudo_sink, g.exit, g.is_buffer
    for v in nodes:
        if v == source or v == sink or is_buffer[v]:
            floor[v] = ceil[v] = lead[v] = 0
            continue
        d_num, d_den = task_duration(g, v, intervals, reference)
        floor[v], ceil[v] = d_num // d_den, -(-d_num // d_den)
        lead[v] = 0 if v == exit_node else first_output_time(g, v, 0, 0, intervals, reference)
    return floor, ceil, lead


def block_orders(g: CanonicalGraph, blocks: list[list[int]]) -> list[list[int]]:
    """TOPO of every block: the order gang scheduling places its nodes in."""
    return induced_topological_orders(g, blocks)


def gang_schedule(
    g: CanonicalGraph,
    blocks: list[list[int]],
    streaming: bytearray,
    intervals: Intervals,
    pes: int,
    reference: bool = True,
    orders: list[list[int]] | None = None,
    since: tuple[Timing, int] | None = None,
) -> Timing:
    """Gang-schedule ``blocks`` on ``pes`` PEs (see module docstring); ``orders`` are the blocks'
    :func:`block_orders`, computed when not given. ``since`` is an earlier timing of the same blocks and
    the first block whose streaming flags or intervals have changed since: the blocks before it keep
    their timing (a block depends on earlier ones only through their nodes' times and PEs)."""
    n = g.n
    if orders is None:
        orders = block_orders(g, blocks)
    if since is None:
        pe, start, end, first = [-1] * n, [0] * n, [0] * n, [0] * n
        first_block = 0
    else:
        previous, first_block = since
        pe, start, end, first = (list(x) for x in (previous.pe, previous.start, previous.end, previous.first_output))
    src, is_buffer = g.src, g.is_buffer
    in_start, in_edges = g.in_start, g.in_edges
    source, sink, exit_node = g.source, g.pseudo_sink, g.exit
    floor, ceil, lead = timing_terms(g, intervals, reference)
    used_before = {pe[v] for order in orders[:first_block] for v in order}
    block_start = max((end[v] for v in orders[first_block - 1]), default=0) if first_block else 0
    for order in orders[first_block:]:
        events: dict[int, list[tuple[int, int]]] = {}
        cursor = 0
        block_end = 0
        for v in order:
            preds = in_edges[in_start[v] : in_start[v + 1]]
            buffer = is_buffer[v]
            if buffer:
                if reference:
                    where = pe[src[preds[-1]]]
                else:
                    where = pe[src[max(preds, key=lambda e: end[src[e]])]]
            elif v == sink and cursor >= pes:
                where = pes - 1
            else:
                where = cursor
            est = block_start
            for e in preds:
                p = src[e]
                ready = first[p] if streaming[e] and not buffer and pe[p] != where else end[p]
                if ready > est:
                    est = ready
            d_ceil = ceil[v]
            timeline = events.get(where)
            if timeline is None:
                timeline = events[where] = [_SENTINEL] if where in used_before else []
            if not timeline or (len(timeline) == 1 and timeline[0] is _SENTINEL):
                begin = est  # the insertion rule on an empty PE (or one with earlier blocks only)
            else:
                begin = insertion_start(timeline, est, floor[v], d_ceil)
            finish = begin + d_ceil
            bisect.insort(timeline, (finish, begin))
            pe[v], start[v], end[v] = where, begin, finish
            if v == source:
                first[v] = 0
            elif buffer or v == exit_node:
                first[v] = finish
            else:
                first[v] = begin + lead[v]
            if finish > block_end:
                block_end = finish
            if not buffer and v != source and v != sink:
                cursor += 1
        used_before.update(events)
        block_start = block_end
    return Timing(pe, start, end, first)
