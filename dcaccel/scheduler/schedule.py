"""The result of scheduling a task DAG on P PEs, and its independent check.

A :class:`Schedule` holds what every scheduler gives (per node, its PE, start, first-output and end
times; the placement order, the streaming edges and the blocks), a per-scheduler detail
(:class:`StreamingDetail`, :class:`ListDetail`, :class:`HeftDetail`), and the figures derived from them:
makespan, work, depth, streaming depth, lower bound, speedup, utilisation, I/O volume (for any on-chip
capacity). It is built once and does not cost itself (:mod:`dcaccel.cost.schedule` does).

:meth:`Schedule.validate` re-checks the timing against the DAG alone: precedence per edge kind,
no overlap on a PE, durations no shorter than the isolation cost, makespan no lower than the
lower bound. The lower bound is max(depth, ⌈W/P⌉) for a list schedule; for a streaming schedule
it is ⌈W/P⌉ only, since streaming tasks overlap along a path (the makespan falls below the depth,
and in the reference's timing model even below the streaming depth, by one cycle).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from dcaccel.dag.metrics import io_volume, streaming_depth, upward_ranks
from dcaccel.dag.taskdag import TaskDAG
from dcaccel.dag.walk import without_cycle_collection
from dcaccel.errors import DcaccelError
from dcaccel.records import attributes, field_names
from dcaccel.scheduler.graph import CanonicalGraph
from dcaccel.scheduler.io import IOVolume, global_io, onchip_placement
from dcaccel.scheduler.timeline import Timing

if TYPE_CHECKING:
    from dcaccel.scheduler.heft import UnitLayout


class ScheduleError(DcaccelError):
    """A schedule that breaks the timing model (see :meth:`Schedule.validate`)."""


@dataclass(frozen=True)
class TaskEvent:
    """One row of a schedule: where and when a node runs."""

    node: int
    label: str
    kind: str
    pe: int
    start: int
    first_output: int
    end: int
    block: int  # index of the node's block (-1 for list schedules)


@dataclass(frozen=True)
class StreamingDetail:
    """What only the streaming scheduler computes: its partitioning rule, the FIFO capacity per streaming
    edge the deadlock analysis sized (absent edges need 1) and what the refinement loop did."""

    partitioning: str  # "relaxed" | "strict"
    capacities: dict[int, int]  # edge id -> FIFO capacity
    makespan_before_refinement: int
    refinement_iterations: int

    @property
    def buffer_space_deadlock(self) -> int:
        """Σ of the capacities above 1 (the reference's ``buffer_space_deadlock``)."""
        return sum(cap for cap in self.capacities.values() if cap > 1)

    def buffer_space(self, graph: CanonicalGraph) -> dict[tuple[int, int], int]:
        """FIFO capacity per streaming edge of ``graph`` as (producer, consumer) -> capacity."""
        return {(graph.src[e], graph.dst[e]): cap for e, cap in sorted(self.capacities.items())}

    def summary(self) -> dict:
        """The fields but the capacities (a table of their own), and their total above 1."""
        return attributes(self, [*field_names(self, without=["capacities"]), "buffer_space_deadlock"])


@dataclass(frozen=True)
class ListDetail:
    """The list scheduler's options: insertion into idle gaps, and the bandwidth between PEs in elements
    per cycle (None: free communication)."""

    insertion: bool
    transfer_bandwidth: float | None

    def summary(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class HeftDetail:
    """The heterogeneous list scheduler's PEs: the unit kind of every PE it numbers and the units of every
    kind (:class:`~dcaccel.scheduler.heft.UnitLayout`)."""

    units: UnitLayout

    def summary(self) -> dict:
        return {"unit_counts": dict(self.units.counts)}


#: The attributes a schedule's summary shows as they are.
_SUMMARY = "scheduler pes makespan work depth lower_bound speedup utilisation io_volume num_blocks".split()


@dataclass(frozen=True, eq=False)
class Schedule:
    """A schedule of ``graph`` on ``pes`` PEs, built once by :func:`dcaccel.scheduler.schedule`.

    The common core of every scheduler: the ``timing`` (PE, start, end, first output per node), the
    order the scheduler placed the nodes in, the edges that ``streaming`` flags (none outside the
    streaming scheduler), the ``blocks`` that run one after another (none: the whole DAG is one block),
    and the on-chip capacity ``onchip`` (elements per block) its I/O split is taken at. What only one
    scheduler computes is its ``detail``. Costing it on an architecture is
    :func:`dcaccel.cost.schedule.cost_schedule`'s job.
    """

    graph: CanonicalGraph
    pes: int
    scheduler: str
    timing: Timing
    placement_order: list[int]  # the list schedulers' priority order, the blocks' orders one after another
    detail: StreamingDetail | ListDetail | HeftDetail
    streaming: bytes = b""  # a flag per edge id (empty: no edge streams)
    blocks: list[list[int]] = field(default_factory=list)
    onchip: int = 0
    _io_at: dict[int, IOVolume] = field(default_factory=dict, init=False, repr=False)  # capacity -> I/O split

    def __post_init__(self):
        if not self.streaming:
            object.__setattr__(self, "streaming", bytes(self.graph.m))
        elif len(self.streaming) != self.graph.m:
            raise ScheduleError(
                f"{len(self.streaming)} streaming flags for the {self.graph.m} edges of {self.dag.name}"
            )

    # ------------------------------------------------------------------ per node

    @property
    def dag(self) -> TaskDAG:
        return self.graph.dag

    @cached_property
    def block_of(self) -> list[int]:
        """The block index of every node (-1 for list schedules)."""
        block_of = [-1] * self.graph.n
        for index, block in enumerate(self.blocks):
            for v in block:
                block_of[v] = index
        return block_of

    def event(self, v: int) -> TaskEvent:
        """Where and when node ``v`` runs."""
        t = self.timing
        return TaskEvent(
            v, self.dag.label(v), self.dag.kind(v).value, t.pe[v], t.start[v], t.first_output[v], t.end[v],
            self.block_of[v],
        )  # fmt: skip

    def events(self) -> list[TaskEvent]:
        """All nodes, by id."""
        return [self.event(v) for v in range(self.graph.n)]

    # ------------------------------------------------------------------ figures

    @property
    def makespan(self) -> int:
        return self.timing.makespan

    @cached_property
    def work(self) -> int:
        return sum(self.graph.cost)

    @cached_property
    def depth(self) -> int:
        return self._derived("depth", lambda: upward_ranks(self.dag, self.graph.cost)[self.graph.source])

    @cached_property
    def streaming_depth(self):
        return streaming_depth(self.dag)

    @property
    def lower_bound(self) -> int:
        """max(depth, ⌈W/P⌉) for a list schedule, ⌈W/P⌉ for a streaming one (see module docstring)."""
        bound = -(-self.work // self.pes)
        return bound if self.is_streaming else max(self.depth, bound)

    @property
    def is_streaming(self) -> bool:
        return isinstance(self.detail, StreamingDetail)

    @property
    def speedup(self) -> float:
        """W / makespan (0 for a DAG without work)."""
        return self.work / self.makespan if self.makespan else 0.0

    @property
    def utilisation(self) -> float:
        return self.speedup / self.pes

    @property
    def num_blocks(self) -> int:
        """Number of blocks, a trailing empty one included as the reference counts it (0 for list schedules)."""
        return len(self.blocks)

    @property
    def streaming_edges(self) -> list[tuple[int, int]]:
        """The edges that stream in the final schedule, in edge order."""
        g = self.graph
        return [(g.src[e], g.dst[e]) for e in g.out_edges if self.streaming[e]]

    @cached_property
    def io_volume(self) -> int:
        """Buffer I/O (§7.1), independent of the schedule."""
        return self._derived("io_volume", lambda: io_volume(self.dag))

    def _derived(self, name: str | tuple, compute):
        """A figure of the graph alone, computed once for every schedule of the graph (``graph.derived``)."""
        derived = self.graph.derived
        if name not in derived:
            derived[name] = compute()
        return derived[name]

    def io_at(self, onchip: int) -> IOVolume:
        """I/O split for an on-chip capacity of ``onchip`` elements per block (§7.2, §7.3); a list
        schedule is one block. Computed once per capacity (the sweep asks for it again to cost the
        schedule on an architecture); the placement of a list schedule, whose one block is the whole
        DAG, once per graph and capacity, for the list schedules of every P."""
        if onchip not in self._io_at:
            with without_cycle_collection():
                if self.blocks:
                    placed = onchip_placement(self.graph, self.blocks, onchip)
                else:
                    placed = self._derived(
                        ("one_block_placement", onchip),
                        lambda: frozenset(onchip_placement(self.graph, [list(range(self.graph.n))], onchip)),
                    )
                off, on, streamed = global_io(self.graph, self.streaming, placed)
            self._io_at[onchip] = IOVolume(self.io_volume, off, on, streamed, onchip, tuple(sorted(placed)))
        return self._io_at[onchip]

    @cached_property
    def io(self) -> IOVolume:
        """I/O split for the schedule's own on-chip capacity."""
        return self.io_at(self.onchip)

    def summary(self) -> dict:
        """The schedule's figures as a JSON-ready dict."""
        return (
            attributes(self, _SUMMARY)
            | {
                "dag": self.dag.name,
                "streaming_depth": _plain_number(self.streaming_depth),
                "io": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self.io).items()},
                "streaming_edges": len(self.streaming_edges),
            }
            | self.detail.summary()
        )

    # ------------------------------------------------------------------ the check

    def validate(self) -> None:
        """Raise :class:`ScheduleError` naming the first node or edge that breaks the timing model."""
        g, t = self.graph, self.timing
        for v in range(g.n):
            if not 0 <= t.pe[v] < self.pes:
                raise ScheduleError(f"{self.node_name(v)} is on PE {t.pe[v]}, outside 0..{self.pes - 1}")
            if t.end[v] - t.start[v] < g.cost[v]:
                raise ScheduleError(
                    f"{self.node_name(v)} runs {t.end[v] - t.start[v]} cycles ({t.start[v]}..{t.end[v]}), "
                    f"less than its cost {g.cost[v]}"
                )
            if v != g.source and not t.start[v] <= t.first_output[v] <= t.end[v]:
                raise ScheduleError(
                    f"{self.node_name(v)}: first output at {t.first_output[v]} outside its run {t.start[v]}..{t.end[v]}"
                )
        self._validate_precedence()
        self._validate_overlap()
        if self.makespan != max(t.end):
            raise ScheduleError(f"makespan {self.makespan} differs from the last end {max(t.end)}")
        if self.makespan < self.lower_bound:
            raise ScheduleError(f"makespan {self.makespan} is below the lower bound {self.lower_bound}")

    def _validate_precedence(self) -> None:
        g, t = self.graph, self.timing
        for e in range(g.m):
            p, v = g.src[e], g.dst[e]
            if not self.streaming[e] or g.is_buffer[v]:
                if t.start[v] < t.end[p]:
                    raise ScheduleError(
                        f"edge {p}->{v}: {self.node_name(v)} starts at {t.start[v]} "
                        f"before {self.node_name(p)} ends at {t.end[p]}"
                    )
                continue
            ready = t.end[p] if t.pe[p] == t.pe[v] else t.first_output[p]
            if t.start[v] < ready:
                raise ScheduleError(
                    f"streaming edge {p}->{v}: {self.node_name(v)} starts at {t.start[v]} "
                    f"before its input is ready at {ready}"
                )
            if v != g.exit and t.end[v] < t.end[p]:
                raise ScheduleError(
                    f"streaming edge {p}->{v}: consumer {self.node_name(v)} ends at {t.end[v]} before its producer "
                    f"ends at {t.end[p]} (the reference aborts here, STREAMING_MODEL §8 B2)"
                )

    def _validate_overlap(self) -> None:
        t = self.timing
        by_pe: dict[int, list[tuple[int, int, int]]] = {}
        for v in range(self.graph.n):
            by_pe.setdefault(t.pe[v], []).append((t.end[v], t.start[v], v))
        for pe, events in by_pe.items():
            events.sort()
            for (end, _, u), (_, start, w) in zip(events, events[1:], strict=False):
                if end > start:
                    raise ScheduleError(
                        f"PE {pe}: {self.node_name(u)} ends at {end} after {self.node_name(w)} starts at {start}"
                    )

    def node_name(self, v: int) -> str:
        """How errors name node ``v``: its kind, id and label."""
        return f"{self.dag.kind(v).value} {v} '{self.dag.label(v)}'"

    def __repr__(self) -> str:
        return (
            f"Schedule({self.dag.name!r}, {self.scheduler}, P={self.pes}, makespan={self.makespan}, "
            f"blocks={self.num_blocks})"
        )


def _plain_number(value):
    """An int or float for JSON (Fractions become floats)."""
    return value if isinstance(value, int) else float(value)
