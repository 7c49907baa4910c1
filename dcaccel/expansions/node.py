"""The node being expanded: its inputs, attributes, applicability and the builder of its nested SDFG.

- :class:`CanonicalForward`: the base of dcaccel's ONNX implementations; :meth:`~CanonicalForward.check`
  says why one does not apply *before* it touches the graph (``forward_can_be_applied`` reads it);
- :func:`node_builder`: an :class:`~dcaccel.expansions.builder.ExpansionBuilder` with one argument per
  connector of the node, each knowing whether another task produces it;
- the node's inputs (constant initializers, schema order, dropping folded inputs) and attributes
  (axes, ONNX pads).

The only edit an expansion makes to the graph it is expanded in is :func:`drop_input` (inputs folded
into the program: constants and shape parameters), after its check passed.
"""

from collections.abc import Sequence

import dace
import numpy as np
from dace import SDFG, SDFGState
from dace.libraries.onnx.forward_implementation_abc import ONNXForward
from dace.sdfg import nodes
from dace.sdfg.utils import in_desc_with_name, out_desc_with_name
from dace.transformation.onnx.constant_folding import remove_node_and_computation

from dcaccel.errors import DcaccelError, ImportedShapeError, UnsupportedOpError
from dcaccel.expansions.builder import ExpansionBuilder
from dcaccel.frontend.ops import op_type


class CanonicalForward(ONNXForward):
    """An ONNX implementation of dcaccel: :meth:`check` first, then ``forward`` builds the nested SDFG."""

    @staticmethod
    def check(node: nodes.Node, state: SDFGState, sdfg: SDFG) -> None:
        """Raise :class:`UnsupportedOpError` naming the attribute, type or shape of ``node`` this
        implementation does not cover; return if it applies (the default)."""

    @classmethod
    def forward_can_be_applied(cls, node: nodes.Node, state: SDFGState, sdfg: SDFG) -> bool:
        """Whether :meth:`check` passes."""
        try:
            cls.check(node, state, sdfg)
        except DcaccelError:
            return False
        return True


def unsupported(node: nodes.LibraryNode, detail: str) -> UnsupportedOpError:
    """The error for a node whose attributes, types or shapes the canonical implementation does not cover."""
    return UnsupportedOpError(op_type(node), node.label, detail)


def wrong_shape(node: nodes.LibraryNode, detail: str) -> ImportedShapeError:
    """The error for a node whose imported shapes are not what its op computes (:class:`ImportedShapeError`)."""
    return ImportedShapeError(op_type(node), node.label, detail)


def onnx_shape(desc: dace.data.Data) -> tuple:
    """The ONNX shape of a container: ``()`` for a DaCe scalar (DaCe gives scalars the shape ``(1,)``)."""
    return () if isinstance(desc, dace.data.Scalar) else tuple(desc.shape)


def input_edge(node: nodes.Node, state: SDFGState, connector: str):
    """The edge feeding ``connector`` of ``node``, or None if the connector is not connected."""
    return next(iter(state.in_edges_by_connector(node, connector)), None)


def input_shape(node: nodes.Node, state: SDFGState, sdfg: SDFG, connector: str) -> tuple:
    """The ONNX shape of the input on ``connector``."""
    return onnx_shape(in_desc_with_name(node, state, sdfg, connector))


def axis_input_shape(node: nodes.Node, state: SDFGState, sdfg: SDFG, connector: str) -> tuple:
    """The ONNX shape of the input on ``connector`` of an op along an axis; :class:`UnsupportedOpError` for a
    rank-0 input (it has no axis)."""
    shape = input_shape(node, state, sdfg, connector)
    if not shape:
        raise unsupported(node, "a rank-0 input has no axis")
    return shape


def output_shape(node: nodes.Node, state: SDFGState, sdfg: SDFG, connector: str) -> tuple:
    """The ONNX shape of the output on ``connector``."""
    return onnx_shape(out_desc_with_name(node, state, sdfg, connector))


def constant_input(node: nodes.Node, state: SDFGState, sdfg: SDFG, connector: str) -> np.ndarray | None:
    """The value of the ONNX initializer (weight or Constant) feeding ``connector``, or None.

    Only SDFGs imported by DaCe's ONNX frontend know their initializers; elsewhere every input
    is data.
    """
    edge = input_edge(node, state, connector)
    model = getattr(sdfg, "_parent_onnx_model", None)
    if edge is None or model is None or not isinstance(edge.src, nodes.AccessNode):
        return None
    value = model.clean_weights.get(edge.src.data)
    return None if value is None else value.numpy()


def constant_ints(node: nodes.Node, state: SDFGState, sdfg: SDFG, connector: str) -> list[int] | None:
    """The integers of a constant 0-d or 1-d input (axes, starts, shapes...), or None if not constant."""
    value = constant_input(node, state, sdfg, connector)
    return None if value is None else [int(v) for v in np.atleast_1d(value)]


