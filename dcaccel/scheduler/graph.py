"""The concrete view of a task DAG that every scheduling stage reads.

:class:`CanonicalGraph` checks the DAG contract once (``TaskDAG.validate``), requires concrete
volumes, and exposes flat lists indexed by node or edge id: the stages never call back into the
``TaskDAG`` in their inner loops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dcaccel.dag.metrics import task_costs
from dcaccel.dag.taskdag import TaskDAG
from dcaccel.errors import DcaccelError


@dataclass(frozen=True, eq=False)
class CanonicalGraph:
    """A validated, concrete canonical DAG as flat lists (shared with the DAG, never modified).

    ``in_volume[v]`` (I) and ``out_volume[v]`` (O) are the volumes of the first in-edge and the
    first out-edge of ``v`` (0 where there is none); ``cost[v]`` is T(v) of §0.3. ``derived`` keeps
    what a stage computes that does not depend on P (the list scheduler's priority order), so that
    the schedules of many P on one graph compute it once.
    """

    dag: TaskDAG
    n: int
    src: list[int]
    dst: list[int]
    vol: list[int]
    out_start: list[int]
    out_edges: list[int]
    in_start: list[int]
    in_edges: list[int]
    is_buffer: bytearray
    source: int
    pseudo_sink: int  # -1 when the exit is a real node
    exit: int
    in_volume: list[int]
    out_volume: list[int]
    cost: list[int]
    order_key: list[int] | None  # the reference's node names where they differ from the ids (records' file_id)
    derived: dict[str, object] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dag(cls, dag: TaskDAG) -> CanonicalGraph:
        """Validate ``dag`` and build its view; symbolic volumes must be evaluated first."""
        dag.validate()
        if not dag.is_concrete:
            names = ", ".join(sorted(str(s) for s in dag.symbols))
            raise DcaccelError(f"DAG '{dag.name}' has symbolic volumes ({names}): call dag.evaluate(...) first")
        adj = dag.adjacency()
        n = dag.num_nodes
        vol = dag.edge_volumes
        is_buffer = bytearray(n)
        for b in dag.buffers:
            is_buffer[b] = 1
        in_start, in_edges, out_start, out_edges = adj.in_start, adj.in_edges, adj.out_start, adj.out_edges
        in_volume = [vol[in_edges[in_start[v]]] if in_start[v] < in_start[v + 1] else 0 for v in range(n)]
        out_volume = [vol[out_edges[out_start[v]]] if out_start[v] < out_start[v + 1] else 0 for v in range(n)]
        sink = dag.sink
        return cls(
            dag=dag,
            n=n,
            src=dag.edge_sources,
            dst=dag.edge_targets,
            vol=vol,
            out_start=adj.out_start,
            out_edges=adj.out_edges,
            in_start=adj.in_start,
            in_edges=adj.in_edges,
            is_buffer=is_buffer,
            source=dag.source,
            pseudo_sink=-1 if sink is None else sink,
            exit=dag.exit,
            in_volume=in_volume,
            out_volume=out_volume,
            cost=task_costs(dag),
            order_key=_order_keys(dag),
        )

    @property
    def m(self) -> int:
        return len(self.src)

    def out_of(self, u: int) -> list[int]:
        """Edge ids leaving ``u`` in successor order."""
        return self.out_edges[self.out_start[u] : self.out_start[u + 1]]

    def into(self, v: int) -> list[int]:
        """Edge ids entering ``v`` in predecessor order."""
        return self.in_edges[self.in_start[v] : self.in_start[v + 1]]

    def successors(self) -> list[list[int]]:
        """The successors of every node, in successor order, built once (``derived``)."""
        found = self.derived.get("successors")
        if found is None:
            dst, out_start, out_edges = self.dst, self.out_start, self.out_edges
            found = self.derived["successors"] = [
                [dst[e] for e in out_edges[out_start[v] : out_start[v + 1]]] for v in range(self.n)
            ]
        return found

    def predecessors(self) -> list[list[int]]:
        """The predecessors of every node, in predecessor order, built once (``derived``)."""
        found = self.derived.get("predecessors")
        if found is None:
            src, in_start, in_edges = self.src, self.in_start, self.in_edges
            found = self.derived["predecessors"] = [
                [src[e] for e in in_edges[in_start[v] : in_start[v + 1]]] for v in range(self.n)
            ]
        return found

    def edge_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``src``, ``dst`` and ``out_edges`` as numpy arrays, built once (``derived``)."""
        found = self.derived.get("edge_arrays")
        if found is None:
            found = self.derived["edge_arrays"] = tuple(
                np.array(values, dtype=np.int64) for values in (self.src, self.dst, self.out_edges)
            )
        return found


def flagged(flags: bytearray) -> list[int]:
    """The indices of the non-zero entries of ``flags`` (per-edge flags), ascending."""
    return np.flatnonzero(np.frombuffer(flags, np.uint8)).tolist()


def _order_keys(dag: TaskDAG) -> list[int] | None:
    """The names the reference knew the nodes by (their records' ``file_id``, else the id), or None when
    they are the ids."""
    keys = [v if dag.info(v).file_id is None else dag.info(v).file_id for v in range(dag.num_nodes)]
    return None if keys == list(range(dag.num_nodes)) else keys
