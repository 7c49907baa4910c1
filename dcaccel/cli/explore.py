"""``dcaccel explore MODEL``: sweep implementations × PEs × schedulers × on-chip memory.

Prints the best implementation per (P, scheduler), writes all points with ``--out`` (CSV, Parquet
or JSON by suffix) and a makespan-vs-P plot with ``--plot``. ``--demo`` sweeps the seed's
convolution (conv-seed, Conv as mv / op / lmv, P = 1…128, both schedulers).

``--executor process|dask`` evaluates assignments in parallel (``--address`` names a Dask scheduler;
without it a local cluster runs on loopback); ``--results FILE`` streams points into an SQLite file
as they finish, and ``--resume`` continues it. When assignments fail, the others' summary is printed,
the failures are listed on stderr and the exit status is 1.
"""

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dcaccel import workloads
from dcaccel.cli.models import MODEL_HELP, resolve_model
from dcaccel.cli.table import format_table
from dcaccel.errors import DcaccelError
from dcaccel.exploration.executors import EXECUTORS

DEMO_MODEL = "conv-seed"
DEMO_IMPLEMENTATIONS = {"Conv": ["mv", "op", "lmv"]}
WRITERS = {
    ".csv": lambda results, path: results.to_csv(path, index=False),
    ".parquet": lambda results, path: results.to_parquet(path, index=False),
    ".json": lambda results, path: results.to_json(path, orient="records", indent=1),
}


@dataclass(frozen=True)
class BestPoint:
    """The winner of one (P, scheduler) column of the sweep, with the others' makespans."""

    pes: int
    scheduler: str
    best: str
    makespan: int
    lower_bound: int
    utilisation: float
    io_volume: int
    others: str  # "assignment: makespan" of the other assignments, best first


def register(subparsers) -> None:
    """Add the ``explore`` sub-command."""
    parser = subparsers.add_parser("explore", help="sweep implementations, PEs and schedulers; tables and plots")
    parser.add_argument("model", nargs="?", metavar="MODEL", help=MODEL_HELP.format("see dcaccel info"))
    parser.add_argument("--demo", action="store_true", help=f"explore {DEMO_MODEL} with Conv=mv,op,lmv")
    parser.add_argument(
        "--impl",
        action="append",
        type=_implementations,
        default=[],
        metavar="OP=NAME[,NAME...]",
        help="implementations to try for an op type (or a node, with --strategy per-node); repeatable",
    )
    parser.add_argument("--pes", type=_integers, default=None, help="PE counts, e.g. 1,2,4,8 (default: 1…128)")
    parser.add_argument("--scheduler", type=_names, default=["streaming", "list"], help="streaming,list")
    parser.add_argument("--onchip", type=_integers, default=[0], help="on-chip memory per block, elements")
    parser.add_argument("--granularity", default="task", help="task, coarse or tiles=T (default: task)")
    parser.add_argument("--strategy", default="per-op-type", help="per-op-type, per-node or greedy")
    parser.add_argument(
        "--edge-volume",
        default="exact",
        choices=("exact", "reference"),
        help="edge volume rule of the task DAG; 'reference' counts as the seed's tool did (default: exact)",
    )
    parser.add_argument(
        "--executor",
        default="local",
        choices=EXECUTORS,
        help="where assignments are evaluated: this process, a process pool, or a Dask cluster (default: local)",
    )
    parser.add_argument(
        "--address", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (default: a local cluster on loopback)"
    )
    parser.add_argument(
        "--workers", type=int, help="processes of the pool or of the local Dask cluster (default: cores)"
    )
    parser.add_argument("--results", type=Path, help="SQLite file that points are written to as they finish")
    parser.add_argument("--resume", action="store_true", help="continue --results, skipping the stored points")
    parser.add_argument("--out", type=Path, help="write every point to a .csv, .parquet or .json file")
    parser.add_argument("--plot", type=Path, help="write the makespan-vs-P plot (.png or .svg)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the sweep, print the summary, write the requested files."""
    from dcaccel.exploration.sweep import DEFAULT_PES, SweepError, explore

    if args.demo == bool(args.model):
        raise DcaccelError("give a MODEL or --demo (not both)")
    if args.resume and args.results is None:
        raise DcaccelError("--resume needs --results FILE")
    spec = DEMO_MODEL if args.demo else args.model
    workload = spec if spec in workloads.names() else resolve_model(spec)
    implementations = dict(DEMO_IMPLEMENTATIONS) if args.demo and not args.impl else dict(args.impl) or None
    if args.out is not None and args.out.suffix.lower() not in WRITERS:
        raise DcaccelError(f"--out {args.out}: unknown format (use one of {', '.join(WRITERS)})")
    status = 0
    try:
        results = explore(
            workload,
            implementations,
            pes=args.pes or DEFAULT_PES,
            scheduler=args.scheduler,
            onchip_memory=args.onchip,
            granularity=_granularity(args.granularity),
            strategy=args.strategy,
            edge_volume=args.edge_volume,
            executor=args.executor,
            address=args.address,
            workers=args.workers,
            results=args.results,
            resume=args.resume,
        )
    except SweepError as err:
        if err.results.empty:
            raise
        results, status = err.results, 1
        sys.stderr.write("".join(f"{line}\n" for line in [str(err), *failure_lines(err.failures)]))
    name = workload if isinstance(workload, str) else workload.name
    sys.stdout.write(f"{name}: {len(results)} points\n{format_table(best_per_column(results))}\n")
    if args.out is not None:
        write_results(results, args.out)
        sys.stdout.write(f"wrote {args.out}\n")
    if args.plot is not None:
        from dcaccel.exploration.plots import plot_makespan, save

        save(plot_makespan(results), args.plot)
        sys.stdout.write(f"wrote {args.plot}\n")
    return status


def write_results(results: pd.DataFrame, path: Path) -> None:
    """Write ``results`` to ``path`` in the format its suffix names."""
    WRITERS[path.suffix.lower()](results, path)


def failure_lines(failures) -> list[str]:
    """One line per failed assignment: the assignment and its error."""
    return [f"  {failure.assignment}: {failure.error}" for failure in failures]


def best_per_column(results: pd.DataFrame) -> list[BestPoint]:
    """Per (P, scheduler), at the smallest on-chip memory swept: the assignment with the least makespan."""
    data = results[results["onchip_memory"] == results["onchip_memory"].min()]
    rows = []
    for (pes, scheduler), group in data.groupby(["pes", "scheduler"], sort=True):
        ranked = group.sort_values(["makespan", "io_volume"], kind="stable")
        best = ranked.iloc[0]
        others = ", ".join(f"{row.assignment}: {row.makespan}" for row in ranked.iloc[1:].itertuples())
        rows.append(
            BestPoint(
                int(pes),
                str(scheduler),
                str(best["assignment"]),
                int(best["makespan"]),
                int(best["lower_bound"]),
                float(best["utilisation"]),
                int(best["io_volume"]),
                others,
            )
        )
    return rows


def _implementations(text: str) -> tuple[str, list[str]]:
    key, sep, names = text.partition("=")
    if not sep or not key or not names:
        raise argparse.ArgumentTypeError(f"expected OP=NAME[,NAME...], got '{text}'")
    return key, _names(names)


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _integers(text: str) -> list[int]:
    try:
        return [int(value) for value in _names(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{text}'") from None


def _granularity(text: str):
    if text.startswith("tiles="):
        return ("tiles", int(text.removeprefix("tiles=")))
    return text
