"""The one walk over a lowered program that builds the canonical task DAG (docs/dag.md).

:class:`Walk` visits the steps of a :class:`~dcaccel.dag.scopes.LoweredProgram` in program order
and applies the extraction rules: which containers are buffer nodes and which version of a buffer
a step reads or writes, which producers of a collapsed container a consumer is connected to,
copies, accumulations, and which collapsed containers re-read a stream. It does not compute
volumes itself: a *graph back-end* holds the nodes and edges and does the arithmetic of one
step. Two back-ends exist:

* :class:`dcaccel.dag.extract.ConcreteGraph` — every task materialised, volumes ints, the
  iterations of a task map evaluated at once with NumPy (what ``extract`` returns);
* :class:`dcaccel.dag.symbolic.SymbolicGraph` — a task map kept as one *family* of tasks with
  volumes in its parameters, summed in closed form (``symbolic_metrics``, and ``extract`` when
  sizes stay symbolic).

A back-end provides, for a group of ``members`` (the nodes one step adds: an array of node ids, or
families) and their accesses to one container: ``task_group``, ``add_tasks``, ``add_buffer``,
``single``/``one`` (the access and members of a single node), ``buffer_edges``, ``record_output``,
``link`` (edges through a collapsed container, returning the condition under which a consumer
re-reads the stream), ``dense``/``not_overwritten`` (a producer that overwrites earlier ones),
``forward`` (a copy between two collapsed containers) and ``faults`` (the contract repairs of
unequal volumes). :func:`walk_program` repeats the walk until no repair is left.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import sympy

from dcaccel.dag import volume as vol
from dcaccel.dag.task import Role, TaskInfo
from dcaccel.dag.taskdag import NodeKind
from dcaccel.errors import DcaccelError

if TYPE_CHECKING:
    from dcaccel.dag.scopes import Access, Copy, LoweredProgram, TaskScope

EDGE_VOLUME_RULES = ("exact", "reference")
SINK_MODES = ("auto", "always", "never")

#: Why a collapsed container that a consumer reads more often than it was written becomes a buffer.
REREAD = "a consumer re-reads what a producer streams"


@dataclass(frozen=True)
class Granularity:
    """How a task map becomes tasks: one per iteration, one for the whole map, or ``tiles`` tasks."""

    mode: str
    tiles: int = 0

    @classmethod
    def parse(cls, value: str | tuple | Granularity) -> Granularity:
        """``"task"``, ``"coarse"``, ``("tiles", T)`` or ``"tiles=T"`` as a :class:`Granularity`."""
        if isinstance(value, Granularity):
            return value
        given = value
        if isinstance(value, str) and value.startswith("tiles="):
            value = ("tiles", value.removeprefix("tiles="))
        if value in ("task", "coarse"):
            return cls(value)
        if isinstance(value, tuple) and len(value) == 2 and value[0] == "tiles":
            try:
                tiles = int(value[1])
            except ValueError:
                tiles = 0
            if tiles >= 1:
                return cls("tiles", tiles)
        raise DcaccelError(
            f"extract: granularity must be 'task', 'coarse', ('tiles', T) or 'tiles=T' with T >= 1, got {given!r}"
        )


def check_options(caller: str, edge_volume: str, sink: str) -> None:
    """Refuse an unknown edge-volume rule or sink mode (one line naming ``caller``)."""
    if edge_volume not in EDGE_VOLUME_RULES:
        raise DcaccelError(f"{caller}: edge_volume must be one of {EDGE_VOLUME_RULES}, got {edge_volume!r}")
    if sink not in SINK_MODES:
        raise DcaccelError(f"{caller}: sink must be one of {SINK_MODES}, got {sink!r}")


def tile_count(iterations: int, tiles: int) -> int:
    """The number of equal tiles a task map of ``iterations`` iterations is split into for
    ``("tiles", tiles)``: the largest divisor of ``iterations`` not above ``tiles`` (equal tiles keep
    the volumes of their edges equal, as the DAG contract requires)."""
    return max((d for d in range(1, min(tiles, iterations) + 1) if iterations % d == 0), default=0)


# -- the accesses of a group of tasks, evaluated ----------------------------------------------


@dataclass
class Rows:
    """The accesses of n tasks to one container: element boxes ``lo``/``hi`` (n × dims, inclusive),
    distinct ``elements`` and element accesses ``volume`` (n), as int64 arrays."""

    lo: np.ndarray
    hi: np.ndarray
    elements: np.ndarray
    volume: np.ndarray

    def take(self, index) -> Rows:
        return Rows(self.lo[index], self.hi[index], self.elements[index], self.volume[index])

    @cached_property
    def boxes(self) -> np.ndarray:
        """The number of elements of each row's box."""
        return box_size(self.lo, self.hi)

    @cached_property
    def peak(self) -> int:
        """The largest absolute value among the rows' elements, volumes and box sizes (a bound for
        overflow checks; computed once, as a task map's rows are kept across passes and DAGs)."""
        return max((int(np.abs(a).max()) for a in (self.elements, self.volume, self.boxes) if a.size), default=0)


