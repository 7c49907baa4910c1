"""The canonical task DAG of a fully lowered program (architecture.md, Contract 2; docs/dag.md).

``extract(lowered)`` walks the steps of the program (:mod:`dcaccel.dag.scopes`) in program order
and builds a :class:`~dcaccel.dag.taskdag.TaskDAG`:

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
  (``"always"``) or never (``"never"``: the seed's DAGs end in the output buffer).

Per-iteration subsets and volumes are read once per task map as expressions in its parameters and
evaluated for all iterations at once with NumPy; nothing is compiled and nothing re-propagated.
This module imports DaCe only when called (``dcaccel.dag`` stays importable without it).
"""

from __future__ import annotations

import copy
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import sympy

from dcaccel.dag.taskdag import NodeKind, TaskDAG
from dcaccel.dag.versions import BufferVersions
from dcaccel.errors import DcaccelError

if TYPE_CHECKING:
    from dcaccel.dag.scopes import Access, Copy, LoweredProgram, TaskScope

EDGE_VOLUME_RULES = ("exact", "reference")
SINK_MODES = ("auto", "always", "never")

#: Functions DaCe writes into subset and volume expressions, for evaluation with NumPy.
_NUMPY_FUNCTIONS = {
    "int_floor": np.floor_divide,
    "int_ceil": lambda a, b: -np.floor_divide(-a, b),
    "Min": np.minimum,
    "Max": np.maximum,
}


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


# -- accesses of a group of tasks --------------------------------------------------------------


@dataclass
class _Rows:
    """The accesses of n tasks to one container: element boxes ``lo``/``hi`` (n × dims, inclusive),
    distinct ``elements`` and element accesses ``volume`` (n). Integer arrays, or object arrays of
    SymPy expressions when sizes are symbolic."""

    lo: np.ndarray
    hi: np.ndarray
    elements: np.ndarray
    volume: np.ndarray

    @property
    def symbolic(self) -> bool:
        return self.volume.dtype == object

    def take(self, index) -> _Rows:
        return _Rows(self.lo[index], self.hi[index], self.elements[index], self.volume[index])


@dataclass
class _Producers:
    """Tasks (or buffer nodes, through a copy) whose writes a collapsed container holds."""

    nodes: np.ndarray
    rows: _Rows


def _box_size(lo, hi):
    if lo.dtype == object:
        return np.array(
            [sympy.Mul(*(h - b + 1 for b, h in zip(lr, hr, strict=True))) for lr, hr in zip(lo, hi, strict=True)]
        )
    return np.prod(hi - lo + 1, axis=-1)


def _overlap(w_lo, w_hi, r_lo, r_hi):
    """Number of elements common to the boxes (broadcast over leading dimensions)."""
    if w_lo.dtype == object or r_lo.dtype == object:
        lo = np.vectorize(sympy.Max, otypes=[object])(w_lo, r_lo)
        hi = np.vectorize(sympy.Min, otypes=[object])(w_hi, r_hi)
        extent = np.vectorize(lambda a, b: sympy.Max(0, b - a + 1), otypes=[object])(lo, hi)
        return np.array([sympy.Mul(*row) for row in extent.reshape(-1, extent.shape[-1])], dtype=object).reshape(
            extent.shape[:-1]
        )
    extent = np.minimum(w_hi, r_hi) - np.maximum(w_lo, r_lo) + 1
    return np.prod(np.clip(extent, 0, None), axis=-1)


def _as_volume(value) -> int | sympy.Expr:
    """A volume as a Python int when concrete (a fraction rounded half up, a positive one to at
    least 1), else a simplified SymPy expression."""
    if isinstance(value, int):
        return value
    if isinstance(value, Fraction):
        if value.denominator == 1:
            return int(value)
        return max(1, int(value + Fraction(1, 2))) if value > 0 else 0
    expr = sympy.sympify(value)
    if expr.is_Integer:
        return int(expr)
    if expr.is_Rational:
        return _as_volume(Fraction(int(expr.p), int(expr.q)))
    return sympy.simplify(expr)


