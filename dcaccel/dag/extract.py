"""The canonical task DAG of a fully lowered program (architecture.md, Contract 2; docs/dag.md).

``extract(lowered)`` walks the steps of the program (:mod:`dcaccel.dag.scopes`) in program order
with the one walk of :mod:`dcaccel.dag.walk` and builds a :class:`~dcaccel.dag.taskdag.TaskDAG`:

* every task scope becomes one task, a task map one task per iteration (``granularity="task"``),
  one task (``"coarse"``) or T tasks of consecutive iterations (``("tiles", T)``);
* every buffer container becomes one buffer node, created when first accessed; a buffer written
  again after it was read gets a new node (a new *version*, ``meta["version"]``), so the graph
  stays acyclic for in-place updates;
* a container that is not a buffer is collapsed: its producers connect straight to its consumers.
  A consumer is connected to the producers whose written elements it reads (element boxes are
  intersected, vectorised over the iterations of a task map);
* edge volume = the consumer's element accesses. Through a collapsed container the ``"exact"``
  rule counts the consumer's accesses of what that producer wrote; the ``"reference"`` rule puts
  the consumer's whole read volume on every in-edge (the seed's tool);
* where the result would break the DAG contract (a stream re-read, unequal in-volumes into a
  task, a task with non-uniform outputs) the collapsed container at fault is turned into a buffer
  node, with a warning and ``meta["inserted_buffer"]`` giving the reason;
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
import warnings
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import sympy

from dcaccel.dag import volume as vol
from dcaccel.dag.taskdag import NodeKind, TaskDAG
from dcaccel.dag.walk import (
    EDGE_VOLUME_RULES,
    SINK_MODES,
    Edge,
    Fault,
    Granularity,
    Node,
    Rows,
    add_edge,
    box_size,
    check_options,
    iteration_points,
    iteration_rows,
    single_rows,
    tiles_of,
    walk_program,
    without_cycle_collection,
)
from dcaccel.errors import DAGContractError

if TYPE_CHECKING:
    from dcaccel.dag.scopes import Access, LoweredProgram, TaskScope

__all__ = ["EDGE_VOLUME_RULES", "SINK_MODES", "ConcreteGraph", "Granularity", "extract", "extract_program"]

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
class _Group:
    """The DAG tasks one task scope becomes: labels, metadata and their accesses per container."""

    labels: list[str]
    metas: list[dict[str, Any]]
    reads: dict[str, Rows]
    writes: dict[str, Rows]
    accumulated: frozenset[str] = frozenset()


def _instantiate(scope: TaskScope, granularity: Granularity) -> _Group:
    """The tasks of ``scope`` at ``granularity`` with their accesses."""
    base = {"state": scope.state, **scope.meta}
    accumulated = frozenset(a.data for a in scope.whole_writes if a.accumulate)
    if not scope.is_task_map or granularity.mode == "coarse":
        meta = dict(base)
        if scope.is_task_map:
            meta["iterations"] = vol.concrete(vol.iterations(scope.ranges))
        return _Group(
            [scope.label],
            [meta],
            {a.data: single_rows(a) for a in scope.whole_reads},
            {a.data: single_rows(a) for a in scope.whole_writes},
            accumulated,
        )
    if granularity.mode == "tiles":
        tiles = tiles_of(scope, granularity)
        labels = [f"{scope.label}{t}" for t in range(len(tiles.bounds))]
        metas = [{**base, "tile": t, "iterations": [a, b]} for t, (a, b) in enumerate(tiles.bounds)]
        return _Group(labels, metas, tiles.reads, tiles.writes, accumulated)
    points = iteration_points(scope)
    names = [str(p) for p in scope.params]
    labels = [f"{scope.label}{i}" for i in range(points.shape[0])]
    metas = [
        {**base, "iteration": i, "index": dict(zip(names, map(int, point), strict=True))}
        for i, point in enumerate(points)
    ]
    reads = {a.data: iteration_rows(a, scope.params, points) for a in scope.reads}
    writes = {a.data: iteration_rows(a, scope.params, points) for a in scope.writes}
    return _Group(labels, metas, reads, writes, accumulated)


class ConcreteGraph:
    """The concrete back-end of :class:`~dcaccel.dag.walk.Walk`: every task a node, volumes ints.

    Members of a step are arrays of node ids, accesses :class:`~dcaccel.dag.walk.Rows` (one row per
    member). ``groups`` caches the tasks of each step across the passes of the contract repair.
    """

    def __init__(self, granularity: Granularity, groups: dict[int, _Group]):
        self.granularity = granularity
        self.groups = groups
        self.nodes: list[Node] = []
        self.edges: dict[tuple[int, int], Edge] = {}
        self.produced: dict[int, Any] = {}
        self.tasks: list[int] = []
        self.fewer_tiles: list[str] = []

    # -- nodes and edges
    def add_node(self, kind: NodeKind, label: str, meta: dict[str, Any]) -> int:
        self.nodes.append(Node(kind, label, meta))
        return len(self.nodes) - 1

    def add_edge(self, src: int, dst: int, exact, reference, via: str | None = None) -> None:
        add_edge(self.edges, src, dst, exact, reference, via)

    def add_buffer(self, data: str, meta: dict[str, Any]) -> int:
        return self.add_node(NodeKind.BUFFER, data, meta)

    def one(self, node: int) -> np.ndarray:
        return np.array([node])

    def single(self, access: Access) -> Rows:
        return single_rows(access)

    def task_group(self, index: int, scope: TaskScope) -> _Group:
        group = self.groups.get(index)
        if group is None:
            group = self.groups[index] = _instantiate(scope, self.granularity)
        if self.granularity.mode == "tiles" and scope.is_task_map and len(group.labels) < self.granularity.tiles:
            self.fewer_tiles.append(f"{scope.label} ({len(group.labels)})")
        return group

    def add_tasks(self, group: _Group) -> np.ndarray:
        nodes = [
            self.add_node(NodeKind.TASK, label, meta) for label, meta in zip(group.labels, group.metas, strict=True)
        ]
        self.tasks.extend(nodes)
        return np.array(nodes, dtype=int)

    def buffer_edges(self, sources: np.ndarray, targets: np.ndarray, rows: Rows) -> None:
        """One edge per row of ``rows`` (from or into a single buffer node), carrying the row's volume."""
        n = len(rows.volume)
        pairs = zip(np.broadcast_to(sources, n).tolist(), np.broadcast_to(targets, n).tolist(), strict=True)
        for (src, dst), volume in zip(pairs, rows.volume.tolist(), strict=True):
            self.add_edge(src, dst, volume, volume)

    def record_output(self, members: np.ndarray, rows: Rows) -> None:
        for node, volume in zip(members.tolist(), rows.volume.tolist(), strict=True):
            self.produced.setdefault(node, volume)

    # -- collapsed containers
    def link(self, producers: np.ndarray, w: Rows, consumers: np.ndarray, r: Rows, via: str) -> sympy.Basic:
        """Edges from ``producers`` (which wrote ``w``) to ``consumers`` reading ``r`` of the collapsed ``via``.

        The exact volume of an edge is the consumer's accesses that fall on the elements this
        producer wrote: volume · (elements written in the overlap) / (elements read). Returns whether
        a consumer reads a producer's elements more often than the producer wrote them.
        """
        p_index, c_index, overlap = _overlapping_pairs(w, r)
        box_w = box_size(w.lo, w.hi)
        columns = zip(
            producers[p_index].tolist(),
            consumers[c_index].tolist(),
            overlap.tolist(),
            w.elements[p_index].tolist(),
            w.volume[p_index].tolist(),
            box_w[p_index].tolist(),
            r.elements[c_index].tolist(),
            r.volume[c_index].tolist(),
            strict=True,
        )
        rereads = False
        for producer, consumer, ov, e_w, v_w, b_w, e_r, v_r in columns:
            numerator, denominator = v_r * e_w * ov, b_w * e_r
            rereads = rereads or numerator * b_w > v_w * ov * denominator
            quotient, remainder = divmod(numerator, denominator)
            exact = quotient if not remainder else vol.rounded(Fraction(numerator, denominator))
            self.add_edge(producer, consumer, exact, v_r, via=via)
        return sympy.true if rereads else sympy.false

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
        or into buffers, else the largest)."""
        found: dict[str, Fault] = {}
        keys = {pair: vol.key(edge.volume(rule)) for pair, edge in self.edges.items()}
        first: tuple[dict[int, int | str], dict[int, int | str]] = ({}, {})
        mixed: tuple[set[int], set[int]] = (set(), set())
        for pair, key in keys.items():
            for side in (0, 1):
                node = pair[1 - side]
                if first[side].setdefault(node, key) != key:
                    mixed[side].add(node)
        tasks = set(self.tasks)
        for side, what in ((0, "unequal in-volumes into"), (1, "non-uniform output of")):
            suspects = mixed[side] & tasks
            if not suspects:
                continue
            edges: dict[int, list[tuple[int | str, Edge]]] = {node: [] for node in suspects}
            for pair, edge in self.edges.items():
                node = pair[1 - side]
                if node in edges:
                    edges[node].append((keys[pair], edge))
            for node, pairs in edges.items():
                fixed = [key for key, edge in pairs if not edge.via]
                target = Counter(fixed).most_common(1)[0][0] if fixed else _largest([key for key, _ in pairs])
                for key, edge in pairs:
                    if edge.via and key != target:
                        for data in sorted(edge.via):
                            found.setdefault(data, Fault(f"{what} task {self.nodes[node].label}"))
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
    groups: dict[int, _Group] | None = None,
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
    else:
        groups = {} if groups is None else groups
        walk = walk_program(program, lambda: ConcreteGraph(granularity, groups), edge_volume)
        nodes, edges, produced = walk.graph.nodes, walk.graph.edges, walk.graph.produced
        _warn_fewer_tiles(walk.graph.fewer_tiles, granularity)
    for data, fault in walk.inserted.items():
        warnings.warn(f"extract: container '{data}' made a buffer node ({fault.reason})", stacklevel=3)
    dag = _emit(nodes, edges, produced, edge_volume, sink, name)
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


def origins_of(lowered) -> dict[str, dict[str, str]]:
    """Map-entry guid → the source node it lowers (``op``, ``node``, ``implementation``), from the
    ``origins`` table of a ``LoweredWorkload`` (guids survive inlining and copies of the SDFG)."""
    return {
        entry.guid: {"op": origin.op_type, "node": origin.node, "implementation": origin.implementation}
        for entry, origin in getattr(lowered, "origins", {}).items()
    }


def _fused_origins(origins: dict[str, dict], fusions) -> dict[str, dict]:
    """The origins after ``fusions``: a fused task keeps the first origin and lists all of them,
    in program order, under ``fused``."""
    parts = {guid: [origin] for guid, origin in origins.items()}
    for fusion in fusions:
        parts[fusion.kept] = parts.get(fusion.kept, []) + parts.pop(fusion.merged, [])
    return {
        guid: {**items[0], "fused": items} if len(items) > 1 else items[0] for guid, items in parts.items() if items
    }


def _emit(
    nodes: list[Node], edges: dict[tuple[int, int], Edge], produced: Mapping[int, Any], rule: str, sink: str, name: str
) -> TaskDAG:
    """The TaskDAG of a walk's nodes and edges: pseudo source first, nodes and edges in walk order,
    then the pseudo sink."""
    dag = TaskDAG(name)
    source = dag.add_node(NodeKind.SOURCE, "pseudo-source")
    ids = [dag.add_node(node.kind, node.label, **node.meta) for node in nodes]
    has_pred = [False] * len(nodes)
    first_out: dict[int, Any] = {}
    first_in: dict[int, Any] = {}
    for (src, dst), edge in edges.items():
        volume = vol.rounded(edge.volume(rule))
        dag.add_edge(ids[src], ids[dst], volume)
        has_pred[dst] = True
        first_out.setdefault(src, volume)
        first_in.setdefault(dst, volume)
    for i, node_id in enumerate(ids):
        if not has_pred[i]:
            dag.add_edge(source, node_id, first_out.get(i, vol.rounded(produced.get(i, 0))))
    exits = [i for i in range(len(ids)) if i not in first_out]
    if sink == "always" or (sink == "auto" and len(exits) > 1):
        pseudo_sink = dag.add_node(NodeKind.SINK, "pseudo-sink")
        for i in exits:
            volume = first_in.get(i) if nodes[i].kind is NodeKind.BUFFER else produced.get(i)
            dag.add_edge(ids[i], pseudo_sink, vol.rounded(volume if volume is not None else first_in.get(i, 0)))
    return dag
