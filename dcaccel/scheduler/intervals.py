"""Streaming-interval analysis (``STREAMING_MODEL.md`` §3): how many cycles apart consecutive
elements travel on each edge when tasks stream to each other.

Tasks joined by streaming edges run in lock-step: inside a weakly connected part U of a streaming
component (buffer out-edges cut), the slowest producer sets the pace. With K the largest volume
handled by a node of U (its input, or also its output when it leaves U), every edge from a
non-exit node v of U to a node of U carries one element every ``K / O_U(v)`` cycles, O_U(v) being
the volume of v's first out-edge into U. All other edges have interval 1.

As in the reference, the exits of U and K look at all edges of the DAG (buffer out-edges
included) while U itself is built without buffer out-edges (§8 B9).
"""

from __future__ import annotations

from dataclasses import dataclass

from dcaccel.scheduler.graph import CanonicalGraph, flagged


@dataclass(frozen=True)
class Intervals:
    """Streaming interval of every edge as an exact ratio ``num[e] / den[e]`` (>= 1); ``paced`` lists the
    edges whose part set it (every other edge has interval 1/1)."""

    num: list[int]
    den: list[int]
    paced: list[int]


def streaming_intervals(g: CanonicalGraph, streaming: bytearray) -> Intervals:
    """The streaming interval of every edge, indexed by edge id."""
    n, m = g.n, g.m
    src, dst, vol, is_buffer = g.src, g.dst, g.vol, g.is_buffer
    out_start, out_edges = g.out_start, g.out_edges
    num = [1] * m
    den = [1] * m

    # Streaming components, as union-find roots (nodes without a streaming edge are singletons).
    component = list(range(n))
    touched = bytearray(n)
    for e in flagged(streaming):
        a, b = src[e], dst[e]
        touched[a] = touched[b] = 1
        while component[a] != a:
            component[a] = a = component[component[a]]
        while component[b] != b:
            component[b] = b = component[component[b]]
        if a < b:
            component[b] = a
        elif b < a:
            component[a] = b
    nodes = [v for v in range(n) if touched[v]]
    for v in nodes:
        r = v
        while component[r] != r:
            r = component[r]
        component[v] = r

    # Parts U: weakly connected through edges that do not leave a buffer, inside one component.
    part = list(range(n))
    for u in nodes:
        if is_buffer[u]:
            continue
        c = component[u]
        for e in out_edges[out_start[u] : out_start[u + 1]]:
            w = dst[e]
            if touched[w] and component[w] == c:
                a, b = u, w
                while part[a] != a:
                    part[a] = a = part[part[a]]
                while part[b] != b:
                    part[b] = b = part[part[b]]
                if a < b:
                    part[b] = a
                elif b < a:
                    part[a] = b
    members: dict[int, list[int]] = {}
    for v in nodes:
        r = v
        while part[r] != r:
            r = part[r]
        part[v] = r
        if r in members:
            members[r].append(v)
        else:
            members[r] = [v]

    in_volume, out_volume = g.in_volume, g.out_volume
    source, exit_node = g.source, g.exit
    paced: list[int] = []
    for root, group in members.items():
        if len(group) == 1:
            continue
        inner_out = []
        peak = -1
        for v in group:
            inner = [e for e in out_edges[out_start[v] : out_start[v + 1]] if part[dst[e]] == root]
            if inner:
                inner_out.append(inner)
            if v == source:
                volume = out_volume[v]
            else:
                volume = in_volume[v]
                if not inner and v != exit_node and not is_buffer[v] and out_volume[v] > volume:
                    volume = out_volume[v]
            if volume > peak:
                peak = volume
        for inner in inner_out:
            pace = vol[inner[0]]
            for e in inner:
                num[e] = peak
                den[e] = pace
            paced += inner
    return Intervals(num, den, paced)