#: Largest number of (producer, consumer) box pairs intersected in one NumPy operation.
_PAIR_CHUNK = 1 << 21


def _overlapping_pairs(w: _Rows, r: _Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def _share(volume, part, whole):
    """``volume · part / whole``: the accesses that fall on ``part`` of ``whole`` elements."""
    if any(isinstance(v, sympy.Basic) for v in (volume, part, whole)):
        if whole == 0:
            return sympy.Integer(0)
        return sympy.sympify(volume) * part / whole
    if whole == 0:
        return Fraction(0)
    return Fraction(int(volume) * int(part), int(whole))


def _is_zero(value) -> bool:
    return bool(value == 0) if not isinstance(value, sympy.Basic) else value.is_zero is True


# -- task instances ----------------------------------------------------------------------------


@dataclass
class _Group:
    """The DAG tasks one task scope becomes: labels, metadata and their accesses per container."""

    labels: list[str]
    metas: list[dict[str, Any]]
    reads: dict[str, _Rows]
    writes: dict[str, _Rows]
    accumulated: frozenset[str] = frozenset()


def _concrete(expr: sympy.Expr) -> bool:
    return not expr.free_symbols


def _single_rows(access: Access) -> _Rows:
    values = [*access.begin, *access.end, access.elements, access.volume]
    dtype = np.int64 if all(_concrete(v) for v in values) else object
    convert = int if dtype is np.int64 else (lambda v: v)
    dims = len(access.begin)
    return _Rows(
        np.array([[convert(v) for v in access.begin]], dtype=dtype).reshape(1, dims),
        np.array([[convert(v) for v in access.end]], dtype=dtype).reshape(1, dims),
        np.array([convert(access.elements)], dtype=dtype),
        np.array([convert(access.volume)], dtype=dtype),
    )


def _iteration_points(scope: TaskScope) -> np.ndarray:
    """The iterations of the task map's outer map, row-major, as an (n × params) integer array."""
    axes = []
    for begin, end, step in scope.ranges:
        if not all(_concrete(v) for v in (begin, end, step)):
            raise DcaccelError(
                f"extract: task map '{scope.label}' has a symbolic number of iterations "
                f"({sympy.sympify(scope.iterations)}); pass symbols=..., use granularity='coarse' "
                "or dcaccel.dag.symbolic.symbolic_metrics"
            )
        axes.append(np.arange(int(begin), int(end) + 1, int(step), dtype=np.int64))
    grids = np.meshgrid(*axes, indexing="ij")
    return np.stack([g.reshape(-1) for g in grids], axis=1)


def _evaluate(expr: sympy.Expr, params: Sequence[sympy.Symbol], points: np.ndarray) -> np.ndarray:
    """``expr`` at every iteration in ``points``: int64 when concrete, else SymPy objects."""
    n = points.shape[0]
    if not expr.free_symbols - set(params):
        if not expr.free_symbols:
            return np.full(n, int(expr), dtype=np.int64)
        function = sympy.lambdify(params, expr, modules=[_NUMPY_FUNCTIONS, "numpy"])
        values = np.asarray(function(*points.T))
        return np.broadcast_to(values, (n,)).astype(np.int64)
    return np.array(
        [expr.xreplace(dict(zip(params, map(sympy.Integer, point), strict=True))) for point in points], dtype=object
    )


def _iteration_rows(access: Access, params, points) -> _Rows:
    exprs = [*access.begin, *access.end, access.elements, access.volume]
    columns = [_evaluate(e, params, points) for e in exprs]
    dtype = object if any(c.dtype == object for c in columns) else np.int64
    columns = [c.astype(dtype) for c in columns]
    dims = len(access.begin)
    n = points.shape[0]
    lo = np.stack(columns[:dims], axis=1) if dims else np.zeros((n, 0), dtype=dtype)
    hi = np.stack(columns[dims : 2 * dims], axis=1) if dims else np.zeros((n, 0), dtype=dtype)
    return _Rows(lo, hi, columns[-2], columns[-1])


def _tile_rows(rows: _Rows, bounds: Sequence[tuple[int, int]]) -> _Rows:
    """The accesses of tiles of consecutive iterations: volumes summed, boxes the bounding box."""
    lo = np.stack([rows.lo[a:b].min(axis=0) for a, b in bounds])
    hi = np.stack([rows.hi[a:b].max(axis=0) for a, b in bounds])
    elements = np.minimum(np.array([rows.elements[a:b].sum() for a, b in bounds]), _box_size(lo, hi))
    volume = np.array([rows.volume[a:b].sum() for a, b in bounds])
    return _Rows(lo, hi, elements, volume)


def tile_count(iterations: int, tiles: int) -> int:
    """The number of equal tiles a task map of ``iterations`` iterations is split into for
    ``("tiles", tiles)``: the largest divisor of ``iterations`` not above ``tiles`` (equal tiles keep
    the volumes of their edges equal, as the DAG contract requires)."""
    return max((d for d in range(1, min(tiles, iterations) + 1) if iterations % d == 0), default=0)


def _instantiate(scope: TaskScope, granularity: Granularity) -> _Group:
    """The tasks of ``scope`` at ``granularity`` with their accesses."""
    base = {"state": scope.state, **scope.meta}
    accumulated = frozenset(a.data for a in scope.whole_writes if a.accumulate)
    if not scope.is_task_map or granularity.mode == "coarse":
        meta = dict(base)
        if scope.is_task_map:
            meta["iterations"] = _as_volume(scope.iterations)
        return _Group(
            [scope.label],
            [meta],
            {a.data: _single_rows(a) for a in scope.whole_reads},
            {a.data: _single_rows(a) for a in scope.whole_writes},
            accumulated,
        )
    points = _iteration_points(scope)
    params = scope.params
    names = [str(p) for p in params]
    reads = {a.data: _iteration_rows(a, params, points) for a in scope.reads}
    writes = {a.data: _iteration_rows(a, params, points) for a in scope.writes}
    n = points.shape[0]
    if granularity.mode == "task":
        labels = [f"{scope.label}{i}" for i in range(n)]
        metas = [
            {**base, "iteration": i, "index": dict(zip(names, map(int, point), strict=True))}
            for i, point in enumerate(points)
        ]
        return _Group(labels, metas, reads, writes, accumulated)
    tiles = tile_count(n, granularity.tiles)
    size = n // tiles if tiles else 0
    bounds = [(t * size, (t + 1) * size) for t in range(tiles)]
    labels = [f"{scope.label}{t}" for t in range(tiles)]
    metas = [{**base, "tile": t, "iterations": [a, b]} for t, (a, b) in enumerate(bounds)]
    return _Group(
        labels,
        metas,
        {d: _tile_rows(r, bounds) for d, r in reads.items()},
        {d: _tile_rows(r, bounds) for d, r in writes.items()},
        accumulated,
    )


# -- the walk ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Edge:
    """An edge under construction: its volume under both rules, and the collapsed containers it
    comes through (empty for an edge from or into a buffer node)."""

    exact: Any
    reference: Any
    via: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Node:
    kind: NodeKind
    label: str
    meta: dict[str, Any]


class _Walk(BufferVersions):
    """One pass over the program that builds nodes and edges. Buffer nodes are the marked containers
    plus ``inserted`` (container → why the contract repair made it a buffer); ``groups`` caches the
    tasks of each step across passes."""

    def __init__(
        self,
        program: LoweredProgram,
        granularity: Granularity,
        inserted: Mapping[str, str],
        groups: dict[int, _Group],
    ):
        super().__init__()
        self.program = program
        self.granularity = granularity
        self.inserted = inserted
        self.groups = groups
        self.nodes: list[_Node] = []
        self.edges: dict[tuple[int, int], _Edge] = {}
        self.produced: dict[int, Any] = {}
        self.producers: dict[str, list[_Producers]] = {}
        self.versions: Counter[str] = Counter()
        self.reused: dict[str, str] = {}
        self.tasks: list[int] = []
        self.fewer_tiles: list[str] = []

    # -- nodes and edges
    def is_buffer(self, data: str) -> bool:
        return self.program.containers[data].is_buffer or data in self.inserted

    def add_node(self, kind: NodeKind, label: str, meta: dict[str, Any]) -> int:
        self.nodes.append(_Node(kind, label, meta))
        return len(self.nodes) - 1

    def add_edge(self, src: int, dst: int, exact, reference, via: str | None = None) -> None:
        edge = self.edges.get((src, dst))
        if edge is None:
            self.edges[(src, dst)] = edge = _Edge(exact, reference)
        else:
            edge.exact += exact
            edge.reference += reference
        if via is not None:
            edge.via.add(via)

    def create_buffer(self, data: str) -> int:
        container = self.program.containers[data]
        meta: dict[str, Any] = {"container": data, "version": self.versions[data]}
        if container.reason is not None:
            meta["reason"] = container.reason.value
        else:
            meta["inserted_buffer"] = self.inserted[data]
        self.versions[data] += 1
        return self.add_node(NodeKind.BUFFER, data, meta)

    # -- steps
    def run(self) -> _Walk:
        from dcaccel.dag.scopes import Copy

        for index, step in enumerate(self.program.steps):
            if isinstance(step, Copy):
                self.copy(step)
            else:
                self.task(index, step)
        return self

    def task(self, index: int, scope: TaskScope) -> None:
        group = self.groups.get(index)
        if group is None:
            group = self.groups[index] = _instantiate(scope, self.granularity)
        if self.granularity.mode == "tiles" and scope.is_task_map and len(group.labels) < self.granularity.tiles:
            self.fewer_tiles.append(f"{scope.label} ({len(group.labels)})")
        read_buffers = {data: self.read_buffer(data) for data in group.reads if self.is_buffer(data)}
        nodes = np.array(
            [self.add_node(NodeKind.TASK, lb, m) for lb, m in zip(group.labels, group.metas, strict=True)], dtype=int
        )
        self.tasks.extend(nodes.tolist())
        for data, rows in group.reads.items():
            if data in read_buffers:
                for node, volume in zip(nodes.tolist(), rows.volume.tolist(), strict=True):
                    self.add_edge(read_buffers[data], node, volume, volume)
            else:
                self.consume(data, nodes, rows)
        for data, rows in group.writes.items():
            for node, volume in zip(nodes.tolist(), rows.volume.tolist(), strict=True):
                self.produced.setdefault(node, volume)
            if data in group.accumulated:
                self.read_accumulator(data, nodes, rows)
            if self.is_buffer(data):
                target = self.write_buffer(data)
                for node, volume in zip(nodes.tolist(), rows.volume.tolist(), strict=True):
                    self.add_edge(node, target, volume, volume)
            else:
                self.produce(data, nodes, rows)

    def read_accumulator(self, data: str, nodes: np.ndarray, rows: _Rows) -> None:
        """An accumulating write (write-conflict resolution) reads the content it updates: edges from
        the container's current buffer node, or from its producers, carrying the write accesses."""
        if not self.is_buffer(data):
            self.consume(data, nodes, rows)
        elif data in self.buffer_node:
            source = self.read_buffer(data)
            for node, volume in zip(nodes.tolist(), rows.volume.tolist(), strict=True):
                self.add_edge(source, node, volume, volume)

    def copy(self, copy: Copy) -> None:
        src, dst = copy.src, copy.dst
        src_rows, dst_rows = _single_rows(src), _single_rows(dst)
        if self.is_buffer(src.data):
            source = self.read_buffer(src.data)
            if self.is_buffer(dst.data):
                self.add_edge(source, self.write_buffer(dst.data), dst_rows.volume[0], dst_rows.volume[0])
            else:
                self.produce(dst.data, np.array([source]), dst_rows)
        elif self.is_buffer(dst.data):
            self.consume(src.data, np.array([self.write_buffer(dst.data)]), src_rows)
        else:
            self.forward(src.data, src_rows, dst.data, dst_rows)

    # -- collapsed containers
    def consume(self, data: str, consumers: np.ndarray, rows: _Rows) -> None:
        """Edges from the producers of the collapsed ``data`` to ``consumers`` reading ``rows``.

        The exact volume of an edge is the consumer's accesses that fall on the elements this
        producer wrote: volume · (elements written in the overlap) / (elements read). A consumer
        reading a producer's elements more often than the producer wrote them re-reads a stream.
        """
        for block in self.producers.get(data, []):
            w = block.rows
            if w.symbolic or rows.symbolic:
                self.consume_symbolic(data, block, consumers, rows)
                continue
            p_index, c_index, overlap = _overlapping_pairs(w, rows)
            box_w = _box_size(w.lo, w.hi)
            columns = zip(
                block.nodes[p_index].tolist(),
                consumers[c_index].tolist(),
                overlap.tolist(),
                w.elements[p_index].tolist(),
                w.volume[p_index].tolist(),
                box_w[p_index].tolist(),
                rows.elements[c_index].tolist(),
                rows.volume[c_index].tolist(),
                strict=True,
            )
            for producer, consumer, ov, e_w, v_w, b_w, e_r, v_r in columns:
                numerator, denominator = v_r * e_w * ov, b_w * e_r
                if numerator * b_w > v_w * ov * denominator:
                    self.reused.setdefault(data, "a consumer re-reads what a producer streams")
                quotient, remainder = divmod(numerator, denominator)
                exact = quotient if not remainder else _as_volume(Fraction(numerator, denominator))
                self.add_edge(producer, consumer, exact, v_r, via=data)

    def consume_symbolic(self, data: str, block: _Producers, consumers: np.ndarray, rows: _Rows) -> None:
        """:meth:`consume` for symbolic boxes or volumes, one pair at a time."""
        w = block.rows
        box_w = _box_size(w.lo, w.hi)
        for c in range(len(consumers)):
            overlap = _overlap(w.lo, w.hi, rows.lo[c : c + 1], rows.hi[c : c + 1])
            for p in _nonzero_symbolic(overlap).tolist():
                exact = _share(rows.volume[c], _share(w.elements[p], overlap[p], box_w[p]), rows.elements[c])
                if _exceeds(exact, _share(w.volume[p], overlap[p], box_w[p])):
                    self.reused.setdefault(data, "a consumer re-reads what a producer streams")
                self.add_edge(int(block.nodes[p]), int(consumers[c]), exact, rows.volume[c], via=data)

    def produce(self, data: str, nodes: np.ndarray, rows: _Rows) -> None:
        """Record ``nodes`` as producers of the collapsed ``data``; forget producers they overwrite."""
        if not rows.symbolic and len(nodes):
            lo, hi = rows.lo.min(axis=0), rows.hi.max(axis=0)
            if rows.elements.sum() >= np.prod(hi - lo + 1):
                kept = []
                for block in self.producers.get(data, []):
                    if block.rows.symbolic:
                        kept.append(block)
                        continue
                    inside = np.all((block.rows.lo >= lo) & (block.rows.hi <= hi), axis=1)
                    if not inside.all():
                        kept.append(_Producers(block.nodes[~inside], block.rows.take(~inside)))
                self.producers[data] = kept
        self.producers.setdefault(data, []).append(_Producers(nodes, rows))

    def forward(self, src: str, src_rows: _Rows, dst: str, dst_rows: _Rows) -> None:
        """A copy between two collapsed containers: the producers of ``src`` become producers of ``dst``."""
        same_shape = _same_extent(src_rows, dst_rows)
        for block in self.producers.get(src, []):
            w = block.rows
            overlap = _overlap(w.lo, w.hi, src_rows.lo, src_rows.hi)
            hits = np.nonzero(overlap)[0] if overlap.dtype != object else _nonzero_symbolic(overlap)
            if not len(hits):
                continue
            box_w = _box_size(w.lo, w.hi)
            if same_shape:
                offset = dst_rows.lo[0] - src_rows.lo[0]
                lo = np.maximum(w.lo[hits], src_rows.lo) + offset
                hi = np.minimum(w.hi[hits], src_rows.hi) + offset
            else:
                lo = np.repeat(dst_rows.lo, len(hits), axis=0)
                hi = np.repeat(dst_rows.hi, len(hits), axis=0)
            elements = np.array([_share(w.elements[p], overlap[p], box_w[p]) for p in hits.tolist()], dtype=object)
            volume = np.array([_share(w.volume[p], overlap[p], box_w[p]) for p in hits.tolist()], dtype=object)
            if not src_rows.symbolic and not w.symbolic:
                elements = np.array([_as_volume(v) for v in elements], dtype=np.int64)
                volume = np.array([_as_volume(v) for v in volume], dtype=np.int64)
            self.produce(dst, block.nodes[hits], _Rows(lo, hi, elements, volume))


def _same_extent(a: _Rows, b: _Rows) -> bool:
    ea = [x for x in (a.hi[0] - a.lo[0] + 1).tolist() if x != 1]
    eb = [x for x in (b.hi[0] - b.lo[0] + 1).tolist() if x != 1]
    return (
        len(a.lo[0]) == len(b.lo[0])
        and ea == eb
        and all(x == y for x, y in zip((a.hi[0] - a.lo[0]).tolist(), (b.hi[0] - b.lo[0]).tolist(), strict=True))
    )


def _nonzero_symbolic(values: np.ndarray) -> np.ndarray:
    return np.array([i for i, v in enumerate(values.tolist()) if not _is_zero(v)], dtype=int)


def _exceeds(a, b) -> bool:
    """Whether ``a > b``; for symbolic values, whether it can hold (not provably ``a <= b``)."""
    if isinstance(a, sympy.Basic) or isinstance(b, sympy.Basic):
        return sympy.simplify(sympy.sympify(a) - b).is_nonpositive is not True
    return a > b


# -- contract repair ---------------------------------------------------------------------------


def _contract_faults(walk: _Walk, rule: str) -> dict[str, str]:
    """Collapsed containers that must become buffer nodes so that the DAG meets the contract."""
    faults = dict(walk.reused)
    keys = {pair: _volume_key(getattr(edge, rule)) for pair, edge in walk.edges.items()}
    first: tuple[dict[int, int | str], dict[int, int | str]] = ({}, {})
    mixed: tuple[set[int], set[int]] = (set(), set())
    for pair, key in keys.items():
        for side in (0, 1):
            node = pair[1 - side]
            if first[side].setdefault(node, key) != key:
                mixed[side].add(node)
    tasks = set(walk.tasks)
    for side, what in ((0, "unequal in-volumes into"), (1, "non-uniform output of")):
        suspects = mixed[side] & tasks
        if not suspects:
            continue
        edges: dict[int, list[tuple[int | str, _Edge]]] = {node: [] for node in suspects}
        for pair, edge in walk.edges.items():
            node = pair[1 - side]
            if node in edges:
                edges[node].append((keys[pair], edge))
        for node, pairs in edges.items():
            fixed = [key for key, edge in pairs if not edge.via]
            target = Counter(fixed).most_common(1)[0][0] if fixed else _largest([key for key, _ in pairs])
            for key, edge in pairs:
                if edge.via and key != target:
                    for data in sorted(edge.via):
                        faults.setdefault(data, f"{what} task {walk.nodes[node].label}")
    return faults


def _volume_key(value) -> int | str:
    """A volume as an int, or the canonical text of a symbolic one (to compare and count volumes)."""
    if type(value) is int:
        return value
    value = _as_volume(value)
    return value if isinstance(value, int) else sympy.srepr(value)


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
    :return: a DAG whose volumes are ints, or SymPy expressions in the remaining symbols.
    """
    from dcaccel.dag.scopes import read_program

    granularity = Granularity.parse(granularity)
    if edge_volume not in EDGE_VOLUME_RULES:
        raise DcaccelError(f"extract: edge_volume must be one of {EDGE_VOLUME_RULES}, got {edge_volume!r}")
    if sink not in SINK_MODES:
        raise DcaccelError(f"extract: sink must be one of {SINK_MODES}, got {sink!r}")
    workload = getattr(lowered, "workload", None)
    if symbols is None:
        symbols = getattr(workload, "symbols", None)
    sdfg = getattr(lowered, "sdfg", lowered)
    origins = _origins(lowered)
    if fusion:
        from dcaccel.transforms.fusion import fuse_elementwise

        sdfg = copy.deepcopy(sdfg)
        origins = _fused_origins(origins, fuse_elementwise(sdfg))
    program = read_program(sdfg, symbols, sources=origins)

    inserted: dict[str, str] = {}
    groups: dict[int, _Group] = {}
    while True:
        walk = _Walk(program, granularity, inserted, groups).run()
        faults = {d: r for d, r in _contract_faults(walk, edge_volume).items() if d not in inserted}
        if not faults:
            break
        for data, reason in faults.items():
            warnings.warn(f"extract: container '{data}' made a buffer node ({reason})", stacklevel=2)
        inserted = {**inserted, **faults}
    if walk.fewer_tiles:
        shown = ", ".join(walk.fewer_tiles[:5]) + (", ..." if len(walk.fewer_tiles) > 5 else "")
        warnings.warn(
            f"extract: {len(walk.fewer_tiles)} task map(s) split into fewer than {granularity.tiles} equal tiles "
            f"(the largest divisor of their iterations): {shown}",
            stacklevel=2,
        )
    return _emit(walk, edge_volume, sink, name or getattr(workload, "name", None) or program.name)


def _origins(lowered) -> dict[str, dict[str, str]]:
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


def _emit(walk: _Walk, rule: str, sink: str, name: str) -> TaskDAG:
    """The TaskDAG of ``walk``: pseudo source first, nodes and edges in walk order, then the sink."""
    dag = TaskDAG(name)
    source = dag.add_node(NodeKind.SOURCE, "pseudo-source")
    ids = [dag.add_node(node.kind, node.label, **node.meta) for node in walk.nodes]
    has_pred = [False] * len(walk.nodes)
    first_out: dict[int, Any] = {}
    first_in: dict[int, Any] = {}
    for (src, dst), edge in walk.edges.items():
        volume = _as_volume(getattr(edge, rule))
        dag.add_edge(ids[src], ids[dst], volume)
        has_pred[dst] = True
        first_out.setdefault(src, volume)
        first_in.setdefault(dst, volume)
    for i, node_id in enumerate(ids):
        if not has_pred[i]:
            dag.add_edge(source, node_id, first_out.get(i, _as_volume(walk.produced.get(i, 0))))
    exits = [i for i in range(len(ids)) if i not in first_out]
    if sink == "always" or (sink == "auto" and len(exits) > 1):
        pseudo_sink = dag.add_node(NodeKind.SINK, "pseudo-sink")
        for i in exits:
            volume = first_in.get(i) if walk.nodes[i].kind is NodeKind.BUFFER else walk.produced.get(i)
            dag.add_edge(ids[i], pseudo_sink, _as_volume(volume if volume is not None else first_in.get(i, 0)))
    return dag
