"""What a schedule costs on an :class:`~dcaccel.architecture.Architecture`: time, traffic, energy, area.

:func:`cost_schedule` turns (DAG, schedule, architecture) into :class:`ArchitectureCosts`. The scheduler
(:mod:`dcaccel.scheduler`) places and orders the nodes in the abstract model (one element per port per
cycle, free memory); the costing keeps that placement and order and re-times it on the architecture,
node by node in the order of the abstract start times:

* a task runs on the first unit kind whose ``ops`` hold its op (its record's ``op``, ``"*"`` for every
  op), or, in a heterogeneous schedule (:mod:`dcaccel.scheduler.heft`), on the kind of its PE;
  its run, scheduled for D abstract cycles, takes ``max(⌈D / throughput⌉, ⌈operations / MAC rate⌉)``
  reference cycles (:func:`dcaccel.cost.rates.run_cycles`), its operations being its arithmetic, MACs
  and other operations alike (:func:`dcaccel.dag.arithmetic.task_arithmetic`);
* it runs on unit ``pe mod count`` of its kind (the schedule's PE itself when the kind has at
  least as many units as the schedule has PEs; fewer units take the tasks of several PEs in turn);
* it starts once its inputs are ready under the schedule's own rule (a non-streaming predecessor
  has ended, a streaming one on another PE has emitted its first element, plus the link's latency;
  the list scheduler's ``bandwidth`` transfer cycles), its PE and its unit have finished the nodes
  before it, and, for the streaming scheduler, the previous block has finished;
* its memory accesses are transfers on the memory they go to, each a slot of ``⌈bytes /
  bandwidth⌉`` cycles from the task's start or when the memory is free (first come, first served:
  overlapping transfers share the bandwidth by taking turns, so no memory ever exceeds its
  bandwidth), and the task ends no earlier than its last slot; a streamed edge makes its consumer
  end no earlier than ``vol · element_bytes / link bandwidth`` cycles after the first element.

Where each element lives: an edge that streams crosses the link between the two units; any other
edge is stored in the home of its buffer (the on-chip memory when the schedule placed the buffer
on chip, off chip otherwise) or off chip (an edge between two tasks, or from the pseudo source);
the task at each end reads or writes it there. A program input placed on chip is loaded once from
off chip, an output placed on chip is written back once. Every element a task reads or writes
passes its unit's local memory once. Energy is accesses × energy per element of each memory, link
traversals × link energy, and operations × energy per MAC; area is the units', the local and the
on-chip memories' (not the off-chip memory's).

Under the ``abstract`` description (one element per cycle, no MAC limit, unlimited bandwidth, no
latency) every re-timed time equals the scheduled one: the abstract start of every node is the
earliest time the rules above allow (``docs/architecture_description.md``).

What the costings of many schedules of one graph share (each task's op and arithmetic, its unit kind on
an architecture, the memory accesses of the last few costings) is kept in a :class:`CostCache` the caller
owns and passes (a sweep keeps one per DAG); without one every costing computes it afresh.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from dcaccel.architecture import ANY_OP, Architecture, ArchitectureError
from dcaccel.architecture import load as load_architecture
from dcaccel.architecture.links import host_of
from dcaccel.cost.rates import ONE_PER_CYCLE, cycles, ratio, run_cycles
from dcaccel.dag.arithmetic import task_arithmetic
from dcaccel.dag.walk import without_cycle_collection
from dcaccel.records import attributes
from dcaccel.scheduler.graph import CanonicalGraph, flagged
from dcaccel.scheduler.schedule import HeftDetail, ListDetail, Schedule, ScheduleError
from dcaccel.scheduler.timeline import Timing

LEVELS = ("offchip", "onchip", "local", "links", "compute")


class Transfer(NamedTuple):
    """One access of a node's run to a memory of limited bandwidth: ``elements`` read or written on
    ``memory`` during ``[start, end)``."""

    memory: str
    node: int
    edge: int
    direction: str  # "read" | "write"
    elements: int
    start: int
    end: int


@dataclass(frozen=True)
class ArchitectureCosts:
    """What a schedule costs on an architecture; times in cycles of the architecture's clock,
    energy in pJ (relative units for ``abstract``), area in mm²."""

    architecture: str
    clock_mhz: float
    element_bytes: int
    pes: int
    timing: Timing
    unit_of: tuple[str | None, ...]  # unit kind per node (None: buffer or pseudo node)
    run_cycles: tuple[int, ...]  # the architecture cost of every node's run (0: buffer, pseudo)
    transfers: tuple[Transfer, ...]  # the accesses to memories of limited bandwidth, in time slots
    accesses: dict[str, tuple[int, int]]  # memory -> (elements read, elements written)
    energy_pj: dict[str, float]  # component (memory, link "a-b", unit kind's compute) -> pJ
    component_level: dict[str, str]  # component -> one of LEVELS
    area_mm2: float
    unit_counts: dict[str, int]
    busy_cycles: dict[str, int]  # unit kind -> Σ of its tasks' run cycles
    compulsory_elements: int  # program inputs read once, outputs written once
    bandwidths: dict[str, tuple[int, int] | None] = field(repr=False, default_factory=dict)  # bytes/cycle
    macs_by_unit: dict[str, int] = field(default_factory=dict)  # unit kind -> Σ of its tasks' MACs
    host: str | None = None  # the architecture's host unit kind (``role: host``)
    # component -> the unit kinds and memories it belongs to: a unit kind's compute its kind, a memory
    # itself, a link the two components it joins
    component_parts: dict[str, tuple[str, ...]] = field(repr=False, default_factory=dict)

    @property
    def makespan_cycles(self) -> int:
        return self.timing.makespan

    @property
    def makespan_seconds(self) -> float:
        return self.makespan_cycles / (self.clock_mhz * 1e6)

    @property
    def energy_total_pj(self) -> float:
        return sum(self.energy_pj.values())

    @property
    def energy_by_level(self) -> dict[str, float]:
        """Energy split into off-chip, on-chip, local memories, links and compute."""
        totals = dict.fromkeys(LEVELS, 0.0)
        for component, energy in self.energy_pj.items():
            totals[self.component_level[component]] += energy
        return totals

    @property
    def average_power_w(self) -> float:
        """Energy over the makespan (0 for an empty schedule)."""
        seconds = self.makespan_seconds
        return self.energy_total_pj * 1e-12 / seconds if seconds else 0.0

    @property
    def utilisation(self) -> dict[str, float]:
        """Per unit kind: busy cycles over (units of the kind × makespan)."""
        span = self.makespan_cycles
        return {
            unit: (self.busy_cycles[unit] / (count * span) if span else 0.0) for unit, count in self.unit_counts.items()
        }

    @property
    def macs(self) -> int:
        """The MACs of every task (:func:`dcaccel.dag.arithmetic.task_arithmetic`)."""
        return sum(self.macs_by_unit.values())

    @property
    def offchip_bytes(self) -> int:
        """Bytes read from and written to the off-chip memory (the traffic of a roofline's intensity)."""
        offchip = [name for name in self.accesses if self.component_level.get(name) == "offchip"]
        return sum(map(self.offchip_elements, offchip)) * self.element_bytes

    def offchip_elements(self, memory: str) -> int:
        read, written = self.accesses.get(memory, (0, 0))
        return read + written

    def energy_split(self, links: Mapping[str, object] = ()) -> dict[str, float]:
        """The energy split into ``host`` (the host unit kind's compute and every link that joins it),
        ``link`` (the host↔accelerator link units ``links`` of a partition,
        :func:`dcaccel.architecture.links.link_units`) and ``accelerator`` (everything else)."""
        split = {"host": 0.0, "accelerator": 0.0, "link": 0.0}
        for component, energy in self.energy_pj.items():
            if component in links:
                split["link"] += energy
            elif self.host is not None and self.host in self.component_parts[component]:
                split["host"] += energy
            else:
                split["accelerator"] += energy
        return split

    def summary(self) -> dict:
        """The figures as a JSON-ready dict."""
        shown = "architecture makespan_cycles makespan_seconds area_mm2 average_power_w utilisation compulsory_elements"
        return attributes(self, shown.split(), energy_pj="energy_total_pj", energy_by_level_pj="energy_by_level") | {
            "energy_by_component_pj": dict(self.energy_pj),
            "accesses": {memory: list(pair) for memory, pair in self.accesses.items()},
        }


#: Access passes and unit plans a :class:`CostCache` keeps for the next costings (the most recently used).
KEPT_ACCESS_PASSES = 4


class CostCache:
    """What the costings of the schedules of one graph share, kept for the caller that costs many of them
    (a sweep: every P, scheduler, architecture and on-chip size of one DAG): the tasks' ops and
    arithmetic, the elements every node reads and writes, the unit kind of every task per architecture
    and the memory accesses of the last :data:`KEPT_ACCESS_PASSES` costings without streaming edges.
    Architectures are keys as themselves (the cache holds them). None of it changes a figure."""

    def __init__(self, graph: CanonicalGraph):
        self.graph = graph
        self.task_ops: tuple[list[int], list[str | None], list[tuple[int, int]]] | None = None
        self.passed: tuple[list[int], list[int]] | None = None
        self.units: dict[Architecture, _TaskUnits] = {}
        self.accesses: dict[tuple, _Accesses] = {}  # (arch, buffers on chip, unit of every node) -> pass

    def check(self, schedule: Schedule) -> None:
        if schedule.graph is not self.graph:
            raise ScheduleError(
                f"a cost cache of the graph of '{self.graph.dag.name}' was given a schedule of another graph "
                f"('{schedule.dag.name}'): keep one cache per CanonicalGraph"
            )

    @staticmethod
    def keep(kept: dict, key, value) -> None:
        """Put ``key`` last in ``kept`` and drop the least recently used entries beyond the bound."""
        kept.pop(key, None)
        kept[key] = value
        while len(kept) > KEPT_ACCESS_PASSES:
            del kept[next(iter(kept))]


def _task_ops(cache: CostCache) -> tuple[list[int], list[str | None], list[tuple[int, int]]]:
    """The tasks of the graph, their ops (their records' ``op``) and their (MACs, operations)
    (:func:`~dcaccel.dag.arithmetic.task_arithmetic`): read from the DAG once per cache."""
    if cache.task_ops is None:
        g = cache.graph
        dag = g.dag
        tasks = list(dag.tasks)
        infos = [dag.info(v) for v in tasks]
        ops = [info.op for info in infos]
        arithmetic = [task_arithmetic(info, g.in_volume[v]) for v, info in zip(tasks, infos, strict=True)]
        cache.task_ops = (tasks, ops, arithmetic)
    return cache.task_ops


class _TaskUnits(NamedTuple):
    """The unit kind of every task (:func:`_task_units`)."""

    unit_of: list[str | None]  # per node (None: buffer or pseudo node)
    tasks_by_unit: dict[str, list[int]]  # unit kind -> its tasks, in task order
    operations: list[int]  # per node (0: buffer or pseudo node)
    macs_by_unit: dict[str, int]  # unit kind -> Σ of its tasks' MACs, kinds in the order of their first task
    operations_by_unit: dict[str, int]  # unit kind -> Σ of its tasks' operations
    passed_by_unit: dict[str, tuple[int, int]]  # unit kind -> elements its tasks read, write


def _task_units(cache: CostCache, arch: Architecture, placed_on: list[str] | None, pe: list[int]) -> _TaskUnits:
    """Every task runs on the first unit kind whose ops hold its op or, in a heterogeneous schedule
    (``placed_on``: the kind of every PE), on the kind of its PE (which must run its op). Kept in the
    cache per architecture for the homogeneous schedules."""
    if placed_on is None and arch in cache.units:
        return cache.units[arch]
    g = cache.graph
    dag = g.dag
    unit_of: list[str | None] = [None] * g.n
    operations = [0] * g.n
    tasks_by_unit: dict[str, list[int]] = {}
    macs_by_unit: dict[str, int] = {}
    operations_by_unit: dict[str, int] = {}
    unit_by_op: dict[str | None, str] = {}
    for v, op, (task_macs, task_operations) in zip(*_task_ops(cache), strict=True):
        if placed_on is not None:
            unit = placed_on[pe[v]]
            if ANY_OP not in arch.units[unit].ops and op not in arch.units[unit].ops:
                raise ArchitectureError(
                    f"task {v} '{dag.label(v)}' (op {op}) is placed on {unit}, which does not run it"
                )
        else:
            unit = unit_by_op.get(op)
            if unit is None:
                unit = unit_by_op[op] = arch.unit_for(op)
        unit_of[v] = unit
        operations[v] = task_operations
        if unit in tasks_by_unit:
            tasks_by_unit[unit].append(v)
            macs_by_unit[unit] += task_macs
            operations_by_unit[unit] += task_operations
        else:
            tasks_by_unit[unit] = [v]
            macs_by_unit[unit] = task_macs
            operations_by_unit[unit] = task_operations
    passed_in, passed_out = _passed(cache)
    passed_by_unit = {
        unit: (sum(passed_in[v] for v in members), sum(passed_out[v] for v in members))
        for unit, members in tasks_by_unit.items()
    }
    found = _TaskUnits(unit_of, tasks_by_unit, operations, macs_by_unit, operations_by_unit, passed_by_unit)
    if placed_on is None:
        CostCache.keep(cache.units, arch, found)
    return found


class _Accesses(NamedTuple):
    """The memory accesses of every node's run (:func:`_access_pass`)."""

    reads: dict[str, int]  # memory -> elements read
    writes: dict[str, int]  # memory -> elements written
    crossings: dict[tuple[str, str], int]  # (component, component) -> elements
    slots: dict[int, list[tuple[str, str, int, int, int]]]  # node -> (memory, direction, elements, edge, cycles)
    compulsory: int  # program inputs read once, outputs written once
    first_edge: dict[tuple[str, str], int]  # crossing -> the first edge on it (crossings are in that order)


def _passed(cache: CostCache) -> tuple[list[int], list[int]]:
    """The elements every node reads and writes (Σ of its in- and out-edges' volumes), once per cache."""
    if cache.passed is None:
        g = cache.graph
        passed_in, passed_out = [0] * g.n, [0] * g.n
        for p, v, volume in zip(g.src, g.dst, g.vol, strict=True):
            passed_out[p] += volume
            passed_in[v] += volume
        cache.passed = passed_in, passed_out
    return cache.passed


def _accesses(
    cache: CostCache, schedule: Schedule, arch: Architecture, onchip_buffers, unit_of: list[str | None], bandwidths
) -> _Accesses:
    """:func:`_access_pass`, kept in the cache without streaming edges for the schedules that share its
    other inputs: the architecture, the buffers on chip and the unit of every node (the list schedules of
    every P share one: the on-chip placement is one block's; so do the streaming schedules of an
    architecture without on-chip memory). A schedule's streaming edges are then taken out of it
    (:func:`_with_streams`), or the pass is run in full when that cannot give the same order."""
    g = schedule.graph
    key = (arch, frozenset(onchip_buffers), tuple(unit_of))
    found = cache.accesses.get(key)
    if found is None:
        found = _access_pass(g, bytes(g.m), arch, onchip_buffers, unit_of, bandwidths)
    CostCache.keep(cache.accesses, key, found)
    src, dst, is_buffer, source, sink = g.src, g.dst, g.is_buffer, g.source, g.pseudo_sink
    streamed = [e for e in flagged(schedule.streaming) if not is_buffer[dst[e]] and src[e] != source and dst[e] != sink]
    if not streamed:
        return found
    with_streams = _with_streams(g, found, streamed, arch, onchip_buffers, unit_of)
    if with_streams is None:
        return _access_pass(g, schedule.streaming, arch, onchip_buffers, unit_of, bandwidths)
    return with_streams


def _with_streams(g, base: _Accesses, streamed: list[int], arch: Architecture, onchip_buffers, unit_of):
    """The access pass with the edges ``streamed`` (into tasks, between two nodes of the program)
    streaming, from ``base``, the pass where none does: each such edge no longer writes and reads memory
    but crosses the link between its units. None when one of them was the first on a crossing of
    ``base`` or all of it (the order of the crossings, which the energies are summed in, would change)."""
    src, dst, vol, is_buffer = g.src, g.dst, g.vol, g.is_buffer
    offchip = arch.offchip
    onchip = arch.onchip[0] if arch.onchip else None
    reads, writes = dict(base.reads), dict(base.writes)
    values = dict(base.crossings)
    first_edge = dict(base.first_edge)
    dropped: dict[int, set[int]] = defaultdict(set)  # node -> edges whose slots it no longer has
    for e in streamed:
        p, v, volume = src[e], dst[e], vol[e]
        if is_buffer[p]:
            accesses = ((v, onchip if p in onchip_buffers else offchip, reads),)
        else:
            accesses = ((p, offchip, writes), (v, offchip, reads))
        for node, memory, counts in accesses:
            counts[memory] -= volume
            dropped[node].add(e)
            if unit_of[node] is not None:
                key = unit_of[node], memory
                if first_edge[key] == e:
                    return None
                values[key] -= volume
        key = unit_of[p], unit_of[v]
        if key in values:
            values[key] += volume
            first_edge[key] = min(first_edge[key], e)
        else:
            values[key] = volume
            first_edge[key] = e
    if 0 in values.values():
        return None
    crossings: dict[tuple[str, str], int] = defaultdict(int)
    for key in sorted(values, key=first_edge.__getitem__):  # stable: base's order among equal first edges
        crossings[key] = values[key]
    slots = dict(base.slots)
    for node, edges in dropped.items():
        if node in slots:
            slots[node] = [slot for slot in slots[node] if slot[3] not in edges]
    return _Accesses(reads, writes, crossings, slots, base.compulsory, first_edge)


def _access_pass(g, streaming, arch: Architecture, onchip_buffers, unit_of: list[str | None], bandwidths) -> _Accesses:
    """The memory accesses of every node's run, on the edges of ``g`` under the ``streaming`` flags.
    Every access is counted (elements read and written per memory, elements per link); those on a
    memory of limited bandwidth are also kept per node as (memory, direction, elements, edge, cycles)
    to become transfer slots. Copies between memories (loads, write-backs, buffer-to-buffer copies)
    are charged to the buffer node."""
    src, dst, vol, is_buffer = g.src, g.dst, g.vol, g.is_buffer
    source, sink = g.source, g.pseudo_sink
    element_bytes = arch.element_bytes
    offchip = arch.offchip
    onchip = arch.onchip[0] if arch.onchip else None
    reads = dict.fromkeys(arch.memories, 0)
    writes = dict.fromkeys(arch.memories, 0)
    crossings: dict[tuple[str, str], int] = defaultdict(int)  # (component, component) -> elements
    first_edge: dict[tuple[str, str], int] = {}  # (component, component) -> the edge that crossed it first
    slots: dict[int, list[tuple[str, str, int, int, int]]] = defaultdict(list)  # ... and the slot's cycles

    def cross(key: tuple[str, str], volume: int, e: int) -> None:
        if key not in crossings:
            first_edge[key] = e
        crossings[key] += volume

    def read(node: int, memory: str, volume: int, e: int) -> None:
        reads[memory] += volume
        if unit_of[node] is not None:
            cross((unit_of[node], memory), volume, e)
        if bandwidths[memory] is not None:
            slots[node].append((memory, "read", volume, e, cycles(volume * element_bytes, bandwidths[memory])))

    def write(node: int, memory: str, volume: int, e: int) -> None:
        writes[memory] += volume
        if unit_of[node] is not None:
            cross((unit_of[node], memory), volume, e)
        if bandwidths[memory] is not None:
            slots[node].append((memory, "write", volume, e, cycles(volume * element_bytes, bandwidths[memory])))

    def copy(node: int, origin: str, target: str, volume: int, e: int) -> None:
        read(node, origin, volume, e)
        write(node, target, volume, e)
        cross((origin, target), volume, e)

    def home(b: int) -> str:
        return onchip if b in onchip_buffers else offchip

    compulsory = 0
    exit_node = g.exit
    limited = {memory for memory, rate in bandwidths.items() if rate is not None}
    for e in range(g.m):
        p, v, volume = src[e], dst[e], vol[e]
        if p == source:
            if v == sink or (is_buffer[v] and all(dst[f] == sink for f in g.out_of(v))):
                continue  # an input that is only an output: nothing to move
            compulsory += volume
            if not is_buffer[v]:
                read(v, offchip, volume, e)
            elif v in onchip_buffers:  # a program input placed on chip is loaded once
                copy(v, offchip, onchip, volume, e)
            continue
        if v == sink:
            if not (is_buffer[p] and any(src[f] == source for f in g.into(p))):
                compulsory += volume
            if not is_buffer[p]:
                write(p, offchip, volume, e)
            elif p in onchip_buffers:  # an output placed on chip is written back once
                copy(p, onchip, offchip, volume, e)
            continue
        to_buffer = is_buffer[v]
        if to_buffer and v == exit_node:  # the output buffer, without a pseudo sink
            compulsory += volume
            if v in onchip_buffers:
                copy(v, onchip, offchip, volume, e)
        if streaming[e] and not to_buffer:
            cross((unit_of[p], unit_of[v]), volume, e)  # over the link between the two units
            continue
        if is_buffer[p]:
            if to_buffer:
                copy(v, home(p), home(v), volume, e)
                continue
            memory = onchip if p in onchip_buffers else offchip
        else:
            # write(p, ...) inlined: the edges between tasks and from tasks to buffers are most of the DAG
            memory = onchip if to_buffer and v in onchip_buffers else offchip
            writes[memory] += volume
            unit = unit_of[p]
            if unit is not None:
                key = unit, memory
                if key not in crossings:
                    first_edge[key] = e
                crossings[key] += volume
            if memory in limited:
                slots[p].append((memory, "write", volume, e, cycles(volume * element_bytes, bandwidths[memory])))
            if to_buffer:
                continue
        # read(v, memory, ...) inlined
        reads[memory] += volume
        unit = unit_of[v]
        if unit is not None:
            key = unit, memory
            if key not in crossings:
                first_edge[key] = e
            crossings[key] += volume
        if memory in limited:
            slots[v].append((memory, "read", volume, e, cycles(volume * element_bytes, bandwidths[memory])))
    return _Accesses(reads, writes, crossings, slots, compulsory, first_edge)


def cost_schedule(
    schedule: Schedule,
    arch: Architecture | str | Path,
    onchip: int | None = None,
    *,
    cache: CostCache | None = None,
    validate: bool = True,
) -> ArchitectureCosts:
    """What ``schedule`` costs on ``arch`` (an :class:`~dcaccel.architecture.Architecture`, a shipped name
    such as ``"eyeriss"``, or a YAML file): the schedule re-timed there in cycles and seconds, the accesses
    of every memory, energy by component, area, power and utilisation per unit kind (the module docstring
    says how). The buffers on chip are those the schedule's I/O split places in ``onchip`` elements (None:
    the schedule's own capacity, or the architecture's on-chip capacity when the schedule has none).
    ``cache``: what the costings of schedules of the same graph share (:class:`CostCache`). With
    ``validate`` (default) the result is checked by :func:`validate_costs`."""
    arch = load_architecture(arch)
    if onchip is None:
        onchip = schedule.onchip or arch.onchip_capacity_elements
    if cache is None:
        cache = CostCache(schedule.graph)
    else:
        cache.check(schedule)
    placed = frozenset(schedule.io_at(onchip).onchip_buffers)
    with without_cycle_collection():
        costs = _costs(cache, schedule, arch, placed)
        if validate:
            validate_costs(schedule, costs)
    return costs


def _costs(
    cache: CostCache, schedule: Schedule, arch: Architecture, onchip_buffers: frozenset[int]
) -> ArchitectureCosts:
    """Re-time ``schedule`` on ``arch`` and cost it (see the module docstring); ``onchip_buffers`` are the
    buffer nodes placed on chip."""
    g, t = schedule.graph, schedule.timing
    n = g.n
    pes = schedule.pes
    element_bytes = arch.element_bytes
    detail = schedule.detail
    transfer_bandwidth = detail.transfer_bandwidth if isinstance(detail, ListDetail) else None
    placed_on = detail.units if isinstance(detail, HeftDetail) else None
    if onchip_buffers and not arch.onchip:
        raise ArchitectureError(f"architecture {arch.name}: buffers are placed on chip but it has no onchip memory")
    if placed_on is None:  # a homogeneous schedule: every PE on its own accelerator unit
        capacity = arch.accelerator_units(pes)
        if pes > capacity:
            besides = " besides its host" if host_of(arch) else ""
            raise ArchitectureError(
                f"architecture {arch.name} has {capacity} units{besides}, the schedule uses {pes} PEs"
            )
        counts = arch.unit_counts(pes)
    else:  # a heterogeneous one (dcaccel.scheduler.heft.UnitLayout): its PEs are the units
        counts = placed_on.counts

    # The unit kind and run cycles of every node, and the unit instance of every task (an index into the
    # units of all kinds, kind after kind).
    plan = _task_units(cache, arch, placed_on, t.pe)
    unit_of = plan.unit_of
    run = [0] * n
    lead = [0] * n  # cycles from the start to the first output
    instance_of = [-1] * n
    rates = {unit: (ratio(arch.throughput(unit)), ratio(arch.mac_rate(unit))) for unit in arch.units}
    busy: dict[str, int] = dict.fromkeys(arch.units, 0)
    instances = 0
    t_start, t_end, t_first, t_pe = t.start, t.end, t.first_output, t.pe
    for unit, count in counts.items():
        members = plan.tasks_by_unit.get(unit, ())
        throughput, mac_rate = rates[unit]
        operations = plan.operations
        total = 0
        for v in members:
            begin = t_start[v]
            runs = run_cycles(t_end[v] - begin, operations[v], throughput, mac_rate)
            leads = t_first[v] - begin if throughput == ONE_PER_CYCLE else cycles(t_first[v] - begin, throughput)
            run[v] = runs
            total += runs
            lead[v] = leads if leads < runs else runs
            instance_of[v] = instances + t_pe[v] % count
        busy[unit] = total
        instances += count

    bandwidths = {name: ratio(memory.bandwidth_bytes_per_cycle) for name, memory in arch.memories.items()}
    links = {(a, b): arch.link(a, b) for a in arch.units for b in arch.units}
    link_rates = {pair: ratio(link.bandwidth_bytes_per_cycle) for pair, link in links.items() if link is not None}

    accesses = _accesses(cache, schedule, arch, onchip_buffers, unit_of, bandwidths)
    reads, writes = dict(accesses.reads), dict(accesses.writes)
    crossings, slots, compulsory = accesses.crossings, accesses.slots, accesses.compulsory
    start, end, first, transfers = _retime(
        schedule, run, lead, unit_of, instance_of, slots, dict.fromkeys(arch.memories, 0), links, link_rates,
        element_bytes, transfer_bandwidth,
    )  # fmt: skip
    timing = Timing(list(t.pe), start, end, first)

    # Energy by component: memories, links, the units' compute.
    level: dict[str, str] = {name: memory.level.value for name, memory in arch.memories.items()}
    parts: dict[str, tuple[str, ...]] = {name: (name,) for name in arch.memories}
    compute = dict(plan.operations_by_unit)
    for unit, (read, written) in plan.passed_by_unit.items():
        local = arch.local(unit)
        if local is not None:
            reads[local] += read
            writes[local] += written
    energy: dict[str, float] = {}
    for name, memory in arch.memories.items():
        energy[name] = reads[name] * memory.read_energy_pj + writes[name] * memory.write_energy_pj
    for (a, b), elements in crossings.items():
        link = arch.link(a, b)
        if link is not None:
            name = "-".join(link.between)
            energy[name] = energy.get(name, 0.0) + elements * link.energy_per_element_pj
            level[name] = "links"
            parts[name] = tuple(link.between)
    for unit, count in compute.items():
        energy[unit] = count * arch.units[unit].energy_per_mac_pj
        level[unit] = "compute"
        parts[unit] = (unit,)
    return ArchitectureCosts(
        architecture=arch.label,
        clock_mhz=arch.clock_mhz,
        element_bytes=element_bytes,
        pes=pes,
        timing=timing,
        unit_of=tuple(unit_of),
        run_cycles=tuple(run),
        transfers=tuple(transfers),
        accesses={name: (reads[name], writes[name]) for name in arch.memories},
        energy_pj=energy,
        component_level=level,
        area_mm2=arch.area_of(counts),
        unit_counts=counts,
        busy_cycles=busy,
        compulsory_elements=compulsory,
        bandwidths=bandwidths,
        macs_by_unit=dict(plan.macs_by_unit),
        host=host_of(arch),
        component_parts=parts,
    )


def _retime(
    schedule, run, lead, unit_of, instance_of, slots, memory_free, links, link_rates, element_bytes, transfer_bandwidth
):
    """Start, end and first output of every node re-timed on the architecture, and the transfers, node by
    node in the order of the abstract starts (ends, then the order the scheduler placed the nodes in
    break ties); see the module docstring for the rules. ``memory_free`` holds 0 for every memory."""
    g, t = schedule.graph, schedule.timing
    n = g.n
    src, vol, is_buffer, streaming = g.src, g.vol, g.is_buffer, schedule.streaming
    source, exit_node = g.source, g.exit
    in_start, in_edges, predecessors = g.in_start, g.in_edges, g.predecessors()
    pe = t.pe
    block_of = schedule.block_of
    order = _retiming_order(schedule)
    if (
        transfer_bandwidth is None
        and not any(slots.values())
        and all(link is not None and link.latency_cycles == 0 for link in links.values())
        and all(rate is None for rate in link_rates.values())
        and _keeps_timing(schedule, order, run, lead, instance_of)
    ):
        return list(t.start), list(t.end), list(t.first_output), []
    order = order.tolist()
    start, end, first = [0] * n, [0] * n, [0] * n
    pe_free = [0] * (max(pe, default=-1) + 1)  # end of the last node re-timed on every PE
    instance_free: dict[int, int] = {}  # the same per unit instance
    block_end = [0] * (len(schedule.blocks) + 1)  # index -1: the list schedules' single block, never closed
    released = 0  # end of the blocks before the current one (blocks come in order)
    current_block = block_of[order[0]] if order else -1
    transfers: list[Transfer] = []
    new_transfer = tuple.__new__  # Transfer(...) without its argument parsing
    plain_inputs = transfer_bandwidth is None and 1 not in streaming  # every input ready when its producer ends
    for v in order:
        block = block_of[v]
        if block != current_block:
            if block_end[current_block] > released:
                released = block_end[current_block]
            current_block = block
        est = released if block >= 0 else 0
        finish_floor = 0
        where = pe[v]
        if plain_inputs or (is_buffer[v] and transfer_bandwidth is None):
            for p in predecessors[v]:
                if end[p] > est:
                    est = end[p]
        else:
            consumes_streams = not is_buffer[v]
            for e in in_edges[in_start[v] : in_start[v + 1]]:
                p = src[e]
                if consumes_streams and streaming[e]:
                    if pe[p] != where:
                        pair = unit_of[p], unit_of[v]
                        link = links[pair]
                        ready = first[p]
                        if link is not None:
                            ready += link.latency_cycles
                            floor = ready + cycles(vol[e] * element_bytes, link_rates[pair])
                            if floor > finish_floor:
                                finish_floor = floor
                    else:
                        ready = end[p]
                    if v != exit_node and end[p] > finish_floor:
                        finish_floor = end[p]
                else:
                    ready = end[p]
                    if transfer_bandwidth is not None and pe[p] != where:
                        ready += math.ceil(vol[e] / transfer_bandwidth)  # as the list scheduler counts it
                if ready > est:
                    est = ready
        begin = pe_free[where]
        if est > begin:
            begin = est
        instance = instance_of[v]
        if instance >= 0:
            busy_until = instance_free.get(instance, begin)
            if busy_until > begin:
                begin = busy_until
        finish = begin + run[v]
        if finish_floor > finish:
            finish = finish_floor
        for memory, direction, elements, e, slot_cycles in slots.get(v, ()):
            slot = memory_free[memory]
            if begin > slot:
                slot = begin
            slot_end = memory_free[memory] = slot + slot_cycles
            transfers.append(new_transfer(Transfer, (memory, v, e, direction, elements, slot, slot_end)))
            if slot_end > finish:
                finish = slot_end
        start[v] = begin
        end[v] = finish
        if v == source:
            first[v] = 0
        elif is_buffer[v] or v == exit_node:
            first[v] = finish
        else:
            first[v] = begin + lead[v]
        pe_free[where] = finish
        if instance >= 0:
            instance_free[instance] = finish
        if block >= 0 and finish > block_end[block]:
            block_end[block] = finish
    return start, end, first, transfers


def retimed_runs(schedule: Schedule, run: list[int], lead: list[int]) -> tuple[list[int], list[int], list[int]]:
    """Start, end and first output of every node of ``schedule`` re-timed by the rules of :func:`_retime`
    with every node's run taking ``run[v]`` units of time and emitting its first output ``lead[v]`` after its
    start, on its own PE, with no memory, link or transfer costs (a cost source of its own durations:
    :mod:`dcaccel.cost.learned`)."""
    n = schedule.graph.n
    links = {(None, None): None}
    start, end, first, _ = _retime(schedule, run, lead, [None] * n, [-1] * n, {}, {}, links, {}, 1, None)
    return start, end, first


def _retiming_order(schedule) -> np.ndarray:
    """The nodes in the order :func:`_retime` takes them: by abstract (start, end), ties broken by the
    order the scheduler placed them in (a node's last place in it; 0 for a node it does not list),
    then by id."""
    _, start, end, _ = schedule.timing.arrays
    placement = np.asarray(schedule.placement_order, dtype=np.int64)
    position = np.zeros(schedule.graph.n, dtype=np.int64)
    np.maximum.at(position, placement, np.arange(len(placement), dtype=np.int64))
    return np.lexsort((np.arange(schedule.graph.n), position, end, start))


def _keeps_timing(schedule, order: np.ndarray, run: list[int], lead: list[int], instance_of: list[int]) -> bool:
    """Whether re-timing, in ``order``, gives every node its scheduled start, end and first output, when
    no node has a transfer slot, links add no latency and cost no cycles, and the list scheduler moves
    data between PEs for free (the ``abstract`` description). Checked for all nodes at once: every
    predecessor comes before its consumer in ``order`` and the blocks come in order, and the scheduled
    times satisfy the re-timing's rules when its inputs (predecessors' times, the previous node's end
    on the same PE and on the same unit instance, the end of the earlier blocks) are the scheduled
    ones; node by node along ``order`` the re-timing then reproduces them."""
    g, t = schedule.graph, schedule.timing
    n = g.n
    if n == 0:
        return True
    pe, start, end, first = t.arrays
    src, dst, _ = g.edge_arrays()
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n, dtype=np.int64)
    if (rank[src] >= rank[dst]).any():
        return False
    is_buffer = np.frombuffer(g.is_buffer, dtype=np.uint8).astype(bool)

    # The earliest start from the inputs: a streamed input on another PE when its producer's first element
    # appears, every other one when its producer ends; a node of a block not before the earlier blocks end.
    streams = np.frombuffer(schedule.streaming, dtype=np.uint8).astype(bool) & ~is_buffer[dst]
    crosses = streams & (pe[src] != pe[dst])
    est = np.zeros(n, dtype=np.int64)
    np.maximum.at(est, dst, np.where(crosses, first[src], end[src]))
    if schedule.blocks:
        block = np.asarray(schedule.block_of, dtype=np.int64)[order]
        if (np.diff(block) < 0).any():
            return False
        block_end = np.zeros(len(schedule.blocks), dtype=np.int64)
        np.maximum.at(block_end, block, end[order])
        released = np.concatenate(([0], np.maximum.accumulate(block_end)[:-1]))
        est[order] = np.maximum(est[order], released[block])
    # The end of the previous node on the same PE and on the same unit instance (none: 0).
    for lane in (pe, np.asarray(instance_of, dtype=np.int64)):
        along = order[np.argsort(lane[order], kind="stable")]
        previous = np.zeros(n, dtype=np.int64)
        same = (lane[along[1:]] == lane[along[:-1]]) & (lane[along[1:]] >= 0)
        previous[along[1:][same]] = end[along[:-1][same]]
        np.maximum(est, previous, out=est)
    if (est != start).any():
        return False

    # A streamed input keeps its consumer running until its producer's first element crosses the link
    # (another PE) and, but for the exit, until its producer ends.
    floor = np.zeros(n, dtype=np.int64)
    np.maximum.at(floor, dst[crosses], first[src[crosses]])
    inner = streams & (dst != g.exit)
    np.maximum.at(floor, dst[inner], end[src[inner]])
    if (np.maximum(start + np.asarray(run, dtype=np.int64), floor) != end).any():
        return False
    emitted = start + np.asarray(lead, dtype=np.int64)
    emitted[is_buffer] = end[is_buffer]
    emitted[g.exit] = end[g.exit]
    emitted[g.source] = 0
    return bool((emitted == first).all())


