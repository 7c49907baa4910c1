"""The feature ``vector_loop`` against gcc's own report of the loops it vectorised.

Every program of the cost model's catalogue (``costmodel_folds.catalogue``) is lowered, its C++ generated
with each top-level map's tasklets marked, and compiled as DaCe compiles it (its CPU flags, ``-O3``) with
``-fopt-info-vec-optimized``. A map step counts as vectorised by gcc when gcc reports a vectorised loop
(not a basic block) between the map's ``#pragma omp parallel for`` and the next one. The table crosses that
with the rule (docs/costmodel.md, "The vector loop") and gives each cell's median measured time per unit
from a rows file. gcc also vectorises the products of a sum it keeps in order, and loops over strided
columns, which do not run a vector a cycle: the two are different facts, and the table shows how often they
part.

    python benchmarks/vector_loop_gcc.py [--families convs lenet] [--rows dcaccel/costmodel/data/rows.jsonl]
"""

from __future__ import annotations

import argparse
import copy
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import dace
import numpy as np
import pandas as pd
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from costmodel_folds import _key, catalogue  # noqa: E402

from dcaccel.costmodel.measure import read_rows, read_steps, step_places  # noqa: E402
from dcaccel.costmodel.models import times, units  # noqa: E402
from dcaccel.dag.scopes import TaskScope  # noqa: E402
from dcaccel.transforms.lower import lower  # noqa: E402

#: The shipped rows.
ROWS = "dcaccel/costmodel/data/rows.jsonl"
#: The prefix a map's tasklets are relabelled with, so that gcc's report can be placed by step.
MARK = "VECTORSTEP"
#: gcc's report of a vectorised loop (a basic block vectorised is not a loop).
VECTORISED = re.compile(r"program\.cpp:(\d+):\d+: optimized: loop vectorized")


@dataclass(frozen=True)
class Agreement:
    """How many map steps the rule and gcc put in one cell, and their median measured time per unit."""

    rule: int
    gcc: str
    steps: int
    median_ns_per_unit: float


def _marked_code(lowered, symbols) -> tuple[str, list[tuple[int, str]]]:
    """The generated C++ of ``lowered`` with each top-level map's tasklets relabelled by its step's index,
    and the (index, label) of those steps."""
    sdfg = copy.deepcopy(lowered.sdfg)
    program = read_steps(lowered, sdfg, symbols)
    marked = []
    for index, (step, (place, _, _)) in enumerate(zip(program.steps, step_places(sdfg, program, symbols), strict=True)):
        if isinstance(step, TaskScope) and place.scope is not None:
            for node in place.state.scope_subgraph(place.scope).nodes():
                if isinstance(node, dace.nodes.Tasklet):
                    node.label = f"{MARK}{index}x_{node.label}"
            marked.append((index, step.label))
    code = sdfg.generate_code()[0].clean_code
    return re.sub(r'#include "\.\./\.\./include/hash\.h"\n', "", code), marked


def _vectorised_lines(code: str) -> set[int]:
    """The lines of ``code`` that gcc reports a vectorised loop at, compiled with DaCe's CPU flags."""
    include = Path(dace.__file__).parent / "runtime" / "include"
    flags = dace.Config.get("compiler", "cpu", "args").split()
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "program.cpp"
        source.write_text(code)
        # what DaCe's CMake build adds to its flags: its C++ standard, and -O3 -DNDEBUG of a Release build
        standard = f"-std=c++{dace.Config.get('compiler', 'cpp_standard')}"
        command = ["g++", standard, "-O3", "-DNDEBUG", "-fopenmp", *flags, f"-I{include}", "-c", str(source)]
        report = subprocess.run(
            [*command, "-o", str(Path(folder) / "program.o"), "-fopt-info-vec-optimized"],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
    return {int(match.group(1)) for match in VECTORISED.finditer(report)}


def gcc_verdicts(lowered, symbols) -> list[tuple[str, bool | None]]:
    """Per top-level map of ``lowered``, in program order: its label and whether gcc vectorised a loop of it
    (None where the code has no marked tasklet of it: a C++ tasklet keeps no label in the code)."""
    code, marked = _marked_code(lowered, symbols)
    lines = code.splitlines()
    pragmas = [number for number, line in enumerate(lines, 1) if "#pragma omp parallel for" in line]
    first = {}
    for number, line in enumerate(lines, 1):
        found = re.search(rf"Tasklet code \({MARK}(\d+)x_", line)
        if found:
            first.setdefault(int(found.group(1)), number)
    vectorised = _vectorised_lines(code)
    verdicts = []
    for index, label in marked:
        if index not in first:
            verdicts.append((label, None))
            continue
        start = max((p for p in pragmas if p < first[index]), default=0)
        end = min((p for p in pragmas if p > first[index]), default=len(lines) + 1)
        verdicts.append((label, any(start <= line < end for line in vectorised)))
    return verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", help="these families of the catalogue only")
    parser.add_argument("--rows", default=ROWS, help="measured rows (their feature and times)")
    args = parser.parse_args()
    measured = {}
    for row in read_rows(args.rows):
        if row.features["kind"] == "map":
            measured.setdefault(_key(row.family, row.program, row.sizes, row.assignment), []).append(row)
    judged, unmeasured = [], 0
    for family, build, assignments in catalogue():
        if args.families and family not in args.families:
            continue
        workload = build()
        symbols = workload.bind_symbols(workload.random_inputs(0))
        for choices in tqdm(assignments, desc=f"{family} {workload.name}", file=sys.stderr):
            lowered = lower(workload, choices)
            by_label: dict[str, list] = {}
            for row in measured.get(_key(family, workload.name, symbols, lowered.implementations), []):
                by_label.setdefault(row.label, []).append(row)
            seen: Counter = Counter()
            for label, verdict in gcc_verdicts(lowered, symbols):
                matches = by_label.get(label, [])
                if seen[label] < len(matches):
                    judged.append((matches[seen[label]], {None: "unplaced", True: "yes", False: "no"}[verdict]))
                else:
                    unmeasured += 1
                seen[label] += 1
    per_unit = times([row for row, _ in judged]) / units([row for row, _ in judged])
    cells: dict[tuple[int, str], list[float]] = {}
    for (row, verdict), time in zip(judged, per_unit, strict=True):
        cells.setdefault((int(row.features["vector_loop"]), verdict), []).append(float(time))
    table = pd.DataFrame(
        [
            asdict(Agreement(rule, gcc, len(values), float(np.median(values))))
            for (rule, gcc), values in sorted(cells.items())
        ]
    )
    print(f"{len(judged)} map steps judged; {unmeasured} without a measured row, left out")
    print(table.to_string(index=False, float_format="%.3f"))


if __name__ == "__main__":
    main()
