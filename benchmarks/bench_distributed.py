"""Speed-up of the ``process`` and ``dask`` executors over ``local`` on a per-node sweep (nothing is compiled).

The sweep is the one of issue 7: ``lenet``, strategy ``per-node`` over its Conv and Gemm nodes with
mv / op / lmv (3^5 = 243 assignments), P = 16 and 128, both schedulers. ``--impl`` narrows it to a
subset (e.g. ``--impl Conv=mv,op,lmv --impl Gemm=mv,lmv``: 3^2·2^3 = 72 assignments) when the full
run takes too long. Every executor's wall time counts everything a user waits for: starting the
process pool or the Dask cluster (spawning workers that import DaCe and build the workload) and
shutting it down. ``dask (warm)`` runs on a cluster whose workers have already imported dcaccel and
built the workload, as those of a persistent cluster (``--address``) have after their first sweep.

The script also prints what decides where lowering runs: per assignment, the seconds of lowering
and DAG extraction against those of scheduling its points (from the ``*_seconds`` columns of the
local run), the size of one assignment's DAG as JSON against that of its pickled points, and the
best speed-up shipping DAGs from a client that lowers would allow (Amdahl: lowering stays serial).

Usage::

    python benchmarks/bench_distributed.py [--model lenet] [--pes 16,128] [--workers 2]
        [--impl Conv=mv,op,lmv --impl Gemm=mv,lmv] [--executors local,process,dask] [--no-warm]
        [--address tcp://scheduler:8786]

With ``--address`` the Dask sweeps run on that cluster (its workers must have dcaccel installed; see
"Running sweeps on a cluster" in the README) instead of a local cluster of ``--workers`` processes.
"""

import argparse
import json
import logging
import os
import pickle
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pandas as pd

from dcaccel import workloads
from dcaccel.cli.table import format_table
from dcaccel.exploration.assignments import per_node
from dcaccel.exploration.dags import build_dag
from dcaccel.exploration.evaluation import DEFAULT_COST_MODEL
from dcaccel.exploration.executors import WorkloadSource
from dcaccel.exploration.grid import Grid
from dcaccel.exploration.load import nodes_by_op_type
from dcaccel.exploration.scheduling import schedule_points
from dcaccel.exploration.sweep import explore

SHAPES = ["mv", "op", "lmv"]
SCHEDULERS = ["streaming", "list"]


@dataclass(frozen=True)
class ExecutorTiming:
    """One sweep: where it ran, how long it took, and whether its rows equal the local ones."""

    executor: str
    workers: int
    assignments: int
    points: int
    wall_s: float
    speedup: float
    assignment_s: float  # mean seconds per assignment inside the worker (lower + extract + schedule)
    same_rows: str


@dataclass(frozen=True)
class WorkSplit:
    """Per assignment (means over the local run): lowering + extraction against scheduling, and sizes."""

    lower_extract_s: float
    schedule_s: float
    dag_json_bytes: int
    points_pickle_bytes: int
    amdahl_bound: float  # best speed-up when the client lowers and workers only schedule


def _implementations(text: str) -> tuple[str, list[str]]:
    op, _, names = text.partition("=")
    return op, [name for name in names.split(",") if name]


def warm(model: str) -> None:
    """On a worker: import dcaccel and build the workload, as a persistent worker already has."""
    WorkloadSource(model).build()


def assignment_seconds(results: pd.DataFrame) -> float:
    """Mean seconds one assignment took where it ran: lowering, extraction and scheduling its points."""
    per_assignment = results.groupby("assignment", sort=False)
    lower_extract = per_assignment["lower_seconds"].first() + per_assignment["extract_seconds"].first()
    return float((lower_extract + per_assignment["schedule_seconds"].sum()).mean())


def cluster_size(address: str | None, workers: int) -> int:
    """The number of workers of the Dask cluster at ``address`` (``workers`` when there is none)."""
    if address is None:
        return workers
    from distributed import Client

    with Client(address) as client:
        return len(client.nthreads())


def timed_sweep(model: str, implementations, pes, executor: str, workers: int, address=None):
    """The results of one per-node sweep and its wall time."""
    start = time.perf_counter()
    results = explore(
        model,
        implementations,
        pes=pes,
        scheduler=SCHEDULERS,
        strategy="per-node",
        executor=executor,
        address=address,
        workers=None if address else workers,
        progress=False,
    )
    return results, time.perf_counter() - start


