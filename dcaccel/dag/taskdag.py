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

import json
import numbers
import operator
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

import networkx as nx
import numpy as np
import sympy

from dcaccel.errors import DAGContractError, DcaccelError

Volume = int | sympy.Expr

_EMPTY_META: Mapping[str, Any] = MappingProxyType({})


class NodeKind(StrEnum):
    """What a node of the canonical DAG stands for."""

    SOURCE = "source"  # the pseudo source (cost 0), feeds the program inputs
    SINK = "sink"  # a pseudo sink (cost 0), the exit when present
    TASK = "task"  # a computation: every in-edge carries I elements, every out-edge O
    BUFFER = "buffer"  # a container fully written before it is read (cost 0)


@dataclass(frozen=True)
class Node:
    """A node of a :class:`TaskDAG`; ``meta`` is free-form (op type, map label, container...)."""

    id: int
    kind: NodeKind
    label: str
    meta: Mapping[str, Any] = field(default_factory=lambda: _EMPTY_META)


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


def _normalize_volume(volume: Any, src: int, dst: int) -> Volume:
    """An edge volume as an int, or a sympy expression when it has free symbols."""
    if isinstance(volume, bool):
        raise DAGContractError(f"edge {src}->{dst}: volume must be an integer or a sympy expression, got {volume!r}")
    if isinstance(volume, numbers.Integral):
        return operator.index(volume)
    if isinstance(volume, str):
        names = {name: sympy.Symbol(name) for name in re.findall(r"[A-Za-z_]\w*", volume)}
        volume = sympy.sympify(volume, locals=names)
    if isinstance(volume, sympy.Basic):
        if volume.is_Integer:
            return int(volume)
        if volume.free_symbols:
            return volume
    raise DAGContractError(f"edge {src}->{dst}: volume must be an integer or a sympy expression, got {volume!r}")


def _compress(keys: list[int], n: int) -> tuple[list[int], list[int]]:
    """Edge ids grouped by ``keys`` (stable: insertion order within a key) and the start of each group."""
    array = np.asarray(keys, dtype=np.int64)
    order = np.argsort(array, kind="stable")
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(array, minlength=n), out=start[1:])
    return start.tolist(), order.tolist()


