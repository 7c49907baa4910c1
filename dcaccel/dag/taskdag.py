"""The canonical task DAG: tasks, buffer nodes, one pseudo source and one exit.

A :class:`TaskDAG` is the input of every scheduler. Node ids are consecutive (``0..n-1``) in
insertion order; the successor order of a node is the order its out-edges were inserted, its
predecessor order the order its in-edges were inserted. The schedulers break ties with these
orders, so they are part of the graph (see ``STREAMING_MODEL.md`` §0.2).

Graph data is stored as flat lists of ints (edge sources, targets, volumes, and a compressed
adjacency built on demand), so that DAGs with millions of tasks stay small. Volumes are ints or
sympy expressions; :meth:`TaskDAG.evaluate` turns a symbolic DAG into a concrete one.

:meth:`TaskDAG.validate` is the single owner of the DAG contract; it raises
:class:`~dcaccel.errors.DAGContractError` naming the node or edge at fault.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import operator
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

import networkx as nx
import numpy as np
import sympy

from dcaccel.dag.expression import ExpressionError, parse_expression
from dcaccel.dag.task import SCHEMA_VERSION, TaskInfo, TaskInfoError, check_role, evaluated, from_meta, info_of_kind
from dcaccel.errors import DAGContractError, DcaccelError

Volume = int | sympy.Expr

#: Largest edge volume :meth:`TaskDAG.validate` accepts (volumes are 64-bit counts downstream).
MAX_VOLUME = 2**63 - 1

#: The DAG file versions :meth:`TaskDAG.from_json` reads (1: the vectors' format, a free-form ``meta`` per node).
READABLE_VERSIONS = (1, SCHEMA_VERSION)


class NodeKind(StrEnum):
    """What a node of the canonical DAG stands for."""

    SOURCE = "source"  # the pseudo source (cost 0), feeds the program inputs
    SINK = "sink"  # a pseudo sink (cost 0), the exit when present
    TASK = "task"  # a computation: every in-edge carries I elements, every out-edge O
    BUFFER = "buffer"  # a container fully written before it is read (cost 0)


@dataclass(frozen=True)
class Node:
    """A node of a :class:`TaskDAG` and what it is (:class:`~dcaccel.dag.task.TaskInfo`: op, node, role...)."""

    id: int
    kind: NodeKind
    label: str
    info: TaskInfo = field(default_factory=TaskInfo)


@dataclass(frozen=True)
class Adjacency:
    """Compressed adjacency: the out-edge ids of ``u`` are ``out_edges[out_start[u]:out_start[u + 1]]``
    in successor order, the in-edge ids of ``v`` are ``in_edges[in_start[v]:in_start[v + 1]]`` in
    predecessor order."""

    out_start: list[int]
    out_edges: list[int]
    in_start: list[int]
    in_edges: list[int]

    def out_of(self, u: int) -> list[int]:
        """Edge ids leaving ``u``, in successor order."""
        return self.out_edges[self.out_start[u] : self.out_start[u + 1]]

    def into(self, v: int) -> list[int]:
        """Edge ids entering ``v``, in predecessor order."""
        return self.in_edges[self.in_start[v] : self.in_start[v + 1]]


class _EdgeArrays(NamedTuple):
    """The edges (sources, targets) and the compressed adjacency (see :class:`Adjacency`) as int64 arrays."""

    src: np.ndarray
    dst: np.ndarray
    out_start: np.ndarray
    out_edges: np.ndarray
    in_start: np.ndarray
    in_edges: np.ndarray


def _normalize_volume(volume: Any, src: int, dst: int) -> Volume:
    """An edge volume as an int, or a sympy expression when it has free symbols (text is read by
    :func:`~dcaccel.dag.expression.parse_expression`, never evaluated)."""
    if isinstance(volume, bool):
        raise DAGContractError(f"edge {src}->{dst}: volume must be an integer or a sympy expression, got {volume!r}")
    if isinstance(volume, numbers.Integral):
        return operator.index(volume)
    if isinstance(volume, str):
        try:
            volume = parse_expression(volume)
        except ExpressionError as err:
            raise DAGContractError(f"edge {src}->{dst}: volume {_excerpt(volume)}: {err}") from None
    if isinstance(volume, sympy.Basic):
        if volume.is_Integer:
            return int(volume)
        if volume.free_symbols:
            return volume
    raise DAGContractError(f"edge {src}->{dst}: volume must be an integer or a sympy expression, got {volume!r}")


def _integers(values: Sequence[int]) -> list[int]:
    """``values`` as a list of Python ints (an integer NumPy array converted at once)."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        return values.tolist()
    return list(map(operator.index, values))


