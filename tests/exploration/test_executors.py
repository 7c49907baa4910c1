"""Executors: the same sweep gives the same rows locally, in a process pool and on a Dask cluster; a
failing assignment is reported without stopping the others; a worker that dies has its assignment
retried; greedy exploration evaluates the candidates of one node together; no worker outlives its
sweep, however the sweep ends.

The process-pool tests use :class:`Stub`, an evaluation that needs no lowering and fails or kills
its worker on request. The Dask tests share one ``LocalCluster`` of two single-threaded
worker processes on loopback, shut down at the end of the module.
"""

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from dcaccel.errors import DcaccelError
from dcaccel.exploration import executors
from dcaccel.exploration.assignments import Assignment
from dcaccel.exploration.executors import (
    LocalExecutor,
    Outcome,
    ProcessExecutor,
    WorkloadSource,
    check_executor,
)
from dcaccel.exploration.points import ExplorationPoint, columns

SHAPES = {"Conv": ["mv", "op", "lmv"]}
TIMING = [name for name in columns() if name.endswith("_seconds")]
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Stub:
    """An evaluation without lowering: one point per assignment, whose makespan is the length of the
    Conv implementation's name. ``bad`` raises; ``die`` kills its worker process the first time (a
    marker file in ``folder`` remembers), ``poison`` every time."""

    folder: str = ""

    def points(self, workload, assignment: Assignment) -> list[ExplorationPoint]:
        name = assignment.as_dict()["Conv"]
        if name == "bad":
            raise ValueError(f"no shape '{name}'\nsecond line")
        marker = os.path.join(self.folder, f"{name}.died")
        if name == "poison" or (name == "die" and not os.path.exists(marker)):
            open(marker, "w").close()
            os._exit(1)
        values = dict.fromkeys(columns(), 0)
        values.update(workload=workload.name, assignment=str(assignment), granularity="task", scheduler="list")
        values.update(makespan=len(name), speedup=0.0, utilisation=0.0, area=0.0, power=0.0)
        return [ExplorationPoint(**values)]


@dataclass(frozen=True)
class Sleeper:
    """An evaluation that marks its start with a file in ``folder``, then sleeps for ten minutes."""

    folder: str

    def points(self, workload, assignment: Assignment) -> list[ExplorationPoint]:
        open(os.path.join(self.folder, f"{assignment.as_dict()['Conv']}.started"), "w").close()
        time.sleep(600)
        return []


#: A sweep of three sleeping assignments on two pool workers (run with the folder of the start marks).
SLEEPING_SWEEP = """
import signal, sys
from types import SimpleNamespace
from dcaccel.exploration.executors import ProcessExecutor, WorkloadSource
from tests.exploration.test_executors import Sleeper, conv

signal.signal(signal.SIGINT, signal.default_int_handler)
with ProcessExecutor(WorkloadSource("stub", SimpleNamespace(name="stub")), Sleeper(sys.argv[1]), 2) as pool:
    list(pool.map(conv("a", "b", "c")))
"""


def conv(*names: str) -> list[Assignment]:
    return [Assignment.of({"Conv": name}) for name in names]


def by_assignment(outcomes: list[Outcome]) -> dict[str, object]:
    """Makespan of each assignment's point, or its failure's error."""
    return {
        str(o.assignment): o.failure.error if o.failure else [point.makespan for point in o.points] for o in outcomes
    }


def test_local_executor_reports_a_failure_and_goes_on():
    workload = SimpleNamespace(name="stub")
    with LocalExecutor(workload, Stub()) as executor:
        outcomes = list(executor.map(conv("mv", "bad", "lmv")))
    assert by_assignment(outcomes) == {"Conv=mv": [2], "Conv=bad": "ValueError: no shape 'bad'", "Conv=lmv": [3]}
    (failure,) = [o.failure for o in outcomes if o.failure]
    assert failure.assignment == "Conv=bad" and "second line" in failure.traceback


@pytest.mark.parametrize(
    ("kind", "address", "workers", "message"),
    [
        ("threads", None, None, "unknown executor 'threads'"),
        ("process", "tcp://127.0.0.1:8786", None, "needs executor 'dask', not 'process'"),
        ("local", "tcp://127.0.0.1:8786", None, "needs executor 'dask'"),
        ("dask", None, 0, "workers must be positive, got 0"),
    ],
)
def test_bad_executor_options_are_named(kind, address, workers, message):
    with pytest.raises(DcaccelError, match=message):
        check_executor(kind, address, workers)


