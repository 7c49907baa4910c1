"""Scheduler cost: time and peak memory per DAG size and scheduler.

    python benchmarks/bench_scheduler.py [--sizes 1000 10000 100000 1000000] [--pes 16 ...]
                                         [--families layered chain mv op lmv] [--schedulers streaming list]
    python benchmarks/bench_scheduler.py --workload resnet18 [--arch tpu] [--impl Conv=mv] [--pes 1 2 4 ... 128]

For every family and size the DAG is generated once (not timed); each scheduler then runs in a
forked child process, so that its peak resident memory is its own. ``time`` is the wall time of
``dcaccel.scheduler.schedule`` (contract check, scheduling and the schedule's own validation),
``cpu`` its process CPU time (the machine may be shared), ``peak`` the child's peak RSS and ``+sched``
what scheduling added to the memory the DAG already used. Targets: 10^5 tasks < 2 s and
10^6 tasks < 30 s per scheduler.

With ``--workload``, one built-in workload is run end to end instead, stage by stage in one child
process: lowering (``--impl``), extraction, then for every P and scheduler, as a sweep's per-point stage
does on one DAG (``CanonicalGraph`` built once), scheduling, the on-chip placement (the knapsack of
``dcaccel.scheduler.io``, for the on-chip capacity of ``--arch``) and the costing on ``--arch`` (which
places the buffers again); a last line sums the points. ResNet-18 on ``tpu`` is the case where the
buffers just exceed the unified buffer, so that the knapsack, not the "everything fits" shortcut,
decides; ``onchip_buffers`` and the energy follow its choice.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import resource
import time
from dataclasses import astuple, dataclass, fields

import dcaccel
from dcaccel.architecture import load as load_architecture
from dcaccel.cost.schedule import CostCache, cost_schedule
from dcaccel.dag import TaskDAG
from dcaccel.dag import generators as gen
from dcaccel.dag.extract import extract
from dcaccel.scheduler import CanonicalGraph, schedule

FAMILIES = {
    "layered": lambda n: gen.layered(n, max(10, math.isqrt(n)), seed=1, buffer_fraction=0.05),
    "chain": lambda n: gen.chain([8 + (7 * i) % 57 for i in range(n + 1)]),
    "mv": lambda n: gen.mmm("mv", 8, 8, max(1, n - 2)),
    "op": lambda n: gen.mmm("op", 8, max(1, n - 1), 8),
    "lmv": lambda n: gen.mmm("lmv", max(1, n - 2), 8, 8),
}
TARGETS = {100_000: 2.0, 1_000_000: 30.0}


@dataclass(frozen=True)
class Row:
    family: str
    tasks: int
    edges: int
    scheduler: str
    pes: int
    time_s: float
    cpu_s: float
    peak_mb: float
    sched_mb: float
    makespan: int
    blocks: int
    target: str


@dataclass(frozen=True)
class WorkloadRow:
    workload: str
    arch: str
    scheduler: str
    pes: int
    tasks: int
    lower_s: float
    extract_s: float
    schedule_s: float
    placement_s: float
    costing_s: float
    peak_mb: float
    onchip_buffers: int
    makespan_cycles: int
    energy_pj: float


def _resident_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _measure(dag: TaskDAG, family: str, scheduler: str, pes: int, queue: multiprocessing.Queue) -> None:
    before = _resident_mb()
    wall, cpu = time.perf_counter(), time.process_time()
    result = schedule(dag, pes, scheduler)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tasks = len(dag.tasks)
    limit = next((t for size, t in sorted(TARGETS.items()) if tasks <= size * 1.1), None)
    verdict = "" if limit is None else ("ok" if wall < limit else f"> {limit:g} s")
    queue.put(
        Row(family, tasks, dag.num_edges, scheduler, pes, wall, cpu, peak, peak - before, result.makespan,
            result.num_blocks, verdict)
    )  # fmt: skip


def _run_workload(args: argparse.Namespace, queue: multiprocessing.Queue) -> None:
    arch = load_architecture(args.arch)
    onchip = arch.onchip_capacity_elements
    start = time.perf_counter()
    lowered = dcaccel.workloads.get(args.workload).lower(dict(choice.split("=", 1) for choice in args.impl))
    lowered_at = time.perf_counter()
    dag = extract(lowered)
    extracted_at = time.perf_counter()
    graph = CanonicalGraph.from_dag(dag)
    cache = CostCache(graph)
    rows = []
    for pes in args.pes:
        for scheduler in args.schedulers:
            scheduled = time.perf_counter()
            result = schedule(graph, pes, scheduler, validate=False)
            placed = time.perf_counter()
            io = result.io_at(onchip)
            costed = time.perf_counter()
            costs = cost_schedule(result, arch, onchip, cache=cache, validate=False)
            done = time.perf_counter()
            rows.append(
                WorkloadRow(args.workload, arch.label, scheduler, pes, len(dag.tasks), lowered_at - start,
                            extracted_at - lowered_at, placed - scheduled, costed - placed, done - costed,
                            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, len(io.onchip_buffers),
                            costs.makespan_cycles, costs.energy_total_pj)
            )  # fmt: skip
    queue.put(rows)


def _print_header(row_type: type, widths: list[int]) -> None:
    print("  ".join(f.name.rjust(w) for f, w in zip(fields(row_type), widths, strict=True)), flush=True)


def _print_row(row, widths: list[int]) -> None:
    cells = [f"{c:.2f}" if isinstance(c, float) else str(c) for c in astuple(row)]
    print("  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--pes", type=int, nargs="+", default=[16])
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--schedulers", nargs="+", choices=["streaming", "list"], default=["streaming", "list"])
    parser.add_argument("--workload", help="a built-in workload to run end to end instead of generated DAGs")
    parser.add_argument("--arch", default="tpu", help="with --workload: the architecture it is costed on")
    parser.add_argument("--impl", nargs="+", default=["Conv=mv"], help="with --workload: OP=IMPL ...")
    args = parser.parse_args()

    context = multiprocessing.get_context("fork")
    if args.workload is not None:
        queue = context.Queue()
        child = context.Process(target=_run_workload, args=(args, queue))
        child.start()
        rows = queue.get()
        child.join()
        widths = [10, 8, 10, 4, 7, 8, 9, 10, 11, 9, 8, 14, 15, 16]
        _print_header(WorkloadRow, widths)
        for row in rows:
            _print_row(row, widths)
        if len(rows) > 1:
            stages = ("schedule_s", "placement_s", "costing_s")
            times = {name: sum(getattr(row, name) for row in rows) for name in stages}
            print(f"{len(rows)} points: " + ", ".join(f"{name} {seconds:.2f}" for name, seconds in times.items())
                  + f", total {sum(times.values()):.2f}")  # fmt: skip
        return
    widths = [10, 9, 9, 10, 4, 8, 8, 9, 9, 12, 7, 8]
    _print_header(Row, widths)
    for size in args.sizes:
        for family in args.families:
            dag = FAMILIES[family](size)
            for pes in args.pes:
                for scheduler in args.schedulers:
                    queue = context.Queue()
                    child = context.Process(target=_measure, args=(dag, family, scheduler, pes, queue))
                    child.start()
                    row = queue.get()
                    child.join()
                    _print_row(row, widths)
            del dag


if __name__ == "__main__":
    main()
