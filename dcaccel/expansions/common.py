"""Building blocks shared by the canonical implementations.

A canonical implementation expands one node into a nested SDFG made only of *flat* maps (one
multi-dimensional map around one tasklet, WCR for reductions), so that after inlining every map
is one task of the canonical DAG (contract 2 in ``docs/architecture.md``). This module holds what
several implementations need for that:

- :func:`register_canonical`: register an ``ONNXForward`` subclass as the ``"canonical"``
  implementation of an ONNX op, also on node classes DaCe built before the registration;
- :class:`MapSteps`: the nested SDFG of an expansion, built as a sequence of flat map steps
  (with an initialisation state for reduction identities) and the operand copies into buffers;
- index helpers (numpy broadcasting, index spaces of shapes) and tasklet literals;
- :func:`constant_input`: the value of an ONNX initializer feeding a connector, if any.

The data-order rule every implementation follows: an input that another task produces (a
transient of the parent SDFG) streams in row-major order. A step that reads such an input more
than once, or in another order, reads it from a copy in a buffer the expansion creates and marks
(:meth:`MapSteps.operand`), as the MMM shapes do with their operand copies. Program inputs and
weights are buffers already (the lowering marks them), so they are read directly.
"""

import ast
import copy
import math
from collections.abc import Callable, Mapping, Sequence

import dace
import numpy as np
from dace import SDFG, SDFGState
from dace.libraries.onnx.forward_implementation_abc import ONNXForward
from dace.libraries.onnx.op_implementations.utils import op_implementation
from dace.sdfg import nodes
from dace.sdfg.utils import in_desc_with_name, out_desc_with_name
from dace.transformation.onnx.constant_folding import remove_node_and_computation
from dace.transformation.transformation import ExpandTransformation

from dcaccel.buffers import BufferReason, mark_buffer
from dcaccel.errors import UnsupportedOpError

IMPLEMENTATION = "canonical"

WCR_SUM = "lambda a, b: a + b"
WCR_MAX = "lambda a, b: max(a, b)"


def register_canonical(op: str) -> Callable[[type[ONNXForward]], type[ONNXForward]]:
    """Class decorator registering an ``ONNXForward`` subclass as the canonical implementation of ``op``.

    DaCe attaches ONNX implementations to its node classes when it first builds them (lazily, on
    first use of an ONNX node). If that already happened, the implementation is attached to the
    existing node classes of ``op`` as well, so the import order of dcaccel and DaCe does not matter.
    """

    def decorate(cls: type[ONNXForward]) -> type[ONNXForward]:
        registered = op_implementation(op=op, name=IMPLEMENTATION)(cls)
        _attach_to_built_nodes(op, registered)
        return registered

    return decorate


def _attach_to_built_nodes(op: str, implementation: type[ONNXForward]) -> None:
    from dace.libraries.onnx.nodes import onnx_op_registry

    if not onnx_op_registry._REGISTRY_INITIALIZED:
        return
    for node_class in onnx_op_registry._ONNX_OPS.get(f"ONNX{op}", {}).values():
        if IMPLEMENTATION in node_class.implementations:
            continue
        name = f"{node_class.__name__}_Expansion_{IMPLEMENTATION}"
        expansion = type(
            name,
            (ExpandTransformation,),
            {
                "environments": [],
                "forward_impl": implementation,
                "expansion": classmethod(_forward_expansion),
                "__module__": __name__,
            },
        )
        globals()[name] = expansion
        node_class.register_implementation(IMPLEMENTATION, expansion)


def _forward_expansion(cls, node, state, sdfg, **kwargs):
    node.validate(sdfg, state)
    return cls.forward_impl.forward(node, state, sdfg, **kwargs)


def unsupported(node: nodes.LibraryNode, detail: str) -> UnsupportedOpError:
    """The error for a node whose attributes, types or shapes the canonical implementation does not cover."""
    op_type = node.schema.name if hasattr(node, "schema") else type(node).__name__
    return UnsupportedOpError(op_type, node.label, detail)


# ---------------------------------------------------------------------------------------------
# Shapes, indices and literals


def onnx_shape(desc: dace.data.Data) -> tuple:
    """The ONNX shape of a container: ``()`` for a DaCe scalar (DaCe gives scalars the shape ``(1,)``)."""
    return () if isinstance(desc, dace.data.Scalar) else tuple(desc.shape)


def index_params(rank: int, prefix: str = "__i") -> list[str]:
    """Map parameter names for a ``rank``-dimensional index space: ``__i0, __i1, ...``.

    (Double underscores keep them apart from the container names of the program an expansion is
    inlined into.)
    """
    return [f"{prefix}{d}" for d in range(rank)]


def index_ranges(params: Sequence[str], shape: Sequence) -> dict[str, str]:
    """Map ranges iterating ``shape`` row-major with ``params``; a rank-0 shape gets one iteration."""
    if not params:
        return {"__unit": "0:1"}
    return {p: f"0:{s}" for p, s in zip(params, shape, strict=True)}


