"""The canonical task DAG of a fully lowered program (architecture.md, Contract 2; docs/dag.md).

``extract(lowered)`` walks the steps of the program (:mod:`dcaccel.dag.scopes`) in program order
with the one walk of :mod:`dcaccel.dag.walk` and builds a :class:`~dcaccel.dag.taskdag.TaskDAG`:

* every task scope becomes one task, a task map one task per iteration (``granularity="task"``),
  one task (``"coarse"``) or T tasks of consecutive iterations (``("tiles", T)``);
* every buffer container becomes one buffer node, created when first accessed; a buffer written
  again after it was read gets a new node (a new *version*, its record's ``container_version``), so the graph
  stays acyclic for in-place updates;
* a container that is not a buffer is collapsed: its producers connect straight to its consumers.
  A consumer is connected to the producers whose written elements it reads (element boxes are
  intersected, vectorised over the iterations of a task map);
* edge volume = the consumer's element accesses. Through a collapsed container the ``"exact"``
  rule counts the consumer's accesses of what that producer wrote; the ``"reference"`` rule puts
  the consumer's whole read volume on every in-edge (the seed's tool);
* where the result would break the DAG contract (a stream re-read, unequal in-volumes into a
  task, a task with non-uniform outputs) the collapsed container at fault is turned into a buffer
  node, with a warning and its record's ``inserted_buffer`` giving the reason;
* one pseudo source feeds every node without predecessors (volume: the first out-edge of the
  target); a pseudo sink collects the exits when there is more than one (``sink="auto"``), always
  (``"always"``) or never (``"never"``: the seed's DAGs end in the output buffer);
* the result is checked with :meth:`TaskDAG.validate`: what no repair can fix (unequal volumes on
  edges from or into buffers) raises :class:`~dcaccel.errors.DAGContractError`.

This module holds the concrete back-end of the walk (:class:`ConcreteGraph`): per-iteration subsets
and volumes are read once per task map as expressions in its parameters and evaluated for all
iterations at once with NumPy; nothing is compiled and nothing re-propagated. When sizes stay
symbolic the closed-form back-end (:mod:`dcaccel.dag.symbolic`) builds the DAG instead. This module
imports DaCe only when called (``dcaccel.dag`` stays importable without it).
"""

from __future__ import annotations

import copy
import logging
import warnings
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import sympy

from dcaccel.dag import volume as vol
from dcaccel.dag.task import TaskInfo
from dcaccel.dag.taskdag import NodeKind, TaskDAG
from dcaccel.dag.walk import (
    EDGE_VOLUME_RULES,
    SINK_MODES,
    Fault,
    Granularity,
    Rows,
    box_size,
    check_options,
    iteration_arithmetic,
    iteration_points,
    iteration_rows,
    single_rows,
    tiles_of,
    walk_program,
    without_cycle_collection,
)
from dcaccel.errors import DAGContractError, DcaccelError

if TYPE_CHECKING:
    from dcaccel.dag.scopes import Access, LoweredProgram, TaskScope

__all__ = ["EDGE_VOLUME_RULES", "SINK_MODES", "ConcreteGraph", "Granularity", "extract", "extract_program"]

#: Detail of the extraction: the buffer nodes the contract repair inserted (their records' ``inserted_buffer``).
logger = logging.getLogger(__name__)

#: Largest number of (producer, consumer) box pairs intersected in one NumPy operation.
_PAIR_CHUNK = 1 << 21


