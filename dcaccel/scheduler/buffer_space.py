"""Deadlock buffer space (``STREAMING_MODEL.md`` §5.1): FIFO capacities for streaming edges.

Where two streaming paths of a block fork and join again (an undirected cycle), the faster path
must hold the elements that arrive before the slower one delivers; otherwise the join stalls and
the fork deadlocks. For every node with several predecessors on such a cycle, the capacity of each
streaming in-edge on the cycle is the number of elements that arrive, at the edge's streaming
interval, between the edge's producer's first output and the latest first output (or end, for a
non-streaming edge) among all predecessors.

The cycles are found as the reference finds them: a depth-first search of the block's undirected
graph that follows streaming edges and marks the tree paths of every back edge, then a second
search that groups marked nodes. The search starts at the first element of a Python set
([ORDER], reproduced literally). As in the reference the pseudo source is not removed from the
undirected graph (§8 B5), so a search that starts there sees no streaming edge and finds no
cycle; ``reference=False`` removes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from dcaccel.scheduler.graph import CanonicalGraph, flagged
from dcaccel.scheduler.intervals import Intervals
from dcaccel.scheduler.order import induced_node_order
from dcaccel.scheduler.timeline import Timing


@dataclass(frozen=True)
class UndirectedBlock:
    """The part of a block the cycle search can mark: its connected components that contain an
    undirected cycle, each with the node the search starts at, their undirected adjacency
    (neighbour and edge id lists, in networkx's order) and their edges."""

    neighbours: dict[int, list[int]]
    via: dict[int, list[int]]
    edges: list[int]
    cyclic: list[tuple[int, set[int]]]


def undirected_blocks(
    g: CanonicalGraph, blocks: list[list[int]], streaming: bytearray, reference: bool = True
) -> list[UndirectedBlock | None]:
    """The undirected view of every block that has a streaming edge and an undirected cycle (None
    for the others). It does not depend on the flags otherwise, and refinement only clears flags:
    later rounds reuse it."""
    block_of = [-1] * g.n
    for index, block in enumerate(blocks):
        for v in block:
            block_of[v] = index
    src, dst = g.src, g.dst
    streams = {block_of[src[e]] for e in flagged(streaming) if block_of[src[e]] == block_of[dst[e]] != -1}
    return [_undirected_block(g, block, reference) if index in streams else None for index, block in enumerate(blocks)]


def buffer_space(
    g: CanonicalGraph,
    blocks: list[list[int]],
    streaming: bytearray,
    intervals: Intervals,
    timing: Timing,
    reference: bool = True,
    undirected: list[UndirectedBlock | None] | None = None,
) -> dict[int, int]:
    """Capacities by edge id for the streaming edges the cycle analysis looked at (missing edges
    need the default capacity 1); ``undirected`` is :func:`undirected_blocks`, computed when not given."""
    capacities: dict[int, int] = {}
    if undirected is None:
        undirected = undirected_blocks(g, blocks, streaming, reference)
    for block, view in zip(blocks, undirected, strict=True):
        if view is None or not any(streaming[e] for e in view.edges):
            continue  # the search would stop at its start in every component
        for cycle in _undirected_cycles(view, streaming):
            _size_cycle(g, block, cycle, streaming, intervals, timing, capacities)
    return capacities


def _undirected_block(g: CanonicalGraph, block: list[int], reference: bool) -> UndirectedBlock | None:
    """The block's undirected view, reduced to its connected components that contain a cycle (None
    if there is none: the search would mark nothing)."""
    members = set(block)
    order = induced_node_order(g, block)
    if not reference:
        members.discard(g.source)
        order = [v for v in order if v != g.source]
    neighbours: dict[int, list[int]] = {v: [] for v in order}
    via: dict[int, list[int]] = {v: [] for v in order}
    edges = []
    dst, out_start, out_edges = g.dst, g.out_start, g.out_edges
    for u in order:
        for e in out_edges[out_start[u] : out_start[u + 1]]:
            w = dst[e]
            if w in members:
                neighbours[u].append(w)
                via[u].append(e)
                neighbours[w].append(u)
                via[w].append(e)
                edges.append(e)
    cyclic = []
    seen_all: set[int] = set()
    for v in order:
        if v in seen_all or not neighbours[v]:
            continue  # visited, or alone (no cycle)
        component = _plain_bfs(neighbours, v)
        seen_all.update(component)
        if sum(len(neighbours[x]) for x in component) >= 2 * len(component):  # not a tree
            cyclic.append((_first_in_set(g, component, neighbours, v), component))
    if not cyclic:
        return None
    kept = set().union(*(component for _, component in cyclic))
    return UndirectedBlock(
        {x: neighbours[x] for x in kept},
        {x: via[x] for x in kept},
        [e for e in edges if g.src[e] in kept],
        cyclic,
    )


def _undirected_cycles(view: UndirectedBlock, streaming: bytearray) -> list[set[int]]:
    neighbours, via = view.neighbours, view.via
    cycles: list[set[int]] = []
    for start, _ in view.cyclic:
        parent = {start: -1}
        marked: set[int] = set()
        visited: set[int] = set()
        stack = [start]
        while stack:
            x = stack.pop()
            before = parent[x]
            if x in visited:
                continue
            visited.add(x)
            for w, e in zip(neighbours[x], via[x], strict=True):
                if w in visited:
                    if w != before:
                        _mark(parent, x, w, marked)
                else:
                    parent[w] = x
                    if streaming[e]:
                        stack.append(w)
        cycles += _marked_groups(neighbours, start, parent, marked)
    return cycles


def _plain_bfs(neighbours: dict[int, list[int]], root: int) -> set[int]:
    """The connected component of ``root``, as a set filled in networkx's BFS order."""
    seen: set[int] = set()
    level = {root}
    while level:
        following: set[int] = set()
        for x in level:
            if x not in seen:
                seen.add(x)
                following.update(neighbours[x])
        level = following
    return seen


def _first_in_set(g: CanonicalGraph, component: set[int], neighbours: dict[int, list[int]], root: int) -> int:
    """The first element of the component's Python set as the reference builds it, by node name."""
    if g.order_key is None:
        return next(iter(component))
    key = g.order_key
    names = _plain_bfs({key[x]: [key[w] for w in neighbours[x]] for x in component}, key[root])
    name = next(iter(names))
    return next(x for x in component if key[x] == name)


def _mark(parent: dict[int, int], u: int, v: int, marked: set[int]) -> None:
    """Mark the tree paths from ``u`` and ``v`` up to their first common ancestor (included)."""
    up = [u]
    p = parent[u]
    while p != -1:
        up.append(p)
        p = parent[p]
    on_up = {x: i for i, x in enumerate(up)}
    p = v
    while p != -1 and p not in on_up:
        marked.add(p)
        p = parent[p]
    marked.add(p)
    marked.update(up[: on_up[p]])


def _marked_groups(neighbours: dict[int, list[int]], start: int, parent: dict[int, int], marked: set[int]):
    """Marked nodes grouped as a second depth-first search (over all edges) meets them."""
    groups: list[set[int]] = [set()]
    visited: set[int] = set()
    stack = [start]
    while stack:
        x = stack.pop()
        if x in visited:
            continue
        visited.add(x)
        if x in marked:
            if groups[-1] and parent[x] not in groups[-1]:
                groups.append(set())
            groups[-1].add(x)
        for w in neighbours[x]:
            if w not in visited:
                parent[w] = x
                stack.append(w)
    return groups


def _size_cycle(g, block, cycle, streaming, intervals: Intervals, timing: Timing, capacities: dict[int, int]) -> None:
    members = set(block)
    src, first, end = g.src, timing.first_output, timing.end
    for x in cycle:
        on_cycle = [e for e in g.into(x) if src[e] in cycle]
        if len(on_cycle) < 2:
            continue
        latest = -1
        for e in g.into(x):
            p = src[e]
            if p in members:
                latest = max(latest, first[p], first[p] if streaming[e] else end[p])
        for e in on_cycle:
            if not streaming[e]:
                continue
            waiting = latest - first[src[e]]
            elements = -(-waiting * intervals.den[e] // intervals.num[e])
            capacities[e] = max(capacities.get(e, 1), elements, 1)
