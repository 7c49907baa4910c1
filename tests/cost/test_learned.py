"""The learned cost model as a cost source: --cost learned:FILE on schedule and explore (issue 26 item 5)."""

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from dcaccel.cli import main
from dcaccel.cost.learned import KIND, TaskTimes, cost_source, learned_makespan, lowered_of, task_times
from dcaccel.costmodel.data import SHIPPED_ROWS
from dcaccel.costmodel.measure import read_rows
from dcaccel.costmodel.models import VERSION, CostModel
from dcaccel.costmodel.predict import predict_steps
from dcaccel.dag.metrics import task_costs
from dcaccel.dag.task import Role
from dcaccel.dag.taskdag import TaskDAG
from dcaccel.errors import DcaccelError
from dcaccel.exploration.study import Study
from dcaccel.scheduler import schedule


@pytest.mark.parametrize("text", ["learned", "learned:", "gbm", "Analytic"])
def test_unknown_cost_source_refused(text):
    with pytest.raises(DcaccelError, match="neither analytic nor learned:FILE"):
        Study.of("explore", models=["lenet"], cost=text)


def test_analytic_is_no_learned_source():
    assert cost_source("analytic") is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot be read"),
        ("{", "not JSON"),
        ('{"format": "other"}', f"not a dcaccel-costmodel file of version {VERSION}"),
        (f'{{"format": "dcaccel-costmodel", "version": {VERSION}}}', "field 'analytic' missing"),
    ],
)
def test_bad_model_file_refused_in_one_line(tmp_path, content, message):
    path = tmp_path / "model.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DcaccelError, match=message) as caught:
        cost_source(f"learned:{path}")
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("pes", "scheduler", "unplaced", "seconds"),
    [
        (1, "list", 0.0, 150e-9),  # A then B on one PE
        (1, "list", 7.0, 157e-9),  # a copy on no node runs beside them
        (2, "streaming", 0.0, 100e-9),  # B streams from A on the other PE: from A's first output (1/4 of its run)
    ],
)
def test_learned_makespan_retimes_the_schedule(pes, scheduler, unplaced, seconds, two_task_chain):
    times = TaskTimes(np.array([0.0, 100.0, 50.0]), unplaced)
    assert learned_makespan(schedule(two_task_chain, pes, scheduler), times) == pytest.approx(seconds)


def test_a_dag_of_no_builtin_workload_is_refused(two_task_chain):
    with pytest.raises(DcaccelError, match="'chain' is no built-in workload"):
        lowered_of(two_task_chain)


@pytest.fixture(scope="session")
def model_file(tmp_path_factory):
    """A model trained on two families of the shipped rows (seconds)."""
    rows = [row for row in read_rows(SHIPPED_ROWS) if row.family in ("conv-seed", "products")]
    path = tmp_path_factory.mktemp("learned") / "model.json"
    CostModel.train(rows).save(path)
    return path


@pytest.fixture(scope="session")
def lenet_dag(tmp_path_factory):
    path = tmp_path_factory.mktemp("learned") / "lenet.json"
    assert main(["dag", "lenet", "--impl", "Conv=mv", "--out", str(path)]) == 0
    return path


@pytest.mark.slow
def test_every_task_map_is_costed_by_the_model(model_file, lenet_dag):
    dag = TaskDAG.from_json(lenet_dag)
    cost = cost_source(f"learned:{model_file}")
    times = task_times(lowered_of(dag), dag, cost)
    tasks = [v for v in dag.tasks if dag.info(v).role is not Role.PSEUDO]
    assert all(dag.info(v).map is not None for v in tasks)
    assert (times.node_ns[tasks] > 0).all()
    # every map's and copy's prediction is placed once: on the tasks and buffers, or beside them
    predicted = predict_steps(lowered_of(dag), cost.model, KIND)["predicted_ns"].sum()
    assert times.node_ns.sum() + times.unplaced_ns == pytest.approx(predicted, rel=1e-9)
    # one schedule on 1 PE runs every task in turn: its learned makespan is at least their sum
    serial = learned_makespan(schedule(dag, 1, "list"), times)
    assert serial >= times.node_ns[tasks].sum() * 1e-9 * (1 - 1e-9)
    assert learned_makespan(schedule(dag, 16, "list"), times) <= serial


