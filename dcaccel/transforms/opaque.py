"""Opaque tasks: the fallback for a library node that dcaccel has no canonical implementation of.

Such a node does not stop the lowering (unless it is strict): it is expanded with DaCe's own
implementation (for an ONNX op, the first of DaCe's registered ``ONNXForward`` implementations whose
``forward_can_be_applied`` accepts the node, e.g. ``pure``; for another library node, the
implementation set on it or its class's default) into one nested SDFG. An ONNX op DaCe has no
implementation for that applies becomes a host task instead, one tasklet calling onnxruntime back
(:mod:`dcaccel.transforms.host`), marked like the nested SDFGs. Every library node inside
that nested SDFG is expanded with DaCe's defaults too, so the lowered program stays a real program
that compiles. The nested SDFG is kept whole (``no_inline``: lowering's inlining and simplification
leave it alone) and carries the opaque mark (:mod:`dcaccel.transforms.opaque_mark`, never a name);
which op and node the task stands for is in the lowering's ``origins``. The DAG extraction reads the
mark and makes the node one task whose in-edges carry the sizes of its input tensors and out-edges the
sizes of its outputs (docs/dag.md, "Opaque tasks").
"""

import copy

import dace
from dace.libraries.onnx.nodes.onnx_op import ONNXOp
from dace.sdfg import nodes

from dcaccel.errors import UnsupportedOpError
from dcaccel.frontend.ops import op_type
from dcaccel.transforms.host import HOST_IMPLEMENTATION, check_host, host_task
from dcaccel.transforms.opaque_mark import mark_opaque


class OpaqueOpWarning(UserWarning):
    """Nodes without a canonical implementation were kept as opaque tasks."""


def fallback_implementation(node: nodes.LibraryNode, state: dace.SDFGState, refused: bool = False) -> str:
    """The name of DaCe's implementation that expands ``node`` as an opaque task (the graph is not touched); for
    an ONNX op DaCe has none for that applies (and gives right values, :func:`_gives_right_values`), or one dcaccel's
    implementation ``refused``, :data:`~dcaccel.transforms.host.HOST_IMPLEMENTATION` (the op runs through
    onnxruntime, :mod:`dcaccel.transforms.host`). A refused node goes to the host because DaCe's expansions of the
    ops dcaccel implements are what dcaccel does not verify, and its refusals are where they fail: among ONNX's
    backend node tests, DaCe's ``pure`` Resize does not compile for the 28 cases the canonical one refuses, and its
    Slice of negative steps and Split into uneven parts build invalid SDFGs.

    Raises :class:`UnsupportedOpError` naming op and node for a library node other than an ONNX op that DaCe has no
    default for.
    """
    from dcaccel.expansions.registry import all_implementations

    op = op_type(node)
    ours = {implementation.name for implementation in all_implementations()}
    registered = type(node).implementations
    if isinstance(node, ONNXOp):
        from dace.libraries.onnx.forward_implementation_abc import ONNXForward

        candidates = () if refused else ONNXForward.registered_implementations(op)
        for name, forward in candidates:
            if name in ours or name not in registered or not _gives_right_values(op, name, node, state):
                continue
            # The forward the node's class expands with under that name: DaCe registers two Expand forwards as
            # pure, and the class keeps the last (the no-op one, which expands to nothing for a real broadcast).
            forward = getattr(registered[name], "forward_impl", forward)
            try:
                applies = forward.forward_can_be_applied(node, state, state.sdfg)
            except (KeyError, ValueError, AttributeError, StopIteration):  # DaCe's checks read absent inputs
                applies = False
            if applies:
                return name
        check_host(node, state)
        return HOST_IMPLEMENTATION
    for name in (node.implementation, type(node).default_implementation):
        if name is not None and name in registered and name not in ours:
            return name
    raise UnsupportedOpError(op, node.label, "no dcaccel implementation, and DaCe has no default one")