def iteration_points(scope: TaskScope) -> np.ndarray:
    """The iterations of the task map's outer map, row-major, as an (n × params) integer array."""
    axes = []
    for begin, end, step in scope.ranges:
        if any(vol.is_symbolic(v) for v in (begin, end, step)):
            raise DcaccelError(
                f"extract: task map '{scope.label}' has a symbolic number of iterations "
                f"({vol.iterations(scope.ranges)}); pass symbols=..., use granularity='coarse' "
                "or dcaccel.dag.symbolic.symbolic_metrics"
            )
        axes.append(np.arange(int(begin), int(end) + 1, int(step), dtype=np.int64))
    grids = np.meshgrid(*axes, indexing="ij")
    return np.stack([g.reshape(-1) for g in grids], axis=1)


def iteration_arithmetic(scope: TaskScope, points: np.ndarray) -> tuple[list, list]:
    """The MACs and other operations of every iteration in ``points`` of the task map ``scope`` (ints, or
    expressions in the sizes that stay symbolic)."""
    return tuple(
        vol.at_points(count, scope.params, points).tolist() if vol.is_symbolic(count) else [count] * len(points)
        for count in (scope.arithmetic.macs, scope.arithmetic.ops)
    )


def single_rows(access: Access) -> Rows:
    """The access of one task as :class:`Rows` of one row (every value must be concrete)."""
    values = [*access.begin, *access.end, access.elements, access.volume]
    dims = len(access.begin)
    ints = [int(v) for v in values]
    return Rows(
        np.array([ints[:dims]], dtype=np.int64).reshape(1, dims),
        np.array([ints[dims : 2 * dims]], dtype=np.int64).reshape(1, dims),
        np.array([ints[-2]], dtype=np.int64),
        np.array([ints[-1]], dtype=np.int64),
    )


def iteration_rows(access: Access, params, points: np.ndarray) -> Rows:
    """The access of every iteration in ``points``; :class:`DcaccelError` when a size is still symbolic."""
    columns = [vol.at_points(e, params, points) for e in (*access.begin, *access.end, access.elements, access.volume)]
    if any(c.dtype == object for c in columns):
        raise DcaccelError(f"extract: the accesses to '{access.data}' depend on symbolic sizes; pass symbols=...")
    dims = len(access.begin)
    n = points.shape[0]
    lo = np.stack(columns[:dims], axis=1) if dims else np.zeros((n, 0), dtype=np.int64)
    hi = np.stack(columns[dims : 2 * dims], axis=1) if dims else np.zeros((n, 0), dtype=np.int64)
    return Rows(lo, hi, columns[-2], columns[-1])