def test_a_builtin_workload_travels_by_name(conv_seed):
    assert WorkloadSource.of(conv_seed, builtin=True) == WorkloadSource("conv-seed")


def test_another_workload_travels_without_what_lowering_does_not_read(conv_seed):
    source = WorkloadSource.of(conv_seed, builtin=False)
    shipped = source.workload
    assert source.build() is shipped and shipped.sdfg is conv_seed.sdfg and shipped.inputs == conv_seed.inputs
    assert (shipped.weights, shipped.onnx_model, shipped.reference) == ({}, None, None)
    assert conv_seed.weights and conv_seed.onnx_model is not None


def test_a_failing_assignment_does_not_stop_the_sweep(conv_seed, monkeypatch):
    from dcaccel.exploration.evaluation import Sweep
    from dcaccel.exploration.run import SweepError
    from dcaccel.exploration.sweep import explore

    original = Sweep.points

    def points(self, workload, assignment):
        if assignment.as_dict()["Conv"] == "op":
            raise RuntimeError("lowering broke")
        return original(self, workload, assignment)

    monkeypatch.setattr(Sweep, "points", points)
    with pytest.raises(
        SweepError, match=r"1 of 2 assignments failed \(first: Conv=op: RuntimeError: lowering broke\)"
    ) as err:
        explore(conv_seed, {"Conv": ["op", "lmv"]}, pes=[2, 4], scheduler="list", progress=False)
    assert err.value.results["assignment"].tolist() == ["Conv=lmv", "Conv=lmv"]
    assert err.value.results["pes"].tolist() == [2, 4]
    assert [failure.assignment for failure in err.value.failures] == ["Conv=op"]


def test_an_unknown_implementation_fails_before_lowering(conv_seed, monkeypatch):
    from dcaccel.exploration.evaluation import Sweep
    from dcaccel.exploration.sweep import explore

    monkeypatch.setattr(Sweep, "points", None)
    with pytest.raises(DcaccelError, match=r"Conv node '.*': no implementation 'tiled'; available: .*lmv"):
        explore(conv_seed, {"Conv": ["mv", "tiled"]}, progress=False)


@pytest.mark.parametrize(
    ("makespans", "expected"),
    [
        ({"mv": 3, "op": 1, "lmv": 2}, "conv1=op,conv2=op"),
        ({"mv": 3, "op": None, "lmv": 2}, "conv1=lmv,conv2=lmv"),
        ({"mv": None, "op": None, "lmv": None}, "conv1=mv,conv2=mv"),
        ({"mv": 2, "op": 2, "lmv": 2}, "conv1=mv,conv2=mv"),
    ],
)
def test_greedy_evaluates_the_candidates_of_a_node_together(makespans, expected):
    from dcaccel.exploration.run import greedy

    batches = []

    def evaluate(candidates):
        batches.append([str(candidate) for candidate in candidates])
        found = []
        for candidate in candidates:
            values = [makespans[name] for name in candidate.as_dict().values()]
            found.append(None if None in values else [SimpleNamespace(makespan=sum(values))])
        return found

    chosen = greedy(evaluate, {"Conv": ["conv1", "conv2"]}, SHAPES, "makespan")
    assert str(chosen) == expected
    assert [len(batch) for batch in batches] == [3, 3]
    assert batches[0] == ["conv1=mv,conv2=mv", "conv1=op,conv2=mv", "conv1=lmv,conv2=mv"]


@pytest.mark.slow
def test_process_pool_retries_a_dead_worker_and_isolates_failures(tmp_path, monkeypatch):
    monkeypatch.setattr(executors, "RETRIES", 1)
    source = WorkloadSource("stub", SimpleNamespace(name="stub"))
    with ProcessExecutor(source, Stub(str(tmp_path)), workers=2) as executor:
        outcomes = list(executor.map(conv("mv", "die", "bad", "op", "poison", "lmv")))
    found = by_assignment(outcomes)
    assert len(outcomes) == 6
    assert found.pop("Conv=poison").startswith("BrokenProcessPool")
    assert found == {
        "Conv=mv": [2],
        "Conv=die": [3],
        "Conv=bad": "ValueError: no shape 'bad'",
        "Conv=op": [2],
        "Conv=lmv": [3],
    }
    assert (tmp_path / "die.died").exists()


