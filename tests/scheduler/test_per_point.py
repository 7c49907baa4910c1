"""The per-point shortcuts of the streaming scheduler and the costing give what the direct computation
gives: the gang-scheduling terms kept per graph (durations, first-output leads), the refinement rounds
that re-time from the first changed block, the access pass derived from the one without streaming
edges (same sums, same crossing order, same transfer slots), and the re-timing that keeps a schedule's
timing when a check of all nodes at once says the node-by-node pass would reproduce it."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings

from dcaccel.architecture import load
from dcaccel.cost import schedule as costing
from dcaccel.cost.rates import ratio
from dcaccel.cost.schedule import CostCache, _access_pass, _accesses, cost_schedule
from dcaccel.dag import TaskDAG
from dcaccel.dag import generators as gen
from dcaccel.dag.taskdag import NodeKind
from dcaccel.scheduler import CanonicalGraph, schedule
from dcaccel.scheduler.gang import block_orders, first_output_time, gang_schedule, task_duration, timing_terms
from dcaccel.scheduler.intervals import streaming_intervals
from dcaccel.scheduler.io import IOVolume, global_io, onchip_placement
from dcaccel.scheduler.order import induced_node_order
from dcaccel.scheduler.schedule import Schedule
from dcaccel.scheduler.streaming import streaming_schedule
from dcaccel.scheduler.timeline import Timing
from tests.scheduler.conftest import canonical_dags, load_vector

VECTORS = ["seedconv_mv", "seedconv_op_noxcolbuf", "fft_rand_8_buf", "chol_rand_6", "chain_elw_6"]
PES = [1, 2, 3, 8]


def _terms_match(g: CanonicalGraph, pes: int, reference: bool) -> None:
    result = streaming_schedule(g, pes, reference=reference)
    floor, ceil, lead = timing_terms(g, result.intervals, reference)
    for v in range(g.n):
        if v in (g.source, g.pseudo_sink) or g.is_buffer[v]:
            assert (floor[v], ceil[v], lead[v]) == (0, 0, 0)
            continue
        num, den = task_duration(g, v, result.intervals, reference)
        assert (floor[v], ceil[v]) == (num // den, -(-num // den)), v
        if v != g.exit:
            assert lead[v] == first_output_time(g, v, 0, 0, result.intervals, reference), v


def _refined_equals_fresh(g: CanonicalGraph, pes: int, reference: bool) -> None:
    """The final timing (refinement re-timed from the first changed block) equals gang scheduling all
    blocks afresh under the final flags."""
    result = streaming_schedule(g, pes, reference=reference)
    fresh = gang_schedule(g, result.blocks, result.streaming, streaming_intervals(g, result.streaming), pes, reference)
    assert result.timing == fresh


def _accesses_equal_full_pass(g: CanonicalGraph, pes: int, arch_name: str, onchip: int) -> None:
    arch = load(arch_name)
    result = schedule(g, pes, "streaming", validate=False)
    placed = frozenset(result.io_at(onchip).onchip_buffers)
    costs = cost_schedule(result, arch, onchip, validate=False)
    unit_of = list(costs.unit_of)
    bandwidths = {name: ratio(memory.bandwidth_bytes_per_cycle) for name, memory in arch.memories.items()}
    got = _accesses(CostCache(g), result, arch, placed, unit_of, bandwidths)
    full = _access_pass(g, result.streaming, arch, placed, unit_of, bandwidths)
    assert (got.reads, got.writes, got.compulsory) == (full.reads, full.writes, full.compulsory)
    assert list(got.crossings.items()) == list(full.crossings.items())  # the energies are summed in this order
    assert {v: s for v, s in got.slots.items() if s} == {v: s for v, s in full.slots.items() if s}


def _costs_by_the_node_by_node_pass(result: Schedule, arch, onchip: int):
    with mock.patch.object(costing, "_keeps_timing", return_value=False):
        return cost_schedule(result, arch, onchip, validate=False)


def _retiming_equals_node_by_node(g: CanonicalGraph, pes: int, scheduler: str, arch_name: str, onchip: int) -> None:
    """The costs equal those of the node-by-node re-timing; on ``abstract`` the check passes and the
    re-timed timing is the schedule's."""
    arch = load(arch_name)
    result = schedule(g, pes, scheduler, validate=False)
    verdicts = []
    keeps_timing = costing._keeps_timing

    def check(*args):
        verdicts.append(keeps_timing(*args))
        return verdicts[-1]

    with mock.patch.object(costing, "_keeps_timing", side_effect=check):
        costs = cost_schedule(result, arch, onchip, validate=False)
    assert costs == _costs_by_the_node_by_node_pass(result, arch, onchip)
    if arch_name == "abstract":
        assert verdicts == [True]
        assert costs.timing == result.timing


