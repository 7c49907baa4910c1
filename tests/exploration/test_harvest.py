"""The harvest of a sweep on worker processes: this process lowers the covers stage by stage, and a
worker given the stages' fragments composes every DAG without lowering, to the rows of a local sweep.

A worker is played here by a second copy of the workload in this process (its own composer) with
``lower`` refused, so that any lowering it tried would fail its assignment.
"""

from dataclasses import replace

import pytest

import dcaccel
from dcaccel.dag.extract import Granularity
from dcaccel.exploration import dags
from dcaccel.exploration.assignments import per_op_type
from dcaccel.exploration.dags import covering_assignments, harvest
from dcaccel.exploration.evaluation import DEFAULT_COST_MODEL, Sweep
from dcaccel.exploration.grid import Grid
from dcaccel.exploration.points import columns, to_frame
from dcaccel.exploration.sweep import explore

IMPLEMENTATIONS = {"Conv": ["mv", "op", "lmv"], "Gemm": ["mv", "op", "lmv"]}
PES = (4, 64)
TIMING = [name for name in columns() if name.endswith("_seconds")]


@pytest.fixture(scope="module")
def local():
    """The rows of the sweep run locally (its DAGs composed, the first mixed one checked)."""
    return explore("lenet", IMPLEMENTATIONS, pes=PES, progress=False)


@pytest.fixture(scope="module")
def stages():
    """The harvest of the per-op-type sweep of LeNet, stage by stage."""
    workload = dcaccel.workloads.get("lenet")
    grid = Grid(PES, ("streaming", "list"), (0,))
    covers = covering_assignments(IMPLEMENTATIONS)
    sweep = Sweep(grid, Granularity.parse("task"), "exact", DEFAULT_COST_MODEL, covers=covers)
    return sweep, list(harvest(workload, sweep, list(per_op_type(IMPLEMENTATIONS))))


@pytest.mark.slow
def test_each_cover_is_a_stage_then_the_rest(stages):
    """A stage per cover with the assignment it lowered (the first cover's fragments compose only it),
    then the six mixed assignments once composition is checked; each stage's fragments grow."""
    _, found = stages
    assert [[str(a) for a in ready] for ready, _ in found[:3]] == [
        ["Conv=mv,Gemm=mv"],
        ["Conv=op,Gemm=op"],
        ["Conv=lmv,Gemm=lmv"],
    ]
    assert len(found) == 4 and len(found[3][0]) == 6
    composers = [harvested.composer for _, harvested in found]
    assert [len(c.lowerings) for c in composers] == [1, 2, 3, 3]  # the check lowering is not kept
    assert [c.verified for c in composers] == [False, False, False, True]
    assert all(c.reason is None and c.nodes == [] and c.expansions is None for c in composers)
    assert all(harvested.lower_seconds > 0 and harvested.assignment == ready[0] for ready, harvested in found)


@pytest.mark.slow
def test_a_worker_composes_every_dag_without_lowering(stages, local, monkeypatch):
    """A worker (another copy of the workload, ``lower`` refused) evaluates the stages in order with
    their fragments: its rows are the local sweep's."""
    sweep, found = stages

    def refuse(*args, **kwargs):
        raise AssertionError("a worker lowered")

    monkeypatch.setattr(dags, "lower", refuse)
    worker = dcaccel.workloads.get("lenet")
    points = []
    for ready, harvested in found:
        staged = replace(sweep, harvested=harvested)
        points += [point for assignment in ready for point in staged.points(worker, assignment)]
    rows = to_frame(points).drop(columns=TIMING)
    expected = local.drop(columns=TIMING)
    order = ["assignment", "pes", "scheduler"]
    assert rows.sort_values(order).reset_index(drop=True).equals(expected.sort_values(order).reset_index(drop=True))
