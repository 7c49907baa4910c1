"""The two clocks of the cost model's timer (dcaccel/costmodel/timer.py) compared on this machine.

``python benchmarks/costmodel_clock.py load`` times one CPU-bound step (the MV step of a 256^3 product,
about 10 ms) alone and then under busy processes (as many as this machine has CPUs, each a Python loop),
with the thread CPU timer, which reads the thread's CPU time and, inside those reads, the wall clock in
every call: the CPU time under load should stay close to the time alone, while the wall time grows with the
share of the CPU the step loses. It prints the medians and the ratios under load to alone.

``python benchmarks/costmodel_clock.py overhead`` measures what the thread CPU clock costs on small steps
(its read is a system call, not a vDSO read as the steady clock's): every step of the products family
(``costmodel_folds.PRODUCTS`` x mv, op, lmv) is timed by the wall timer alone, and by the thread CPU
timer (its CPU time and the wall clock it reads inside); it prints per step the three medians, and the
median over steps of the CPU time's excess over the wall time inside (the read's cost counted in a step)
and of the inner wall time's ratio to the wall timer's alone (what the inner reads' nesting costs).

Run with ``OMP_NUM_THREADS=1`` (the thread CPU clock refuses more threads).
"""

import argparse
import multiprocessing
import sys
import time
from pathlib import Path

import numpy as np

from dcaccel.costmodel.measure import run_timed, timed_program
from dcaccel.costmodel.timer import WALL_EVENT
from dcaccel.transforms.lower import lower
from dcaccel.workloads import mmm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from costmodel_folds import PRODUCTS, SHAPES  # noqa: E402


def _busy(stop) -> None:
    while not stop.is_set():
        pass


def _steps(lowered, clock: str, repeat: int) -> tuple[dict, dict]:
    """The samples of every timed event of ``lowered`` over ``repeat`` calls, and each step's label by event."""
    _, (_, events), program, arguments = timed_program(lowered, 0, clock)
    return run_timed(program, arguments, repeat), {event: label for event, label, _, _ in events}


def run_load(args) -> None:
    lowered = lower(mmm.workload(N=256, K=256, M=256), {"MatMul": "mv"})
    _, (_, events), program, arguments = timed_program(lowered, 0, "thread-cpu")
    (event,) = [event for event, label, _, _ in events if label == "MV"]

    def medians() -> tuple[float, float]:
        samples = run_timed(program, arguments, args.repeat)
        return float(np.median(samples[event])), float(np.median(samples[event + WALL_EVENT]))

    alone = medians()
    stop = multiprocessing.Event()
    busy = [multiprocessing.Process(target=_busy, args=(stop,)) for _ in range(args.busy)]
    for process in busy:
        process.start()
    time.sleep(1.0)
    try:
        loaded = medians()
    finally:
        stop.set()
        for process in busy:
            process.join()
    print(f"MV of a 256^3 product, {args.repeat} calls; {args.busy} busy processes beside it under load")
    print(f"{'':8} {'CPU ms':>10} {'wall ms':>10}")
    print(f"{'alone':8} {alone[0] / 1e6:10.3f} {alone[1] / 1e6:10.3f}")
    print(f"{'loaded':8} {loaded[0] / 1e6:10.3f} {loaded[1] / 1e6:10.3f}")
    print(f"{'ratio':8} {loaded[0] / alone[0]:10.3f} {loaded[1] / alone[1]:10.3f}")


def run_overhead(args) -> None:
    excess, nesting = [], []
    print(f"{'program':28} {'step':16} {'wall ns':>10} {'cpu ns':>10} {'inner wall':>10}")
    for (n, k, m), shape in ((size, shape) for size in PRODUCTS for shape in SHAPES):
        lowered = lower(mmm.workload(N=n, K=k, M=m), {"MatMul": shape})
        wall, labels = _steps(lowered, "wall", args.repeat)
        cpu, _ = _steps(lowered, "thread-cpu", args.repeat)
        for event, label in labels.items():
            if event not in wall:
                continue
            alone, inner, thread = (float(np.median(s)) for s in (wall[event], cpu[event + WALL_EVENT], cpu[event]))
            excess.append(thread - inner)
            nesting.append(inner / alone)
            print(f"{f'mmm {n}x{k}x{m} {shape}':28} {label[:16]:16} {alone:10.0f} {thread:10.0f} {inner:10.0f}")
    print(f"\n{len(excess)} steps, medians over them:")
    print(f"CPU time - inner wall time: {np.median(excess):.0f} ns (10th-90th: {np.percentile(excess, 10):.0f}", end="")
    print(f"-{np.percentile(excess, 90):.0f})")
    print(f"inner wall time / wall timer alone: {np.median(nesting):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    load = sub.add_parser("load")
    load.add_argument("--repeat", type=int, default=50)
    load.add_argument("--busy", type=int, default=multiprocessing.cpu_count())
    overhead = sub.add_parser("overhead")
    overhead.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    (run_load if args.command == "load" else run_overhead)(args)


if __name__ == "__main__":
    main()
