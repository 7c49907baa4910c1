"""``dcaccel explore MODEL``: sweep implementations × PEs × schedulers × on-chip memory.

Prints the best implementation per (P, scheduler), writes all points with ``--out`` (CSV, Parquet
or JSON by suffix) and a makespan-vs-P plot with ``--plot``. ``--demo`` sweeps the seed's
convolution (conv-seed, Conv as mv / op / lmv, P = 1…128, both schedulers).

``--executor process|dask`` evaluates assignments in parallel (``--address`` names a Dask scheduler;
without it a local cluster runs on loopback); ``--results FILE`` streams points into an SQLite file
as they finish, and ``--resume`` continues it. When assignments fail (some or all), the others'
summary is printed, the failures are listed on stderr and the exit status is 1.

``--arch NAME|FILE`` (repeatable) costs every point on each accelerator description, and
``--arch-param PATH=V[,V...]`` (repeatable) sweeps each of them over the product of the values; the
summary ranks by the cycles on the architecture, one table per architecture when there are several.
``--scheduler heft`` places tasks on the architecture's unit kinds (HEFT). ``--partition-policy
greedy,min-region,cost`` (repeatable or a comma list; ``none`` is the plain pipeline) partitions every
assignment between each architecture's host and its accelerator (``dcaccel partition``) and schedules it
with HEFT (the default scheduler when a policy other than ``none`` is given; another scheduler gives
points only with ``none``, and is refused otherwise); the summary has one table per architecture and
policy. Beyond eight such tables it ranks them instead: the best point of each, the ten fewest cycles
shown.

Every argument is checked before the sweep starts (all but the ``--impl`` keys before the model is
loaded): a sweep never runs and then fails on an output path, a number or an ``--impl`` key (a key
naming no node or op type of the model is an error, with the closest name suggested). Repeated
``--impl`` for one key merge their names. An op with no canonical implementation is lowered as one
opaque task (one warning names such nodes; the ``opaque_tasks`` and ``opaque_work_share`` columns count
them); ``--strict`` refuses the model instead, before the sweep.
"""

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dcaccel import workloads
from dcaccel.architecture import DEFAULT as DEFAULT_ARCHITECTURE
from dcaccel.architecture import parse_parameter
from dcaccel.cli.arguments import bounded_int, bounded_ints, check_output, non_negative_float, suggest
from dcaccel.cli.models import (
    MODEL_HELP,
    add_fold_argument,
    add_strict_argument,
    add_symbols_argument,
    check_choice_keys,
    resolve_model,
)
from dcaccel.cli.table import format_table
from dcaccel.dag.extract import Granularity
from dcaccel.errors import DcaccelError
from dcaccel.exploration.assignments import STRATEGIES
from dcaccel.exploration.executors import EXECUTORS
from dcaccel.exploration.mapping import LAYER, MAPPING
from dcaccel.exploration.points import SWEEP_SCHEDULERS
from dcaccel.exploration.store import MAX_INTEGER
from dcaccel.exploration.store import SUFFIXES as RESULT_SUFFIXES
from dcaccel.partitioning import OBJECTIVES as PARTITION_OBJECTIVES
from dcaccel.scheduler import SCHEDULERS

DEMO_MODEL = "conv-seed"
DEMO_IMPLEMENTATIONS = {"Conv": ["mv", "op", "lmv"]}
WRITERS = {
    ".csv": lambda results, path: results.to_csv(path, index=False),
    ".parquet": lambda results, path: results.to_parquet(path, index=False),
    ".json": lambda results, path: results.to_json(path, orient="records", indent=1),
}
PLOT_SUFFIXES = (".png", ".svg")
#: The most PEs a sweep schedules on (the schedulers keep per-PE state: 2**20 PEs take a few seconds).
MAX_PES = 2**20
#: How many other assignments a summary row names before "+N more".
OTHERS_SHOWN = 3
#: The most tables a summary prints, one per architecture and partition policy; beyond, one ranking.
TABLES_SHOWN = 8
#: How many rows that ranking shows before "+N more".
DESIGNS_SHOWN = 10
#: The values a summary groups results by, with how a table's heading and the ranking name them.
GROUPS = {"architecture": ("on", "architectures"), "partition_policy": ("partition", "partition policies")}


