"""``dcaccel schedule DAG.json --pes P``: schedule a task DAG file and report makespan, bounds and I/O.

``--pes``, ``--scheduler``, ``--partitioning``, ``--onchip`` and ``--arch`` are the flags of every command
(:data:`dcaccel.cli.arguments.VOCABULARY`), one value each here: ``--onchip`` is the on-chip memory per block
in elements (0 with ``--arch``: the description's on-chip capacity). ``--arch`` also costs the
schedule on an accelerator description (:func:`dcaccel.cost.schedule.cost_schedule`); with it,
``--scheduler heft`` places the tasks on the description's unit kinds (HEFT, its PEs are the
units). Every argument is checked before the DAG is read.
"""

from __future__ import annotations

import argparse
import json
import sys

from dcaccel.architecture import load as load_architecture
from dcaccel.cli.arch import costs_lines
from dcaccel.cli.arguments import add_concept, check_output, study_default
from dcaccel.cost.learned import cost_source, learned_makespan, lowered_of, task_times
from dcaccel.cost.schedule import cost_schedule
from dcaccel.dag.taskdag import TaskDAG
from dcaccel.errors import DcaccelError
from dcaccel.scheduler import HETEROGENEOUS, PARTITIONINGS, SCHEDULERS, schedule

#: Formats the Gantt chart can be written in (matplotlib's backends here).
GANTT_FORMATS = (".png", ".svg", ".pdf")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "schedule",
        help="schedule a task DAG (JSON) on P PEs",
        description="Schedule a canonical task DAG (the JSON format of TaskDAG.to_json) on P processing elements.",
    )
    parser.add_argument("dag", metavar="DAG.json", help="task DAG file")
    add_concept(parser, "pes", one=True, required=True, default="none: required")
    add_concept(parser, "scheduler", one=True, choices=(*SCHEDULERS, HETEROGENEOUS), default=SCHEDULERS[0])
    add_concept(parser, "partitioning", choices=PARTITIONINGS)
    add_concept(parser, "onchip_memory", one=True)
    add_concept(parser, "arch", one=True, default="none: the abstract model only")
    add_concept(parser, "cost")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a summary")
    parser.add_argument("--gantt", metavar="FILE", help=f"also draw a Gantt chart ({', '.join(GANTT_FORMATS)})")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Schedule the DAG file ``args.dag`` and print its summary; every argument is checked first."""
    check_output("--gantt", args.gantt, GANTT_FORMATS)
    scheduler = args.scheduler or SCHEDULERS[0]
    partitioning = args.partitioning or study_default("partitioning")
    if scheduler == HETEROGENEOUS and args.arch is None:
        raise DcaccelError(f"--scheduler {HETEROGENEOUS} places tasks on an architecture's units: give --arch")
    arch = None if args.arch is None else load_architecture(args.arch)
    learned = cost_source(args.cost or study_default("cost"))
    dag = TaskDAG.from_json(args.dag)
    onchip = args.onchip_memory or (0 if arch is None else arch.onchip_capacity_elements)
    placed_on = arch if scheduler == HETEROGENEOUS else None
    result = schedule(dag, args.pes, scheduler, partitioning, onchip=onchip, arch=placed_on)
    if args.gantt:
        from dcaccel.scheduler.gantt import save_gantt

        save_gantt(result, args.gantt)
    summary = result.summary()
    if arch is not None:
        summary["architecture"] = cost_schedule(result, arch).summary()
    if learned is not None:
        times = task_times(lowered_of(dag), dag, learned)
        summary["learned_seconds"] = learned_makespan(result, times)
    if args.json:
        sys.stdout.write(json.dumps(summary) + "\n")
    else:
        sys.stdout.write(_readable(summary))
    return 0


def _readable(summary: dict) -> str:
    io = summary["io"]
    lines = [
        f"{summary['dag']}: {summary['scheduler']} schedule on {summary['pes']} PEs"
        + (f" ({summary['partitioning']} partitioning)" if summary["scheduler"] == "streaming" else ""),
        f"  makespan       {summary['makespan']:,} cycles (lower bound {summary['lower_bound']:,})",
        f"  work / depth   {summary['work']:,} / {summary['depth']:,}; "
        f"streaming depth {float(summary['streaming_depth']):,.1f}",
        f"  speedup        {summary['speedup']:.2f} (utilisation {summary['utilisation']:.1%})",
        f"  buffer I/O     {summary['io_volume']:,} elements",
        f"  I/O split      off-chip {io['off_chip']:,}, on-chip {io['on_chip']:,}, streamed {io['streamed']:,} "
        f"(on-chip capacity {io['onchip_capacity']:,} elements)",
    ]
    if summary["scheduler"] == "streaming":
        lines.append(
            f"  blocks         {summary['num_blocks']}; refinement rounds {summary['refinement_iterations']}; "
            f"streaming edges {summary['streaming_edges']}; deadlock buffer space {summary['buffer_space_deadlock']}"
        )
    if "architecture" in summary:
        lines += costs_lines(summary["architecture"])
    if "learned_seconds" in summary:
        learned = summary["learned_seconds"] * 1e6
        lines.append(f"  learned        {learned:,.1f} us on this CPU (the learned cost model)")
    return "\n".join(lines) + "\n"
