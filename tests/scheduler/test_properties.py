"""Properties every schedule of every valid DAG must have (hypothesis on random canonical DAGs)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcaccel.scheduler import schedule
from tests.scheduler.conftest import canonical_dags

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VARIANTS = [
    pytest.param("streaming", {"partitioning": "relaxed"}, id="streaming-relaxed"),
    pytest.param("streaming", {"partitioning": "strict"}, id="streaming-strict"),
    pytest.param("streaming", {"partitioning": "relaxed", "reference": False}, id="streaming-fixed"),
    pytest.param("streaming", {"partitioning": "relaxed", "refine": False}, id="streaming-unrefined"),
    pytest.param("list", {}, id="list-insertion"),
    pytest.param("list", {"insertion": False}, id="list-append"),
    pytest.param("list", {"bandwidth": 2.0}, id="list-bandwidth"),
]


@pytest.mark.parametrize(("scheduler", "options"), VARIANTS)
@SETTINGS
@given(dag=canonical_dags(), pes=st.integers(1, 6))
def test_every_schedule_is_valid(scheduler, options, dag, pes):
    before = dag.to_json()
    result = schedule(dag, pes, scheduler, validate=False, **options)
    result.validate()
    assert result.makespan >= math.ceil(result.work / pes)
    assert dag.to_json() == before  # schedulers never modify their input


@pytest.mark.parametrize("insertion", [True, False], ids=["insertion", "append"])
@SETTINGS
@given(dag=canonical_dags(), pes=st.integers(1, 6))
def test_list_schedule_never_exceeds_sequential_work(insertion, dag, pes):
    result = schedule(dag, pes, "list", insertion=insertion)
    assert result.depth <= result.makespan <= result.work


@pytest.mark.slow
@SETTINGS
@given(dag=canonical_dags(), pes=st.integers(1, 6))
def test_list_schedule_without_insertion_respects_graham_bound(dag, pes):
    result = schedule(dag, pes, "list", insertion=False)
    assert result.makespan <= result.work / pes + (1 - 1 / pes) * result.depth + 1e-9


@pytest.mark.parametrize(("scheduler", "options"), VARIANTS)
@SETTINGS
@given(dag=canonical_dags(), pes=st.integers(1, 5), extra=st.integers(1, 8))
def test_more_pes_keep_the_schedule_valid(scheduler, options, dag, pes, extra):
    for count in (pes, pes + extra):
        schedule(dag, count, scheduler, validate=False, **options).validate()


@pytest.mark.slow
@SETTINGS
@given(dag=canonical_dags())
def test_one_pe_list_schedule_is_sequential(dag):
    for insertion in (True, False):
        result = schedule(dag, 1, "list", insertion=insertion)
        assert result.makespan == result.work
