"""``dcaccel explore MODEL``: sweep implementations × PEs × schedulers × on-chip memory.

The flags that set a field of :class:`dcaccel.Study` are the vocabulary every command shares
(:data:`dcaccel.cli.arguments.VOCABULARY`, ``docs/cli.md``); the command builds the study of the flags given
(the Study's defaults for the others: P the designs' units when every ``--arch`` fixes them, as
:meth:`dcaccel.Study.pe_counts` resolves it for every front door) and runs it
with :func:`dcaccel.explore`. Prints the best implementation per (P, scheduler), writes all points with
``--out`` (CSV, Parquet or JSON by suffix) and a makespan-vs-P plot with ``--plot`` (the cycles on the
architecture with ``--arch``). ``--demo`` sweeps the seed's convolution (conv-seed, Conv as mv / op / lmv,
P = 1…128, both schedulers). ``--objective`` is what the greedy strategy (and the mapping search) minimises:
``makespan`` the cycles on the architecture, ``energy`` its pJ, or a numeric column.

``--executor process|dask`` evaluates assignments in parallel (``--address`` names a Dask scheduler;
without it a local cluster runs on loopback); ``--results FILE`` streams points into an SQLite file
as they finish, and ``--resume`` continues it. When assignments fail (some or all), the others'
summary is printed, the failures are listed on stderr and the exit status is 1.

``--arch NAME|FILE`` (repeatable) costs every point on each accelerator description, and
``--arch-param PATH=V[,V...]`` (repeatable) sweeps each of them over the product of the values; the
summary ranks by the cycles on the architecture, one table per architecture when there are several.
``--scheduler heft`` places tasks on the architecture's unit kinds (HEFT). ``--policy
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
from dcaccel.cli.arguments import (
    PAIRS,
    SWITCHES,
    VOCABULARY,
    add_concept,
    check_output,
)
from dcaccel.cli.models import MODEL_HELP, add_fold_argument, add_symbols_argument, check_choice_keys, resolve_model
from dcaccel.cli.table import format_table
from dcaccel.errors import DcaccelError
from dcaccel.exploration.assignments import STRATEGIES
from dcaccel.exploration.mapping import LAYER, MAPPING
from dcaccel.exploration.store import SUFFIXES as RESULT_SUFFIXES
from dcaccel.scheduler import HETEROGENEOUS, SCHEDULERS

DEMO_MODEL = "conv-seed"
DEMO_IMPLEMENTATIONS = {"Conv": ["mv", "op", "lmv"]}
WRITERS = {
    ".csv": lambda results, path: results.to_csv(path, index=False),
    ".parquet": lambda results, path: results.to_parquet(path, index=False),
    ".json": lambda results, path: results.to_json(path, orient="records", indent=1),
}
PLOT_SUFFIXES = (".png", ".svg")
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
    add_concept(parser, "implementations")
    add_concept(parser, "strategy", choices=(*STRATEGIES, MAPPING))
    add_concept(parser, "max_assignments")
    add_concept(parser, "objective")
    add_concept(parser, "arch")
    add_concept(parser, "arch_params")
    add_concept(parser, "pes")
    add_concept(parser, "scheduler", default=f"{','.join(SCHEDULERS)}; {HETEROGENEOUS} with a --policy other than none")
    add_concept(parser, "onchip_memory")
    add_concept(parser, "partitioning")
    add_concept(parser, "partition_policy", old="--partition-policy")
    add_concept(parser, "min_nodes")
    add_concept(parser, "min_work_share")
    add_concept(parser, "partition_objective")
    add_concept(parser, "granularity")
    add_concept(parser, "edge_volume")
    add_concept(parser, "executor")
    add_concept(parser, "address")
    add_concept(parser, "workers")
    add_concept(parser, "results")
    add_concept(parser, "resume")
    add_concept(parser, "compose")
    add_concept(parser, "strict")
    add_concept(parser, "cost")
    parser.add_argument("--out", type=Path, metavar="FILE", help=f"write every point to a {', '.join(WRITERS)} file")
    parser.add_argument(
        "--plot",
        type=Path,
        metavar="FILE",
        help=f"write the makespan-vs-P plot ({', '.join(PLOT_SUFFIXES)}): the cycles on the architecture with --arch",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Check every argument, run the sweep, print the summary, write the requested files."""
    from dcaccel.exploration.grid import architectures
    from dcaccel.exploration.run import SweepError
    from dcaccel.exploration.study import NO_PARTITION, Study
    from dcaccel.exploration.sweep import explore

    if args.demo == bool(args.model):
        raise DcaccelError("give a MODEL or --demo (not both)")
    if args.resume and args.results is None:
        raise DcaccelError("--resume needs --results FILE")
    check_output("--out", args.out, WRITERS)
    check_output("--plot", args.plot, PLOT_SUFFIXES)
    check_output("--results", args.results, RESULT_SUFFIXES)
    if args.strategy == MAPPING and (args.plot is not None or args.partition_policy):
        raise DcaccelError("--strategy mapping: no --plot or --policy (its rows are mappings)")
    fields = study_fields(args)
    spec = DEMO_MODEL if args.demo else args.model
    if args.demo and not args.implementations:
        fields["implementations"] = DEMO_IMPLEMENTATIONS
    if args.scheduler is None and any(policy != NO_PARTITION for policy in args.partition_policy or ()):
        fields["scheduler"] = [HETEROGENEOUS]
    study = Study.of("explore", models=[spec], **{name: value for name, value in fields.items() if value is not None})
    architectures(study.arch, study.arch_params)  # a design that cannot be read is refused before the model loads
    builtin = spec in workloads.names() and not args.symbols and args.fold  # else the workers get it built
    workload = spec if builtin else resolve_model(spec, args.symbols, args.fold)
    if study.implementations:
        check_choice_keys(workloads.get(spec) if builtin else workload, study.implementations)
    status = 0
    try:
        results = explore(workload, study=study)
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

        save(plot_makespan(results, cycles=args.arch is not None), args.plot)
        sys.stdout.write(f"wrote {args.plot}\n")
    return status


def study_fields(args: argparse.Namespace) -> dict:
    """The Study fields the arguments give (None: not given, the Study's default), ``--impl`` and
    ``--arch-param`` pairs merged."""
    fields = {name: getattr(args, name) for name in (*VOCABULARY, *SWITCHES) if hasattr(args, name)}
    for name in PAIRS:
        fields[name] = merge(fields[name] or ()) or None
    return fields


def write_results(results: pd.DataFrame, path: Path) -> None:
    """Write ``results`` to ``path`` in the format its suffix names."""
    WRITERS[path.suffix.lower()](results, path)


def merge(pairs: Iterable[tuple[str, Iterable]]) -> dict[str, list]:
    """The ``--impl`` (or ``--arch-param``) pairs as key → names (values), those of a repeated key merged
    (each once, in the order given)."""
    merged: dict[str, list] = {}
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
