"""Wall time of exploration sweeps, split by stage (no compilation anywhere).

Targets on the 2-core machine: conv-seed (Conv as mv/op/lmv × 8 PE counts × 2 schedulers) < 5 s,
lenet (mv/op/lmv for Conv and Gemm, per op type) < 15 s, resnet18 per op type < 2 min.

    python benchmarks/bench_explore.py [conv-seed lenet resnet18 ...]
"""

import sys
import time
from dataclasses import dataclass

T0 = time.perf_counter()
import dcaccel  # noqa: E402
from dcaccel.cli.table import format_table  # noqa: E402
from dcaccel.exploration import explore  # noqa: E402

IMPORT_SECONDS = time.perf_counter() - T0
SHAPES = ["mv", "op", "lmv"]
PES = [1, 2, 4, 8, 16, 32, 64, 128]
SWEEPS = {
    "conv-seed": {"Conv": SHAPES},
    "lenet": {"Conv": SHAPES, "Gemm": SHAPES},
    "mobilenetv2-block": {"Conv": SHAPES},
    "transformer-encoder": {"MatMul": SHAPES},
    "resnet18": {"Conv": SHAPES, "Gemm": SHAPES},
}


@dataclass(frozen=True)
class SweepTiming:
    workload: str
    assignments: int
    points: int
    tasks_max: int
    load_s: float
    lower_s: float
    extract_s: float
    schedule_s: float
    total_s: float
    dominant: str


def measure(name: str) -> SweepTiming:
    start = time.perf_counter()
    workload = dcaccel.workloads.get(name)
    loaded = time.perf_counter()
    results = explore(workload, SWEEPS[name], pes=PES, scheduler=["streaming", "list"], progress=False)
    total = time.perf_counter() - start
    per_assignment = results.drop_duplicates("assignment")
    stages = {
        "load": loaded - start,
        "lower": float(per_assignment["lower_seconds"].sum()),
        "extract": float(per_assignment["extract_seconds"].sum()),
        "schedule": float(results["schedule_seconds"].sum()),
    }
    return SweepTiming(
        workload=name,
        assignments=len(per_assignment),
        points=len(results),
        tasks_max=int(results["tasks"].max()),
        load_s=round(stages["load"], 2),
        lower_s=round(stages["lower"], 2),
        extract_s=round(stages["extract"], 2),
        schedule_s=round(stages["schedule"], 2),
        total_s=round(total, 2),
        dominant=max(stages, key=stages.get),
    )


def main(names: list[str]) -> None:
    rows = [measure(name) for name in names or ["conv-seed", "lenet", "resnet18"]]
    print(f"import dcaccel + explore: {IMPORT_SECONDS:.2f} s (once per process, not in the rows)")
    print(format_table(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