def subscript(indices: Sequence) -> str:
    """A memlet subscript from per-dimension index expressions (``0`` for a scalar)."""
    return ", ".join(str(i) for i in indices) if indices else "0"


def broadcast_indices(in_shape: Sequence, out_shape: Sequence, out_indices: Sequence) -> list:
    """Indices into an input of ``in_shape`` read at output position ``out_indices`` (numpy broadcasting).

    Dimensions are aligned from the right; an input dimension of size 1 facing a larger output
    dimension is read at index 0.
    """
    offset = len(out_shape) - len(in_shape)
    if offset < 0:
        raise ValueError(f"cannot broadcast shape {tuple(in_shape)} to {tuple(out_shape)}")
    return [
        0 if size == 1 and out_shape[offset + d] != 1 else out_indices[offset + d] for d, size in enumerate(in_shape)
    ]


def is_broadcast(in_shape: Sequence, out_shape: Sequence) -> bool:
    """Whether broadcasting ``in_shape`` to ``out_shape`` reads some input element more than once."""
    return math.prod(int(s) for s in in_shape) != math.prod(int(s) for s in out_shape)


def literal(value, dtype: dace.typeclass) -> str:
    """A tasklet expression for the constant ``value`` converted to ``dtype``."""
    if dtype == dace.bool_:
        return "True" if bool(value) else "False"
    if dtype in (dace.complex64, dace.complex128):
        value = complex(value)
        return f"dace.{dtype.to_string()}({value.real!r}, {value.imag!r})"
    number = int(value) if np.issubdtype(dtype.type, np.integer) else float(value)
    return f"dace.{dtype.to_string()}({number!r})"


def lowest(dtype: dace.typeclass) -> str:
    """A Python tasklet expression for the lowest finite value of ``dtype``."""
    if dtype == dace.bool_:
        return "False"
    info = np.iinfo(dtype.type) if np.issubdtype(dtype.type, np.integer) else np.finfo(dtype.type)
    return literal(info.min, dtype)


def max_identity(dtype: dace.typeclass) -> str:
    """A C++ expression for the identity of a max reduction over ``dtype``: -infinity, or the lowest value."""
    if np.issubdtype(dtype.type, np.floating):
        return f"-std::numeric_limits<{dtype.ctype}>::infinity()"
    return f"std::numeric_limits<{dtype.ctype}>::lowest()"


def is_complex(dtype: dace.typeclass) -> bool:
    """Whether ``dtype`` is a complex number type."""
    return dtype in (dace.complex64, dace.complex128)


# ---------------------------------------------------------------------------------------------
# ONNX node inputs


def input_edge(node: nodes.Node, state: SDFGState, connector: str):
    """The edge feeding ``connector`` of ``node``, or None if the connector is not connected."""
    return next(iter(state.in_edges_by_connector(node, connector)), None)


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