def constant_int(
    node: nodes.Node, state: SDFGState, sdfg: SDFG, connector: str, what: str, default: int | None = None
) -> int | None:
    """The single integer of the constant input ``connector`` (an axis, a count, an offset: a 0-d or one-element
    tensor of any numeric type), ``default`` when the optional input is absent; :class:`UnsupportedOpError`
    (``'connector' must be a constant (what)``) when it is data or holds several elements."""
    if input_edge(node, state, connector) is None:
        return default
    value = constant_ints(node, state, sdfg, connector)
    if value is None or len(value) != 1:
        raise unsupported(node, f"'{connector}' must be a constant ({what})")
    return value[0]


def ordered_inputs(node: nodes.Node, state: SDFGState) -> list[str]:
    """The connected input connectors of an ONNX node in schema order (absent optional inputs left out)."""
    order = {param.name: k for k, param in enumerate(node.schema.inputs)}

    def position(connector: str) -> tuple[int, int]:
        name, _, index = connector.partition("__")
        return order.get(name, len(order)), int(index or 0)

    return sorted((edge.dst_conn for edge in state.in_edges(node)), key=position)


def drop_input(node: nodes.Node, state: SDFGState, sdfg: SDFG, connector: str) -> None:
    """Disconnect an input whose value the expansion folded in (a constant or a shape parameter)."""
    remove_node_and_computation(sdfg, state, node, connector)


def produced_by_task(sdfg: SDFG, name: str) -> bool:
    """Whether container ``name`` of ``sdfg`` holds data that another task produces.

    That is the case for transients; a non-transient container of a nested SDFG is followed out
    to the container it is connected to. Non-transients of the top-level SDFG (program inputs,
    outputs and weights) are not produced by a task.
    """
    while not sdfg.arrays[name].transient and sdfg.parent_nsdfg_node is not None:
        outer_state, nested = sdfg.parent, sdfg.parent_nsdfg_node
        edges = [e for e in outer_state.in_edges(nested) if e.dst_conn == name]
        edges += [e for e in outer_state.out_edges(nested) if e.src_conn == name]
        if not edges:
            return True
        path = outer_state.memlet_path(edges[0])
        end = path[0].src if edges[0].dst is nested else path[-1].dst
        if not isinstance(end, nodes.AccessNode):
            return True
        sdfg, name = sdfg.parent_sdfg, end.data
    return sdfg.arrays[name].transient


def streams_into(node: nodes.Node, state: SDFGState, sdfg: SDFG, edge) -> bool:
    """Whether the input ``edge`` of ``node`` carries data another task produces (it streams)."""
    source = state.memlet_path(edge)[0].src
    return not isinstance(source, nodes.AccessNode) or produced_by_task(sdfg, source.data)


def node_builder(node: nodes.Node, state: SDFGState, sdfg: SDFG, drop: Sequence[str] = ()) -> ExpansionBuilder:
    """The builder of ``node``'s nested SDFG: one argument per connected connector, named after it.

    Inputs listed in ``drop`` are disconnected first (their value was folded in). An input that
    another task produces is marked streamed (see :meth:`ExpansionBuilder.operand`).
    """
    for connector in drop:
        drop_input(node, state, sdfg, connector)
    builder = ExpansionBuilder(f"{node.label}_expansion", prefix=node.label)
    for edge in state.in_edges(node):
        desc = in_desc_with_name(node, state, sdfg, edge.dst_conn)
        builder.argument(edge.dst_conn, desc, streamed=streams_into(node, state, sdfg, edge))
    for edge in state.out_edges(node):
        builder.argument(edge.src_conn, out_desc_with_name(node, state, sdfg, edge.src_conn))
    return builder


def normalize_axis(axis: int, rank: int, node: nodes.Node) -> int:
    """``axis`` in ``[0, rank)``; negative axes count from the end (ONNX convention)."""
    if not -rank <= axis < max(rank, 1):
        raise unsupported(node, f"axis {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


def onnx_pads(
    node: nodes.Node, in_sizes: Sequence[int], out_sizes: Sequence[int], kernel, strides, dilations
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The begin and end pads per spatial axis of a windowed op (Conv, MaxPool, AveragePool).

    Explicit ``pads`` (``auto_pad`` NOTSET), none (VALID), or the ONNX SAME rule: the total padding
    that keeps ``out_sizes`` split in two halves, the larger half at the end (SAME_UPPER) or at the
    beginning (SAME_LOWER). Any other ``auto_pad`` raises :class:`UnsupportedOpError`.
    """
    dims = len(kernel)
    auto_pad = node.auto_pad or "NOTSET"
    if auto_pad == "NOTSET":
        pads = tuple(int(p) for p in node.pads) if node.pads else (0,) * (2 * dims)
        return pads[:dims], pads[dims:]
    if auto_pad == "VALID":
        return (0,) * dims, (0,) * dims
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise unsupported(node, f"auto_pad='{auto_pad}'")
    totals = [
        max(0, (o - 1) * s + (k - 1) * d + 1 - i)
        for o, s, k, d, i in zip(out_sizes, strides, kernel, dilations, in_sizes, strict=True)
    ]
    small, large = tuple(t // 2 for t in totals), tuple(t - t // 2 for t in totals)
    return (small, large) if auto_pad == "SAME_UPPER" else (large, small)