def _timing_moved_one_cycle(g: CanonicalGraph, pes: int, scheduler: str) -> Schedule:
    """The schedule with its last-starting node one cycle later: the re-timing moves it back."""
    result = schedule(g, pes, scheduler, validate=False)
    t = result.timing
    v = max(range(g.n), key=lambda u: (t.start[u], t.end[u]))
    start, end, first = list(t.start), list(t.end), list(t.first_output)
    start[v], end[v], first[v] = start[v] + 1, end[v] + 1, first[v] + 1
    return Schedule(
        g, pes, scheduler, Timing(list(t.pe), start, end, first), result.placement_order, result.detail,
        streaming=result.streaming, blocks=result.blocks,
    )  # fmt: skip


@pytest.mark.parametrize("reference", [True, False])
@pytest.mark.parametrize("pes", PES)
@pytest.mark.parametrize("name", VECTORS)
def test_streaming_shortcuts_on_vectors(name, pes, reference):
    g = CanonicalGraph.from_dag(load_vector(name)[1])
    _terms_match(g, pes, reference)
    _refined_equals_fresh(g, pes, reference)


@pytest.mark.parametrize(("arch", "onchip"), [("abstract", 0), ("eyeriss", 0), ("eyeriss", 8)])
@pytest.mark.parametrize("pes", PES)
@pytest.mark.parametrize("name", VECTORS)
def test_access_pass_from_the_one_without_streams_on_vectors(name, pes, arch, onchip):
    _accesses_equal_full_pass(CanonicalGraph.from_dag(load_vector(name)[1]), pes, arch, onchip)


def _first_crossing_streams() -> TaskDAG:
    """source -> b_in -> T0 -> T1 -> T2 -> b_out -> sink, 4 elements per edge. On 2 PEs, T0 -> T1 streams
    and is, without streaming, the first edge from a PE to the off-chip memory (the buffers are on chip):
    that crossing then comes after the link's."""
    dag = TaskDAG("first_crossing_streams")
    nodes = [
        dag.add_node(kind, label)
        for kind, label in [(NodeKind.SOURCE, "source"), (NodeKind.BUFFER, "b_in"), (NodeKind.TASK, "T0"),
                            (NodeKind.TASK, "T1"), (NodeKind.TASK, "T2"), (NodeKind.BUFFER, "b_out"),
                            (NodeKind.SINK, "sink")]
    ]  # fmt: skip
    for a, b in zip(nodes, nodes[1:], strict=False):
        dag.add_edge(a, b, 4)
    return dag


def test_access_pass_when_a_streaming_edge_is_first_on_a_crossing():
    g = CanonicalGraph.from_dag(_first_crossing_streams())
    assert (2, 3) in schedule(g, 2, "streaming").streaming_edges
    _accesses_equal_full_pass(g, 2, "eyeriss", 8)


@pytest.mark.parametrize(("seed", "pes"), [(6, 8), (0, 2), (1, 4)])
def test_refinement_from_the_first_changed_block_on_layered_dags(seed, pes):
    """Seed 6 on 8 PEs: a refinement round that changes the makespan (493 -> 462)."""
    g = CanonicalGraph.from_dag(gen.layered(40, 6, seed=seed, buffer_fraction=0.1))
    _refined_equals_fresh(g, pes, True)
    _terms_match(g, pes, True)
    _accesses_equal_full_pass(g, pes, "eyeriss", 8)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dag=canonical_dags(max_tasks=10))
def test_per_point_shortcuts(dag: TaskDAG):
    g = CanonicalGraph.from_dag(dag)
    for pes in (2, 4):
        _terms_match(g, pes, True)
        _refined_equals_fresh(g, pes, True)
        _accesses_equal_full_pass(g, pes, "eyeriss", 8)


@pytest.mark.parametrize(("arch", "onchip"), [("abstract", 0), ("eyeriss", 0), ("tpu", 0)])
@pytest.mark.parametrize("scheduler", ["streaming", "list"])
@pytest.mark.parametrize("pes", PES)
@pytest.mark.parametrize("name", VECTORS)
def test_retiming_keeps_the_timing_only_when_the_pass_would(name, pes, scheduler, arch, onchip):
    _retiming_equals_node_by_node(CanonicalGraph.from_dag(load_vector(name)[1]), pes, scheduler, arch, onchip)


