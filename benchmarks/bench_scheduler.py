"""Scheduler cost: time and peak memory per DAG size and scheduler.

    python benchmarks/bench_scheduler.py [--sizes 1000 10000 100000 1000000] [--pes 16]
                                         [--families layered chain mv op lmv] [--schedulers streaming list]

For every family and size the DAG is generated once (not timed); each scheduler then runs in a
forked child process, so that its peak resident memory is its own. ``time`` is the wall time of
``dcaccel.scheduler.schedule`` (contract check, scheduling and the schedule's own validation),
``cpu`` its process CPU time (the machine may be shared), ``peak`` the child's peak RSS and ``+sched``
what scheduling added to the memory the DAG already used. Targets: 10^5 tasks < 2 s and
10^6 tasks < 30 s per scheduler.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import resource
import time
from dataclasses import astuple, dataclass, fields

from dcaccel.dag import TaskDAG
from dcaccel.dag import generators as gen
from dcaccel.scheduler import schedule

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--pes", type=int, default=16)
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--schedulers", nargs="+", choices=["streaming", "list"], default=["streaming", "list"])
    args = parser.parse_args()

    context = multiprocessing.get_context("fork")
    header = [f.name for f in fields(Row)]
    widths = [10, 9, 9, 10, 4, 8, 8, 9, 9, 12, 7, 8]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)), flush=True)
    for size in args.sizes:
        for family in args.families:
            dag = FAMILIES[family](size)
            for scheduler in args.schedulers:
                queue = context.Queue()
                child = context.Process(target=_measure, args=(dag, family, scheduler, args.pes, queue))
                child.start()
                row = queue.get()
                child.join()
                cells = [f"{c:.2f}" if isinstance(c, float) else str(c) for c in astuple(row)]
                print("  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)), flush=True)
            del dag


if __name__ == "__main__":
    main()