def box_size(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Number of elements of each box (row) of ``lo``/``hi``."""
    return np.prod(hi - lo + 1, axis=-1)


def tile_rows(rows: Rows, bounds: Sequence[tuple[int, int]]) -> Rows:
    """The accesses of tiles of consecutive iterations: volumes summed, boxes the bounding box."""
    lo = np.stack([rows.lo[a:b].min(axis=0) for a, b in bounds])
    hi = np.stack([rows.hi[a:b].max(axis=0) for a, b in bounds])
    elements = np.minimum(np.array([rows.elements[a:b].sum() for a, b in bounds]), box_size(lo, hi))
    volume = np.array([rows.volume[a:b].sum() for a, b in bounds])
    return Rows(lo, hi, elements, volume)


@dataclass
class Tiles:
    """The tasks of a task map at ``("tiles", T)``: tile t covers the iterations ``bounds[t]`` and
    accesses ``reads``/``writes`` (container → :class:`Rows`, one row per tile)."""

    bounds: list[tuple[int, int]]
    reads: dict[str, Rows]
    writes: dict[str, Rows]


def tiles_of(scope: TaskScope, granularity: Granularity) -> Tiles:
    """The tiles of the task map ``scope`` (concrete sizes needed: the tile count is a divisor)."""
    points = iteration_points(scope)
    n = points.shape[0]
    tiles = tile_count(n, granularity.tiles)
    size = n // tiles if tiles else 0
    bounds = [(t * size, (t + 1) * size) for t in range(tiles)]
    return Tiles(
        bounds,
        {a.data: tile_rows(iteration_rows(a, scope.params, points), bounds) for a in scope.reads},
        {a.data: tile_rows(iteration_rows(a, scope.params, points), bounds) for a in scope.writes},
    )


# -- the walk ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    """Why a collapsed container must become a buffer node, and under which condition on the sizes
    (``sympy.true`` when always)."""

    reason: str
    condition: sympy.Basic = sympy.true


@dataclass(slots=True)
class Edge:
    """An edge under construction: its volume under both rules, the collapsed containers it comes
    through (empty for an edge from or into a buffer node) and, in the closed-form back-end, the
    family of tasks it stands for one edge per iteration of (``over``; None for a single edge)."""

    exact: Any
    reference: Any
    via: set[str] = field(default_factory=set)
    over: int | None = None

    def volume(self, rule: str):
        return self.exact if rule == "exact" else self.reference


def add_edge(
    edges: dict[tuple[int, int], Edge], src: int, dst: int, exact, reference, via: str | None, over: int | None = None
) -> None:
    """Add the edge ``src`` → ``dst`` with volumes ``exact``/``reference``; when the pair already has one
    (a consumer reading two containers a producer wrote), add the volumes to it. ``via``: the collapsed
    container crossed; ``over``: see :class:`Edge`."""
    known = edges.get((src, dst))
    if known is None:
        edges[(src, dst)] = known = Edge(exact, reference, set(), over)
    else:
        known.exact += exact
        known.reference += reference
    if via is not None:
        known.via.add(via)


@dataclass(slots=True)
class Node:
    """A node of the DAG under construction."""

    kind: NodeKind
    label: str
    info: TaskInfo


class Walk:
    """One pass over the program steps (docs/dag.md, "Extraction rules"), building the DAG in ``graph``.

    Buffer nodes are the marked containers plus ``inserted`` (container → the :class:`Fault` that made
    it a buffer). A buffer container has one node per *version*: reading uses the current node,
    writing after a read starts a new one, so an in-place update never closes a cycle. ``producers``
    holds, per collapsed container, the members that wrote it and what they wrote; ``reused`` the
    collapsed containers found re-read.
    """

    def __init__(self, program: LoweredProgram, graph, inserted: Mapping[str, Fault]):
        self.program = program
        self.graph = graph
        self.inserted = inserted
        self.buffer_node: dict[str, int] = {}
        self.buffer_read: set[str] = set()
        self.versions: Counter[str] = Counter()
        self.producers: dict[str, list[tuple[Any, Any]]] = {}
        self.reused: dict[str, Fault] = {}

    # -- buffer versions
    def is_buffer(self, data: str) -> bool:
        return self.program.containers[data].is_buffer or data in self.inserted

    def new_buffer(self, data: str) -> int:
        container = self.program.containers[data]
        marked = container.reason is not None
        info = TaskInfo(
            role=Role.BUFFER,
            reason=container.reason.value if marked else None,
            container=data,
            container_version=self.versions[data],
            inserted_buffer=None if marked else self.inserted[data].reason,
        )
        self.versions[data] += 1
        node = self.buffer_node[data] = self.graph.add_buffer(data, info)
        self.buffer_read.discard(data)
        return node

    def read_buffer(self, data: str) -> int:
        node = self.buffer_node.get(data)
        if node is None:
            node = self.new_buffer(data)
        self.buffer_read.add(data)
        return node

    def write_buffer(self, data: str) -> int:
        if data in self.buffer_read or data not in self.buffer_node:
            return self.new_buffer(data)
        return self.buffer_node[data]

    # -- steps
    def run(self) -> Walk:
        from dcaccel.dag.scopes import Copy

        for index, step in enumerate(self.program.steps):
            if isinstance(step, Copy):
                self.copy(step)
            else:
                self.task(index, step)
        return self

    def task(self, index: int, scope: TaskScope) -> None:
        group = self.graph.task_group(index, scope)
        read_buffers = {data: self.read_buffer(data) for data in group.reads if self.is_buffer(data)}
        members = self.graph.add_tasks(group)
        for data, access in group.reads.items():
            if data in read_buffers:
                self.graph.buffer_edges(self.graph.one(read_buffers[data]), members, access)
            else:
                self.consume(data, members, access)
        for data, access in group.writes.items():
            self.graph.record_output(members, access)
            if data in group.accumulated:
                self.read_accumulator(data, members, access)
            if self.is_buffer(data):
                self.graph.buffer_edges(members, self.graph.one(self.write_buffer(data)), access)
            else:
                self.produce(data, members, access)

    def read_accumulator(self, data: str, members, access) -> None:
        """An accumulating write (write-conflict resolution) reads the content it updates: edges from
        the container's current buffer node, or from its producers, carrying the write accesses."""
        if not self.is_buffer(data):
            self.consume(data, members, access)
        elif data in self.buffer_node:
            self.graph.buffer_edges(self.graph.one(self.read_buffer(data)), members, access)

    def copy(self, copy: Copy) -> None:
        src, dst = self.graph.single(copy.src), self.graph.single(copy.dst)
        if self.is_buffer(copy.src.data):
            source = self.graph.one(self.read_buffer(copy.src.data))
            if self.is_buffer(copy.dst.data):
                self.graph.buffer_edges(source, self.graph.one(self.write_buffer(copy.dst.data)), dst)
            else:
                self.produce(copy.dst.data, source, dst)
        elif self.is_buffer(copy.dst.data):
            self.consume(copy.src.data, self.graph.one(self.write_buffer(copy.dst.data)), src)
        else:
            for producers, written in self.producers.get(copy.src.data, []):
                moved = self.graph.forward(producers, written, src, dst, copy.src.data, copy.dst.data)
                if moved is not None:
                    self.produce(copy.dst.data, *moved)

    # -- collapsed containers
    def consume(self, data: str, members, access) -> None:
        """Edges from the producers of the collapsed ``data`` to ``members`` reading ``access``."""
        for producers, written in self.producers.get(data, []):
            condition = self.graph.link(producers, written, members, access, data)
            if condition is not sympy.false:
                self.reused.setdefault(data, Fault(REREAD, condition))

    def produce(self, data: str, members, access) -> None:
        """Record ``members`` as producers of the collapsed ``data``; forget the producers they overwrite."""
        if self.graph.dense(members, access):
            kept = []
            for producers, written in self.producers.get(data, []):
                rest = self.graph.not_overwritten(producers, written, members, access)
                if rest is not None:
                    kept.append(rest)
            self.producers[data] = kept
        self.producers.setdefault(data, []).append((members, access))


@contextmanager
def without_cycle_collection() -> Iterator[None]:
    """Pause Python's cyclic garbage collector: walking and scheduling allocate millions of small acyclic
    objects, and the collections they trigger would rescan every live object (a quarter to a half of the
    run time on large DAGs, or when a sweep keeps many fragments alive). Reference counting still frees
    everything."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def walk_program(program: LoweredProgram, make_graph: Callable[[], Any], rule: str) -> Walk:
    """Walk ``program`` with a fresh back-end from ``make_graph`` until the contract repairs are done:
    after each pass the collapsed containers found re-read, or at fault for unequal volumes under
    ``rule``, become buffer nodes, and the walk is repeated. Returns the last walk (its ``inserted``
    are all the repairs)."""
    inserted: dict[str, Fault] = {}
    while True:
        walk = Walk(program, make_graph(), inserted).run()
        faults = dict(walk.reused)
        for data, fault in walk.graph.faults(rule).items():
            faults.setdefault(data, fault)
        new = {data: fault for data, fault in faults.items() if data not in inserted}
        if not new:
            return walk
        inserted = {**inserted, **new}