@pytest.mark.slow
def test_a_calibrated_model_scales_every_duration(model_file, lenet_dag, tmp_path):
    """A model calibrated for a machine twice as slow by the boosted model (the one that costs the maps;
    the analytic and sequence scales other): every task's and forwarded copy's duration, and so the learned
    makespan, twice as long, the task of no map (the first task's record without its map: an opaque task)
    included."""
    data = json.loads(lenet_dag.read_text())
    opaque = next(node for node in data["nodes"] if node["kind"] == "task")
    del opaque["info"]["map"]
    edited = tmp_path / "lenet.json"
    edited.write_text(json.dumps(data))
    dag = TaskDAG.from_json(edited)
    model = CostModel.load(model_file)
    slower = tmp_path / "slower.json"
    replace(model, scales={"analytic": 3.0, "boosted": 2.0, "sequence": 5.0}, calibrated_on={"here": 1}).save(slower)
    base, scaled = (task_times(lowered_of(dag), dag, cost_source(f"learned:{path}")) for path in (model_file, slower))
    assert base.node_ns[opaque["id"]] == pytest.approx(model.analytic.factor * float(task_costs(dag)[opaque["id"]]))
    np.testing.assert_allclose(scaled.node_ns, 2 * base.node_ns, rtol=1e-12)
    assert scaled.unplaced_ns == pytest.approx(2 * base.unplaced_ns, rel=1e-12)
    placed = schedule(dag, 16, "list")  # re-timed in whole nanoseconds a task: twice as long within 1 ns a task
    doubled = pytest.approx(2 * learned_makespan(placed, base), abs=len(dag.tasks) * 1e-9)
    assert learned_makespan(placed, scaled) == doubled


@pytest.mark.slow
def test_schedule_takes_a_learned_cost(model_file, lenet_dag, capsys):
    assert main(["schedule", str(lenet_dag), "--pes", "16", "--json", "--cost", f"learned:{model_file}"]) == 0
    learned = json.loads(capsys.readouterr().out)
    assert main(["schedule", str(lenet_dag), "--pes", "16", "--json"]) == 0
    analytic = json.loads(capsys.readouterr().out)
    assert learned.pop("learned_seconds") > 0
    assert learned == analytic


@pytest.mark.slow
def test_schedule_refuses_a_bad_model_file(lenet_dag, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert main(["schedule", str(lenet_dag), "--pes", "4", "--cost", f"learned:{bad}"]) != 0
    error = capsys.readouterr().err.strip()
    assert str(bad) in error and len(error.splitlines()) == 1


@pytest.fixture(scope="module")
def explored(model_file, tmp_path_factory):
    """lenet explored with and without the learned cost (two assignments, two P)."""
    where = tmp_path_factory.mktemp("explore")
    flags = ["explore", "lenet", "--impl", "Conv=mv,op", "--pes", "1,16", "--scheduler", "streaming"]
    tables = {}
    for name, extra in (("analytic", []), ("learned", ["--cost", f"learned:{model_file}"])):
        out = where / f"{name}.csv"
        assert main([*flags, *extra, "--out", str(out), "--results", str(where / f"{name}.sqlite")]) == 0
        tables[name] = pd.read_csv(out)
    return tables


@pytest.mark.slow
def test_explore_analytic_columns_unchanged_by_learned_cost(explored):
    analytic, learned = explored["analytic"], explored["learned"]
    kept = [name for name in analytic.columns if not name.endswith("_seconds")]
    pd.testing.assert_frame_equal(analytic[kept], learned[kept])
    assert (analytic["learned_seconds"] == 0).all()
    assert (learned["learned_seconds"] > 0).all()
    # more PEs never make the learned makespan of an assignment longer here
    by = learned.pivot_table(index="assignment", columns="pes", values="learned_seconds")
    assert (by[16] <= by[1]).all()


@pytest.mark.slow
def test_store_fingerprints_the_model_file(model_file, tmp_path):
    changed = tmp_path / "changed.json"
    data = json.loads(model_file.read_text())
    data["analytic"]["factor"] *= 2
    changed.write_text(json.dumps(data))
    first, second = cost_source(f"learned:{model_file}"), cost_source(f"learned:{changed}")
    assert first.setting != second.setting
    results = tmp_path / "r.sqlite"
    flags = ["explore", "lenet", "--impl", "Conv=mv", "--pes", "4", "--scheduler", "list", "--results", str(results)]
    assert main([*flags, "--cost", f"learned:{model_file}"]) == 0
    changed.write_bytes(model_file.read_bytes())
    assert main([*flags, "--resume", "--cost", f"learned:{changed}"]) == 0  # same bytes: resumed
    changed.write_text(json.dumps(data))
    assert main([*flags, "--resume", "--cost", f"learned:{changed}"]) != 0  # another model: refused


def test_learned_column_added_beside_the_analytic_ones():
    from dcaccel.exploration.points import columns

    names = columns()
    assert names[-1] == "learned_seconds" and "makespan_cycles" in names


@pytest.mark.slow
def test_explore_costs_partitions_by_the_learned_model(model_file, tmp_path):
    flags = ["explore", "lenet", "--impl", "Conv=mv", "--pes", "4", "--arch", "cgra", "--policy", "none,greedy"]
    tables = []
    for extra in ([], ["--cost", f"learned:{model_file}"]):
        out = tmp_path / f"{len(extra)}.csv"
        assert main([*flags, "--scheduler", "streaming,heft", *extra, "--out", str(out)]) == 0
        tables.append(pd.read_csv(out))
    analytic, learned = tables
    kept = [name for name in analytic.columns if not name.endswith("_seconds")]
    pd.testing.assert_frame_equal(analytic[kept], learned[kept])
    assert set(learned["partition_policy"]) == {"none", "greedy"}
    assert (learned["learned_seconds"] > 0).all()
