"""The iteration orders the reference scheduler's tie-breaking depends on (``STREAMING_MODEL.md``
§0.2, [ORDER]).

The reference runs on networkx 2.5: an induced subgraph ``G[S]`` iterates its nodes in the order
of the Python ``set(S)`` when S is less than half the graph, and in graph order otherwise; its
topological sort is Kahn's algorithm with a LIFO stack. Reproducing both literally is cheap.
"""

from __future__ import annotations

import numpy as np

from dcaccel.scheduler.graph import CanonicalGraph


def python_set_order(g: CanonicalGraph, nodes: list[int]) -> list[int]:
    """The iteration order of the Python set the reference builds from ``nodes`` (in list order),
    its elements being the reference's node names (:attr:`CanonicalGraph.order_key`)."""
    if g.order_key is None:
        return list(set(nodes))
    key = g.order_key
    node_of = {key[v]: v for v in nodes}
    return [node_of[k] for k in {key[v] for v in nodes}]


def induced_node_order(g: CanonicalGraph, nodes: list[int]) -> list[int]:
    """Node order of the induced subgraph on ``nodes``: Python set order when the subgraph has less
    than half the nodes of ``g``, graph (id) order otherwise."""
    members = set(nodes)
    if 2 * len(members) < g.n:
        return python_set_order(g, nodes)
    return sorted(members)


def induced_topological_orders(g: CanonicalGraph, parts: list[list[int]]) -> list[list[int]]:
    """TOPO(G[part]) of every part of a partition of (some of) the nodes: LIFO Kahn on the induced
    subgraph, started from its in-degree-0 nodes in induced node order, children pushed in successor
    order. The parts' in-degrees and inner edges are counted in one pass over the edges; a part without
    inner edges is its induced node order reversed (every node starts on the stack, none is pushed)."""
    n = g.n
    dst, out_start, out_edges = g.dst, g.out_start, g.out_edges
    part_of = [-1] * n
    for index, part in enumerate(parts):
        for v in part:
            part_of[v] = index
    sources, targets, _ = g.edge_arrays()
    where = np.array(part_of, dtype=np.int64)
    inside = where[sources]
    inside = (inside == where[targets]) & (inside != -1)
    indeg = np.bincount(targets[inside], minlength=n).tolist()
    inner_edges = np.bincount(where[sources[inside]], minlength=len(parts)).tolist()
    orders = []
    for index, part in enumerate(parts):
        if len(part) < 2:
            orders.append(list(part))
            continue
        if not inner_edges[index]:
            orders.append(induced_node_order(g, part)[::-1])
            continue
        stack = [v for v in induced_node_order(g, part) if indeg[v] == 0]
        order = []
        while stack:
            u = stack.pop()
            for e in out_edges[out_start[u] : out_start[u + 1]]:
                w = dst[e]
                if part_of[w] == index:
                    indeg[w] -= 1
                    if indeg[w] == 0:
                        stack.append(w)
            order.append(u)
        orders.append(order)
    return orders