def _compress(keys: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Edge ids grouped by ``keys`` (stable: insertion order within a key) and the start of each group."""
    order = np.argsort(keys, kind="stable")
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=start[1:])
    return start, order


class TaskDAG:
    """A canonical task DAG (see the module docstring and ``docs/architecture.md`` Contract 4)."""

    def __init__(self, name: str = ""):
        self.name = name
        self._kinds: list[NodeKind] = []
        self._labels: list[str] = []
        self._infos: list[TaskInfo] = []
        self._edge_src: list[int] = []
        self._edge_dst: list[int] = []
        self._edge_volume: list[Volume] = []
        self._symbolic_edges = 0
        self._derived: dict[str, Any] = {}  # adjacency, node list, roles, validity: cleared on every change

    # ------------------------------------------------------------------ construction

    def add_node(self, kind: NodeKind, label: str, info: TaskInfo | None = None) -> int:
        """Append a node and return its id (the next consecutive integer); without ``info`` the node is
        what its kind says (:func:`~dcaccel.dag.task.info_of_kind`)."""
        kind = NodeKind(kind)
        self._kinds.append(kind)
        self._labels.append(str(label))
        self._infos.append(info_of_kind(kind) if info is None else info)
        self._derived.clear()
        return len(self._kinds) - 1

    def add_edge(self, src: int, dst: int, volume: Volume) -> None:
        """Append the edge ``src -> dst`` carrying ``volume`` element accesses."""
        n = len(self._kinds)
        for node in (src, dst):
            if not isinstance(node, numbers.Integral) or not 0 <= node < n:
                raise DAGContractError(f"edge {src}->{dst}: node {node!r} does not exist (the DAG has {n} nodes)")
        self._edge_src.append(operator.index(src))
        self._edge_dst.append(operator.index(dst))
        volume = _normalize_volume(volume, src, dst)
        self._edge_volume.append(volume)
        self._symbolic_edges += not isinstance(volume, int)
        self._derived.clear()

    def add_nodes(self, kinds: Sequence[NodeKind], labels: Sequence[str], infos: Sequence[TaskInfo]) -> range:
        """Append one node per ``kinds[i]``, ``labels[i]``, ``infos[i]`` (as :meth:`add_node` one by one)
        and return their ids. The records are shared (they are frozen)."""
        if not len(kinds) == len(labels) == len(infos):
            raise DAGContractError(f"add_nodes: {len(kinds)} kinds, {len(labels)} labels and {len(infos)} infos")
        start = len(self._kinds)
        self._kinds.extend(kind if type(kind) is NodeKind else NodeKind(kind) for kind in kinds)
        self._labels.extend(label if type(label) is str else str(label) for label in labels)
        self._infos.extend(infos)
        self._derived.clear()
        return range(start, len(self._kinds))

    def add_edges(self, sources: Sequence[int], targets: Sequence[int], volumes: Sequence[Volume]) -> None:
        """Append the edges ``sources[i] -> targets[i]`` carrying ``volumes[i]``, in that order (as
        :meth:`add_edge` one by one, the checks done once for all of them). Integer NumPy arrays are
        taken as they are."""
        sources, targets = _integers(sources), _integers(targets)
        if not len(sources) == len(targets) == len(volumes):
            raise DAGContractError(
                f"add_edges: {len(sources)} sources, {len(targets)} targets and {len(volumes)} volumes"
            )
        if not sources:
            return
        n = len(self._kinds)
        if min(min(sources), min(targets)) < 0 or max(max(sources), max(targets)) >= n:
            for src, dst in zip(sources, targets, strict=True):
                for node in (src, dst):
                    if not 0 <= node < n:
                        raise DAGContractError(f"edge {src}->{dst}: node {node} does not exist (the DAG has {n} nodes)")
        if isinstance(volumes, np.ndarray) and volumes.dtype.kind in "iu":
            normalized = volumes.tolist()
        else:
            normalized = [
                volume if type(volume) is int else _normalize_volume(volume, src, dst)
                for src, dst, volume in zip(sources, targets, volumes, strict=True)
            ]
            self._symbolic_edges += sum(type(volume) is not int for volume in normalized)
        self._edge_src.extend(sources)
        self._edge_dst.extend(targets)
        self._edge_volume.extend(normalized)
        self._derived.clear()

    # ------------------------------------------------------------------ nodes and edges

    @property
    def num_nodes(self) -> int:
        return len(self._kinds)

    @property
    def num_edges(self) -> int:
        return len(self._edge_src)

    @property
    def nodes(self) -> list[Node]:
        """The nodes in id (= insertion) order."""
        if "nodes" not in self._derived:
            self._derived["nodes"] = [
                Node(i, kind, label, info)
                for i, (kind, label, info) in enumerate(zip(self._kinds, self._labels, self._infos, strict=True))
            ]
        return self._derived["nodes"]

    def node(self, v: int) -> Node:
        """The node with id ``v``."""
        return Node(v, self._kinds[v], self._labels[v], self._infos[v])

    def kind(self, v: int) -> NodeKind:
        return self._kinds[v]

    def label(self, v: int) -> str:
        return self._labels[v]

    def info(self, v: int) -> TaskInfo:
        """What node ``v`` is (:class:`~dcaccel.dag.task.TaskInfo`)."""
        return self._infos[v]

    @property
    def edge_sources(self) -> Sequence[int]:
        """Source node of every edge, indexed by edge id (insertion order). Read-only."""
        return self._edge_src

    @property
    def edge_targets(self) -> Sequence[int]:
        """Target node of every edge, indexed by edge id. Read-only."""
        return self._edge_dst

    @property
    def edge_volumes(self) -> Sequence[Volume]:
        """Volume of every edge, indexed by edge id. Read-only."""
        return self._edge_volume

    def adjacency(self) -> Adjacency:
        """The compressed adjacency (built once, rebuilt after the graph changes)."""
        if "adjacency" not in self._derived:
            n = len(self._kinds)
            src, dst = (np.asarray(ends, dtype=np.int64) for ends in (self._edge_src, self._edge_dst))
            out_start, out_edges = _compress(src, n)
            in_start, in_edges = _compress(dst, n)
            self._derived["arrays"] = _EdgeArrays(src, dst, out_start, out_edges, in_start, in_edges)
            self._derived["adjacency"] = Adjacency(*(a.tolist() for a in (out_start, out_edges, in_start, in_edges)))
        return self._derived["adjacency"]

    def _arrays(self) -> _EdgeArrays:
        """The edges and the adjacency as int64 arrays (built with :meth:`adjacency`)."""
        self.adjacency()
        return self._derived["arrays"]

    @property
    def edges(self) -> list[tuple[int, int, Volume]]:
        """``(u, v, volume)`` for u in node order, v in successor order of u."""
        adj = self.adjacency()
        src, dst, vol = self._edge_src, self._edge_dst, self._edge_volume
        return [(src[e], dst[e], vol[e]) for e in adj.out_edges]

    def successors(self, u: int) -> list[int]:
        """Successors of ``u`` in successor (edge insertion) order."""
        dst = self._edge_dst
        return [dst[e] for e in self.adjacency().out_of(u)]

    def predecessors(self, v: int) -> list[int]:
        """Predecessors of ``v`` in predecessor (edge insertion) order."""
        src = self._edge_src
        return [src[e] for e in self.adjacency().into(v)]

    def volume(self, u: int, v: int) -> Volume:
        """Volume of the edge ``u -> v``."""
        dst = self._edge_dst
        for e in self.adjacency().out_of(u):
            if dst[e] == v:
                return self._edge_volume[e]
        raise DAGContractError(f"no edge {u}->{v} in DAG '{self.name}'")

    def in_degree(self, v: int) -> int:
        adj = self.adjacency()
        return adj.in_start[v + 1] - adj.in_start[v]

    def out_degree(self, u: int) -> int:
        adj = self.adjacency()
        return adj.out_start[u + 1] - adj.out_start[u]

    def topological_order(self) -> list[int]:
        """Kahn's order with a LIFO stack, as networkx 2.5 computes it (``STREAMING_MODEL.md`` §0.2,
        TOPO): start from the in-degree-0 nodes in node order, pop from the end, push children
        in successor order. Nodes on a cycle are left out."""
        if "topological_order" not in self._derived:
            adj = self.adjacency()
            dst = self._edge_dst
            in_start, out_start, out_edges = adj.in_start, adj.out_start, adj.out_edges
            indeg = [in_start[v + 1] - in_start[v] for v in range(self.num_nodes)]
            stack = [v for v, d in enumerate(indeg) if d == 0]
            order = []
            while stack:
                u = stack.pop()
                for e in out_edges[out_start[u] : out_start[u + 1]]:
                    w = dst[e]
                    indeg[w] -= 1
                    if indeg[w] == 0:
                        stack.append(w)
                order.append(u)
            self._derived["topological_order"] = order
        return list(self._derived["topological_order"])

    # ------------------------------------------------------------------ roles

    def _nodes_of_kind(self, kind: NodeKind) -> list[int]:
        key = f"kind:{kind.value}"
        if key not in self._derived:
            self._derived[key] = [v for v, k in enumerate(self._kinds) if k is kind]
        return self._derived[key]

    @property
    def source(self) -> int:
        """The pseudo source."""
        sources = self._nodes_of_kind(NodeKind.SOURCE)
        if len(sources) != 1:
            raise DAGContractError(f"DAG '{self.name}' has {len(sources)} nodes of kind source, expected exactly one")
        return sources[0]

    @property
    def sink(self) -> int | None:
        """The pseudo sink, or None when the exit is a real node."""
        sinks = self._nodes_of_kind(NodeKind.SINK)
        if len(sinks) > 1:
            raise DAGContractError(f"DAG '{self.name}' has {len(sinks)} pseudo sinks ({sinks}), expected at most one")
        return sinks[0] if sinks else None

    @property
    def exit(self) -> int:
        """The unique node without out-edges."""
        adj = self.adjacency()
        if "exit" not in self._derived:
            exits = [v for v in range(self.num_nodes) if adj.out_start[v + 1] == adj.out_start[v]]
            if len(exits) != 1:
                raise DAGContractError(f"DAG '{self.name}' has {len(exits)} exits {exits[:8]}, expected exactly one")
            self._derived["exit"] = exits[0]
        return self._derived["exit"]

    @property
    def buffers(self) -> frozenset[int]:
        return frozenset(self._nodes_of_kind(NodeKind.BUFFER))

    @property
    def tasks(self) -> list[int]:
        return list(self._nodes_of_kind(NodeKind.TASK))

    # ------------------------------------------------------------------ symbols

    @property
    def symbols(self) -> set[sympy.Symbol]:
        """The free symbols of all edge volumes."""
        found: set[sympy.Symbol] = set()
        for volume in self._edge_volume:
            if not isinstance(volume, int):
                found |= volume.free_symbols
        return found

    @property
    def is_concrete(self) -> bool:
        """Whether every edge volume is an int."""
        return self._symbolic_edges == 0

    def evaluate(self, **values: int) -> TaskDAG:
        """A copy with every symbol replaced by ``values[name]`` (symbols are matched by name);
        every volume must become an int. Symbolic counts of the tasks (:attr:`~dcaccel.dag.task.TaskInfo.macs`,
        ..., :mod:`dcaccel.dag.arithmetic`) are substituted too."""
        volumes = []
        for src, dst, volume in zip(self._edge_src, self._edge_dst, self._edge_volume, strict=True):
            if not isinstance(volume, int):
                volume = volume.subs({s: values[s.name] for s in volume.free_symbols if s.name in values})
                if not volume.is_Integer:
                    missing = ", ".join(sorted(str(s) for s in volume.free_symbols)) or "a non-integer value"
                    raise DcaccelError(f"edge {src}->{dst}: volume {volume} needs values for {missing}")
                volume = int(volume)
            volumes.append(volume)
        result = self._copy_structure()
        result._edge_volume = volumes
        result._symbolic_edges = 0
        result._infos = []
        for v, info in enumerate(self._infos):
            try:
                result._infos.append(evaluated(info, values))
            except TaskInfoError as err:
                raise DcaccelError(f"DAG '{self.name}': {self._describe(v)}: {err}") from None
        return result

    def _copy_structure(self) -> TaskDAG:
        result = TaskDAG(self.name)
        result._kinds = self._kinds.copy()
        result._labels = self._labels.copy()
        result._infos = self._infos.copy()
        result._edge_src = self._edge_src.copy()
        result._edge_dst = self._edge_dst.copy()
        result._edge_volume = self._edge_volume.copy()
        result._symbolic_edges = self._symbolic_edges
        return result

    # ------------------------------------------------------------------ the contract

    def validate(self) -> None:
        """Check the canonical DAG contract (``STREAMING_MODEL.md`` §0.1).

        One node of kind source with no in-edges and nothing else without in-edges; exactly one
        exit (a pseudo sink when the DAG has one); no cycle and no duplicated edge; positive
        volumes of at most :data:`MAX_VOLUME`; every task reads the same volume on all its in-edges
        and writes the same volume on all its out-edges; every buffer node receives the same volume
        on all its in-edges; distinct ``file_id`` (:class:`~dcaccel.dag.task.TaskInfo`) where given. A
        DAG that passed is not checked again until it changes.
        """
        if self._derived.get("valid"):
            return
        n = self.num_nodes
        name = f"DAG '{self.name}'" if self.name else "DAG"
        if n == 0 or self.num_edges == 0:
            raise DAGContractError(f"{name} needs a source and at least one edge")
        adj = self.adjacency()
        self._validate_roles(name, adj)
        self._validate_file_ids(name)
        self._validate_edges(name)
        self._validate_acyclic(name, adj)
        self._validate_uniform(adj)
        self._derived["valid"] = True

    def _describe(self, v: int) -> str:
        return f"{self._kinds[v].value} {v} '{self._labels[v]}'"

    def _validate_roles(self, name: str, adj: Adjacency) -> None:
        arrays = self._arrays()
        no_in = np.flatnonzero(np.diff(arrays.in_start) == 0).tolist()
        no_out = np.flatnonzero(np.diff(arrays.out_start) == 0).tolist()
        sources = self._nodes_of_kind(NodeKind.SOURCE)
        sinks = self._nodes_of_kind(NodeKind.SINK)
        if len(sources) != 1:
            raise DAGContractError(f"{name} has {len(sources)} nodes of kind source {sources[:8]}, expected one")
        if no_in != sources:
            extra = [self._describe(v) for v in no_in if v not in sources]
            if extra:
                raise DAGContractError(f"{name} has two sources: {self._describe(sources[0])} and {', '.join(extra)}")
            raise DAGContractError(f"{name}: the pseudo source {sources[0]} has in-edges")
        if len(no_out) != 1:
            exits = ", ".join(self._describe(v) for v in no_out[:8])
            raise DAGContractError(f"{name} has {len(no_out)} exits ({exits}), expected exactly one")
        if len(sinks) > 1 or (sinks and sinks != no_out):
            raise DAGContractError(f"{name}: pseudo sink(s) {sinks} must be the unique exit {no_out[0]}")

    def _validate_file_ids(self, name: str) -> None:
        """The records' ``file_id`` (the reference's node names, see :meth:`from_json`) are distinct
        non-negative integers, where given; a node without one is known by its id."""
        if all(info.file_id is None for info in self._infos):
            return
        seen: dict[int, int] = {}
        for v, info in enumerate(self._infos):
            key = v if info.file_id is None else info.file_id
            if isinstance(key, bool) or not isinstance(key, int) or key < 0:
                raise DAGContractError(f"{name}: {self._describe(v)} has file_id {key!r}, expected an integer >= 0")
            if key in seen:
                raise DAGContractError(
                    f"{name}: {self._describe(v)} and {self._describe(seen[key])} have the same file_id {key}"
                )
            seen[key] = v

    def _validate_edges(self, name: str) -> None:
        src, dst, vol = self._edge_src, self._edge_dst, self._edge_volume
        concrete = self._symbolic_edges == 0
        if not concrete or min(vol) < 1 or max(vol) > MAX_VOLUME:
            for e, volume in enumerate(vol):
                if (volume < 1) if isinstance(volume, int) else (volume.is_positive is False):
                    raise DAGContractError(f"{name}: edge {src[e]}->{dst[e]} has volume {volume}, expected >= 1")
                if isinstance(volume, int) and volume > MAX_VOLUME:
                    raise DAGContractError(
                        f"{name}: edge {src[e]}->{dst[e]} has volume {volume}, expected at most 2**63 - 1"
                    )
        arrays = self._arrays()
        pairs = arrays.src * self.num_nodes + arrays.dst
        pairs.sort()
        repeated = np.flatnonzero(pairs[1:] == pairs[:-1])
        if repeated.size:
            u, v = divmod(int(pairs[repeated[0]]), self.num_nodes)
            raise DAGContractError(f"{name}: duplicated edge {u}->{v}")

    def _validate_acyclic(self, name: str, adj: Adjacency) -> None:
        n = self.num_nodes
        order = self.topological_order()
        if len(order) == n:
            return
        # Every node left out has a predecessor left out: walk back until a node repeats.
        src = self._edge_src
        done = bytearray(n)
        for v in order:
            done[v] = 1
        v = next(v for v in range(n) if not done[v])
        position: dict[int, int] = {}
        walk: list[int] = []
        while v not in position:
            position[v] = len(walk)
            walk.append(v)
            v = next(src[e] for e in adj.into(v) if not done[src[e]])
        cycle = list(reversed(walk[position[v] :]))
        path = " -> ".join(f"{c} '{self._labels[c]}'" for c in [*cycle, cycle[0]])
        raise DAGContractError(f"{name} has a cycle: {path}")

    def _validate_uniform(self, adj: Adjacency) -> None:
        if self._symbolic_edges == 0:
            self._validate_uniform_concrete()
            return
        src, dst, vol, kinds = self._edge_src, self._edge_dst, self._edge_volume, self._kinds
        in_start, in_edges, out_start, out_edges = adj.in_start, adj.in_edges, adj.out_start, adj.out_edges
        n = self.num_nodes
        first_in = [vol[in_edges[in_start[v]]] if in_start[v + 1] > in_start[v] else None for v in range(n)]
        first_out = [vol[out_edges[out_start[u]]] if out_start[u + 1] > out_start[u] else None for u in range(n)]
        for e in _mismatches(vol, first_in, dst):
            v = dst[e]
            if (kinds[v] is NodeKind.TASK or kinds[v] is NodeKind.BUFFER) and _differ(vol[e], first_in[v]):
                raise DAGContractError(
                    f"{self._describe(v)} has in-edges with different volumes ({first_in[v]} and {vol[e]})"
                )
        for e in _mismatches(vol, first_out, src):
            u = src[e]
            if kinds[u] is NodeKind.TASK and _differ(vol[e], first_out[u]):
                raise DAGContractError(
                    f"{self._describe(u)} has out-edges with different volumes ({first_out[u]} and {vol[e]})"
                )

    def _validate_uniform_concrete(self) -> None:
        """:meth:`_validate_uniform` when every volume is an int (in 1..MAX_VOLUME, checked before), with
        NumPy: the first edge (in edge order) whose volume differs from the first in-edge of its task or
        buffer target, then from the first out-edge of its task source."""
        arrays = self._arrays()
        volumes = np.asarray(self._edge_volume, dtype=np.int64)
        task, buffer = np.zeros(self.num_nodes, dtype=bool), np.zeros(self.num_nodes, dtype=bool)
        task[self._nodes_of_kind(NodeKind.TASK)] = True
        buffer[self._nodes_of_kind(NodeKind.BUFFER)] = True
        sides = (
            (arrays.dst, arrays.in_start, arrays.in_edges, task | buffer, "in"),
            (arrays.src, arrays.out_start, arrays.out_edges, task, "out"),
        )
        for ends, start, edges, checked, word in sides:
            has = start[1:] > start[:-1]
            first = np.zeros(self.num_nodes, dtype=np.int64)
            first[has] = volumes[edges[start[:-1][has]]]
            bad = np.flatnonzero((volumes != first[ends]) & checked[ends])
            if bad.size:
                e = int(bad[0])
                v = int(ends[e])
                pair = f"{int(first[v])} and {int(volumes[e])}"
                raise DAGContractError(f"{self._describe(v)} has {word}-edges with different volumes ({pair})")

    # ------------------------------------------------------------------ serialisation

    def to_json(self) -> dict:
        """The DAG as ``{"schema_version", "name", "nodes": [...], "edges": [...]}``: the vectors' format
        with each node's record (:meth:`TaskInfo.to_json <dcaccel.dag.task.TaskInfo.to_json>`, the fields
        that are set; the role when its kind does not imply it) under ``"info"``."""
        nodes = []
        for v, (kind, label, info) in enumerate(zip(self._kinds, self._labels, self._infos, strict=True)):
            entry = {"id": v, "kind": kind.value, "label": label}
            fields = info.to_json()
            if info.role is info_of_kind(kind).role:
                fields.pop("role", None)
            if fields:
                entry["info"] = fields
            nodes.append(entry)
        edges = [
            {"src": s, "dst": d, "volume": v if isinstance(v, int) else str(v)}
            for s, d, v in zip(self._edge_src, self._edge_dst, self._edge_volume, strict=True)
        ]
        return {"schema_version": SCHEMA_VERSION, "name": self.name, "nodes": nodes, "edges": edges}

    @classmethod
    def from_json(cls, data: Mapping | str | os.PathLike) -> TaskDAG:
        """Read a DAG in the vectors' format (a dict, or the path of a JSON file).

        Nodes are inserted in ``nodes`` order and get consecutive ids in that order; the file's
        ids (a permutation of ``0..n-1``) name the edge ends, and a node whose file id differs from
        its position keeps it as its record's ``file_id`` (the reference scheduler's Python sets iterate
        in the order of these ids, see ``dcaccel.scheduler.order``). Edges are inserted in ``edges``
        order. A volume is an integer (an integral float is accepted) or the text of a symbolic
        expression, read by :func:`~dcaccel.dag.expression.parse_expression` and never evaluated.

        ``schema_version`` says the layout (:data:`READABLE_VERSIONS`; a file without one is version 1):
        a node's ``info`` (version 2) is read field by field by :meth:`TaskInfo.from_json
        <dcaccel.dag.task.TaskInfo.from_json>`, a version-1 ``meta`` converted by
        :func:`~dcaccel.dag.task.from_meta`; a file of another version is refused. Other top-level keys
        are ignored. The file's structure (types, keys, ids, every record's fields and its role against
        its kind) is checked here and every fault raises a one-line :class:`DcaccelError` naming the file
        and the node or edge; the DAG contract (volumes ≥ 1, cycles, sources and exits...) is
        :meth:`validate`'s, which the schedulers call.
        """
        origin = "JSON data"
        if isinstance(data, str | os.PathLike):
            try:
                origin = f"file '{os.fspath(data)}'"
                with open(data, encoding="utf-8") as stream:
                    data = json.load(stream)
            except (OSError, ValueError, RecursionError) as err:
                raise DcaccelError(f"cannot read DAG {origin}: {_one_line(err)}") from None
        return _DAGReader(origin).read(cls, data)

    def to_networkx(self) -> nx.DiGraph:
        """A ``networkx.DiGraph`` with node attributes ``kind``, ``label`` (+ the record's fields that are
        set, :meth:`TaskInfo.given <dcaccel.dag.task.TaskInfo.given>`) and edge attribute ``volume``; node
        and edge insertion orders are kept."""
        graph = nx.DiGraph(name=self.name)
        for v, (kind, label, info) in enumerate(zip(self._kinds, self._labels, self._infos, strict=True)):
            graph.add_node(v, **info.given(), kind=kind.value, label=label)
        for s, d, v in zip(self._edge_src, self._edge_dst, self._edge_volume, strict=True):
            graph.add_edge(s, d, volume=v)
        return graph

    @classmethod
    def from_networkx(cls, graph: nx.DiGraph) -> TaskDAG:
        """Read a graph produced by :meth:`to_networkx` (nodes ``0..n-1`` with ``kind``/``label`` and the
        fields of their records, edges with ``volume``). Successor and predecessor orders are those of
        ``graph``."""
        if sorted(graph.nodes) != list(range(graph.number_of_nodes())):
            raise DAGContractError(f"networkx graph '{graph.name}': nodes must be the integers 0..n-1")
        dag = cls(str(graph.graph.get("name", "")))
        position = {v: i for i, v in enumerate(graph.nodes)}
        for v, attrs in graph.nodes(data=True):
            fields = {k: a for k, a in attrs.items() if k not in ("kind", "label")}
            if "kind" not in attrs:
                raise DAGContractError(f"networkx graph '{graph.name}': node {v} has no 'kind' attribute")
            kind = NodeKind(attrs["kind"])
            try:
                info = dataclasses.replace(info_of_kind(kind), **fields)
            except TypeError:
                unknown = ", ".join(sorted(set(fields) - set(TaskInfo.__dataclass_fields__)))
                raise DAGContractError(
                    f"networkx graph '{graph.name}': node {v} has unknown attributes {unknown}"
                ) from None
            dag.add_node(kind, attrs.get("label", str(v)), info)
        for u, v, attrs in _insertion_ordered_edges(graph):
            if "volume" not in attrs:
                raise DAGContractError(f"networkx graph '{graph.name}': edge {u}->{v} has no 'volume' attribute")
            dag.add_edge(position[u], position[v], attrs["volume"])
        return dag

    def to_dot(self) -> str:
        """The DAG in Graphviz DOT: buffers as boxes, pseudo nodes as points, volumes on edges."""
        shapes = {NodeKind.SOURCE: "point", NodeKind.SINK: "point", NodeKind.TASK: "ellipse", NodeKind.BUFFER: "box"}
        lines = [f"digraph {json.dumps(self.name or 'dag')} {{"]
        for v, (kind, label) in enumerate(zip(self._kinds, self._labels, strict=True)):
            lines.append(f"  {v} [label={json.dumps(label)}, shape={shapes[kind]}];")
        for s, d, v in zip(self._edge_src, self._edge_dst, self._edge_volume, strict=True):
            lines.append(f"  {s} -> {d} [label={json.dumps(str(v))}];")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        return f"TaskDAG({self.name!r}, {self.num_nodes} nodes, {self.num_edges} edges)"


def _mismatches(volumes: list[Volume], first: list[Volume], ends: list[int]) -> list[int]:
    """Edges whose volume differs structurally from ``first[end]`` (candidates for ``_differ``)."""
    return [e for e, (volume, end) in enumerate(zip(volumes, ends, strict=True)) if volume != first[end]]


def _differ(a: Volume, b: Volume) -> bool:
    """Whether two volumes differ (symbolically: whether their difference does not expand to 0)."""
    if isinstance(a, int) and isinstance(b, int):
        return a != b
    return sympy.expand(a - b) != 0


def _insertion_ordered_edges(graph: nx.DiGraph) -> list[tuple[int, int, dict]]:
    """The edges of ``graph`` in an order that reproduces both its successor and its predecessor
    orders when inserted one by one (a topological order of the two chains of constraints)."""
    edges = [(u, v) for u in graph for v in graph.succ[u]]
    index = {edge: i for i, edge in enumerate(edges)}
    after: list[list[int]] = [[] for _ in edges]
    blockers = [0] * len(edges)
    for adjacency, key in ((graph.succ, lambda u, w: (u, w)), (graph.pred, lambda v, w: (w, v))):
        for node, neighbours in adjacency.items():
            chain = [index[key(node, w)] for w in neighbours]
            for a, b in zip(chain, chain[1:], strict=False):
                after[a].append(b)
                blockers[b] += 1
    ready = [i for i in range(len(edges)) if blockers[i] == 0]
    ready.reverse()
    ordered = []
    while ready:
        i = ready.pop()
        ordered.append(i)
        for j in after[i]:
            blockers[j] -= 1
            if blockers[j] == 0:
                ready.append(j)
    return [(edges[i][0], edges[i][1], graph.edges[edges[i]]) for i in ordered]


class _DAGReader:
    """Reads the vectors' JSON format into a :class:`TaskDAG`, checking types, keys and ids; each
    fault raises one line naming ``origin`` and the node or edge."""

    _KINDS = ", ".join(kind.value for kind in NodeKind)

    def __init__(self, origin: str):
        self.origin = origin

    def fail(self, where: str, problem: str) -> DcaccelError:
        return DcaccelError(f"{self.origin} is not a DAG in the vectors' format: {where}{problem}")

    def read(self, cls: type[TaskDAG], data: Any) -> TaskDAG:
        if not isinstance(data, Mapping):
            raise self.fail("", f"expected a JSON object, got {_json_type(data)}")
        version = data.get("schema_version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version not in READABLE_VERSIONS:
            readable = " and ".join(map(str, READABLE_VERSIONS))
            raise DcaccelError(
                f"{self.origin} has DAG schema version {_shown(version)}; this dcaccel reads versions {readable}"
            )
        name = data.get("name", "")
        if not isinstance(name, str) or not name.isprintable():
            raise self.fail("", "'name' must be a string on one line")
        nodes, edges = (self._list(data, key) for key in ("nodes", "edges"))
        dag = cls(name)
        position: dict[int, int] = {}
        for i, entry in enumerate(nodes):
            file_id, kind, label, info = self._node(i, entry, version)
            if file_id in position:
                raise self.fail(f"node {i}: ", f"duplicate id {file_id} (also node {position[file_id]})")
            position[file_id] = i
            if file_id != i and info.file_id is None:
                info = info.derive(file_id=file_id)
            dag.add_node(kind, label, info)
        if sorted(position) != list(range(len(nodes))):
            missing = next(i for i in range(len(nodes)) if i not in position)
            raise self.fail("", f"node ids must be consecutive 0..{len(nodes) - 1} (no node has id {missing})")
        for k, entry in enumerate(edges):
            dag.add_edge(*self._edge(k, entry, position))
        return dag

    def _list(self, data: Mapping, key: str) -> list:
        if key not in data:
            raise self.fail("", f"no '{key}' list")
        if not isinstance(data[key], list):
            raise self.fail("", f"'{key}' must be a list, got {_json_type(data[key])}")
        return data[key]

    def _node(self, i: int, entry: Any, version: int) -> tuple[int, NodeKind, str, TaskInfo]:
        where = f"node {i}: "
        if not isinstance(entry, Mapping):
            raise self.fail(where, f"expected an object, got {_json_type(entry)}")
        for key in ("id", "kind"):
            if key not in entry:
                raise self.fail(where, f"no '{key}'")
        file_id = entry["id"]
        if not _is_int(file_id):
            raise self.fail(where, f"'id' must be an integer, got {_json_type(file_id)}")
        if not isinstance(entry["kind"], str) or entry["kind"] not in NodeKind._value2member_map_:
            raise self.fail(where, f"unknown kind {_excerpt(entry['kind'])} (expected one of {self._KINDS})")
        label = entry.get("label", str(file_id))
        if not isinstance(label, str) or not label.isprintable():
            raise self.fail(where, "'label' must be a string on one line")
        kind = NodeKind(entry["kind"])
        key = "meta" if version == 1 else "info"
        try:
            if key not in entry:
                info = info_of_kind(kind)
            elif version == 1:
                info = from_meta(kind, entry["meta"])
            else:
                info = TaskInfo.from_json(entry["info"], info_of_kind(kind))
            check_role(kind, info)
        except TaskInfoError as err:
            raise self.fail(where, f"'{key}' {err}") from None
        return file_id, kind, label, info

    def _edge(self, k: int, entry: Any, position: dict[int, int]) -> tuple[int, int, Volume]:
        where = f"edge {k}: "
        if not isinstance(entry, Mapping):
            raise self.fail(where, f"expected an object, got {_json_type(entry)}")
        for key in ("src", "dst", "volume"):
            if key not in entry:
                raise self.fail(where, f"no '{key}'")
        ends = []
        for key in ("src", "dst"):
            node = entry[key]
            if not _is_int(node):
                raise self.fail(where, f"'{key}' must be a node id, got {_json_type(node)}")
            if node not in position:
                raise self.fail(where, f"'{key}' is {node}, which is no node id")
            ends.append(position[node])
        where = f"edge {k} ({entry['src']}->{entry['dst']}): "
        volume = entry["volume"]
        if isinstance(volume, float):
            if not volume.is_integer() or abs(volume) > 2**53:
                raise self.fail(where, f"volume {volume!r} is not an integer")
            volume = int(volume)
        elif isinstance(volume, str):
            try:
                volume = parse_expression(volume)
            except ExpressionError as err:
                raise self.fail(where, f"volume {_excerpt(volume)}: {err}") from None
            if not (volume.is_Integer or volume.free_symbols):
                raise self.fail(where, f"volume {_excerpt(entry['volume'])} is not an integer")
        elif not _is_int(volume):
            raise self.fail(where, f"volume must be an integer or an expression, got {_json_type(volume)}")
        return ends[0], ends[1], volume


def _shown(value: Any) -> str:
    """A JSON scalar as written (a string quoted and cut, another value by its JSON type)."""
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    return _excerpt(value) if isinstance(value, str) else _json_type(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _json_type(value: Any) -> str:
    """The JSON name of the type of ``value`` (what a user sees in the file)."""
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list"}
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "an object"
    return names.get(type(value), type(value).__name__)


def _excerpt(text: Any, limit: int = 60) -> str:
    """``text`` quoted on one line, cut to about ``limit`` characters."""
    quoted = repr(text) if isinstance(text, str) else repr(str(text))
    return quoted if len(quoted) <= limit else quoted[: limit - 4] + "...'"


def _one_line(err: BaseException) -> str:
    """The message of ``err`` on one line."""
    return " ".join(str(err).split()) or type(err).__name__
