"""Spatial block partitioning (``STREAMING_MODEL.md`` §2): cut the DAG into blocks of at most P
tasks that run together; edges between tasks of one block stream.

The partition repeatedly takes a node all of whose predecessors are already placed (a *source*
of the remaining graph), scanning the sources in node order:

* a source that depends on no source of the current block is added at once, as a new block
  source;
* among dependent sources whose work does not exceed that of the first block source they
  depend on (or that are, or depend on, a buffer node), the one with the most work joins the
  block (ties: the later source);
* otherwise ``strict`` opens a new block with the dependent source of most work (ties: the
  earlier), while ``relaxed`` adds the one of least work to the current block (ties: the
  earlier).

A block closes when it holds P non-buffer nodes. The reference rescans all sources and builds a
descendant set per block source; here sources wait in heaps and dependence on the current block's
sources is a bitmask propagated along edges, which gives the same blocks in O((n + m) log n)
(§10).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from dcaccel.scheduler.graph import CanonicalGraph


@dataclass(frozen=True)
class Partition:
    """Blocks in execution order (the pseudo source first in block 0, the pseudo sink last in the last
    block; a trailing empty block is kept, as the reference counts it) and the edges that stream."""

    blocks: list[list[int]]
    streaming_edges: list[int]  # edge ids, in edge order


def in_degrees(g: CanonicalGraph) -> list[int]:
    """The number of predecessors of every node, counted once per graph (``derived``)."""
    found = g.derived.get("in_degrees")
    if found is None:
        found = g.derived["in_degrees"] = np.diff(np.asarray(g.in_start, dtype=np.int64)).tolist()
    return found


def partition(g: CanonicalGraph, pes: int, strict: bool = False) -> Partition:
    """Spatial block partitioning of ``g`` for ``pes`` PEs, strict or relaxed (see module docstring).

    The reference never checks a strict block for fullness right after opening it; that only
    matters for P = 1, where the reference aborts, and here the check is made.
    """
    n = g.n
    root, sink = g.source, g.pseudo_sink
    work = g.cost
    is_buffer = g.is_buffer
    successors = g.successors()
    indeg = list(in_degrees(g))

    blocks: list[list[int]] = [[]]
    block_sources: list[int] = []  # sources of the current block; bit i of a mask stands for block_sources[i]
    buffers_in_block = 0
    mask = [0] * n
    epoch = [0] * n  # mask[v] belongs to the current block iff epoch[v] == current
    current = 1

    stops: list[int] = []  # independent sources and pseudo nodes: the scan stops at the first of them
    pending: list[int] = []  # dependent sources not yet reached by the scan, by id
    fits: list[tuple[int, int]] = []  # dependent sources that may join the block: (-work, -id)
    opens: list[tuple[int, int]] = []  # the others: relaxed (work, id), strict (-work, id)
    fits_flag = bytearray(n)

    push, pop = heapq.heappush, heapq.heappop

    def activate(stop: int) -> None:
        """File the dependent sources the scan reaches before ``stop`` as block candidates."""
        while pending and pending[0] < stop:
            s = pop(pending)
            if fits_flag[s]:
                push(fits, (-work[s], -s))
            else:
                push(opens, (-work[s] if strict else work[s], s))

    def new_block() -> None:
        nonlocal current, buffers_in_block
        current += 1
        buffers_in_block = 0
        block_sources.clear()
        for s in pending:
            push(stops, s)
        for _, s in fits:
            push(stops, -s)
        for _, s in opens:
            push(stops, s)
        pending.clear()
        fits.clear()
        opens.clear()

    def remove(v: int, propagate: int) -> None:
        """Take ``v`` out of the remaining graph: its successors inherit the mask ``propagate``, and
        those left without predecessors become sources, filed by their dependence on the current
        block's sources (the first one they depend on decides whether they may join the block)."""
        for w in successors[v]:
            if propagate:
                if epoch[w] == current:
                    mask[w] |= propagate
                else:
                    epoch[w] = current
                    mask[w] = propagate
            indeg[w] -= 1
            if indeg[w] == 0:
                m = mask[w] if epoch[w] == current else 0
                if m == 0 or w == sink:
                    push(stops, w)
                else:
                    bs = block_sources[(m & -m).bit_length() - 1]
                    fits_flag[w] = work[w] <= work[bs] or is_buffer[w] or is_buffer[bs]
                    push(pending, w)

    stops.append(root)
    placed = 0
    while placed < n:
        stop = stops[0] if stops else n
        if pending and pending[0] < stop:
            activate(stop)
        # The next node of the current block and whether it is a block source.
        if stops and (stop == root or stop == sink):
            pop(stops)
            placed += 1
            remove(stop, 0)
            if not fits:
                continue
            v, as_source = -pop(fits)[1], False
        elif stops:
            v, as_source = pop(stops), True
        elif fits:
            v, as_source = -pop(fits)[1], False
        else:
            v, as_source = pop(opens)[1], strict
            if strict:
                blocks.append([])
                new_block()
        placed += 1
        block = blocks[-1]
        block.append(v)
        buffers_in_block += is_buffer[v]
        inherited = mask[v] if epoch[v] == current else 0
        if as_source:
            inherited |= 1 << len(block_sources)
            block_sources.append(v)
        if len(block) - buffers_in_block >= pes:
            blocks.append([])
            new_block()
            remove(v, 0)
        else:
            remove(v, inherited)

    block_of = np.full(n, -1, dtype=np.int64)
    for index, block in enumerate(blocks):
        block_of[block] = index
    sources, targets, edges = g.edge_arrays()
    producer = sources[edges]
    block = block_of[producer]
    inside = (np.frombuffer(is_buffer, np.uint8)[producer] == 0) & (block == block_of[targets[edges]]) & (block != -1)
    streaming = edges[inside].tolist()
    blocks[0].insert(0, root)
    if sink != -1:
        blocks[-1].append(sink)
    return Partition(blocks, streaming)
