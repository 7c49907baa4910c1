"""Wall time of exploration sweeps, split by stage, composed from fragments and lowered whole side by side
(no compilation anywhere).

Each sweep runs twice on a fresh workload (so neither path inherits the other's cached expansions):
``explore(..., compose=True)`` (the DAG of an assignment composed from the fragments of its nodes,
:mod:`dcaccel.dag.compose`) and ``compose=False`` (every assignment lowered whole); the rows must be
equal, timing columns aside, and the script checks it. Stages: ``load`` (building the workload),
``lower`` (whole-program lowerings, including those done for fragments), ``extract`` (extraction, or
composition and extraction), ``schedule`` (every point's schedule), ``points`` (the rest: I/O splits,
costing on the architecture, bookkeeping). Targets on the 2-core machine (issue 16): lenet per-node
< 30 s, resnet18 per-op-type < 25 s, resnet18 greedy per-node < 2 min.

    python benchmarks/bench_explore.py [SWEEP ...] [--paths composed,whole] [--workers N]

``--workers N`` (N > 1) runs each sweep on ``explore(..., executor="process", workers=N)``: the
assignments are shared out among N processes. Composing, the sweep's process lowers the covers and
sends the workers the fragments stage by stage (``dcaccel.exploration.dags.harvest``), so the workers
lower nothing (``lower`` is then the harvest's time); whole, each worker lowers its assignments. The
stage columns sum the processes' times, so with workers they can exceed the wall time.

SWEEP: lenet-per-node (243 assignments × P ∈ {16, 128} × 2 schedulers), resnet18-per-op-type (9 × 8 P ×
2), resnet18-greedy (21 nodes, one at a time, P ∈ {16, 128} × 2), conv-seed, lenet (per op type, 8 P).
"""

from __future__ import annotations

import argparse
import time
import warnings
from dataclasses import dataclass

T0 = time.perf_counter()
import pandas as pd  # noqa: E402

import dcaccel  # noqa: E402
from dcaccel.cli.table import format_table  # noqa: E402
from dcaccel.exploration import explore  # noqa: E402

IMPORT_SECONDS = time.perf_counter() - T0
SHAPES = ["mv", "op", "lmv"]
ALL_PES = [1, 2, 4, 8, 16, 32, 64, 128]
TWO_PES = [16, 128]


@dataclass(frozen=True)
class Sweep:
    """One benchmarked sweep."""

    workload: str
    implementations: dict
    strategy: str
    pes: list


SWEEPS = {
    "lenet-per-node": Sweep("lenet", {"Conv": SHAPES, "Gemm": SHAPES}, "per-node", TWO_PES),
    "resnet18-per-op-type": Sweep("resnet18", {"Conv": SHAPES, "Gemm": SHAPES}, "per-op-type", ALL_PES),
    "resnet18-greedy": Sweep("resnet18", {"Conv": SHAPES, "Gemm": SHAPES}, "greedy", TWO_PES),
    "conv-seed": Sweep("conv-seed", {"Conv": SHAPES}, "per-op-type", ALL_PES),
    "lenet": Sweep("lenet", {"Conv": SHAPES, "Gemm": SHAPES}, "per-op-type", ALL_PES),
}
DEFAULT = ["lenet-per-node", "resnet18-per-op-type", "resnet18-greedy"]
TIMING = ("lower_seconds", "extract_seconds", "schedule_seconds")


@dataclass(frozen=True)
class SweepTiming:
    sweep: str
    path: str
    workers: int
    assignments: int
    points: int
    tasks_max: int
    load_s: float
    lower_s: float
    extract_s: float
    schedule_s: float
    points_s: float
    total_s: float
    dominant: str


def measure(name: str, compose: bool, workers: int = 1) -> tuple[SweepTiming, pd.DataFrame]:
    sweep = SWEEPS[name]
    start = time.perf_counter()
    workload = dcaccel.workloads.get(sweep.workload)
    loaded = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = explore(
            workload,
            sweep.implementations,
            pes=sweep.pes,
            scheduler=["streaming", "list"],
            strategy=sweep.strategy,
            progress=False,
            compose=compose,
            executor="process" if workers > 1 else "local",
            workers=workers if workers > 1 else None,
        )
    total = time.perf_counter() - start
    per_assignment = results.drop_duplicates("assignment")
    stages = {
        "load": loaded - start,
        "lower": float(per_assignment["lower_seconds"].sum()),
        "extract": float(per_assignment["extract_seconds"].sum()),
        "schedule": float(results["schedule_seconds"].sum()),
    }
    stages["points"] = max(total - sum(stages.values()), 0.0)
    row = SweepTiming(
        sweep=name,
        path="composed" if compose else "whole",
        workers=workers,
        assignments=len(per_assignment),
        points=len(results),
        tasks_max=int(results["tasks"].max()),
        load_s=round(stages["load"], 2),
        lower_s=round(stages["lower"], 2),
        extract_s=round(stages["extract"], 2),
        schedule_s=round(stages["schedule"], 2),
        points_s=round(stages["points"], 2),
        total_s=round(total, 2),
        dominant=max(stages, key=stages.get),
    )
    return row, results


def main(names: list[str], paths: list[str], workers: int = 1) -> None:
    rows = []
    for name in names:
        found = {}
        for path in paths:
            row, results = measure(name, path == "composed", workers)
            rows.append(row)
            found[path] = results.drop(columns=list(TIMING))
            print(format_table([row]), flush=True)
        if len(found) == 2:
            pd.testing.assert_frame_equal(found["composed"], found["whole"])
            print(f"{name}: composed and whole-program rows are identical", flush=True)
    print(f"import dcaccel + explore: {IMPORT_SECONDS:.2f} s (once per process, not in the rows)")
    print(format_table(rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweeps", nargs="*", metavar="SWEEP", help=f"any of {', '.join(SWEEPS)}")
    parser.add_argument("--paths", default="composed,whole", help="composed, whole or both (default)")
    parser.add_argument("--workers", type=int, default=1, help="processes sharing the assignments (default 1)")
    args = parser.parse_args()
    unknown = [name for name in args.sweeps if name not in SWEEPS]
    if unknown:
        parser.error(f"unknown sweep {unknown[0]!r} (known: {', '.join(SWEEPS)})")
    main(args.sweeps or DEFAULT, [path for path in args.paths.split(",") if path], args.workers)
