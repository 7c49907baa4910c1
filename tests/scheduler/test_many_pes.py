"""More PEs than tasks: the schedule is that of as many PEs as the DAG can use, at no cost growing
with P, and the figures that depend on P (lower bound, utilisation) are those of the P asked for."""

from __future__ import annotations

import math
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings

from dcaccel.dag import generators as gen
from dcaccel.scheduler import schedule
from tests.scheduler.conftest import canonical_dags
from tests.scheduler.test_properties import VARIANTS

HUGE = 10**8

DAGS = [
    pytest.param(lambda: gen.chain([3, 5, 2]), id="chain"),
    pytest.param(lambda: gen.fork_join(4, 2, 8), id="fork-join"),
    pytest.param(lambda: gen.mmm("mv", 3, 4, 5), id="mmm-mv"),
    pytest.param(lambda: gen.mmm("op", 2, 3, 2), id="mmm-op"),
]


def _enough(dag, scheduler: str) -> int:
    """A P from which on the scheduler's choices no longer change: one PE per node for the list
    scheduler; for the streaming one, more PEs than tasks (with exactly as many, the reference
    closes the full block and puts the pseudo sink into a trailing block of its own)."""
    return dag.num_nodes if scheduler == "list" else len(dag.tasks) + 1


@pytest.mark.parametrize("build", DAGS)
@pytest.mark.parametrize(("scheduler", "options"), VARIANTS)
def test_huge_p_is_the_schedule_of_enough_pes(build, scheduler, options):
    dag = build()
    enough = schedule(dag, _enough(dag, scheduler), scheduler, **options)
    tracemalloc.start()
    try:
        huge = schedule(dag, HUGE, scheduler, **options)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000  # bytes: nothing grows with P (a list per PE would take gigabytes)
    assert huge.timing == enough.timing
    assert huge.blocks == enough.blocks
    assert (huge.makespan, huge.num_blocks, huge.io) == (enough.makespan, enough.num_blocks, enough.io)
    summary = huge.summary()
    assert summary["pes"] == huge.pes == HUGE
    ceiling = math.ceil(huge.work / HUGE)
    assert summary["lower_bound"] == (ceiling if scheduler == "streaming" else max(huge.depth, ceiling))
    assert summary["utilisation"] == pytest.approx(huge.work / huge.makespan / HUGE)


@pytest.mark.parametrize("scheduler", ["list", "streaming"])
def test_more_pes_than_enough_change_nothing(scheduler):
    dag = gen.fork_join(3, 2, 4)
    base = schedule(dag, _enough(dag, scheduler), scheduler)
    for pes in (_enough(dag, scheduler) + 1, 1000, 2**40):
        assert schedule(dag, pes, scheduler).timing == base.timing


@pytest.mark.parametrize(("scheduler", "options"), VARIANTS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dag=canonical_dags())
def test_random_dags_on_huge_p(scheduler, options, dag):
    huge = schedule(dag, HUGE, scheduler, **options)
    enough = schedule(dag, _enough(dag, scheduler), scheduler, **options)
    assert (huge.timing, huge.blocks, huge.makespan) == (enough.timing, enough.blocks, enough.makespan)