@pytest.fixture(scope="module")
def cluster():
    """Two single-threaded worker processes on loopback, closed with the module."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as local:
        yield local


@pytest.fixture(scope="module")
def local_results(conv_seed):
    from dcaccel.exploration.sweep import explore

    return explore(conv_seed, SHAPES, pes=[1, 16, 128], progress=False)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("executor", "by_name"), [("process", True), ("process", False), ("dask", True), ("dask", False)]
)
def test_every_executor_gives_the_same_rows(executor, by_name, conv_seed, local_results, cluster):
    from dcaccel.exploration.sweep import explore

    address = cluster.scheduler_address if executor == "dask" else None
    workload = "conv-seed" if by_name else conv_seed
    results = explore(workload, SHAPES, pes=[1, 16, 128], executor=executor, address=address, workers=2)
    assert len(results) == 3 * 3 * 2
    assert results.drop(columns=TIMING).equals(local_results.drop(columns=TIMING))


@pytest.mark.slow
def test_a_killed_worker_loses_no_point(conv_seed, local_results, cluster, tmp_path):
    from distributed import Client

    from dcaccel.exploration.store import KEY, read_points
    from dcaccel.exploration.sweep import explore

    path = tmp_path / "r.sqlite"
    killed = []
    with Client(cluster) as observer:
        pids = observer.run(os.getpid)

        def kill_a_busy_worker():
            deadline = time.monotonic() + 120
            while not killed and time.monotonic() < deadline:
                busy = [address for address, keys in observer.processing().items() if keys and address in pids]
                if busy:
                    os.kill(pids[busy[0]], signal.SIGKILL)
                    killed.append(pids[busy[0]])
                time.sleep(0.05)

        killer = threading.Thread(target=kill_a_busy_worker)
        killer.start()
        results = explore(  # lowered whole, an assignment runs long enough to be found busy
            "conv-seed",
            SHAPES,
            pes=[1, 16, 128],
            executor="dask",
            address=cluster.scheduler_address,
            results=path,
            compose=False,
        )
        killer.join()
        assert killed and killed[0] not in observer.run(os.getpid).values()
    assert results.drop(columns=TIMING).equals(local_results.drop(columns=TIMING))
    stored = read_points(path)
    assert len(stored) == len(local_results) and not stored.duplicated(list(KEY)).any()

    resumed = explore("conv-seed", SHAPES, pes=[1, 16, 128], executor="dask", results=path, resume=True)
    assert resumed.equals(results)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=["KILL", "TERM", "INT"])
def test_no_worker_outlives_its_sweep(signum, tmp_path):
    import psutil

    sweep = subprocess.Popen([sys.executable, "-c", SLEEPING_SWEEP, str(tmp_path)], cwd=ROOT, stderr=subprocess.PIPE)
    descendants = []
    try:
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("*.started"))) < 2:
            assert sweep.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        descendants = psutil.Process(sweep.pid).children(recursive=True)
        assert len([p for p in descendants if p.ppid() != sweep.pid]) == 2  # the workers, under the fork server
        sweep.send_signal(signum)
        sweep.wait(timeout=30)
        _, alive = psutil.wait_procs(descendants, timeout=10)
        assert alive == []
    finally:
        for process in [*descendants, sweep]:
            if process.poll() is None if process is sweep else process.is_running():
                process.kill()
    assert sweep.returncode == -signum


@pytest.mark.slow
def test_ctrl_c_keeps_the_finished_points_and_stops_the_workers(monkeypatch, tmp_path):
    import psutil

    from dcaccel.exploration.store import ResultStore, read_points
    from dcaccel.exploration.sweep import explore

    original = ResultStore.add

    def add_then_interrupt(self, points):
        original(self, points)
        raise KeyboardInterrupt

    monkeypatch.setattr(ResultStore, "add", add_then_interrupt)
    path = tmp_path / "r.sqlite"
    options = {"pes": [4], "scheduler": "list", "executor": "process", "workers": 2, "progress": False}
    with pytest.raises(KeyboardInterrupt):
        explore("conv-seed", SHAPES, results=path, **options)
    workers = [p for p in psutil.Process().children(recursive=True) if p.ppid() != os.getpid()]
    _, alive = psutil.wait_procs(workers, timeout=5)
    assert alive == []
    assert len(read_points(path)) == 1