def normalize_axis(axis: int, rank: int, node: nodes.Node) -> int:
    """``axis`` in ``[0, rank)``; negative axes count from the end (ONNX convention)."""
    if not -rank <= axis < max(rank, 1):
        raise unsupported(node, f"axis {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


# ---------------------------------------------------------------------------------------------
# The nested SDFG of an expansion


def connector(name: str) -> str:
    """The tasklet connector of the operand a step calls ``name`` (``__`` + name)."""
    return f"__{name}"


def _renamed(code: str, names: Mapping[str, str]) -> str:
    """Python tasklet ``code`` with the identifiers in ``names`` replaced."""

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.Name:
            node.id = names.get(node.id, node.id)
            return node

    return ast.unparse(Rename().visit(ast.parse(code)))


class MapSteps:
    """The nested SDFG of an expansion, built as a sequence of flat map steps.

    Steps are added in dataflow order to one compute state; each step is one flat map (one task
    after lowering). Reduction identities are written by :meth:`init` maps into a preceding
    initialisation state (the idiom of DaCe's own ``Reduce`` expansion), so that every WCR target
    holds its identity before the first step accumulates into it.
    """

    def __init__(self, label: str):
        self.label = label
        self.sdfg = SDFG(f"{label}_expansion")
        self.state = self.sdfg.add_state(f"{label}_compute")
        self._init_state: SDFGState | None = None
        self._latest: dict[str, nodes.AccessNode] = {}
        self._streamed: set[str] = set()

    @classmethod
    def for_node(cls, node: nodes.Node, state: SDFGState, sdfg: SDFG, drop: Sequence[str] = ()) -> "MapSteps":
        """The nested SDFG for ``node``: one argument per connected connector, named after it.

        Inputs listed in ``drop`` are disconnected first (their value was folded in). An input
        that is a transient of the parent SDFG is remembered as *streamed* (see :meth:`operand`).
        """
        for connector in drop:
            drop_input(node, state, sdfg, connector)
        steps = cls(node.label)
        for edge in state.in_edges(node):
            steps.argument(edge.dst_conn, in_desc_with_name(node, state, sdfg, edge.dst_conn))
            source = state.memlet_path(edge)[0].src
            if not isinstance(source, nodes.AccessNode) or produced_by_task(sdfg, source.data):
                steps.mark_streamed(edge.dst_conn)
        for edge in state.out_edges(node):
            steps.argument(edge.src_conn, out_desc_with_name(node, state, sdfg, edge.src_conn))
        return steps

    def argument(self, name: str, desc: dace.data.Data) -> str:
        """Add a non-transient container ``name`` shaped like ``desc`` (a connector of the nested SDFG)."""
        arg = copy.deepcopy(desc)
        arg.transient = False
        self.sdfg.add_datadesc(name, arg)
        return name

    def desc(self, name: str) -> dace.data.Data:
        """The descriptor of container ``name`` in the nested SDFG."""
        return self.sdfg.arrays[name]

    def transient(self, name: str, shape: Sequence, dtype: dace.typeclass, reason: BufferReason | None = None) -> str:
        """Add a transient (a scalar for a rank-0 shape), marked as a buffer for ``reason`` if given."""
        if len(shape) == 0:
            name, desc = self.sdfg.add_scalar(name, dtype, transient=True, find_new_name=True)
        else:
            name, desc = self.sdfg.add_array(name, tuple(shape), dtype, transient=True, find_new_name=True)
        if reason is not None:
            mark_buffer(desc, reason)
        return name

    def mark_streamed(self, name: str) -> None:
        """Record that argument ``name`` is produced by another task (see :meth:`operand`)."""
        self._streamed.add(name)

    def is_streamed(self, name: str) -> bool:
        """Whether argument ``name`` is produced by another task (a transient of the parent SDFG)."""
        return name in self._streamed

    def operand(self, name: str, reused: bool, reason: BufferReason = BufferReason.REUSE) -> str:
        """The container a step reads input ``name`` from.

        If the step reads it more than once or out of order (``reused``) and another task produces
        it (it streams), it is first copied in order into a buffer marked ``reason``, and the copy is
        returned. Otherwise the input is read directly.
        """
        if not reused or not self.is_streamed(name):
            return name
        desc = self.desc(name)
        shape = onnx_shape(desc)
        buffer = self.transient(f"{name}_buffer", shape, desc.dtype, reason)
        params = index_params(len(shape))
        self.step(
            f"copy_{name}",
            index_ranges(params, shape),
            {"v": dace.Memlet(f"{name}[{subscript(params)}]")},
            "out = v",
            {"out": dace.Memlet(f"{buffer}[{subscript(params)}]")},
        )
        return buffer

    def step(
        self,
        label: str,
        ranges: Mapping[str, str],
        inputs: Mapping[str, dace.Memlet],
        code: str,
        outputs: Mapping[str, dace.Memlet],
    ) -> nodes.Tasklet:
        """Add one flat map step (a task): ``ranges`` around a Python tasklet ``code``.

        Inputs are read from the latest version of each container in the compute state, so steps
        added later see the results of earlier ones. The tasklet's connectors are the keys of
        ``inputs`` and ``outputs`` prefixed with ``__`` (see :func:`connector`; ``code`` is
        rewritten accordingly), so that they never clash with the names of the containers of the
        program the expansion is inlined into. Returns the tasklet.
        """
        names = {name: connector(name) for name in (*inputs, *outputs)}
        read_nodes = {m.data: self._read(m.data) for m in inputs.values()}
        write_nodes = {m.data: self.state.add_access(m.data) for m in outputs.values()}
        tasklet, _, _ = self.state.add_mapped_tasklet(
            f"{self.label}_{label}",
            dict(ranges),
            {names[name]: memlet for name, memlet in inputs.items()},
            _renamed(code, names),
            {names[name]: memlet for name, memlet in outputs.items()},
            external_edges=True,
            input_nodes=read_nodes,
            output_nodes=write_nodes,
        )
        self._latest.update(write_nodes)
        return tasklet

    def init(self, name: str, value: str, language: dace.Language = dace.Language.Python) -> None:
        """Write ``value`` (an expression in ``language``) to every element of ``name``, before the compute state."""
        if self._init_state is None:
            self._init_state = self.sdfg.add_state_before(self.state, f"{self.label}_init")
        shape = onnx_shape(self.desc(name))
        params = index_params(len(shape))
        self._init_state.add_mapped_tasklet(
            f"{self.label}_init_{name}",
            index_ranges(params, shape),
            {},
            f"__out = {value};" if language == dace.Language.CPP else f"__out = {value}",
            {"__out": dace.Memlet(f"{name}[{subscript(params)}]")},
            language=language,
            external_edges=True,
        )

    def _read(self, name: str) -> nodes.AccessNode:
        if name not in self._latest:
            self._latest[name] = self.state.add_read(name)
        return self._latest[name]
