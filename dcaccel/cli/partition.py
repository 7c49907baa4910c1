"""``dcaccel partition MODEL --arch X``: which operators the accelerator runs, which the host, and what it costs.

Prints per operator where it runs and why (supported, pattern, unsupported op, violated constraint,
region too small), the number of regions, the shares of MACs and work offloaded, the volume crossing the
host↔accelerator links, and the end-to-end makespan and energy split between host, accelerator and link
(:mod:`dcaccel.partitioning`). ``--json`` prints one object instead; ``--dot`` writes the operator
graph with nodes coloured by target. The ``cost`` policy shows its progress over the regions it tries
when that takes longer than a second.
"""

import argparse
import inspect
import json
import sys
from dataclasses import dataclass

from dcaccel.cli.arguments import add_concept, check_output, study_default
from dcaccel.cli.models import (
    add_impl_argument,
    add_model_argument,
    model_with_choices,
)
from dcaccel.cli.table import format_table
from dcaccel.partitioning import OBJECTIVES, Partition, partition
from dcaccel.transforms.offload import POLICIES, op_instances

#: The policy of ``dcaccel.partition`` and of ``--policy`` when it is not given.
DEFAULT_POLICY = inspect.signature(partition).parameters["policy"].default
#: P when ``--pes`` is not given: ``dcaccel.partition``'s, the count of a unit kind the design leaves open.
DEFAULT_PES = inspect.signature(partition).parameters["pes"].default

#: The options of the min-region policy (Study fields named as ``dcaccel.partition`` takes them).
MIN_REGION = ("min_nodes", "min_work_share")

#: Fill colours of the DOT graph: the host, then the accelerator's unit kinds in turn.
HOST_COLOUR = "lightgrey"
KIND_COLOURS = ("lightblue", "palegreen", "khaki", "plum", "lightsalmon")


def register(subparsers) -> None:
    """Add the ``partition`` sub-command."""
    parser = subparsers.add_parser("partition", help="split a model between an accelerator and its host")
    add_model_argument(parser)
    add_concept(parser, "arch", one=True, required=True, default="none: a partition needs a design with a host")
    add_concept(parser, "partition_policy", one=True, choices=POLICIES, default=DEFAULT_POLICY)
    add_concept(parser, "partition_objective", choices=OBJECTIVES, old="--objective")
    add_concept(parser, "pes", one=True, default=f"{DEFAULT_PES}, for a unit kind the design leaves open")
    add_concept(parser, "min_nodes")
    add_concept(parser, "min_work_share")
    add_impl_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--dot", metavar="FILE.dot", help="write the operator graph coloured by target")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Partition the model and print the report."""
    check_output("--dot", args.dot, (".dot", ".gv"))
    workload, choices = model_with_choices(args)
    result = partition(
        workload,
        args.arch,
        args.partition_policy or DEFAULT_POLICY,
        choices=choices,
        pes=args.pes or DEFAULT_PES,
        **{name: study_default(name) if getattr(args, name) is None else getattr(args, name) for name in MIN_REGION},
        objective=args.partition_objective or study_default("partition_objective"),
        progress=None,
    )
    if args.dot:
        with open(args.dot, "w", encoding="utf-8") as out:
            out.write(to_dot(result, workload))
    if args.json:
        sys.stdout.write(json.dumps(result.summary(), indent=2) + "\n")
    else:
        sys.stdout.write(format_report(result) + "\n")
    return 0


@dataclass(frozen=True)
class _Row:
    node: str
    op: str
    target: str
    region: str
    reason: str


def format_report(result: Partition) -> str:
    """Per operator where it runs and why, then the totals."""
    summary = result.summary()
    rows = [_Row(n.name, n.op, n.target, "-" if n.region is None else str(n.region), n.reason) for n in result.nodes]
    split = summary["energy_split_pj"]
    return "\n".join(
        [
            format_table(rows),
            f"{result.workload} on {result.architecture}, policy {result.policy}: "
            f"{summary['offloaded_regions']} of {len(result.regions)} region(s) offloaded, "
            f"{sum(n.offloaded for n in result.nodes)} of {len(result.nodes)} operators",
            f"offloaded: {summary['offloaded_mac_share']:.1%} of the MACs, "
            f"{summary['offloaded_work_share']:.1%} of the work",
            f"transfers: {summary['transfer_tasks']} task(s), {summary['transfer_volume']} elements over the host link",
            f"makespan: {summary['makespan']} cycles ({summary['makespan_us']:.6g} us)",
            f"energy: {summary['energy_pj']:.6g} pJ (host {split['host']:.6g}, accelerator {split['accelerator']:.6g}, "
            f"link {split['link']:.6g})",
        ]
    )


def to_dot(result: Partition, workload) -> str:
    """The operator graph (an edge per tensor one operator reads from another) with nodes filled by target."""
    kinds = list(dict.fromkeys(n.target for n in result.nodes if n.offloaded))
    colour = {kind: KIND_COLOURS[i % len(KIND_COLOURS)] for i, kind in enumerate(kinds)}
    lines = [f"digraph {json.dumps(result.workload)} {{", "  node [shape=box, style=filled];"]
    for n in result.nodes:
        fill = colour[n.target] if n.offloaded else HOST_COLOUR
        label = f"{n.name} ({n.op}) on {n.target}"
        lines.append(f"  {json.dumps(n.name)} [label={json.dumps(label)}, fillcolor={fill}];")
    for instance in op_instances(workload):
        for producer in instance.producers:
            lines.append(f"  {json.dumps(producer)} -> {json.dumps(instance.name)};")
    lines.append("}")
    return "\n".join(lines) + "\n"
