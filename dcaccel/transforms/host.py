"""Host tasks: an ONNX op that neither dcaccel nor DaCe can expand runs through onnxruntime, called back from
the compiled program.

The node is replaced by one tasklet (a code node marked opaque, :mod:`dcaccel.transforms.opaque`) whose connectors
keep the node's ONNX connector names (prefixed with ``_`` where one names a container of the SDFG) and read and
write its whole tensors; its code calls a DaCe callback (a symbol of type ``dace.callback``, an argument of the
compiled program) with a pointer to every input and output, inputs first in the node's ONNX order (a scalar input
by value; a scalar output, a 0-d tensor such as Det's of one matrix, by its address, which the callback sees as an
array of one element). The callback is a :class:`HostCall`: a one-node ONNX model of the op (its attributes, its
opset version, the element types and shapes of its tensors, which ONNX shape inference gave the imported model) run
by an onnxruntime session that writes its results into the outputs. :func:`host_callbacks` gives a program's
callbacks by symbol name (:mod:`dcaccel.frontend.execution` passes them on every run). An op onnxruntime has no
kernel for is refused when its host task is built; a call that fails at run time cannot raise through the compiled
program (ctypes drops a callback's exception, leaving the outputs unwritten): it is recorded, and
:func:`raising_host_failures` raises it, naming op and node, once the program call returns. The DAG extraction
counts the task like every opaque task: its volumes the sizes of its tensors, its arithmetic from its op and shapes
(:func:`dcaccel.dag.arithmetic.opaque_arithmetic`).
"""

import contextlib
import functools
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import dace
import numpy as np
from dace.libraries.onnx.nodes.onnx_op import ONNXOp
from dace.sdfg import nodes

from dcaccel.errors import UnsupportedOpError

#: The name of the implementation that runs an op through onnxruntime on the host.
HOST_IMPLEMENTATION = "onnxruntime"

#: The callbacks of every host task built in this process, by callback symbol.
_CALLS: dict[str, "HostCall"] = {}


@dataclass(frozen=True)
class HostCall:
    """One op run by onnxruntime: its one-node model and the ONNX names of the callback's arguments, inputs
    first, then outputs."""

    model: bytes
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    op: str
    node: str

    def __call__(self, *arrays: np.ndarray) -> None:
        """Run the op on the input ``arrays`` and write its results into the output ones (same order). A scalar
        input arrives as a Python number: it is given to onnxruntime as an array of its ONNX element type. A
        failure (onnxruntime's, or a result of another size than its output) is recorded for
        :func:`raising_host_failures`: raised here, ctypes would drop it."""
        try:
            self._run(arrays)
        except Exception as err:  # anything onnxruntime raises; the user gets one line after the program call
            detail = str(err).splitlines()[0] if str(err) else type(err).__name__
            _FAILURES.append(UnsupportedOpError(self.op, self.node, f"onnxruntime failed on the host: {detail}"))

    def _run(self, arrays: tuple[np.ndarray, ...]) -> None:
        types = _input_types(self.model)
        feed = {
            name: np.asarray(a, types[name]) for name, a in zip(self.inputs, arrays[: len(self.inputs)], strict=True)
        }
        results = _session(self.model).run(list(self.outputs), feed)
        for name, target, result in zip(self.outputs, arrays[len(self.inputs) :], results, strict=True):
            result = np.asarray(result)
            if result.size != target.size:
                raise ValueError(f"output '{name}' has shape {list(result.shape)}, not {list(target.shape)}")
            target[...] = result.reshape(target.shape)


#: The failures of host calls since :func:`raising_host_failures` was entered, first first.
_FAILURES: list[UnsupportedOpError] = []


@contextlib.contextmanager
def raising_host_failures():
    """Run the body (a call of a compiled program); if a host call failed during it, raise the first failure
    (:class:`UnsupportedOpError` naming op and node) when it returns."""
    _FAILURES.clear()
    yield
    failures = list(_FAILURES)
    _FAILURES.clear()
    if failures:
        raise failures[0]


