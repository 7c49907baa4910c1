"""``dcaccel schedule DAG.json --pes P``: schedule a task DAG file and report makespan, bounds and I/O.

``--onchip`` is the on-chip memory per block in elements, as in ``dcaccel explore`` (the model
counts elements; 0 with ``--arch``: the description's on-chip capacity). ``--arch`` also costs the
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
from dcaccel.cli.arguments import bounded_int, check_output
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
    parser.add_argument("--pes", type=bounded_int(1), required=True, metavar="P", help="number of processing elements")
    parser.add_argument(
        "--scheduler",
        choices=(*SCHEDULERS, HETEROGENEOUS),
        default="streaming",
        help=f"{HETEROGENEOUS}: on the unit kinds of --arch (default: streaming)",
    )
    parser.add_argument("--partitioning", choices=PARTITIONINGS, default="relaxed", help="streaming scheduler only")
    parser.add_argument(
        "--onchip",
        type=bounded_int(0),
        default=0,
        metavar="ELEMENTS",
        help="on-chip memory per block, in elements (as dcaccel explore --onchip; default 0)",
    )
    parser.add_argument(
        "--arch", metavar="NAME|FILE", help="also cost the schedule on an accelerator description (dcaccel arch list)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a summary")
    parser.add_argument("--gantt", metavar="FILE", help=f"also draw a Gantt chart ({', '.join(GANTT_FORMATS)})")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Schedule the DAG file ``args.dag`` and print its summary; every argument is checked first."""
    check_output("--gantt", args.gantt, GANTT_FORMATS)
    if args.scheduler == HETEROGENEOUS and args.arch is None:
        raise DcaccelError(f"--scheduler {HETEROGENEOUS} places tasks on an architecture's units: give --arch")
    arch = None if args.arch is None else load_architecture(args.arch)
    dag = TaskDAG.from_json(args.dag)
    onchip = args.onchip or (0 if arch is None else arch.onchip_capacity_elements)
    placed_on = arch if args.scheduler == HETEROGENEOUS else None
    result = schedule(dag, args.pes, args.scheduler, args.partitioning, onchip=onchip, arch=placed_on)
    if args.gantt:
        from dcaccel.scheduler.gantt import save_gantt

        save_gantt(result, args.gantt)
    summary = result.summary()
    if arch is not None:
        summary["architecture"] = cost_schedule(result, arch).summary()
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
    return "\n".join(lines) + "\n"
