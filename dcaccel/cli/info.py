"""``dcaccel info MODEL``: a model's inputs, outputs and parameters, and its operators.

Lists the op types with their counts and dcaccel's canonical implementations, then every
operator (library node) with its op type and operand shapes. An operator dcaccel has no canonical
implementation of shows ``opaque (NAME)`` (lowering keeps it as one opaque task, expanded with DaCe's
implementation NAME) or ``unsupported`` (DaCe cannot expand it either); a closing line names them, and the
nodes the check of their implementation refuses (lowered as opaque tasks too) with the refusal. Nothing is
compiled.
"""

import argparse
import sys
from collections import Counter
from dataclasses import dataclass

from dcaccel.cli.models import add_model_argument, resolve_model
from dcaccel.cli.table import format_table
from dcaccel.frontend import TensorSpec, Workload
from dcaccel.frontend.ops import operators

#: The implementation column of a node lowered as an opaque task, and of one nothing can lower.
OPAQUE = "opaque"
UNSUPPORTED = "unsupported"


@dataclass(frozen=True)
class OpTypeRow:
    """One op type of the model: how many nodes have it, and dcaccel's implementations of it."""

    op_type: str
    count: int
    implementations: str


@dataclass(frozen=True)
class NodeRow:
    """One operator of the model, with its operand shapes and the implementations it can be lowered with."""

    node: str
    op_type: str
    inputs: str
    outputs: str
    implementations: str


def register(subparsers) -> None:
    """Add the ``info`` sub-command."""
    parser = subparsers.add_parser("info", help="list a model's operators, shapes and canonical implementations")
    add_model_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the description of the model."""
    sys.stdout.write(describe(resolve_model(args.model, args.symbols, args.fold)) + "\n")
    return 0


def describe(workload: Workload) -> str:
    """The text ``dcaccel info`` prints for ``workload``."""
    lines = [
        f"workload {workload.name} (from {workload.origin.value})",
        *(f"input  {_tensor(spec)}" for spec in workload.inputs),
        *(f"output {_tensor(spec)}" for spec in workload.outputs),
        f"parameters {workload.parameter_count:,}",
    ]
    if workload.symbols:
        lines.append("symbols " + ", ".join(f"{k}={v}" for k, v in workload.symbols.items()))
    lines += ["", format_table(op_type_rows(workload)), "", format_table(node_rows(workload))]
    lines += fallback_lines(workload)
    return "\n".join(lines)


def implementations_by_node(workload: Workload) -> dict[str, str]:
    """dcaccel's implementation names for each library node of the workload; for a node without any,
    ``opaque (NAME)`` (DaCe's implementation NAME expands it into an opaque task) or ``unsupported``."""
    from dcaccel.frontend.ops import library_nodes
    from dcaccel.transforms.lower import available_implementations

    return {
        node.label: ", ".join(available_implementations(node)) or _fallback(node, state)
        for node, state in library_nodes(workload.sdfg)
    }


def _fallback(node, state) -> str:
    """What lowering does with a node dcaccel has no implementation of: ``opaque (NAME)`` or ``unsupported``."""
    from dcaccel.errors import UnsupportedOpError
    from dcaccel.transforms.opaque import fallback_implementation

    try:
        return f"{OPAQUE} ({fallback_implementation(node, state)})"
    except UnsupportedOpError:
        return UNSUPPORTED


def fallback_lines(workload: Workload) -> list[str]:
    """Lines naming the nodes lowered as opaque tasks (:func:`~dcaccel.transforms.lower.opaque_reasons`: no
    canonical implementation, or one whose check refuses them, with the refusal), and those no lowering accepts
    (none when neither)."""
    from dcaccel.frontend.ops import library_nodes
    from dcaccel.transforms.lower import describe_opaque, opaque_reasons

    reasons = opaque_reasons(workload.sdfg)
    runs = {node.label: _fallback(node, state) for node, state in library_nodes(workload.sdfg) if node.label in reasons}
    lines = []
    opaque = {name: reason for name, reason in reasons.items() if runs[name] != UNSUPPORTED}
    if opaque:
        lines += ["", f"opaque tasks (no canonical implementation; refused by --strict): {describe_opaque(opaque)}"]
    unsupported = [f"{name} ({reason.op})" for name, reason in reasons.items() if runs[name] == UNSUPPORTED]
    if unsupported:
        lines += ["", f"unsupported (neither dcaccel nor DaCe can lower them): {', '.join(unsupported)}"]
    return lines


def op_type_rows(workload: Workload) -> list[OpTypeRow]:
    """Op types in order of first appearance, with counts and dcaccel's implementation names (``-``: none)."""
    choices = implementations_by_node(workload)
    ops = operators(workload.sdfg)
    counts = Counter(op.op_type for op in ops)
    first = {op.op_type: choices.get(op.node, "-") for op in reversed(ops)}
    return [OpTypeRow(op_type, count, first[op_type]) for op_type, count in counts.items()]


def node_rows(workload: Workload) -> list[NodeRow]:
    """One row per operator of the workload's SDFG."""
    choices = implementations_by_node(workload)
    return [
        NodeRow(op.node, op.op_type, _shapes(op.inputs), _shapes(op.outputs), choices.get(op.node, "-"))
        for op in operators(workload.sdfg)
    ]


def _tensor(spec: TensorSpec) -> str:
    """``name dtype[d0, d1, ...]``."""
    return f"{spec.name} {spec.dtype}[{', '.join(str(d) for d in spec.shape)}]"


def _shapes(shapes) -> str:
    """Operand shapes as ``1x6x24x24, 6``."""
    return ", ".join("x".join(str(d) for d in shape) or "scalar" for shape in shapes)