@pytest.mark.parametrize("scheduler", ["streaming", "list"])
@pytest.mark.parametrize("name", VECTORS)
def test_retiming_check_refuses_a_timing_the_pass_changes(name, scheduler):
    g = CanonicalGraph.from_dag(load_vector(name)[1])
    moved = _timing_moved_one_cycle(g, 4, scheduler)
    arch = load("abstract")
    costs = cost_schedule(moved, arch, 0, validate=False)
    assert costs == _costs_by_the_node_by_node_pass(moved, arch, 0)
    assert costs.timing != moved.timing


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dag=canonical_dags(max_tasks=12))
def test_retiming_shortcut_on_random_dags(dag: TaskDAG):
    g = CanonicalGraph.from_dag(dag)
    for pes in (1, 3):
        for scheduler in ("streaming", "list"):
            _retiming_equals_node_by_node(g, pes, scheduler, "abstract", 0)
            _retiming_equals_node_by_node(g, pes, scheduler, "eyeriss", 8)


def _lifo_kahn(g: CanonicalGraph, part: list[int]) -> list[int]:
    """TOPO of the induced subgraph on ``part``, directly: LIFO Kahn from its in-degree-0 nodes in induced
    node order."""
    members = set(part)
    indeg = {v: sum(g.src[e] in members for e in g.into(v)) for v in part}
    stack = [v for v in induced_node_order(g, part) if indeg[v] == 0]
    order = []
    while stack:
        u = stack.pop()
        order.append(u)
        for e in g.out_of(u):
            w = g.dst[e]
            if w in members:
                indeg[w] -= 1
                if indeg[w] == 0:
                    stack.append(w)
    return order


def _block_orders_match(g: CanonicalGraph, pes: int) -> int:
    """Block orders equal LIFO Kahn per block; returns how many blocks of several nodes have no inner edge."""
    blocks = streaming_schedule(g, pes).blocks
    assert block_orders(g, blocks) == [_lifo_kahn(g, block) for block in blocks]
    members = [set(block) for block in blocks]
    return sum(
        len(block) > 1 and not any(g.dst[e] in inside for v in block for e in g.out_of(v))
        for block, inside in zip(blocks, members, strict=True)
    )


@pytest.mark.parametrize("pes", PES)
@pytest.mark.parametrize("name", VECTORS)
def test_block_orders_on_vectors(name, pes):
    _block_orders_match(CanonicalGraph.from_dag(load_vector(name)[1]), pes)


@pytest.mark.parametrize(("family", "pes", "blocks"), [("mv", 2, 5), ("mv", 4, 2), ("op", 2, 5), ("lmv", 4, 2)])
def test_block_orders_of_blocks_without_inner_edges(family, pes, blocks):
    """The independent tasks of an mmm DAG (8 x 8 x 12 elements) fill blocks without inner edges, whose
    order is their induced node order reversed."""
    sizes = {"mv": (8, 8, 12), "op": (8, 12, 8), "lmv": (12, 8, 8)}[family]
    assert _block_orders_match(CanonicalGraph.from_dag(gen.mmm(family, *sizes)), pes) == blocks


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dag=canonical_dags(max_tasks=12))
def test_block_orders_on_random_dags(dag: TaskDAG):
    g = CanonicalGraph.from_dag(dag)
    for pes in (1, 2, 3):
        _block_orders_match(g, pes)


def _list_io_equals_direct(g: CanonicalGraph, capacity: int) -> None:
    """The I/O split of list schedules (their one-block placement kept per graph) equals the direct one."""
    for pes in (1, 2, 5):
        result = schedule(g, pes, "list", validate=False)
        placed = onchip_placement(g, [list(range(g.n))], capacity)
        off, on, streamed = global_io(g, result.streaming, placed)
        assert result.io_at(capacity) == IOVolume(result.io_volume, off, on, streamed, capacity, tuple(sorted(placed)))


@pytest.mark.parametrize("capacity", [0, 8, 64, 4096])
@pytest.mark.parametrize("name", VECTORS)
def test_list_schedules_share_their_placement_on_vectors(name, capacity):
    _list_io_equals_direct(CanonicalGraph.from_dag(load_vector(name)[1]), capacity)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dag=canonical_dags(max_tasks=12))
def test_list_schedules_share_their_placement_on_random_dags(dag: TaskDAG):
    g = CanonicalGraph.from_dag(dag)
    for capacity in (0, 5, 40):
        _list_io_equals_direct(g, capacity)