@functools.lru_cache(maxsize=64)
def _input_types(model: bytes) -> dict[str, np.dtype]:
    """The numpy type of every input of a one-node model."""
    import onnx

    graph = onnx.load_from_string(model).graph
    return {v.name: onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type) for v in graph.input}


@functools.lru_cache(maxsize=64)
def _session(model: bytes):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: not its notes on the one-node model's opset stamp
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def host_callbacks(parameters: Iterable[str]) -> dict[str, HostCall]:
    """The callbacks among a program's ``parameters`` (its argument names), by name."""
    return {name: _CALLS[name] for name in parameters if name in _CALLS}


def _onnx_names(node: ONNXOp, connectors: set[str], params) -> list[str]:
    """The node's connectors in ONNX order, ``""`` for an absent optional one (trailing ones left out)."""
    names = []
    for param in params:
        variadic = sorted(
            (c for c in connectors if c.startswith(f"{param.name}__")), key=lambda c: int(c[2 + len(param.name) :])
        )
        names.extend(variadic or [param.name if param.name in connectors else ""])
    while names and not names[-1]:
        names.pop()
    return names


def _value_info(name: str, desc: dace.data.Data):
    from onnx import helper

    shape = [] if isinstance(desc, dace.data.Scalar) else [int(s) if str(s).isdigit() else str(s) for s in desc.shape]
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(desc.dtype.type)), shape)


def one_node_model(node: ONNXOp, descs: dict[str, dace.data.Data], inputs: list[str], outputs: list[str]) -> bytes:
    """The ONNX model of ``node`` alone: its op, attributes and opset version; graph inputs and outputs the
    tensors ``descs`` describes (by connector)."""
    from onnx import helper

    from dcaccel.frontend.ops import op_type  # (dcaccel.frontend imports this module)

    attributes = {name: getattr(node, name) for name in node.schema.attributes if getattr(node, name, None) is not None}
    try:
        proto = helper.make_node(node.schema.name, inputs, outputs, domain=node.schema.domain, **attributes)
    except (TypeError, ValueError) as err:
        raise UnsupportedOpError(op_type(node), node.label, f"attributes onnxruntime cannot be given: {err}") from None
    graph = helper.make_graph(
        [proto],
        node.label,
        [_value_info(name, descs[name]) for name in inputs if name],
        [_value_info(name, descs[name]) for name in outputs if name],
    )
    opset = helper.make_opsetid(node.schema.domain, node.schema.since_version)
    return helper.make_model(graph, opset_imports=[opset], ir_version=9).SerializeToString()


def _host_model(node: ONNXOp, state: dace.SDFGState) -> tuple[dict, list[str], list[str], bytes]:
    """The tensors of ``node`` by connector, its ONNX inputs and outputs, and the one-node model onnxruntime runs for
    it. :class:`UnsupportedOpError` for attributes onnxruntime cannot be given, or an op it has no kernel for."""
    from dcaccel.frontend.ops import op_type  # (dcaccel.frontend imports this module)

    sdfg = state.sdfg
    descs = {e.dst_conn: sdfg.arrays[e.data.data] for e in state.in_edges(node) if not e.data.is_empty()}
    descs |= {e.src_conn: sdfg.arrays[e.data.data] for e in state.out_edges(node) if not e.data.is_empty()}
    inputs = _onnx_names(node, set(node.in_connectors), node.schema.inputs)
    outputs = _onnx_names(node, set(node.out_connectors), node.schema.outputs)
    model = one_node_model(node, descs, inputs, outputs)
    try:
        _session(model)
    except Exception as err:  # onnxruntime's own errors (no kernel for the op, its version or its types)
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UnsupportedOpError(
            op_type(node), node.label, f"onnxruntime cannot run it on the host: {detail}"
        ) from None
    return descs, inputs, outputs, model