@dataclass(frozen=True)
class BestPoint:
    """The winner of one (P, scheduler) column of the sweep, with the others' makespans."""

    pes: int
    scheduler: str
    best: str
    makespan: int  # in the abstract model's cycles (one element per cycle and port)
    cycles: int  # the makespan on the sweep's architecture (equal to makespan on ``abstract``)
    lower_bound: int
    utilisation: float
    io_volume: int
    others: str  # "assignment: cycles" of the next OTHERS_SHOWN assignments, best first, then "+N more"


def register(subparsers) -> None:
    """Add the ``explore`` sub-command."""
    parser = subparsers.add_parser("explore", help="sweep implementations, PEs and schedulers; tables and plots")
    parser.add_argument("model", nargs="?", metavar="MODEL", help=MODEL_HELP.format("see dcaccel info"))
    add_symbols_argument(parser)
    add_fold_argument(parser)
    parser.add_argument("--demo", action="store_true", help=f"explore {DEMO_MODEL} with Conv=mv,op,lmv")
    parser.add_argument(
        "--impl",
        action="append",
        type=_implementations,
        default=[],
        metavar="KEY=NAME[,NAME...]",
        help="implementations to try for an op type or a node name (a node name wins over its op type); "
        "repeatable, repeats of a key merge",
    )
    parser.add_argument(
        "--pes",
        type=bounded_ints(1, MAX_PES),
        default=None,
        metavar="P[,P...]",
        help=f"PE counts, at most {MAX_PES} (default: 1,2,4,…,128)",
    )
    parser.add_argument(
        "--scheduler",
        type=_schedulers,
        metavar="NAME[,NAME...]",
        help=f"schedulers: {', '.join(SWEEP_SCHEDULERS)} ({SWEEP_SCHEDULERS[-1]}: on the architecture's unit kinds; "
        f"default: {','.join(SCHEDULERS)}, with --partition-policy {SWEEP_SCHEDULERS[-1]})",
    )
    parser.add_argument(
        "--partition-policy",
        action="append",
        type=_policies,
        default=[],
        metavar="POLICY[,POLICY...]",
        help="partition each assignment between the architectures' host and accelerator: none (the plain "
        "pipeline), greedy, min-region, cost; repeatable (default: none)",
    )
    parser.add_argument(
        "--min-nodes", type=bounded_int(0), default=2, help="min-region: fewest operators (default: %(default)d)"
    )
    parser.add_argument(
        "--min-work-share",
        type=non_negative_float,
        default=0.05,
        help="min-region: least share of the work (default: %(default)g)",
    )
    parser.add_argument(
        "--partition-objective",
        default="makespan",
        choices=PARTITION_OBJECTIVES,
        help="what the cost policy minimises: cycles, pJ or their product (default: %(default)s)",
    )
    parser.add_argument(
        "--onchip",
        type=bounded_ints(0, MAX_INTEGER),
        default=[0],
        metavar="ELEMENTS[,ELEMENTS...]",
        help="on-chip memory per block, in elements (default: 0)",
    )
    parser.add_argument(
        "--arch",
        action="append",
        default=[],
        metavar="NAME|FILE",
        help="accelerator description the architecture columns are computed on (dcaccel arch list; "
        f"default: {DEFAULT_ARCHITECTURE}); repeatable; with --onchip 0 its on-chip capacity places the buffers",
    )
    parser.add_argument(
        "--arch-param",
        action="append",
        type=_arch_parameter,
        default=[],
        metavar="PATH=VALUE[,VALUE...]",
        help="sweep a field of the architectures, e.g. offchip.bandwidth_bytes_per_cycle=8,16 or "
        "units.pe.count=16,64; repeatable: the product of the values",
    )
    parser.add_argument(
        "--granularity",
        type=_granularity,
        default="task",
        metavar="task|coarse|tiles=T",
        help="one task per iteration of a task map (default), one per task map, or T per task map",
    )
    parser.add_argument(
        "--strategy",
        default="per-op-type",
        choices=(*STRATEGIES, MAPPING),
        help="the product over the --impl keys, over the nodes they cover, one node at a time, or the mapping "
        "search (dcaccel map: the best mapping per layer and the whole network, by makespan)",
    )
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
        "--workers",
        type=bounded_int(1),
        metavar="N",
        help="processes of the pool or of the local Dask cluster (default: cores)",
    )
    parser.add_argument(
        "--results",
        type=Path,
        metavar="FILE",
        help=f"SQLite file ({', '.join(RESULT_SUFFIXES)}) that points are written to as they finish",
    )
    parser.add_argument("--resume", action="store_true", help="continue --results, skipping the stored points")
    parser.add_argument(
        "--no-compose",
        dest="compose",
        action="store_false",
        help="lower every assignment whole instead of composing its DAG from the nodes' fragments (same DAGs)",
    )
    add_strict_argument(parser)
    parser.add_argument("--out", type=Path, metavar="FILE", help=f"write every point to a {', '.join(WRITERS)} file")
    parser.add_argument(
        "--plot", type=Path, metavar="FILE", help=f"write the makespan-vs-P plot ({', '.join(PLOT_SUFFIXES)})"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Check every argument, run the sweep, print the summary, write the requested files."""
    from dcaccel.exploration.executors import check_executor
    from dcaccel.exploration.grid import architectures
    from dcaccel.exploration.run import SweepError
    from dcaccel.exploration.study import DEFAULT_PES, NO_PARTITION
    from dcaccel.exploration.sweep import explore

    if args.demo == bool(args.model):
        raise DcaccelError("give a MODEL or --demo (not both)")
    if args.resume and args.results is None:
        raise DcaccelError("--resume needs --results FILE")
    check_executor(args.executor, args.address, args.workers)
    check_output("--out", args.out, WRITERS)
    check_output("--plot", args.plot, PLOT_SUFFIXES)
    check_output("--results", args.results, RESULT_SUFFIXES)
    if args.strategy == MAPPING and (args.plot is not None or args.results is not None or args.partition_policy):
        raise DcaccelError("--strategy mapping: no --plot, --results or --partition-policy (its rows are mappings)")
    archs = architectures(args.arch or [DEFAULT_ARCHITECTURE], merge(args.arch_param))
    policies = [policy for policies in args.partition_policy for policy in policies] or None
    partitioned = any(policy != NO_PARTITION for policy in policies or ())
    schedulers = args.scheduler or ([SWEEP_SCHEDULERS[-1]] if partitioned else list(SCHEDULERS))
    spec = DEMO_MODEL if args.demo else args.model
    implementations = dict(DEMO_IMPLEMENTATIONS) if args.demo and not args.impl else merge(args.impl) or None
    builtin = spec in workloads.names() and not args.symbols and args.fold  # else the workers get it built
    workload = spec if builtin else resolve_model(spec, args.symbols, args.fold)
    if implementations:
        check_choice_keys(workloads.get(spec) if builtin else workload, implementations)
    status = 0
    try:
        results = explore(
            workload,
            implementations,
            pes=args.pes or DEFAULT_PES,
            scheduler=schedulers,
            onchip_memory=args.onchip,
            granularity=args.granularity,
            strategy=args.strategy,
            edge_volume=args.edge_volume,
            executor=args.executor,
            address=args.address,
            workers=args.workers,
            results=args.results,
            resume=args.resume,
            strict=args.strict,
            arch=archs,
            compose=args.compose,
            partition_policy=policies,
            min_nodes=args.min_nodes,
            min_work_share=args.min_work_share,
            partition_objective=args.partition_objective,
        )
    except SweepError as err:
        results, status = err.results, 1
        sys.stderr.write("".join(f"{line}\n" for line in [str(err), *failure_lines(err.failures)]))
    name = workload if isinstance(workload, str) else workload.name
    table = mapping_summary(results) if args.strategy == MAPPING else summary(results)
    sys.stdout.write(f"{name}: {len(results)} points\n{table}\n")
    if results.empty:
        if args.out is not None or args.plot is not None:
            sys.stderr.write("no point finished: nothing written\n")
        return status
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


def merge(pairs: Iterable[tuple[str, list[str]]]) -> dict[str, list[str]]:
    """The ``--impl`` pairs as key → implementation names, the names of a repeated key merged (each once,
    in the order given)."""
    merged: dict[str, list[str]] = {}
    for key, names in pairs:
        merged[key] = list(dict.fromkeys([*merged.get(key, []), *names]))
    return merged


def failure_lines(failures) -> list[str]:
    """One line per failed assignment: the assignment and its error."""
    return [f"  {failure.assignment}: {failure.error}" for failure in failures]


def summary(results: pd.DataFrame) -> str:
    """The table of :func:`best_per_column`; one per architecture and partition policy, headed by them,
    when the results hold several; beyond :data:`TABLES_SHOWN` of them, the ranking of :func:`best_designs`."""
    keys = [key for key in GROUPS if key in results and results[key].nunique() > 1]
    if not keys:
        return format_table(best_per_column(results))
    groups = list(results.groupby(keys, sort=False))
    if len(groups) > TABLES_SHOWN:
        return ranking(groups, keys)
    tables = []
    for values, group in groups:
        heading = ", ".join(f"{GROUPS[key][0]} {value}" for key, value in zip(keys, values, strict=True))
        tables.append(f"{heading}:\n{format_table(best_per_column(group))}")
    return "\n".join(tables)


@dataclass(frozen=True)
class BestDesign:
    """The best point of one architecture and partition policy over every P and scheduler."""

    architecture: str
    partition_policy: str
    pes: int
    scheduler: str
    best: str
    cycles: int
    energy_pj: float


def best_designs(groups) -> list[BestDesign]:
    """Per (architecture, partition policy) group of the results, its best point over every P and scheduler
    at the smallest on-chip memory (as :func:`best_per_column` ranks), fewest cycles first (ties: less energy)."""
    designs = []
    for _, group in groups:
        ranked, cycles = _ranked(group)
        best = ranked.iloc[0]
        designs.append(
            BestDesign(
                str(best["architecture"]),
                str(best["partition_policy"]),
                int(best["pes"]),
                str(best["scheduler"]),
                str(best["assignment"]),
                int(best[cycles]),
                float(best["energy_pj"]),
            )
        )
    return sorted(designs, key=lambda design: (design.cycles, design.energy_pj))


def ranking(groups, keys: list[str]) -> str:
    """The :data:`DESIGNS_SHOWN` best of :func:`best_designs`, headed by what they rank, then "+N more"."""
    designs = best_designs(groups)
    kinds = " and ".join(GROUPS[key][1] for key in keys)
    lines = [f"the best point of each of {len(designs)} {kinds}, fewest cycles first:"]
    lines.append(format_table(designs[:DESIGNS_SHOWN]))
    if len(designs) > DESIGNS_SHOWN:
        lines.append(f"+{len(designs) - DESIGNS_SHOWN} more (--out writes every point)")
    return "\n".join(lines)


@dataclass(frozen=True)
class MappedPoint:
    """One row of ``--strategy mapping``: a layer's best mapping or the whole network's."""

    architecture: str
    layer: str  # the node, or "network"
    cycles: int
    energy_pj: float
    mapping: str


def mapping_summary(results: pd.DataFrame) -> str:
    """The rows of a mapping search: per architecture and on-chip size, each layer's best mapping and the
    network's implementations with its total cycles and energy."""
    rows = [
        MappedPoint(
            str(row.architecture),
            str(row.assignment).split(" = ")[0] if row.granularity == LAYER else "network",
            int(row.makespan_cycles),
            float(row.energy_pj),
            str(row.assignment).split(" = ", 1)[1] if row.granularity == LAYER else str(row.assignment),
        )
        for row in results.itertuples(index=False)
    ]
    return format_table(rows)


def best_per_column(results: pd.DataFrame) -> list[BestPoint]:
    """Per (P, scheduler), at the smallest on-chip memory swept: the assignment with the least makespan on
    the sweep's architecture (``makespan_cycles``; the abstract ``makespan`` where that column is absent)."""
    data, cycles = _ranked(results)
    rows = []
    for (pes, scheduler), ranked in data.groupby(["pes", "scheduler"], sort=True):
        best = ranked.iloc[0]
        others = [f"{row.assignment}: {getattr(row, cycles)}" for row in ranked.iloc[1 : 1 + OTHERS_SHOWN].itertuples()]
        if len(ranked) > 1 + OTHERS_SHOWN:
            others.append(f"+{len(ranked) - 1 - OTHERS_SHOWN} more")
        rows.append(
            BestPoint(
                int(pes),
                str(scheduler),
                str(best["assignment"]),
                int(best["makespan"]),
                int(best[cycles]),
                int(best["lower_bound"]),
                float(best["utilisation"]),
                int(best["io_volume"]),
                ", ".join(others),
            )
        )
    return rows


def _ranked(results: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The points of ``results`` at the smallest on-chip memory swept, best first: the least makespan on the
    sweep's architecture (``makespan_cycles``; the abstract ``makespan`` where that column is absent), then
    the least abstract makespan and I/O volume; and the name of the cycles column."""
    data = results[results["onchip_memory"] == results["onchip_memory"].min()]
    cycles = "makespan_cycles" if "makespan_cycles" in data else "makespan"
    return data.sort_values([cycles, "makespan", "io_volume"], kind="stable"), cycles


def _implementations(text: str) -> tuple[str, list[str]]:
    """One ``--impl KEY=NAME[,NAME...]``."""
    key, sep, names = text.partition("=")
    if not sep or not key.strip() or not _names(names):
        raise argparse.ArgumentTypeError(f"expected KEY=NAME[,NAME...], got {text!r}")
    return key.strip(), _names(names)


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _check_known(names: list[str], what: str, known) -> None:
    """Refuse the first of ``names`` that is not one of ``known`` (a ``what``), suggesting the closest."""
    for name in names:
        if name not in known:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {name!r} (expected {', '.join(known)}){suggest(name, known)}"
            )


def _policies(text: str) -> list[str]:
    """``--partition-policy POLICY[,POLICY...]``, each one of the sweep's partition policies."""
    from dcaccel.exploration.study import PARTITION_POLICIES

    names = _names(text)
    if not names:
        raise argparse.ArgumentTypeError(f"expected one or more of {', '.join(PARTITION_POLICIES)}, got {text!r}")
    _check_known(names, "partition policy", PARTITION_POLICIES)
    return names


def _schedulers(text: str) -> list[str]:
    """``--scheduler NAME[,NAME...]``, each one of :data:`SWEEP_SCHEDULERS`."""
    names = _names(text)
    if not names:
        raise argparse.ArgumentTypeError(f"expected {','.join(SCHEDULERS)} or one of them, got {text!r}")
    _check_known(names, "scheduler", SWEEP_SCHEDULERS)
    return list(dict.fromkeys(names))


def _arch_parameter(text: str) -> tuple[str, list]:
    """One ``--arch-param PATH=VALUE[,VALUE...]`` (values are YAML scalars)."""
    try:
        path, values = parse_parameter(text)
    except DcaccelError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return path, list(values)


def _granularity(text: str) -> Granularity:
    """``--granularity``: task, coarse or tiles=T (T ≥ 1)."""
    try:
        return Granularity.parse(text)
    except DcaccelError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
