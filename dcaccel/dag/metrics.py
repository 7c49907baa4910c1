"""Metrics of a canonical task DAG alone (no schedule): task cost, work, depth, I/O volume and
streaming depth, as ``STREAMING_MODEL.md`` §0.3, §6.2 and §7.1 define them.

Every function works on concrete DAGs (int results; the streaming depth may be a
``fractions.Fraction``) and on symbolic ones (sympy results, with ``sympy.Max`` where the
concrete computation compares).
"""

from __future__ import annotations

from fractions import Fraction

from dcaccel.dag import volume as arithmetic
from dcaccel.dag.taskdag import NodeKind, TaskDAG, Volume


def task_costs(dag: TaskDAG) -> list[Volume]:
    """The isolation time T(v) of every node (§0.3, base latency 1).

    0 for the pseudo source, a pseudo sink and buffer nodes; ``I`` for a task without out-edges
    (the exit); ``max(I, O)`` otherwise, with I (O) the volume of the first in-edge (out-edge).
    """
    adj = dag.adjacency()
    vol = dag.edge_volumes
    biggest = max if dag.is_concrete else arithmetic.maximum
    in_start, in_edges, out_start, out_edges = adj.in_start, adj.in_edges, adj.out_start, adj.out_edges
    costs: list[Volume] = [0] * dag.num_nodes
    for v in dag.tasks:
        if in_start[v] == in_start[v + 1]:
            continue
        volume_in = vol[in_edges[in_start[v]]]
        if out_start[v] == out_start[v + 1]:
            costs[v] = volume_in
        else:
            costs[v] = biggest(volume_in, vol[out_edges[out_start[v]]])
    return costs


def work(dag: TaskDAG) -> Volume:
    """W = Σ T(v): the time a single PE needs for the whole DAG (§6.2)."""
    return arithmetic.total(task_costs(dag))


def opaque_work(dag: TaskDAG) -> tuple[int, float | Volume]:
    """The number of opaque tasks (role opaque: ops with no canonical implementation, docs/dag.md) and
    their share of the work, Σ T(v) over them / W (0.0 when there are none)."""
    opaque = [v for v in dag.tasks if dag.info(v).opaque]
    if not opaque:
        return 0, 0.0
    costs = task_costs(dag)
    return len(opaque), sum(costs[v] for v in opaque) / sum(costs[v] for v in dag.tasks)


def upward_ranks(dag: TaskDAG, costs: list[Volume] | None = None) -> list[Volume]:
    """rank(v) = T(v) + max over successors s of rank(s) (the longest path from v, own cost included)."""
    costs = task_costs(dag) if costs is None else costs
    biggest = max if dag.is_concrete else arithmetic.maximum
    adj = dag.adjacency()
    dst = dag.edge_targets
    out_start, out_edges = adj.out_start, adj.out_edges
    ranks: list[Volume] = [0] * dag.num_nodes
    for v in reversed(dag.topological_order()):
        best = 0
        for e in out_edges[out_start[v] : out_start[v + 1]]:
            best = biggest(best, ranks[dst[e]])
        ranks[v] = costs[v] + best
    return ranks


def depth(dag: TaskDAG) -> Volume:
    """The critical path: rank of the pseudo source (§6.2)."""
    return upward_ranks(dag)[dag.source]


def io_volume(dag: TaskDAG) -> Volume:
    """Σ over buffer nodes of the volume they receive and send, edges from the pseudo source and
    into a pseudo sink excluded (§7.1; the seed table's "I/Os")."""
    adj = dag.adjacency()
    src, dst, vol = dag.edge_sources, dag.edge_targets, dag.edge_volumes
    pseudo = {dag.source}
    if dag.sink is not None:
        pseudo.add(dag.sink)
    terms = []
    for b in dag.buffers:
        terms += [vol[e] for e in adj.into(b) if src[e] not in pseudo]
        terms += [vol[e] for e in adj.out_of(b) if dst[e] not in pseudo]
    return arithmetic.total(terms)