def check_host(node: ONNXOp, state: dace.SDFGState) -> None:
    """Raise :class:`UnsupportedOpError` unless onnxruntime can run ``node`` as a host task (without touching it)."""
    _host_model(node, state)


def host_task(node: ONNXOp, state: dace.SDFGState) -> nodes.Tasklet:
    """Replace ``node`` by the host task calling onnxruntime for it (see the module docstring); returns the
    tasklet, not yet marked opaque. :class:`UnsupportedOpError` for attributes onnxruntime cannot be given, or
    an op onnxruntime has no kernel for."""

    from dcaccel.frontend.ops import op_type  # (dcaccel.frontend imports this module)

    sdfg = state.sdfg
    in_edges, out_edges = list(state.in_edges(node)), list(state.out_edges(node))
    descs, inputs, outputs, model = _host_model(node, state)
    connector = _free_connectors(sdfg, (*node.in_connectors, *node.out_connectors))
    arguments = [name for name in (*inputs, *outputs) if name]
    symbol = f"__dcaccel_host_{hashlib.sha256(model).hexdigest()[:16]}"
    _CALLS[symbol] = HostCall(
        model, tuple(n for n in inputs if n), tuple(n for n in outputs if n), op_type(node), node.label
    )
    callback = dace.callback(
        None,
        *(_callback_type(descs[name]) for name in inputs if name),
        *(_callback_output_type(descs[name]) for name in outputs if name),
    )
    _declare(sdfg, symbol, callback)
    tasklet = state.add_tasklet(
        node.label,
        {connector[name] for name in node.in_connectors},
        {connector[name] for name in node.out_connectors},
        f"{symbol}({', '.join(connector[name] for name in arguments)})",
        side_effects=True,
    )
    for edge in in_edges:
        state.add_edge(edge.src, edge.src_conn, tasklet, connector[edge.dst_conn], edge.data)
        if isinstance(descs.get(edge.dst_conn), dace.data.Array):  # a pointer, even to one element
            tasklet.in_connectors[connector[edge.dst_conn]] = dace.pointer(descs[edge.dst_conn].dtype)
    for edge in out_edges:
        state.add_edge(tasklet, connector[edge.src_conn], edge.dst, edge.dst_conn, edge.data)
        tasklet.out_connectors[connector[edge.src_conn]] = dace.pointer(descs[edge.src_conn].dtype)
    state.remove_node(node)
    return tasklet


def _free_connectors(sdfg: dace.SDFG, names) -> dict[str, str]:
    """A tasklet connector per ONNX connector name: the name itself, prefixed with ``_`` while it is the name of a
    container or symbol of ``sdfg`` (a model output called ``output`` and Tile's ``output`` connector)."""
    taken = set(sdfg.arrays) | set(sdfg.symbols) | set(sdfg.constants)
    free = {}
    for name in names:
        free[name] = name
        while free[name] in taken:
            free[name] = "_" + free[name]
    return free


def _callback_type(desc: dace.data.Data) -> dace.data.Data:
    """The type of a callback argument: the tensor (an array, passed as a pointer), or a scalar's value."""
    return desc if isinstance(desc, dace.data.Array) else desc.dtype


def _callback_output_type(desc: dace.data.Data) -> dace.data.Array:
    """The type of a callback's output argument: the tensor, passed as a pointer; a scalar as an array of its one
    element (the tasklet passes the scalar's address)."""
    return desc if isinstance(desc, dace.data.Array) else dace.data.Array(desc.dtype, [1])


def _declare(sdfg: dace.SDFG, symbol: str, callback: dace.callback) -> None:
    """Declare the callback ``symbol`` in ``sdfg`` and every SDFG it is nested in, mapped through each nested
    SDFG node, so that it is an argument of the top-level program."""
    while sdfg is not None:
        if symbol not in sdfg.symbols:
            sdfg.add_symbol(symbol, callback)
        if sdfg.parent_nsdfg_node is not None:
            sdfg.parent_nsdfg_node.symbol_mapping[symbol] = symbol
        sdfg = sdfg.parent_sdfg