def _gives_right_values(op: str, implementation: str, node: ONNXOp, state: dace.SDFGState) -> bool:
    """False where DaCe's ``implementation`` is known to compute wrong values for ``node`` (it then runs on the host
    through onnxruntime): LogSoftmax's ``pure`` along another than the last axis (ONNX's test_logsoftmax_axis_0
    and _1, a 3 × 4 × 5 input: deviations up to 3.8); Pow's ``pure`` of a constant 0-d exponent that is not an
    integer (it truncates the exponent to an int: ``F.lp_pool2d``'s square root, x ** 0.5, became x ** 0)."""
    from dcaccel.expansions.node import constant_input, input_shape

    if (op, implementation) == ("Pow", "pure"):
        exponent = constant_input(node, state, state.sdfg, "Y")
        return exponent is None or exponent.ndim > 0 or float(exponent).is_integer()
    if (op, implementation) != ("LogSoftmax", "pure"):
        return True
    from dcaccel.expansions.softmax import softmax_axes

    rank = len(input_shape(node, state, state.sdfg, "input"))
    return softmax_axes(node, rank) == [rank - 1]


def expand_opaque(node: nodes.LibraryNode, state: dace.SDFGState, implementation: str) -> nodes.CodeNode:
    """Expand ``node`` with DaCe's ``implementation`` into one opaque task (see the module docstring) and
    return the node that replaced it, marked; raises :class:`UnsupportedOpError` naming op and node when
    DaCe's expansion fails."""
    op = op_type(node)
    if implementation == HOST_IMPLEMENTATION:
        tasklet = host_task(node, state)
        mark_opaque(tasklet)
        return tasklet
    before = set(state.nodes())
    try:
        node.expand(state, implementation)
    except Exception as err:  # DaCe raises anything from a failed expansion; the user gets one line
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UnsupportedOpError(op, node.label, f"DaCe's '{implementation}' expansion failed: {detail}") from err
    (expanded,) = [new for new in state.nodes() if new not in before]
    if isinstance(expanded, nodes.LibraryNode):
        return expand_opaque(expanded, state, fallback_implementation(expanded, state))
    if isinstance(expanded, nodes.NestedSDFG):
        expanded.no_inline = True
        _expand_inner(expanded.sdfg, op, node.label)
    mark_opaque(expanded)
    return expanded


def _expand_inner(sdfg: dace.SDFG, op: str, label: str) -> None:
    """Expand every library node inside an opaque task's nested SDFG with DaCe's defaults."""
    try:
        sdfg.expand_library_nodes(recursive=True)
    except Exception as err:  # as in expand_opaque
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UnsupportedOpError(op, label, f"DaCe cannot expand its inner library nodes: {detail}") from err


def with_host_tasks(sdfg: dace.SDFG) -> dace.SDFG:
    """``sdfg`` with every ONNX node that has no implementation chosen expanded as lowering's fallback expands it
    (:func:`fallback_implementation`): by DaCe's own implementation where one applies,
    else replaced by its host task; on a copy (``sdfg`` itself when it has no such node). The unlowered program of
    a model then compiles too: left to itself, DaCe expands a node with its library's default (``pure``), which
    an op without one (Det, or Trilu with only dcaccel's canonical implementation registered) does not have and
    which, where its check refuses the node (Clip without a ``min``, a Cast DaCe cannot expand), expands to
    nothing."""
    from dcaccel.frontend.ops import library_nodes

    def unchosen(graph: dace.SDFG) -> list:
        return [(n, s) for n, s in library_nodes(graph) if isinstance(n, ONNXOp) and n.implementation is None]

    if not unchosen(sdfg):
        return sdfg
    sdfg = copy.deepcopy(sdfg)
    for node, state in unchosen(sdfg):
        implementation = fallback_implementation(node, state)
        if implementation == HOST_IMPLEMENTATION:
            mark_opaque(host_task(node, state))
        else:
            node.implementation = implementation
    return sdfg
