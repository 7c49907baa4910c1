"""``dcaccel schedule DAG.json --pes P``: schedule a task DAG file and report makespan, bounds and I/O."""

from __future__ import annotations

import argparse
import json
import sys

from dcaccel.dag.taskdag import TaskDAG
from dcaccel.errors import DcaccelError
from dcaccel.scheduler import PARTITIONINGS, SCHEDULERS, schedule


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "schedule",
        help="schedule a task DAG (JSON) on P PEs",
        description="Schedule a canonical task DAG (the JSON format of TaskDAG.to_json) on P processing elements.",
    )
    parser.add_argument("dag", metavar="DAG.json", help="task DAG file")
    parser.add_argument("--pes", type=int, required=True, help="number of processing elements")
    parser.add_argument("--scheduler", choices=SCHEDULERS, default="streaming")
    parser.add_argument("--partitioning", choices=PARTITIONINGS, default="relaxed", help="streaming scheduler only")
    parser.add_argument("--onchip", type=int, default=0, metavar="BYTES", help="on-chip memory per block, in bytes")
    parser.add_argument(
        "--element-bytes", type=int, default=4, metavar="N", help="bytes per element for --onchip (default 4)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a summary")
    parser.add_argument("--gantt", metavar="FILE", help="also draw a Gantt chart (.png or .svg)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.element_bytes < 1:
        raise DcaccelError(f"--element-bytes must be positive, got {args.element_bytes}")
    if args.onchip < 0:
        raise DcaccelError(f"--onchip must be non-negative, got {args.onchip}")
    dag = TaskDAG.from_json(args.dag)
    result = schedule(dag, args.pes, args.scheduler, args.partitioning, onchip=args.onchip // args.element_bytes)
    if args.gantt:
        from dcaccel.scheduler.gantt import save_gantt

        save_gantt(result, args.gantt)
    summary = result.summary()
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
    return "\n".join(lines) + "\n"