def production_rates(dag: TaskDAG) -> list:
    """R(v) = O/I for every node (§0.1): 1 for the pseudo source and a pseudo sink, -1/I for a real
    exit (only ever used as max(R, 1) = 1)."""
    adj = dag.adjacency()
    vol = dag.edge_volumes
    rates: list = [1] * dag.num_nodes
    for v in range(dag.num_nodes):
        if dag.kind(v) in (NodeKind.SOURCE, NodeKind.SINK) or adj.in_start[v] == adj.in_start[v + 1]:
            continue
        volume_in = vol[adj.in_edges[adj.in_start[v]]]
        first_out = adj.out_start[v]
        volume_out = -1 if first_out == adj.out_start[v + 1] else vol[adj.out_edges[first_out]]
        rates[v] = arithmetic.ratio(volume_out, volume_in)
    return rates


def streaming_depth(dag: TaskDAG):
    """The streaming depth (§6.2, ``get_streaming_depth_no_buffer_nodes``): a lower bound on the
    makespan with unbounded PEs when every edge streams.

    Levels: lev(source) = 0, lev(v) = max over predecessors of lev + max(R(v), 1). Without the
    pseudo nodes, for every weakly connected component Q: V_Q = the largest volume entering Q at a
    node without predecessor in Q or leaving a node of Q, lev_Q = the largest level of an exit of Q.
    The result is the largest V_Q + lev_Q (0 for a DAG without tasks or buffers).
    """
    adj = dag.adjacency()
    src, dst, vol = dag.edge_sources, dag.edge_targets, dag.edge_volumes
    n = dag.num_nodes
    source, sink, exit_node = dag.source, dag.sink, dag.exit
    rates = production_rates(dag)
    levels: list = [0] * n
    for v in dag.topological_order():
        if v == source:
            continue
        best = 0
        for e in adj.into(v):
            best = arithmetic.maximum(best, levels[src[e]])
        levels[v] = best + arithmetic.maximum(rates[v], 1)

    removed = {source} if sink is None else {source, sink}
    component = _weak_components(dag, removed)
    volume_of: dict[int, Volume] = {}
    level_of: dict[int, Volume] = {}
    for v in range(n):
        if v in removed:
            continue
        q = component[v]
        inside_in = [e for e in adj.into(v) if src[e] not in removed]
        inside_out = [e for e in adj.out_of(v) if dst[e] not in removed]
        volume_in = vol[adj.in_edges[adj.in_start[v]]] if not inside_in else -1
        if inside_out:
            volume_out = vol[inside_out[0]]
        elif v == exit_node:
            volume_out = vol[adj.in_edges[adj.in_start[v]]]
        else:
            volume_out = vol[adj.out_edges[adj.out_start[v]]]
        volume_of[q] = arithmetic.maximum(volume_of.get(q, -1), arithmetic.maximum(volume_out, volume_in))
        if not inside_out:
            level_of[q] = arithmetic.maximum(level_of.get(q, 0), levels[v])
    best = None
    for q, volume in volume_of.items():
        candidate = volume + level_of.get(q, 0)
        best = candidate if best is None else arithmetic.maximum(best, candidate)
    if best is None:
        return 0
    if isinstance(best, Fraction) and best.denominator == 1:
        return int(best)
    return best


def _weak_components(dag: TaskDAG, removed: set[int]) -> list[int]:
    """Weakly connected component label of every node (``-1`` for ``removed`` nodes)."""
    n = dag.num_nodes
    adj = dag.adjacency()
    src, dst = dag.edge_sources, dag.edge_targets
    label = [-1] * n
    for root in range(n):
        if root in removed or label[root] != -1:
            continue
        label[root] = root
        stack = [root]
        while stack:
            u = stack.pop()
            for e in adj.out_of(u):
                w = dst[e]
                if label[w] == -1 and w not in removed:
                    label[w] = root
                    stack.append(w)
            for e in adj.into(u):
                w = src[e]
                if label[w] == -1 and w not in removed:
                    label[w] = root
                    stack.append(w)
    return label
