"""The streaming scheduler (``STREAMING_MODEL.md`` §1): partition, streaming intervals, gang
schedule, deadlock buffer space, then the refinement loop of the reference's DSE driver.

Refinement: a streaming edge whose FIFO would have to hold the whole stream (``volume - 1 <=
capacity``, which includes every edge of volume at most 2, §8 B10) stops streaming; intervals,
schedule and buffer space are recomputed on the same blocks until no edge changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from dcaccel.scheduler.buffer_space import buffer_space, undirected_blocks
from dcaccel.scheduler.gang import block_orders, gang_schedule
from dcaccel.scheduler.graph import CanonicalGraph, flagged
from dcaccel.scheduler.intervals import Intervals, streaming_intervals
from dcaccel.scheduler.partition import partition
from dcaccel.scheduler.timeline import Timing


@dataclass(frozen=True)
class StreamingResult:
    """Everything the streaming pipeline computes for one (DAG, P, partitioning)."""

    timing: Timing
    blocks: list[list[int]]
    orders: list[list[int]]  # TOPO of every block: the order the nodes were placed in
    streaming: bytearray  # final flag per edge id
    initial_streaming: bytearray  # flags right after partitioning
    intervals: Intervals  # final streaming interval per edge id
    capacities: dict[int, int]  # final buffer space by edge id (absent: 1)
    initial_capacities: dict[int, int]
    makespan_before_refinement: int
    refinement_iterations: int


def streaming_schedule(
    g: CanonicalGraph, pes: int, strict: bool = False, refine: bool = True, reference: bool = True
) -> StreamingResult:
    """Run the streaming pipeline on ``g`` with ``pes`` PEs (see module docstring)."""
    cut = partition(g, pes, strict=strict)
    blocks = cut.blocks
    streaming = bytearray(g.m)
    for e in cut.streaming_edges:
        streaming[e] = 1
    initial_streaming = bytearray(streaming)

    orders = block_orders(g, blocks)
    intervals = streaming_intervals(g, streaming)
    timing = gang_schedule(g, blocks, streaming, intervals, pes, reference=reference, orders=orders)
    makespan_before = timing.makespan
    undirected = undirected_blocks(g, blocks, streaming, reference=reference)
    capacities = buffer_space(g, blocks, streaming, intervals, timing, reference=reference, undirected=undirected)
    initial_capacities = capacities
    rounds = 0
    vol, src = g.vol, g.src
    block_of = [0] * g.n
    for index, block in enumerate(blocks):
        for v in block:
            block_of[v] = index
    while refine:
        dropped = [e for e in flagged(streaming) if vol[e] - 1 <= capacities.get(e, 1)]
        if not dropped:
            break
        rounds += 1
        for e in dropped:
            streaming[e] = 0
        intervals = streaming_intervals(g, streaming)
        # Streaming edges, their components and paced edges lie inside one block: the blocks before the
        # first one that lost a streaming edge keep their timing.
        changed = min(block_of[src[e]] for e in dropped)
        timing = gang_schedule(
            g, blocks, streaming, intervals, pes, reference=reference, orders=orders, since=(timing, changed)
        )
        capacities = buffer_space(g, blocks, streaming, intervals, timing, reference=reference, undirected=undirected)
    return StreamingResult(
        timing=timing,
        blocks=blocks,
        orders=orders,
        streaming=streaming,
        initial_streaming=initial_streaming,
        intervals=intervals,
        capacities=capacities,
        initial_capacities=initial_capacities,
        makespan_before_refinement=makespan_before,
        refinement_iterations=rounds,
    )