def _overlapping_pairs(w: Rows, r: Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (producer row, consumer row) pairs whose boxes share elements, with the shared count,
    producer-major within consumer chunks."""
    n_w, n_r = len(w.volume), len(r.volume)
    step = max(1, _PAIR_CHUNK // max(n_w, 1))
    found = []
    for start in range(0, n_r, step):
        lo = np.maximum(w.lo[:, None, :], r.lo[None, start : start + step, :])
        hi = np.minimum(w.hi[:, None, :], r.hi[None, start : start + step, :])
        overlap = np.prod(np.clip(hi - lo + 1, 0, None), axis=-1)
        p, c = np.nonzero(overlap)
        found.append((p, c + start, overlap[p, c]))
    if not found:
        return np.zeros(0, dtype=int), np.zeros(0, dtype=int), np.zeros(0, dtype=np.int64)
    return tuple(np.concatenate(parts) for parts in zip(*found, strict=True))


def _same_extent(a: Rows, b: Rows) -> bool:
    """Whether the single boxes of ``a`` and ``b`` have the same extents (size-1 dimensions aside)."""
    ea = [x for x in (a.hi[0] - a.lo[0] + 1).tolist() if x != 1]
    eb = [x for x in (b.hi[0] - b.lo[0] + 1).tolist() if x != 1]
    return (
        len(a.lo[0]) == len(b.lo[0])
        and ea == eb
        and all(x == y for x, y in zip((a.hi[0] - a.lo[0]).tolist(), (b.hi[0] - b.lo[0]).tolist(), strict=True))
    )


@dataclass
class TaskGroup:
    """The DAG tasks one task scope becomes: labels, records and their accesses per container (every DAG
    built from the group shares its records, :meth:`TaskDAG.add_nodes`)."""

    labels: list[str]
    infos: list[TaskInfo]
    reads: dict[str, Rows]
    writes: dict[str, Rows]
    accumulated: frozenset[str] = frozenset()


def instantiate(scope: TaskScope, granularity: Granularity) -> TaskGroup:
    """The tasks of ``scope`` at ``granularity`` with their accesses."""
    base = scope.info.derive(state=scope.state)
    accumulated = frozenset(a.data for a in scope.whole_writes if a.accumulate)
    if not scope.is_task_map or granularity.mode == "coarse":
        info = base.derive(**scope.whole_arithmetic.counts())
        if scope.is_task_map:
            info = info.derive(iterations=vol.concrete(vol.iterations(scope.ranges)))
        return TaskGroup(
            [scope.label],
            [info],
            {a.data: single_rows(a) for a in scope.whole_reads},
            {a.data: single_rows(a) for a in scope.whole_writes},
            accumulated,
        )
    if granularity.mode == "tiles":
        tiles = tiles_of(scope, granularity)
        labels = [f"{scope.label}{t}" for t in range(len(tiles.bounds))]
        counts = iteration_arithmetic(scope, iteration_points(scope))
        infos = [
            base.derive(
                tile=t, iterations=b - a, iteration_range=(a, b), macs=sum(counts[0][a:b]), ops=sum(counts[1][a:b])
            )
            for t, (a, b) in enumerate(tiles.bounds)
        ]
        return TaskGroup(labels, infos, tiles.reads, tiles.writes, accumulated)
    points = iteration_points(scope)
    names = [p.name for p in scope.params]
    labels = [f"{scope.label}{i}" for i in range(points.shape[0])]
    indices = [tuple(zip(names, point, strict=True)) for point in points.tolist()]
    macs, ops = iteration_arithmetic(scope, points)
    infos = [
        base.derive(iteration=i, index=index, macs=m, ops=o)
        for i, (index, m, o) in enumerate(zip(indices, macs, ops, strict=True))
    ]
    reads = {a.data: iteration_rows(a, scope.params, points) for a in scope.reads}
    writes = {a.data: iteration_rows(a, scope.params, points) for a in scope.writes}
    return TaskGroup(labels, infos, reads, writes, accumulated)


#: Largest value of an int64: exact volumes are computed in int64 while no intermediate product exceeds it.
_INT64_MAX = int(np.iinfo(np.int64).max)


def _exact_volumes(
    reads: np.ndarray, written: np.ndarray, overlap: np.ndarray, box: np.ndarray, read: np.ndarray, wide: bool
) -> np.ndarray:
    """``reads · written · overlap / (box · read)`` per row, rounded half up, a positive fraction to at
    least 1 (:func:`dcaccel.dag.volume.rounded` of the quotient), vectorised: in int64, or in Python ints
    (object arrays) when ``wide`` (an intermediate product could exceed int64); int64 volumes unless a
    volume itself exceeds it."""
    if wide:
        reads, written, overlap, box, read = (a.astype(object) for a in (reads, written, overlap, box, read))
    numerator, denominator = reads * written * overlap, box * read
    if not denominator.all():
        raise DcaccelError("extract: a consumer reads no element of a box it overlaps (a zero element count)")
    quotient, remainder = numerator // denominator, numerator % denominator
    half_up = np.maximum((2 * numerator + denominator) // (2 * denominator), 1)
    volumes = np.where(remainder == 0, quotient, half_up)
    if wide and (not volumes.size or -_INT64_MAX <= min(volumes) and max(volumes) <= _INT64_MAX):
        return volumes.astype(np.int64)  # the volumes fit even where their products did not
    return volumes


def _overflows(reads: np.ndarray, written: np.ndarray, overlap: np.ndarray, box: np.ndarray, read: np.ndarray) -> bool:
    """Whether :func:`_exact_volumes` of these rows could exceed int64 (from the largest of each factor)."""
    top = [int(np.abs(a).max()) if a.size else 0 for a in (reads, written, overlap, box, read)]
    return 2 * top[0] * top[1] * top[2] + top[3] * top[4] > _INT64_MAX or 2 * top[3] * top[4] > _INT64_MAX


@dataclass
class EdgeTable:
    """The edges of one pass of the walk, one per (source, target) pair in the order the pairs first
    appeared, as arrays: ``src``, ``dst``, the volumes under both rules (int64, or Python ints in an
    object array) and ``through`` (whether the edge comes through a collapsed container).
    :meth:`via` names those containers."""

    src: np.ndarray
    dst: np.ndarray
    exact: np.ndarray
    reference: np.ndarray
    through: np.ndarray
    codes: np.ndarray  # per added edge: the code of the collapsed container crossed, -1 for none
    slot: np.ndarray  # per added edge: the edge of the table it was merged into
    containers: list[str]  # collapsed container by code
    _members: tuple[np.ndarray, np.ndarray] | None = None

    def volume(self, rule: str) -> np.ndarray:
        return self.exact if rule == "exact" else self.reference

    def via(self, edge: int) -> list[str]:
        """The collapsed containers edge ``edge`` comes through, sorted by name."""
        if self._members is None:
            order = np.argsort(self.slot, kind="stable")
            start = np.zeros(len(self.src) + 1, dtype=np.int64)
            np.cumsum(np.bincount(self.slot, minlength=len(self.src)), out=start[1:])
            self._members = (order, start)
        order, start = self._members
        codes = self.codes[order[start[edge] : start[edge + 1]]]
        return sorted({self.containers[code] for code in codes.tolist() if code >= 0})


class EdgeLog:
    """The edges one pass of the walk adds, kept as batches of arrays (one per step and container) and
    merged once, by :meth:`table`: an edge added again for a pair that has one (a consumer reading two
    containers its producer wrote) adds its volumes to the first and keeps its place."""

    def __init__(self):
        self.batches: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]] = []
        self.containers: dict[str, int] = {}

    def add(self, src: np.ndarray, dst: np.ndarray, exact: np.ndarray, reference: np.ndarray, via: str | None):
        """Edges ``src[i] -> dst[i]`` with volumes ``exact[i]``/``reference[i]`` through ``via`` (None: a
        buffer edge)."""
        if len(src):
            code = -1 if via is None else self.containers.setdefault(via, len(self.containers))
            self.batches.append((src, dst, exact, reference, code))

    def table(self, nodes: int) -> EdgeTable:
        """The merged edges (node ids below ``nodes``)."""
        if not self.batches:
            empty = np.zeros(0, dtype=np.int64)
            return EdgeTable(empty, empty, empty, empty, np.zeros(0, dtype=bool), empty, empty, [])
        src, dst, exact, reference = (np.concatenate([batch[i] for batch in self.batches]) for i in range(4))
        codes = np.repeat([batch[4] for batch in self.batches], [len(batch[0]) for batch in self.batches])
        names = list(self.containers)
        pair = src * nodes + dst
        unique, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
        if len(unique) == len(pair):
            slot = np.arange(len(pair))
            return EdgeTable(src, dst, exact, reference, codes >= 0, codes, slot, names)
        order = np.argsort(first)
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        slot = rank[inverse.reshape(-1)]
        counts = np.bincount(slot)
        merged = []
        for volumes in (exact, reference):
            if volumes.dtype != object and int(np.abs(volumes).max()) > _INT64_MAX // int(counts.max()):
                volumes = volumes.astype(object)
            total = np.zeros(len(unique), dtype=volumes.dtype)
            np.add.at(total, slot, volumes)
            merged.append(total)
        through = np.bincount(slot, weights=codes >= 0, minlength=len(unique)) > 0
        kept = first[order]
        return EdgeTable(src[kept], dst[kept], merged[0], merged[1], through, codes, slot, names)


class ConcreteGraph:
    """The concrete back-end of :class:`~dcaccel.dag.walk.Walk`: every task a node, volumes ints.

    Members of a step are arrays of node ids, accesses :class:`~dcaccel.dag.walk.Rows` (one row per
    member). ``groups`` caches the tasks of each step across the passes of the contract repair. Nodes are
    kept as columns (``kinds``, ``labels``, ``infos``), edges as arrays in an :class:`EdgeLog`, merged into
    an :class:`EdgeTable` once the pass is over (:meth:`edges`): no object per node or edge.
    """

    def __init__(self, granularity: Granularity, groups: dict[int, TaskGroup]):
        self.granularity = granularity
        self.groups = groups
        self.kinds: list[NodeKind] = []
        self.labels: list[str] = []
        self.infos: list[TaskInfo] = []
        self.log = EdgeLog()
        self.produced: dict[int, Any] = {}
        self.tasks: list[int] = []
        self.fewer_tiles: list[str] = []
        self._table: EdgeTable | None = None

    # -- nodes and edges
    def add_buffer(self, data: str, info: TaskInfo) -> int:
        self.kinds.append(NodeKind.BUFFER)
        self.labels.append(data)
        self.infos.append(info)
        return len(self.kinds) - 1

    def edges(self) -> EdgeTable:
        """The edges of the pass (call once the walk is over)."""
        if self._table is None:
            self._table = self.log.table(len(self.kinds))
        return self._table

    def one(self, node: int) -> np.ndarray:
        return np.array([node])

    def single(self, access: Access) -> Rows:
        return single_rows(access)

    def task_group(self, index: int, scope: TaskScope) -> TaskGroup:
        group = self.groups.get(index)
        if group is None:
            group = self.groups[index] = instantiate(scope, self.granularity)
        if self.granularity.mode == "tiles" and scope.is_task_map and len(group.labels) < self.granularity.tiles:
            self.fewer_tiles.append(f"{scope.label} ({len(group.labels)})")
        return group

    def add_tasks(self, group: TaskGroup) -> np.ndarray:
        start, count = len(self.kinds), len(group.labels)
        self.kinds.extend([NodeKind.TASK] * count)
        self.labels.extend(group.labels)
        self.infos.extend(group.infos)
        self.tasks.extend(range(start, start + count))
        return np.arange(start, start + count)

    def buffer_edges(self, sources: np.ndarray, targets: np.ndarray, rows: Rows) -> None:
        """One edge per row of ``rows`` (from or into a single buffer node), carrying the row's volume."""
        n = len(rows.volume)
        sources, targets = (nodes if len(nodes) == n else np.repeat(nodes, n) for nodes in (sources, targets))
        self.log.add(sources, targets, rows.volume, rows.volume, None)

    def record_output(self, members: np.ndarray, rows: Rows) -> None:
        """The volume each of ``members`` writes (the first container it writes; the members of one step
        are recorded together, at its first write)."""
        if len(members) and int(members[0]) not in self.produced:
            self.produced.update(zip(members.tolist(), rows.volume.tolist(), strict=True))

    # -- collapsed containers
    def link(self, producers: np.ndarray, w: Rows, consumers: np.ndarray, r: Rows, via: str) -> sympy.Basic:
        """Edges from ``producers`` (which wrote ``w``) to ``consumers`` reading ``r`` of the collapsed ``via``.

        The exact volume of an edge is the consumer's accesses that fall on the elements this
        producer wrote: volume · (elements written in the overlap) / (elements read). Returns whether
        a consumer reads a producer's elements more often than the producer wrote them: its accesses
        per element read, ``r.volume / r.elements``, exceed the producer's per element written,
        ``w.volume / w.elements``.
        """
        p_index, c_index, overlap = _overlapping_pairs(w, r)
        e_w, v_w, box_w = w.elements[p_index], w.volume[p_index], w.boxes[p_index]
        e_r, v_r = r.elements[c_index], r.volume[c_index]
        # int64 suffices when the rows' peaks say so (an overlap is at most the producer's box), else
        # when the largest factors of these pairs do
        wide = 2 * r.peak * w.peak * w.peak + w.peak * r.peak > _INT64_MAX and _overflows(v_r, e_w, overlap, box_w, e_r)
        exact = _exact_volumes(v_r, e_w, overlap, box_w, e_r, wide)
        self.log.add(producers[p_index], consumers[c_index], exact, v_r, via)
        if 2 * r.peak * w.peak > _INT64_MAX:
            v_r, e_w, v_w, e_r = (a.astype(object) for a in (v_r, e_w, v_w, e_r))
        return sympy.true if (v_r * e_w > v_w * e_r).any() else sympy.false

    def dense(self, members: np.ndarray, rows: Rows) -> bool:
        """Whether ``members`` write every element of the bounding box of what they write."""
        if not len(members):
            return False
        return bool(rows.elements.sum() >= np.prod(rows.hi.max(axis=0) - rows.lo.min(axis=0) + 1))

    def not_overwritten(self, producers: np.ndarray, w: Rows, members: np.ndarray, rows: Rows):
        """The producers whose box is not inside the bounding box that ``members`` overwrite (None if none)."""
        lo, hi = rows.lo.min(axis=0), rows.hi.max(axis=0)
        outside = ~np.all((w.lo >= lo) & (w.hi <= hi), axis=1)
        return (producers[outside], w.take(outside)) if outside.any() else None

    def forward(self, producers: np.ndarray, w: Rows, src: Rows, dst: Rows, src_data: str, dst_data: str):
        """A copy ``src`` → ``dst`` between collapsed containers: the producers of the copied part become
        producers of the target (boxes translated when the shapes match, the whole target box otherwise)."""
        lo = np.maximum(w.lo, src.lo)
        hi = np.minimum(w.hi, src.hi)
        overlap = np.prod(np.clip(hi - lo + 1, 0, None), axis=-1)
        hits = np.nonzero(overlap)[0]
        if not len(hits):
            return None
        box_w = box_size(w.lo, w.hi)
        if _same_extent(src, dst):
            offset = dst.lo[0] - src.lo[0]
            lo, hi = lo[hits] + offset, hi[hits] + offset
        else:
            lo, hi = np.repeat(dst.lo, len(hits), axis=0), np.repeat(dst.hi, len(hits), axis=0)
        parts = [(w.elements[p], w.volume[p], overlap[p], box_w[p]) for p in hits.tolist()]
        elements = np.array([vol.rounded(vol.share(e, o, b)) for e, _, o, b in parts], dtype=np.int64)
        volume = np.array([vol.rounded(vol.share(v, o, b)) for _, v, o, b in parts], dtype=np.int64)
        return producers[hits], Rows(lo, hi, elements, volume)

    # -- contract repair
    def faults(self, rule: str) -> dict[str, Fault]:
        """Collapsed containers at fault for unequal in-volumes into a task or non-uniform outputs of a
        task: the edges through them whose volume differs from the target (the one of the edges from
        or into buffers, else the largest).

        A node is a suspect when one of its edges (in-edges, then out-edges) differs from its first;
        suspects are visited in the order of a Python set of them, which depends on the order they were
        found in (the edge order), and each container keeps the reason of the first task it is found at.
        """
        found: dict[str, Fault] = {}
        table = self.edges()
        keys = table.volume(rule)
        tasks = set(self.tasks)
        for ends, what in ((table.dst, "unequal in-volumes into"), (table.src, "non-uniform output of")):
            if not len(ends):
                continue
            _, first = np.unique(ends, return_index=True)
            first_key = np.zeros(len(self.kinds), dtype=keys.dtype)
            first_key[ends[first]] = keys[first]
            mixed = ends[keys != first_key[ends]]
            _, seen_at = np.unique(mixed, return_index=True)
            suspects = set(mixed[np.sort(seen_at)].tolist()) & tasks
            if not suspects:
                continue
            order = np.argsort(ends, kind="stable")
            start = np.searchsorted(ends[order], np.arange(len(self.kinds) + 1))
            for node in suspects:
                edges = order[start[node] : start[node + 1]]
                pairs = list(zip(keys[edges].tolist(), table.through[edges].tolist(), edges.tolist(), strict=True))
                fixed = [key for key, through, _ in pairs if not through]
                target = Counter(fixed).most_common(1)[0][0] if fixed else _largest([key for key, _, _ in pairs])
                for key, through, edge in pairs:
                    if through and key != target:
                        for data in table.via(edge):
                            found.setdefault(data, Fault(f"{what} task {self.labels[node]}"))
        return found


def _largest(keys: list[int | str]) -> int | str:
    """The largest concrete volume among ``keys`` (the first key when all are symbolic)."""
    concrete = [k for k in keys if isinstance(k, int)]
    return max(concrete) if concrete else keys[0]


# -- entry point -------------------------------------------------------------------------------


def extract(
    lowered,
    granularity: str | tuple = "task",
    edge_volume: str = "exact",
    *,
    sink: str = "auto",
    fusion: bool = False,
    symbols: Mapping[str, int] | None = None,
    name: str | None = None,
) -> TaskDAG:
    """The canonical task DAG of ``lowered`` (a ``LoweredWorkload`` or a fully lowered ``dace.SDFG``).

    :param granularity: ``"task"`` (each iteration of a task map is a task), ``"coarse"`` (a task map
        is one task) or ``("tiles", T)`` (T tasks of consecutive iterations per task map).
    :param edge_volume: ``"exact"`` or ``"reference"`` (see the module docstring and docs/dag.md).
    :param sink: ``"auto"`` (a pseudo sink only when the DAG has several exits), ``"always"``, ``"never"``.
    :param fusion: fuse chains of element-wise tasks first (:func:`dcaccel.transforms.fusion.fuse_elementwise`,
        on a copy of the SDFG).
    :param symbols: values of symbolic sizes to substitute (needed for a symbolic number of tasks);
        None takes the default sizes of the ``LoweredWorkload``'s workload, ``{}`` keeps every size symbolic.
    :return: a DAG that meets the contract (``validate()`` passed), whose volumes are ints, or SymPy
        expressions in the remaining symbols.
    :raises DAGContractError: when no contract repair makes the DAG valid.
    """
    from dcaccel.dag.scopes import read_program

    granularity = Granularity.parse(granularity)
    check_options("extract", edge_volume, sink)
    workload = getattr(lowered, "workload", None)
    if symbols is None:
        symbols = getattr(workload, "symbols", None)
    sdfg = getattr(lowered, "sdfg", lowered)
    origins = origins_of(lowered)
    if fusion:
        from dcaccel.transforms.fusion import fuse_elementwise

        sdfg = copy.deepcopy(sdfg)
        origins = _fused_origins(origins, fuse_elementwise(sdfg))
    program = read_program(sdfg, symbols, positive_sizes=True, sources=origins)
    name = name or getattr(workload, "name", None) or program.name
    return extract_program(program, granularity, edge_volume, sink=sink, name=name)


def extract_program(
    program: LoweredProgram,
    granularity: Granularity,
    edge_volume: str,
    *,
    sink: str = "auto",
    name: str | None = None,
    groups: dict[int, TaskGroup] | None = None,
) -> TaskDAG:
    """The task DAG of the steps of ``program`` (what :func:`extract` does once it has read the SDFG).

    ``groups`` holds the tasks of steps already instantiated at ``granularity``, by step index (the
    fragments of :mod:`dcaccel.dag.compose` pass theirs); steps missing from it are instantiated here.
    """
    name = name or program.name
    with without_cycle_collection():
        return _extract_program(program, granularity, edge_volume, sink, name, groups)


def _extract_program(program, granularity, edge_volume, sink, name, groups) -> TaskDAG:
    if program.symbols:
        from dcaccel.dag.symbolic import SymbolicGraph

        walk = walk_program(program, lambda: SymbolicGraph(granularity), edge_volume)
        nodes, edges, produced = walk.graph.materialise()
        columns = ([node.kind for node in nodes], [node.label for node in nodes], [node.info for node in nodes])
        ends = tuple(np.array([pair[side] for pair in edges], dtype=np.int64) for side in (0, 1))
        rounded = (vol.rounded(edge.volume(edge_volume)) for edge in edges.values())
        volumes = np.fromiter(rounded, dtype=object, count=len(edges))
    else:
        groups = {} if groups is None else groups
        walk = walk_program(program, lambda: ConcreteGraph(granularity, groups), edge_volume)
        graph = walk.graph
        table, produced = graph.edges(), graph.produced
        columns = (graph.kinds, graph.labels, graph.infos)
        ends = (table.src, table.dst)
        volumes = table.volume(edge_volume)
        _warn_fewer_tiles(graph.fewer_tiles, granularity)
    for data, fault in walk.inserted.items():
        logger.debug("extract %s: container '%s' made a buffer node (%s)", name, data, fault.reason)
    dag = _emit(*columns, *ends, volumes, produced, sink, name)
    try:
        dag.validate()
    except DAGContractError as err:
        raise DAGContractError(f"extract: {err}") from None
    return dag


def _warn_fewer_tiles(fewer: list[str], granularity: Granularity) -> None:
    if fewer:
        shown = ", ".join(fewer[:5]) + (", ..." if len(fewer) > 5 else "")
        warnings.warn(
            f"extract: {len(fewer)} task map(s) split into fewer than {granularity.tiles} equal tiles "
            f"(the largest divisor of their iterations): {shown}",
            stacklevel=3,
        )


def origins_of(lowered) -> dict[str, TaskInfo]:
    """Map-entry guid → the record of the source node it lowers (``op``, ``node``, ``implementation``),
    from the ``origins`` table of a ``LoweredWorkload`` (guids survive inlining and copies of the SDFG)."""
    return {
        entry.guid: TaskInfo(op=origin.op_type, node=origin.node, implementation=origin.implementation)
        for entry, origin in getattr(lowered, "origins", {}).items()
    }


def _fused_origins(origins: dict[str, TaskInfo], fusions) -> dict[str, TaskInfo]:
    """The origins after ``fusions``: a fused task keeps the first origin and lists the nodes of all of
    them, in program order, as ``fused``."""
    parts = {guid: [origin] for guid, origin in origins.items()}
    for fusion in fusions:
        parts[fusion.kept] = parts.get(fusion.kept, []) + parts.pop(fusion.merged, [])
    return {
        guid: items[0].derive(fused=tuple(item.node for item in items)) if len(items) > 1 else items[0]
        for guid, items in parts.items()
        if items
    }


def _emit(
    kinds: list[NodeKind],
    labels: list[str],
    infos: list[TaskInfo],
    src: np.ndarray,
    dst: np.ndarray,
    volumes: np.ndarray,
    produced: Mapping[int, Any],
    sink: str,
    name: str,
) -> TaskDAG:
    """The TaskDAG of a walk's nodes (as columns) and edges (``src[e] -> dst[e]`` with ``volumes[e]``: int64,
    or an object array of ints and rounded expressions): pseudo source first, nodes and edges in walk
    order, then the pseudo sink."""
    dag = TaskDAG(name)
    source = dag.add_node(NodeKind.SOURCE, "pseudo-source")
    n = len(kinds)
    dag.add_nodes(kinds, labels, infos)  # walk node i is node i + 1
    dag.add_edges(src + 1, dst + 1, volumes)
    first_out = _first_volumes(src, volumes)
    first_in = _first_volumes(dst, volumes)
    has_pred = np.zeros(n, dtype=bool)
    has_pred[dst] = True
    fed = np.flatnonzero(~has_pred).tolist()
    dag.add_edges(
        [source] * len(fed),
        [i + 1 for i in fed],
        [first_out[i] if i in first_out else vol.rounded(produced.get(i, 0)) for i in fed],
    )
    exits = [i for i in range(n) if i not in first_out]
    if sink == "always" or (sink == "auto" and len(exits) > 1):
        pseudo_sink = dag.add_node(NodeKind.SINK, "pseudo-sink")
        for i in exits:
            volume = first_in.get(i) if kinds[i] is NodeKind.BUFFER else produced.get(i)
            dag.add_edge(i + 1, pseudo_sink, vol.rounded(volume if volume is not None else first_in.get(i, 0)))
    return dag


def _first_volumes(ends: np.ndarray, volumes: np.ndarray) -> dict[int, Any]:
    """Node → the volume of its first edge among those whose end (source or target) ``ends`` lists."""
    nodes, first = np.unique(ends, return_index=True)
    return dict(zip(nodes.tolist(), volumes[first].tolist(), strict=True))
