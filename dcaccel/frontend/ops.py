"""The operators of a workload's SDFG: library nodes with their op type and operand shapes."""

from dataclasses import dataclass

import dace
from dace.libraries.onnx.nodes.onnx_op import ONNXOp

from dcaccel.frontend.shapes import dimension_str


@dataclass(frozen=True)
class OpInfo:
    """One operator (library node) of an SDFG: its label, op type and operand shapes, in connector order."""

    node: str
    op_type: str
    inputs: tuple[tuple[int | str, ...], ...]
    outputs: tuple[tuple[int | str, ...], ...]


def op_type(node: dace.nodes.LibraryNode) -> str:
    """The op type of a library node: the ONNX op name for ONNX nodes, else the ``op_type`` its class
    declares (dcaccel's MMM node: "MatMul"), else the node's class name."""
    if isinstance(node, ONNXOp):
        return node.schema.name
    return getattr(type(node), "op_type", type(node).__name__)


def library_nodes(sdfg: dace.SDFG) -> list[tuple[dace.nodes.LibraryNode, dace.SDFGState]]:
    """Every library node of ``sdfg`` (nested SDFGs included) with its state, in a deterministic order."""
    return [(node, state) for node, state in sdfg.all_nodes_recursive() if isinstance(node, dace.nodes.LibraryNode)]


def nodes_by_op_type(sdfg: dace.SDFG) -> dict[str, list[str]]:
    """Names of the library nodes of ``sdfg`` per op type, in program order."""
    found: dict[str, list[str]] = {}
    for node, _ in library_nodes(sdfg):
        found.setdefault(op_type(node), []).append(node.label)
    return found


def choice_keys(sdfg: dace.SDFG) -> list[str]:
    """The keys an implementation choice for ``sdfg`` can use: its op types, then its node names, in
    program order."""
    nodes = nodes_by_op_type(sdfg)
    return [*nodes, *(node for names in nodes.values() for node in names)]


def operators(sdfg: dace.SDFG) -> list[OpInfo]:
    """The operators of ``sdfg``: one :class:`OpInfo` per library node, with the shapes of its operands."""
    infos = []
    for node, state in library_nodes(sdfg):
        in_edges, out_edges = _operand_edges(node, state)
        infos.append(
            OpInfo(
                node=node.label,
                op_type=op_type(node),
                inputs=tuple(_operand_shape(e) for e in in_edges),
                outputs=tuple(_operand_shape(e) for e in out_edges),
            )
        )
    return infos


def _operand_edges(node: dace.nodes.LibraryNode, state: dace.SDFGState) -> tuple[list, list]:
    """In- and out-edges of a library node, in the order of its ONNX schema (else by connector name)."""
    if isinstance(node, ONNXOp):
        edges = list(node.iter_edges(state))
        return [e for e, is_input in edges if is_input], [e for e, is_input in edges if not is_input]
    in_edges = sorted(state.in_edges(node), key=lambda e: str(e.dst_conn))
    out_edges = sorted(state.out_edges(node), key=lambda e: str(e.src_conn))
    return in_edges, out_edges


def _operand_shape(edge) -> tuple[int | str, ...]:
    """Shape of the data an edge of a library node carries (the size of the memlet's subset)."""
    if edge.data.data is None:
        return ()
    return tuple(dimension_str(size) for size in edge.data.subset.size())
