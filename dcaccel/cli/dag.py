"""``dcaccel dag MODEL``: the canonical task DAG of a lowered model.

Lowers the model with the ``--impl`` choices, extracts its task DAG (:func:`dcaccel.dag.extract.extract`),
checks it against the contract (:meth:`TaskDAG.validate`: nothing invalid is written) and either writes
it (``--out dag.json`` in the vectors' format, ``--out dag.dot`` for Graphviz) or prints a one-screen
summary: numbers of tasks, buffers and edges, work, depth, I/O volume, the opaque tasks (ops with no
canonical implementation, each one task) and the task labels that account for most tasks. Nothing is
compiled. ``--strict`` refuses a model with such an op instead.
"""

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass

from dcaccel.cli.arguments import add_concept, check_output, study_default
from dcaccel.cli.models import (
    add_impl_argument,
    add_model_argument,
    add_strict_argument,
    lower_workload,
    model_with_choices,
)
from dcaccel.cli.table import format_table
from dcaccel.dag import metrics
from dcaccel.dag.extract import EDGE_VOLUME_RULES, SINK_MODES, Granularity, extract
from dcaccel.dag.taskdag import TaskDAG

#: The file formats ``--out`` writes.
DAG_FORMATS = (".json", ".dot")

#: How many task labels the summary lists.
TOP_LABELS = 8


@dataclass(frozen=True)
class LabelRow:
    """Tasks sharing one map label (a task map's iterations share their map's label) and their work."""

    label: str
    tasks: int
    work: str


def register(subparsers) -> None:
    """Add the ``dag`` sub-command."""
    parser = subparsers.add_parser("dag", help="extract the canonical task DAG of a lowered model")
    add_model_argument(parser)
    add_impl_argument(parser)
    add_concept(parser, "granularity")
    add_concept(parser, "edge_volume", choices=EDGE_VOLUME_RULES)
    parser.add_argument(
        "--sink", choices=SINK_MODES, default="auto", help="when to add a pseudo sink (default: %(default)s)"
    )
    parser.add_argument("--fuse", action="store_true", help="fuse chains of element-wise tasks first")
    add_strict_argument(parser)
    parser.add_argument("--out", metavar="FILE", help="write the DAG to FILE (.json or .dot) instead of a summary")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Extract the DAG; write it to ``--out`` or print its summary."""
    check_output("--out", args.out, DAG_FORMATS)
    granularity = args.granularity or study_default("granularity")
    edge_volume = args.edge_volume or study_default("edge_volume")
    workload, choices = model_with_choices(args)
    lowered = lower_workload(workload, choices, args.strict)
    dag = extract(lowered, Granularity.parse(granularity), edge_volume, sink=args.sink, fusion=args.fuse)
    dag.validate()
    if args.out is None:
        settings = f"granularity {granularity}, edge volume {edge_volume}"
        sys.stdout.write(f"{summary(dag)}\n({settings}{', fused' if args.fuse else ''})\n")
        return 0
    with open(args.out, "w") as stream:
        if args.out.lower().endswith(".json"):
            json.dump(dag.to_json(), stream, indent=1)
        else:
            stream.write(dag.to_dot())
    sys.stdout.write(f"wrote {dag!r} to {args.out}\n")
    return 0


def summary(dag: TaskDAG) -> str:
    """The one-screen description ``dcaccel dag`` prints: counts, work, depth, I/O and the top labels."""
    tasks = dag.tasks
    lines = [
        f"DAG {dag.name}: {len(tasks)} tasks, {len(dag.buffers)} buffers, {dag.num_edges} edges",
        f"work {_number(metrics.work(dag))}, depth {_number(metrics.depth(dag))}, "
        f"I/O volume {_number(metrics.io_volume(dag))}",
        *_opaque_lines(dag),
        "",
        format_table(label_rows(dag)),
    ]
    return "\n".join(lines)


def _opaque_lines(dag: TaskDAG) -> list[str]:
    """One line naming the opaque tasks and their share of the work (none when there are none)."""
    count, share = metrics.opaque_work(dag)
    if not count:
        return []
    opaque = [dag.node(v) for v in dag.tasks if dag.info(v).opaque]
    names = ", ".join(f"{node.label} ({node.info.op})" if node.info.op else node.label for node in opaque)
    return [f"opaque tasks {count} ({share:.1%} of the work): {names}"]


def label_rows(dag: TaskDAG, top: int = TOP_LABELS) -> list[LabelRow]:
    """The ``top`` map labels with the most tasks (ties in order of first appearance)."""
    costs = metrics.task_costs(dag)
    counts: Counter[str] = Counter()
    work: dict[str, int] = {}
    for v in dag.tasks:
        node = dag.node(v)
        label = node.info.map or node.label
        counts[label] += 1
        work[label] = work.get(label, 0) + costs[v]
    return [LabelRow(label, count, _number(work[label])) for label, count in counts.most_common(top)]


def _number(value) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)
