"""Wall time of lowering and task-DAG extraction for the built-in workloads (nothing is compiled).

For every case (a built-in workload and its implementation choices) the script builds the
workload, lowers it (``Workload.lower``) and extracts its DAG at the default granularity with
the exact volume rule (``dcaccel.dag.extract.extract``), and reports the size of the DAG, the wall
time of each step (extraction: the best of ``--repeat`` runs, ``validate()`` of the result included)
and the extraction rate in tasks per second; ``validate_s`` is the part of it that the contract check
``TaskDAG.validate`` takes (timed on an unchecked copy of the DAG). Workloads with symbolic sizes
are extracted at their default sizes. A case that fails (an op without a canonical implementation
yet) is reported with its error and does not stop the others.

Usage: ``python benchmarks/bench_extract.py [--cases conv-seed:Conv=op,resnet18] [--repeat 3]``.
A case is ``WORKLOAD[:OP=NAME[+OP=NAME...]]``; the default is every built-in workload with its
default implementations plus conv-seed under each MMM shape.
"""

import argparse
import time
import warnings
from dataclasses import dataclass

from dcaccel import workloads
from dcaccel.cli.table import format_table
from dcaccel.dag.extract import extract


@dataclass(frozen=True)
class Row:
    """One case: DAG size, seconds per step, extraction rate."""

    case: str
    tasks: int | str
    buffers: int | str
    edges: int | str
    build_s: float | str
    lower_s: float | str
    extract_s: float | str
    validate_s: float | str
    tasks_per_s: float | str


def default_cases() -> list[str]:
    """Every built-in workload with its defaults, and conv-seed under the three MMM shapes."""
    return [*workloads.names(), *(f"conv-seed:Conv={shape}" for shape in ("op", "lmv"))]


def parse_case(case: str) -> tuple[str, dict[str, str]]:
    """``WORKLOAD[:OP=NAME[+OP=NAME...]]`` as (workload name, implementation choices)."""
    name, _, spec = case.partition(":")
    choices = dict(pair.split("=", 1) for pair in spec.split("+") if pair)
    return name, choices


def measure(case: str, repeat: int) -> Row:
    """Build, lower and extract one case; a step that raises ends the row with its error."""
    name, choices = parse_case(case)
    try:
        start = time.perf_counter()
        workload = workloads.get(name)
        built = time.perf_counter()
        lowered = workload.lower(choices)
        lowered_at = time.perf_counter()
    except Exception as err:  # a workload the lowering cannot handle yet: report it, go on
        message = f"error: {str(err).splitlines()[0][:60]}"
        return Row(case, message, "-", "-", "-", "-", "-", "-", "-")
    seconds = []
    for _ in range(repeat):
        begin = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dag = extract(lowered)
        seconds.append(time.perf_counter() - begin)
    best = min(seconds)
    unchecked = dag.evaluate()
    begin = time.perf_counter()
    unchecked.validate()
    validated = time.perf_counter() - begin
    tasks = len(dag.tasks)
    return Row(
        case,
        tasks,
        len(dag.buffers),
        dag.num_edges,
        round(built - start, 2),
        round(lowered_at - built, 2),
        round(best, 3),
        round(validated, 3),
        round(tasks / best),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=lambda text: text.split(","), default=None, help="comma-separated cases")
    parser.add_argument("--repeat", type=int, default=3, help="extraction runs per case; the best counts")
    args = parser.parse_args(argv)
    rows = [measure(case, args.repeat) for case in (args.cases or default_cases())]
    print(format_table(rows))


if __name__ == "__main__":
    main()
