"""What the points of one DAG share (``CanonicalGraph.derived``: depth, buffer I/O; the caller's
:class:`~dcaccel.cost.schedule.CostCache`: tasks' ops and MACs, unit kinds, the memory accesses of the last
costings; a schedule's I/O split per on-chip capacity) changes no figure: every point scheduled and costed
in turn on one graph and one cache, its I/O split asked for twice as the sweep does, equals the point
computed alone on a fresh graph without a cache."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from dcaccel.architecture import load
from dcaccel.cost.schedule import KEPT_ACCESS_PASSES, CostCache, cost_schedule
from dcaccel.dag import TaskDAG
from dcaccel.errors import DcaccelError
from dcaccel.scheduler import CanonicalGraph, schedule
from tests.scheduler.conftest import canonical_dags, load_vector

POINTS = [
    (pes, scheduler, arch, onchip)
    for pes in (1, 2, 3, 8)
    for scheduler in ("streaming", "list", "heft")
    for arch in ("abstract", "eyeriss")
    for onchip in (0, 8)
]


def _point(graph: CanonicalGraph, cache: CostCache | None, pes: int, scheduler: str, arch, onchip: int) -> dict:
    """Everything a sweep point reads from the schedule of ``graph``: its I/O split at ``onchip`` and its
    costs on ``arch`` there (the I/O split asked for first, as the sweep does)."""
    result = schedule(graph, pes, scheduler, arch=arch if scheduler == "heft" else None, validate=False)
    io = result.io_at(onchip)
    costs = cost_schedule(result, arch, onchip, cache=cache, validate=False)
    return {
        "summary": result.summary(),
        "io": io,
        "timing": costs.timing,
        "run_cycles": costs.run_cycles,
        "transfers": costs.transfers,
        "costs": costs.summary(),
    }


def _shared_equals_alone(dag: TaskDAG) -> None:
    shared = CanonicalGraph.from_dag(dag)
    cache = CostCache(shared)
    archs = {name: load(name) for name in ("abstract", "eyeriss")}  # one object each, as a sweep holds them
    on_shared = [_point(shared, cache, pes, scheduler, archs[arch], onchip) for pes, scheduler, arch, onchip in POINTS]
    alone = [
        _point(CanonicalGraph.from_dag(dag), None, pes, scheduler, load(arch), onchip)
        for pes, scheduler, arch, onchip in POINTS
    ]
    for point, got, expected in zip(POINTS, on_shared, alone, strict=True):
        assert got == expected, point
    assert {"depth", "io_volume"} <= set(shared.derived)
    assert cache.task_ops is not None and set(cache.units) == set(archs.values())
    assert 0 < len(cache.accesses) <= KEPT_ACCESS_PASSES


@pytest.mark.parametrize(
    "name",
    [pytest.param("seedconv_mv", marks=pytest.mark.slow), "seedconv_op_noxcolbuf", "fft_rand_8_buf", "chol_rand_6"],
)
def test_points_on_one_graph_equal_points_alone_on_vectors(name):
    _shared_equals_alone(load_vector(name)[1])


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dag=canonical_dags(max_tasks=8))
def test_points_on_one_graph_equal_points_alone(dag):
    _shared_equals_alone(dag)


@pytest.mark.parametrize("onchip", [0, 8, 1 << 40])
def test_io_split_is_computed_once_per_capacity(onchip):
    graph = CanonicalGraph.from_dag(load_vector("seedconv_mv")[1])
    result = schedule(graph, 4, "streaming", validate=False)
    first = result.io_at(onchip)
    assert result.io_at(onchip) is first
    assert schedule(CanonicalGraph.from_dag(graph.dag), 4, "streaming", validate=False).io_at(onchip) == first


def test_a_cost_cache_is_of_one_graph():
    dag = load_vector("seedconv_mv")[1]
    result = schedule(dag, 4)
    with pytest.raises(
        DcaccelError, match="a cost cache of the graph of 'seedconv_mv' was given a schedule of another"
    ):
        cost_schedule(result, "eyeriss", cache=CostCache(CanonicalGraph.from_dag(dag)))
