"""The heterogeneous list scheduler (``scheduler="heft"``): tasks on the unit kinds that run them, each
where it finishes first at its kind's speed."""

from __future__ import annotations

import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcaccel.architecture import Architecture
from dcaccel.cost.schedule import cost_schedule
from dcaccel.dag import NodeKind, TaskDAG, TaskInfo
from dcaccel.errors import DcaccelError
from dcaccel.scheduler import schedule
from tests.scheduler.conftest import canonical_dags

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def two_kinds(fast_ops=("*",), slow_ops=("*",), fast_count=1, slow_count=1) -> Architecture:
    """A fast kind (2 elements per cycle) and a slow one (1), listed in that order; free memory."""
    return Architecture.from_dict(
        {
            "name": "two",
            "units": {
                "fast": {"count": fast_count, "ops": list(fast_ops), "elements_per_cycle": 2},
                "slow": {"count": slow_count, "ops": list(slow_ops)},
            },
            "memories": {"dram": {"level": "offchip"}},
        }
    )


def independent(ops: list[str | None]) -> TaskDAG:
    """Independent tasks of 4 elements each (op per task), from the source to a pseudo sink."""
    dag = TaskDAG("independent")
    source = dag.add_node(NodeKind.SOURCE, "source")
    tasks = [dag.add_node(NodeKind.TASK, f"T{i}", TaskInfo(op=op)) for i, op in enumerate(ops)]
    sink = dag.add_node(NodeKind.SINK, "sink")
    for task in tasks:
        dag.add_edge(source, task, 4)
        dag.add_edge(task, sink, 4)
    return dag


def test_each_task_where_it_finishes_first():
    """Three 4-element tasks: fast (2 cycles each) takes the first two placed (ends 2, then 4 = slow's 4,
    the lower unit wins the tie), slow the third (ends 4)."""
    arch = two_kinds()
    result = schedule(independent([None, None, None]), 1, "heft", arch=arch)
    costs = cost_schedule(result, arch)
    assert result.pes == 2 and result.detail.units == ["fast", "slow"]
    tasks = [v for v in result.placement_order if v in (1, 2, 3)]
    assert [costs.unit_of[v] for v in tasks] == ["fast", "fast", "slow"]
    assert [(costs.timing.start[v], costs.timing.end[v]) for v in tasks] == [(0, 2), (2, 4), (0, 4)]
    assert costs.makespan_cycles == 4
    assert result.makespan == 8  # the same placement in the abstract model: two 4-cycle tasks on one PE
    assert costs.utilisation == {"fast": 4 / 4, "slow": 4 / 4}


@pytest.mark.parametrize(
    ("ops", "units"),
    [
        (["Conv", "Softmax", "Conv"], ["fast", "slow", "fast"]),
        (["Softmax", "Softmax"], ["slow", "slow"]),
    ],
)
def test_only_on_kinds_that_run_the_op(ops, units):
    arch = two_kinds(fast_ops=("Conv",), slow_ops=("*",))
    costs = cost_schedule(schedule(independent(ops), 1, "heft", arch=arch), arch)
    assert [costs.unit_of[v] for v in range(1, len(ops) + 1)] == units


def test_needs_an_architecture():
    with pytest.raises(DcaccelError, match="the heft scheduler places tasks on an architecture's units"):
        schedule(independent([None]), 2, "heft")


@pytest.mark.slow
@SETTINGS
@given(dag=canonical_dags(), pes=st.integers(1, 6))
def test_on_abstract_the_costs_are_the_schedule(dag, pes):
    result = schedule(dag, pes, "heft", arch="abstract")
    assert result.pes == pes
    assert cost_schedule(result, "abstract").timing == result.timing


@SETTINGS
@given(dag=canonical_dags(), fast=st.integers(1, 4), slow=st.integers(1, 4), split=st.booleans())
def test_valid_on_two_kinds(dag, fast, slow, split):
    """Validated (schedule and costs), every task on a kind that runs it, no kind above full use."""
    arch = two_kinds(fast_ops=("Conv",) if split else ("*",), fast_count=fast, slow_count=slow)
    result = schedule(dag, 1, "heft", arch=arch)
    costs = cost_schedule(result, arch)
    assert result.pes == fast + slow
    assert all(costs.unit_of[v] == "slow" for v in dag.tasks) if split else True
    assert all(0 <= share <= 1 for share in costs.utilisation.values())


@pytest.mark.slow
@SETTINGS
@given(dag=canonical_dags(), fast=st.integers(1, 3), split=st.booleans())
def test_units_beyond_the_nodes_change_nothing(dag, fast, split):
    """A kind of 10**12 units (used to end in MemoryError) schedules as one of as many units as the graph has
    nodes: the same placement and times, its PEs all the units, its state bounded by the nodes."""
    few = schedule(dag, 1, "heft", arch=two_kinds(fast_ops=("Conv",) if split else ("*",), fast_count=fast))
    nodes = few.graph.n
    same = two_kinds(fast_ops=("Conv",) if split else ("*",), fast_count=fast, slow_count=nodes)
    huge = two_kinds(fast_ops=("Conv",) if split else ("*",), fast_count=fast, slow_count=10**12)
    bounded, unbounded = schedule(dag, 1, "heft", arch=same), schedule(dag, 1, "heft", arch=huge)
    assert unbounded.timing == bounded.timing and unbounded.placement_order == bounded.placement_order
    unbounded_costs = cost_schedule(unbounded, huge)
    assert unbounded_costs.timing == cost_schedule(bounded, same).timing
    assert (unbounded.pes, bounded.pes) == (fast + 10**12, fast + nodes)
    assert len(unbounded.detail.units) == fast + nodes
    assert unbounded_costs.unit_counts == {"fast": fast, "slow": 10**12}


def test_a_huge_open_count_is_fast():
    """``partition --pes 10**12`` and a bus of 10**8 units (4.1 GB, 70 s before): time and memory follow the
    tasks, not the units."""
    arch = Architecture.from_dict(
        {"name": "bus", "units": {"pe": {"topology": {"kind": "bus"}}}, "memories": {"dram": {"level": "offchip"}}}
    )
    tracemalloc.start()
    began = time.perf_counter()
    result = schedule(independent([None] * 50), 10**12, "heft", arch=arch)
    costs = cost_schedule(result, arch)
    elapsed = time.perf_counter() - began
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert result.pes == 10**12 and costs.makespan_cycles == 4  # every task on its own unit
    assert elapsed < 2 and peak < 20_000_000


def test_an_open_kind_beside_a_host_has_p_units():
    """The costs count P units of an open kind, not P plus the host (``pes`` of the schedule is every unit)."""
    arch = Architecture.from_dict(
        {
            "name": "open",
            "units": {"pe": {"area_mm2": 1.0}, "host": {"count": 1, "role": "host", "area_mm2": 10.0}},
            "memories": {"dram": {"level": "offchip"}},
        }
    )
    result = schedule(independent([None] * 4), 2, "heft", arch=arch)
    costs = cost_schedule(result, arch)
    assert result.pes == 3
    assert costs.unit_counts == {"pe": 2, "host": 1}
    assert costs.area_mm2 == 2 * 1.0 + 10.0
    assert costs.utilisation["pe"] == sum(
        costs.run_cycles[v] for v in range(result.graph.n) if costs.unit_of[v] == "pe"
    ) / (2 * costs.makespan_cycles)
