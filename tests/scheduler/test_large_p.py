"""P far beyond the number of tasks: the schedulers' internal structures are sized by the DAG, never by
P; and scheduling many P on one prepared graph computes what does not depend on P once."""

from __future__ import annotations

import pytest

from dcaccel.dag import TaskDAG
from dcaccel.dag import generators as gen
from dcaccel.scheduler import CanonicalGraph, gang, schedule
from dcaccel.scheduler import list as list_scheduler
from tests.scheduler.test_properties import VARIANTS

HUGE = 100_000_000
SEED_MV = "tests/data/vectors/seedconv_mv_noxycolbuf.json"

DAGS = [
    pytest.param(lambda: gen.chain([3, 5, 2]), id="chain"),
    pytest.param(lambda: gen.fork_join(4, 2, 8), id="fork-join"),
    pytest.param(lambda: gen.mmm("mv", 3, 4, 5), id="mmm-mv"),
    pytest.param(lambda: TaskDAG.from_json(SEED_MV), id="seed-mv"),
]


@pytest.fixture
def sizes(monkeypatch):
    """Records the number of PEs the list scheduler's PE structures are built for, and the number of
    PEs gang scheduling is given and the PE timelines it keeps per block."""
    seen = {"processors": [], "gang_pes": [], "blocks": []}

    class Processors(list_scheduler._Processors):
        def __init__(self, pes, insertion):
            seen["processors"].append(pes)
            super().__init__(pes, insertion)

    original_gang = gang.gang_schedule

    def recording_gang(g, blocks, streaming, intervals, pes, reference=True, orders=None):
        seen["gang_pes"].append(pes)
        seen["blocks"].append(max((len(block) for block in blocks), default=0))
        return original_gang(g, blocks, streaming, intervals, pes, reference=reference, orders=orders)

    monkeypatch.setattr(list_scheduler, "_Processors", Processors)
    monkeypatch.setattr("dcaccel.scheduler.streaming.gang_schedule", recording_gang)
    return seen


@pytest.mark.parametrize("build", DAGS)
@pytest.mark.parametrize(("scheduler", "options"), VARIANTS)
def test_structures_are_sized_by_the_dag(build, scheduler, options, sizes):
    dag = build()
    result = schedule(dag, HUGE, scheduler, **options)
    nodes = dag.num_nodes
    # Per-node arrays only: one entry per node of the DAG, every PE used below the number of nodes.
    assert len(result.timing.pe) == len(result.timing.start) == len(result.timing.end) == nodes
    assert max(result.timing.pe) < nodes
    if scheduler == "list":
        assert sizes["processors"] and max(sizes["processors"]) <= nodes  # segment tree, gaps: per PE used
    else:
        assert sizes["gang_pes"] == [HUGE] * len(sizes["gang_pes"])  # P is only compared with, never allocated
        assert max(sizes["blocks"]) <= nodes
        assert len(result.blocks) <= 3  # everything fits one block (plus the pseudo nodes' trailing block)
    assert result.pes == HUGE


@pytest.mark.parametrize("scheduler", ["streaming", "list"])
def test_huge_p_reports_the_p_asked_for(scheduler):
    dag = TaskDAG.from_json(SEED_MV)
    huge = schedule(dag, HUGE, scheduler)
    tasks = len(dag.tasks)
    summary = huge.summary()
    assert summary["pes"] == HUGE
    assert huge.speedup == pytest.approx(huge.work / huge.makespan)
    assert huge.utilisation == pytest.approx(huge.work / huge.makespan / HUGE)
    # The streaming reference with P = tasks exactly closes a full block and puts the pseudo sink in a
    # block of its own; from P = tasks + 1 on nothing changes any more (the vectors keep the former).
    same_as = tasks + 1 if scheduler == "streaming" else dag.num_nodes
    assert huge.timing == schedule(dag, same_as, scheduler).timing


def test_prepared_graph_gives_the_same_schedules_and_ranks_once(monkeypatch):
    dag = TaskDAG.from_json(SEED_MV)
    graph = CanonicalGraph.from_dag(dag)
    calls = []
    original = list_scheduler._priority_order
    monkeypatch.setattr(list_scheduler, "_priority_order", lambda g: calls.append(g) or original(g))
    for pes in (1, 16, 128, HUGE):
        for scheduler in ("streaming", "list"):
            prepared = schedule(graph, pes, scheduler)
            fresh = schedule(dag, pes, scheduler)
            assert (prepared.timing, prepared.makespan, prepared.blocks) == (fresh.timing, fresh.makespan, fresh.blocks)
    # the fresh DAGs build a graph of their own each time; the prepared graph ranked its tasks once
    assert sum(g is graph for g in calls) == 1