class TaskDAG:
    """A canonical task DAG (see the module docstring and ``docs/architecture.md`` Contract 4)."""

    def __init__(self, name: str = ""):
        self.name = name
        self._kinds: list[NodeKind] = []
        self._labels: list[str] = []
        self._metas: list[Mapping[str, Any]] = []
        self._edge_src: list[int] = []
        self._edge_dst: list[int] = []
        self._edge_volume: list[Volume] = []
        self._symbolic_edges = 0
        self._derived: dict[str, Any] = {}  # adjacency, node list, roles, validity: cleared on every change

    # ------------------------------------------------------------------ construction

    def add_node(self, kind: NodeKind, label: str, **meta) -> int:
        """Append a node and return its id (the next consecutive integer)."""
        self._kinds.append(NodeKind(kind))
        self._labels.append(str(label))
        self._metas.append(MappingProxyType(dict(meta)) if meta else _EMPTY_META)
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
                Node(i, kind, label, meta)
                for i, (kind, label, meta) in enumerate(zip(self._kinds, self._labels, self._metas, strict=True))
            ]
        return self._derived["nodes"]

    def node(self, v: int) -> Node:
        """The node with id ``v``."""
        return Node(v, self._kinds[v], self._labels[v], self._metas[v])

    def kind(self, v: int) -> NodeKind:
        return self._kinds[v]

    def label(self, v: int) -> str:
        return self._labels[v]

    def meta(self, v: int) -> Mapping[str, Any]:
        """The metadata of node ``v`` (read-only)."""
        return self._metas[v]

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
            out_start, out_edges = _compress(self._edge_src, n)
            in_start, in_edges = _compress(self._edge_dst, n)
            self._derived["adjacency"] = Adjacency(out_start, out_edges, in_start, in_edges)
        return self._derived["adjacency"]

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
        every volume must become an int."""
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
        return result

    def _copy_structure(self) -> TaskDAG:
        result = TaskDAG(self.name)
        result._kinds = self._kinds.copy()
        result._labels = self._labels.copy()
        result._metas = self._metas.copy()
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
        volumes; every task reads the same volume on all its in-edges and writes the same volume
        on all its out-edges; every buffer node receives the same volume on all its in-edges.
        A DAG that passed is not checked again until it changes.
        """
        if self._derived.get("valid"):
            return
        n = self.num_nodes
        name = f"DAG '{self.name}'" if self.name else "DAG"
        if n == 0 or self.num_edges == 0:
            raise DAGContractError(f"{name} needs a source and at least one edge")
        adj = self.adjacency()
        self._validate_roles(name, adj)
        self._validate_edges(name)
        self._validate_acyclic(name, adj)
        self._validate_uniform(adj)
        self._derived["valid"] = True

    def _describe(self, v: int) -> str:
        return f"{self._kinds[v].value} {v} '{self._labels[v]}'"

    def _validate_roles(self, name: str, adj: Adjacency) -> None:
        n = self.num_nodes
        in_start, out_start = adj.in_start, adj.out_start
        no_in = [v for v in range(n) if in_start[v + 1] == in_start[v]]
        no_out = [v for v in range(n) if out_start[v + 1] == out_start[v]]
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

    def _validate_edges(self, name: str) -> None:
        src, dst, vol = self._edge_src, self._edge_dst, self._edge_volume
        concrete = self._symbolic_edges == 0
        if not concrete or min(vol) < 1:
            for e, volume in enumerate(vol):
                if (volume < 1) if isinstance(volume, int) else (volume.is_positive is False):
                    raise DAGContractError(f"{name}: edge {src[e]}->{dst[e]} has volume {volume}, expected >= 1")
        pairs = np.asarray(src, dtype=np.int64) * self.num_nodes + np.asarray(dst, dtype=np.int64)
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

    # ------------------------------------------------------------------ serialisation

    def to_json(self) -> dict:
        """The DAG in the vectors' format: ``{"name", "nodes": [...], "edges": [...]}``."""
        nodes = []
        for v, (kind, label, meta) in enumerate(zip(self._kinds, self._labels, self._metas, strict=True)):
            entry = {"id": v, "kind": kind.value, "label": label}
            if meta:
                entry["meta"] = _jsonable(dict(meta))
            nodes.append(entry)
        edges = [
            {"src": s, "dst": d, "volume": v if isinstance(v, int) else str(v)}
            for s, d, v in zip(self._edge_src, self._edge_dst, self._edge_volume, strict=True)
        ]
        return {"name": self.name, "nodes": nodes, "edges": edges}

    @classmethod
    def from_json(cls, data: dict | str | os.PathLike) -> TaskDAG:
        """Read a DAG in the vectors' format (a dict, or the path of a JSON file).

        Nodes are inserted in ``nodes`` order and get consecutive ids in that order; the file's
        ids (a permutation of ``0..n-1``) name the edge ends, and a node whose file id differs from
        its position keeps it as ``meta["file_id"]`` (the reference scheduler's Python sets iterate
        in the order of these ids, see ``dcaccel.scheduler.order``). Edges are inserted in ``edges``
        order. Keys the format does not define are ignored.
        """
        origin = "JSON data"
        if not isinstance(data, dict):
            origin = f"file '{os.fspath(data)}'"
            try:
                with open(data) as stream:
                    data = json.load(stream)
            except (OSError, ValueError) as err:
                raise DcaccelError(f"cannot read DAG {origin}: {err}") from None
        try:
            dag = cls(str(data.get("name", "")))
            file_ids = [entry["id"] for entry in data["nodes"]]
            if sorted(file_ids) != list(range(len(file_ids))):
                raise DAGContractError(f"{origin}: node ids must be consecutive 0..{len(file_ids) - 1}")
            position = {file_id: i for i, file_id in enumerate(file_ids)}
            for i, entry in enumerate(data["nodes"]):
                meta = dict(entry.get("meta", {}))
                if entry["id"] != i:
                    meta.setdefault("file_id", entry["id"])
                dag.add_node(NodeKind(entry["kind"]), entry.get("label", str(entry["id"])), **meta)
            for entry in data["edges"]:
                dag.add_edge(position[entry["src"]], position[entry["dst"]], entry["volume"])
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise DcaccelError(f"{origin} is not a DAG in the vectors' format: {err!r}") from None
        return dag

    def to_networkx(self) -> nx.DiGraph:
        """A ``networkx.DiGraph`` with node attributes ``kind``, ``label`` (+ meta) and edge attribute
        ``volume``; node and edge insertion orders are kept."""
        graph = nx.DiGraph(name=self.name)
        for v, (kind, label, meta) in enumerate(zip(self._kinds, self._labels, self._metas, strict=True)):
            graph.add_node(v, **meta, kind=kind.value, label=label)
        for s, d, v in zip(self._edge_src, self._edge_dst, self._edge_volume, strict=True):
            graph.add_edge(s, d, volume=v)
        return graph

    @classmethod
    def from_networkx(cls, graph: nx.DiGraph) -> TaskDAG:
        """Read a graph produced by :meth:`to_networkx` (nodes ``0..n-1`` with ``kind``/``label``,
        edges with ``volume``). Successor and predecessor orders are those of ``graph``."""
        if sorted(graph.nodes) != list(range(graph.number_of_nodes())):
            raise DAGContractError(f"networkx graph '{graph.name}': nodes must be the integers 0..n-1")
        dag = cls(str(graph.graph.get("name", "")))
        position = {v: i for i, v in enumerate(graph.nodes)}
        for v, attrs in graph.nodes(data=True):
            meta = {k: a for k, a in attrs.items() if k not in ("kind", "label")}
            if "kind" not in attrs:
                raise DAGContractError(f"networkx graph '{graph.name}': node {v} has no 'kind' attribute")
            dag.add_node(NodeKind(attrs["kind"]), attrs.get("label", str(v)), **meta)
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


def _jsonable(value: Any) -> Any:
    """``value`` with everything JSON cannot hold (sympy expressions, numpy scalars...) as strings."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value)


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
