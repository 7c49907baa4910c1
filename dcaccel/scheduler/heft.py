"""The heterogeneous list scheduler (HEFT, Topcuoglu et al., IEEE TPDS 2002) over an architecture's units.

The PEs are the architecture's units, kind after kind in description order (a kind without a count
has P units). A task may run on any unit of a kind whose ``ops`` hold its op (``"*"``: every op), or
only on the kind its record's ``unit`` names (a partition's placement, :mod:`dcaccel.transforms.offload`),
buffer and pseudo nodes (no work) on any unit. A task takes, on a unit of kind k, its architecture
run time ``max(⌈T(v) / throughput_k⌉, ⌈operations / MAC rate_k⌉)`` cycles (T(v) its abstract cost,
operations its arithmetic; :func:`dcaccel.cost.rates.run_cycles`, the rule the costing re-times
with). Tasks are taken by upward rank over the mean run time of their eligible kinds (the topological
order breaks ties), each on the unit where it finishes earliest (the lowest unit on ties), after the
last task of that unit (no insertion). Communication is free here: memory and link costs are the
re-timing's (:func:`dcaccel.cost.schedule.cost_schedule`).

The result is a :class:`~dcaccel.scheduler.Schedule` in the abstract model for that placement and
order (a node starts when its predecessors and the previous node of its unit have finished, and
runs T(v)), so every abstract figure and check applies; its :class:`~dcaccel.scheduler.schedule.HeftDetail`
records each PE's kind for the costs.

Every choice takes the lowest unit of a kind among those where a node finishes first, and a unit never
used is free from the start, so no schedule uses more units of a kind than its graph has nodes: only
those are numbered and kept (time and memory do not grow with a unit count, the schedule is the same),
and the schedule's P is every unit of the architecture (:func:`schedule_units`).
"""

from __future__ import annotations

from dcaccel.architecture import ANY_OP, Architecture, ArchitectureError
from dcaccel.cost.rates import ratio, run_cycles
from dcaccel.dag.arithmetic import task_arithmetic
from dcaccel.scheduler.graph import CanonicalGraph
from dcaccel.scheduler.list import _FreeTimes
from dcaccel.scheduler.timeline import Timing


def schedule_units(arch: Architecture, pes: int) -> int:
    """The PEs of a HEFT schedule on ``arch`` for P = ``pes``: every unit of every kind (an open count is ``pes``)."""
    return sum(arch.unit_counts(pes).values())


class UnitLayout(list):
    """The kind of every PE a schedule of ``nodes`` nodes numbers: the architecture's units, kind after kind,
    at most ``nodes`` of each kind; ``counts`` holds the units of every kind (an open count is ``pes``)."""

    def __init__(self, arch: Architecture, pes: int, nodes: int):
        self.counts = arch.unit_counts(pes)
        super().__init__(unit for unit, count in self.counts.items() for _ in range(min(count, nodes)))


def heft_schedule(g: CanonicalGraph, arch: Architecture, pes: int) -> tuple[Timing, UnitLayout, list[int]]:
    """Place and order ``g`` on ``arch``'s units by HEFT (see the module docstring); returns the abstract
    timing of that placement, the kind of every PE and the order the nodes were placed in."""
    dag = g.dag
    n = g.n
    units = list(arch.units)
    layout = UnitLayout(arch, pes, n)
    rates = {unit: (ratio(arch.throughput(unit)), ratio(arch.mac_rate(unit))) for unit in units}
    eligible: list[list[str]] = [units] * n
    duration: list[dict[str, int]] = [dict.fromkeys(units, 0) for _ in range(n)]
    for v in dag.tasks:
        info = dag.info(v)
        op = info.op
        pinned = info.unit
        if pinned is not None and pinned not in arch.units:
            raise ArchitectureError(
                f"architecture {arch.name}: task {v} '{dag.label(v)}' asks for unknown unit {pinned}"
            )
        kinds = (
            [pinned]
            if pinned is not None
            else [u for u in units if ANY_OP in arch.units[u].ops or op in arch.units[u].ops]
        )
        if not kinds:
            raise ArchitectureError(f"architecture {arch.name}: no unit runs op '{op or '(none)'}'")
        eligible[v] = kinds
        _, work = task_arithmetic(info, g.in_volume[v])
        duration[v] = {unit: run_cycles(g.cost[v], work, *rates[unit]) for unit in kinds}

    topological = dag.topological_order()
    rank = [0.0] * n
    for v in reversed(topological):
        below = max((rank[g.dst[e]] for e in g.out_of(v)), default=0.0)
        rank[v] = sum(duration[v].values()) / len(duration[v]) + below
    order = sorted(topological, key=rank.__getitem__, reverse=True)

    # Per kind, the units' free times (architecture cycles) in a segment tree: the lowest unit free by
    # a time, or the lowest of those free earliest, is the unit of the kind where a task finishes first.
    offset = {unit: layout.index(unit) for unit in units if unit in layout}
    free = {unit: _FreeTimes(layout.count(unit)) for unit in offset}
    finish = [0] * n
    pe = [-1] * n
    for v in order:
        ready = max((finish[g.src[e]] for e in g.into(v)), default=0)
        best = None
        for unit in eligible[v]:
            times = free[unit]
            local = times.first_free_by(ready)
            if local >= 0:
                begin = ready
            else:
                begin, local = times.earliest()
            candidate = (begin + duration[v][unit], offset[unit] + local)
            if best is None or candidate < best:
                best = candidate
        finish[v], pe[v] = best
        unit = layout[pe[v]]
        free[unit].set(pe[v] - offset[unit], finish[v])

    start, end = [0] * n, [0] * n
    last = [0] * len(layout)  # abstract time each unit is free
    for v in order:
        begin = max([last[pe[v]], *(end[g.src[e]] for e in g.into(v))])
        start[v], end[v] = begin, begin + g.cost[v]
        last[pe[v]] = end[v]
    return Timing(pe, start, end, end.copy()), layout, order