def work_split(model: str, implementations, pes, local: pd.DataFrame) -> WorkSplit:
    """What shipping DAGs instead of lowering in the workers would move and save, for this sweep."""
    per_assignment = local.groupby("assignment", sort=False)
    lower_extract = (per_assignment["lower_seconds"].first() + per_assignment["extract_seconds"].first()).mean()
    schedule = per_assignment["schedule_seconds"].sum().mean()
    workload = workloads.get(model)
    assignment = next(iter(per_node(nodes_by_op_type(workload), implementations, max_assignments=10**6)))
    built = build_dag(workload, assignment, "task", "exact")
    grid = Grid(tuple(pes), tuple(SCHEDULERS), (0,))
    points = list(schedule_points(workload.name, built, grid, "task", DEFAULT_COST_MODEL))
    return WorkSplit(
        round(lower_extract, 3),
        round(schedule, 3),
        len(json.dumps(built.dag.to_json())),
        len(pickle.dumps(points)),
        round((lower_extract + schedule) / lower_extract, 3),
    )


@contextmanager
def dask_cluster(address: str | None, workers: int) -> Iterator[str]:
    """The scheduler address of the cluster at ``address``, or of a LocalCluster on loopback started here."""
    if address is not None:
        yield address
        return
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        silence_logs=logging.ERROR,
    ) as cluster:
        yield cluster.scheduler_address


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="lenet")
    parser.add_argument("--pes", default="16,128", help="comma-separated PE counts")
    parser.add_argument("--impl", action="append", type=_implementations, default=[], metavar="OP=NAME[,NAME...]")
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="processes of the pool and local cluster")
    parser.add_argument("--executors", default="local,process,dask")
    parser.add_argument("--address", help="a running Dask scheduler for the dask sweeps (default: a local cluster)")
    parser.add_argument("--no-warm", action="store_true", help="skip the sweep on a warmed-up Dask cluster")
    args = parser.parse_args(argv)
    implementations = dict(args.impl) or {"Conv": SHAPES, "Gemm": SHAPES}
    pes = [int(value) for value in args.pes.split(",")]
    executors = args.executors.split(",")
    warnings.simplefilter("ignore")
    os.environ["PYTHONWARNINGS"] = "ignore"  # the workers' extraction warnings, as in this process

    runs: dict[str, tuple[pd.DataFrame, float, int]] = {}
    for executor in executors:
        address = args.address if executor == "dask" else None
        results, seconds = timed_sweep(args.model, implementations, pes, executor, args.workers, address)
        runs[executor] = (results, seconds, 1 if executor == "local" else cluster_size(address, args.workers))
        print(f"{executor}: {seconds:.1f} s", flush=True)
    if "dask" in executors and not args.no_warm:
        from distributed import Client

        with dask_cluster(args.address, args.workers) as address:
            with Client(address) as client:
                client.run(warm, args.model)
            results, seconds = timed_sweep(args.model, implementations, pes, "dask", args.workers, address)
            runs["dask (warm)"] = (results, seconds, cluster_size(address, args.workers))
        print(f"dask (warm): {seconds:.1f} s", flush=True)

    reference, reference_seconds, _ = runs[executors[0]]
    timing = [name for name in reference.columns if name.endswith("_seconds")]
    rows = [
        ExecutorTiming(
            name,
            workers,
            results["assignment"].nunique(),
            len(results),
            round(seconds, 1),
            round(reference_seconds / seconds, 2),
            round(assignment_seconds(results), 2),
            "yes" if results.drop(columns=timing).equals(reference.drop(columns=timing)) else "NO",
        )
        for name, (results, seconds, workers) in runs.items()
    ]
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"\n{args.model} per-node sweep, P = {args.pes}, {os.cpu_count()} cores, load average at the end {load}")
    print(f"speed-up over {executors[0]}; assignment_s above the local one means the workers shared the cores")
    print(format_table(rows))
    if "local" in runs:
        print("\nper assignment: lowering + extraction vs scheduling, and what would travel")
        print(format_table([work_split(args.model, implementations, pes, runs["local"][0])]))


if __name__ == "__main__":
    main()
