"""Coverage of the model corpus (``tests/models/corpus.py``): what each real architecture lowers to.

For every model of the corpus the script imports it (``dcaccel.load``), lowers it with its matrix
products (Conv, Gemm, MatMul) under each MMM shape (mv, op, lmv), extracts the task DAG and schedules it
on 16 PEs (``corpus.run_pipeline``), and, with ``--verify``, compiles the ``lmv`` lowering and checks
it against onnxruntime (``dcaccel.verify``). It prints one row per model (dataclass rows → DataFrame →
markdown): its op types with their node counts, the canonical and opaque tasks of each shape's DAG,
the seconds of each stage (wall time: import once; lowering, extraction and scheduling summed over the
three shapes), the CPU seconds from import to schedule of the slowest shape (the issue's 2-minute bound,
which other processes on a shared machine do not inflate), and whether the compiled lowering matched
(``yes``, ``no``, ``error``, or ``-`` when not run). A stage that raises ends the model's row with the stage,
and the error in the ``failure`` column; the other models go on.

Usage: ``python benchmarks/model_coverage.py [--models resnet,bert] [--verify]``. ``docs/models.md``
holds the table of a run.
"""

import argparse
import datetime
import sys
import time
import traceback
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the corpus lives in the test package

import dcaccel  # noqa: E402
from dcaccel.frontend.ops import nodes_by_op_type  # noqa: E402
from tests.models import corpus  # noqa: E402

VERIFIED_SHAPE = "lmv"
"""The shape whose lowering ``--verify`` compiles (the fewest tasks)."""


@dataclass
class Row:
    """One model of the corpus: its ops, the tasks of each shape's DAG, seconds per stage, verification."""

    model: str
    source: str
    ops: str = "-"  # op types with node counts, in program order
    canonical_tasks: str = "-"  # per shape, mv/op/lmv
    opaque_tasks: str = "-"  # per shape, mv/op/lmv
    import_s: float | str = "-"
    lower_s: float | str = "-"  # summed over the three shapes
    extract_s: float | str = "-"
    schedule_s: float | str = "-"
    worst_cpu_s: float | str = "-"  # CPU seconds from import to schedule of the slowest shape
    verified: str = "-"
    failure: str = ""  # the stage and error that ended the row


def _message(err: Exception) -> str:
    """The error in one line, with the dcaccel (or DaCe) function that raised it."""
    frames = [frame for frame in traceback.extract_tb(err.__traceback__) if "/dcaccel/" in frame.filename]
    where = f" [{Path(frames[-1].filename).name}:{frames[-1].name}]" if frames else ""
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {text[:240]}{where}"


def measure(name: str, verify: bool) -> Row:
    """Run one model through the pipeline under every MMM shape; a stage that raises ends the row."""
    row = Row(name, corpus.MODELS[name].source)
    try:
        start, cpu_start = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's tracer warnings
            workload = corpus.load(name)
        row.import_s = round(time.perf_counter() - start, 2)
        import_cpu = time.process_time() - cpu_start
    except Exception as err:  # a model that does not import: report it, go on
        row.failure = f"import: {_message(err)}"
        return row
    row.ops = ", ".join(f"{op}×{len(nodes)}" for op, nodes in nodes_by_op_type(workload.sdfg).items())
    runs = {}
    for shape in corpus.MMM_SHAPES:
        try:
            runs[shape] = corpus.run_pipeline(workload, shape)
        except Exception as err:
            row.failure = f"{shape}: {_message(err)}"
            break
    if runs:
        row.canonical_tasks = "/".join(str(run.canonical_tasks) for run in runs.values())
        row.opaque_tasks = "/".join(str(run.opaque_tasks) for run in runs.values())
        for stage in ("lower", "extract", "schedule"):
            setattr(row, f"{stage}_s", round(sum(run.seconds[stage] for run in runs.values()), 2))
        row.worst_cpu_s = round(import_cpu + max(run.cpu_seconds for run in runs.values()), 2)
    if verify and VERIFIED_SHAPE in runs:
        try:
            row.verified = "yes" if dcaccel.verify(workload, runs[VERIFIED_SHAPE].lowered).passed else "no"
        except Exception as err:
            row.verified = "error"
            row.failure = f"verify: {_message(err)}"
    return row


def table(rows: list[Row]) -> pd.DataFrame:
    """The rows as a DataFrame, one column per field of :class:`Row`."""
    return pd.DataFrame([asdict(row) for row in rows])


def markdown(frame: pd.DataFrame) -> str:
    """``frame`` as a markdown table (``|`` in cells escaped)."""
    cells = [[str(value).replace("|", "\\|") for value in row] for row in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", type=lambda text: text.split(","), default=None, help="comma-separated corpus models"
    )
    parser.add_argument("--verify", action="store_true", help=f"compile the {VERIFIED_SHAPE} lowering and verify it")
    args = parser.parse_args(argv)
    names = args.models or corpus.names()
    unknown = [name for name in names if name not in corpus.MODELS]
    if unknown:
        parser.error(f"no model {', '.join(unknown)} in the corpus (models: {', '.join(corpus.names())})")
    rows = []
    for name in names:
        rows.append(measure(name, args.verify))
        print(f"{name}: {rows[-1].failure or 'ok'}", file=sys.stderr, flush=True)
    today = datetime.date.today().isoformat()
    print(f"`python benchmarks/model_coverage.py{' --verify' if args.verify else ''}`, {today}\n")
    print(markdown(table(rows)))


if __name__ == "__main__":
    main()