def validate_costs(schedule, costs: ArchitectureCosts) -> None:
    """Check the re-timed schedule against the DAG and the architecture alone: every run at least its
    architecture cost, precedence per edge kind, no overlap on a PE or a unit, every transfer inside its node's
    run, and no memory above its bandwidth (transfers of a memory never overlap and each lasts at
    least its bytes over the bandwidth). Raises :class:`ScheduleError` naming what breaks."""
    g, t = schedule.graph, costs.timing
    name = schedule.node_name
    for v in range(g.n):
        if t.end[v] - t.start[v] < costs.run_cycles[v]:
            raise ScheduleError(
                f"{name(v)} runs {t.end[v] - t.start[v]} cycles on {costs.architecture}, "
                f"less than its cost {costs.run_cycles[v]}"
            )
        if v != g.source and not t.start[v] <= t.first_output[v] <= t.end[v]:
            raise ScheduleError(f"{name(v)}: first output at {t.first_output[v]} outside its run")
    for e in range(g.m):
        p, v = g.src[e], g.dst[e]
        streams = schedule.streaming[e] and not g.is_buffer[v]
        ready = t.first_output[p] if streams and t.pe[p] != t.pe[v] else t.end[p]
        if t.start[v] < ready:
            raise ScheduleError(f"edge {p}->{v}: {name(v)} starts at {t.start[v]} before its input is ready at {ready}")
        if streams and v != g.exit and t.end[v] < t.end[p]:
            raise ScheduleError(f"streaming edge {p}->{v}: consumer {name(v)} ends before its producer")
    by_pe: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for v in range(g.n):
        by_pe[t.pe[v]].append((t.start[v], t.end[v], v))
    for pe, events in by_pe.items():
        events.sort()
        for (_, end, u), (start, _, w) in zip(events, events[1:], strict=False):
            if end > start:
                raise ScheduleError(f"PE {pe}: {name(u)} ends at {end} after {name(w)} starts at {start}")
    by_unit: dict[tuple[str, int], list[tuple[int, int, int]]] = defaultdict(list)
    for v in range(g.n):
        unit = costs.unit_of[v]
        if unit is not None:
            by_unit[unit, t.pe[v] % costs.unit_counts[unit]].append((t.start[v], t.end[v], v))
    for (unit, index), events in by_unit.items():
        events.sort()
        for (_, end, u), (start, _, w) in zip(events, events[1:], strict=False):
            if end > start:
                raise ScheduleError(f"{unit} {index}: {name(u)} ends at {end} after {name(w)} starts at {start}")
    by_memory: dict[str, list[Transfer]] = defaultdict(list)
    for transfer in costs.transfers:
        v = transfer.node
        if not t.start[v] <= transfer.start <= transfer.end <= t.end[v]:
            raise ScheduleError(f"a transfer of {name(v)} on {transfer.memory} lies outside its run")
        if costs.bandwidths.get(transfer.memory) is not None:
            by_memory[transfer.memory].append(transfer)
    for memory, transfers in by_memory.items():
        numerator, denominator = costs.bandwidths[memory]
        transfers.sort(key=lambda transfer: (transfer.start, transfer.end))
        for transfer in transfers:
            if transfer.elements * costs.element_bytes * denominator > numerator * (transfer.end - transfer.start):
                raise ScheduleError(
                    f"{memory}: {transfer.elements} elements of {name(transfer.node)} in "
                    f"{transfer.end - transfer.start} cycles exceed {numerator / denominator:g} bytes per cycle"
                )
        busy = [x for x in transfers if x.end > x.start]
        for before, after in zip(busy, busy[1:], strict=False):
            if before.end > after.start:
                raise ScheduleError(
                    f"{memory}: transfers of {name(before.node)} and {name(after.node)} overlap above its bandwidth"
                )
    if costs.makespan_cycles != max(t.end, default=0):
        raise ScheduleError("the re-timed makespan differs from the last end")
