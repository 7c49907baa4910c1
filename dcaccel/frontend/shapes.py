"""Shapes with symbolic sizes: evaluating them, binding symbols from the arrays a user passes, and the output
shapes of the ONNX ops whose shape comes from an input's value.

A dimension is an int or a string (a symbol name such as ``"N"``, or an expression such as
``"N + 1"``), as :class:`~dcaccel.frontend.workload.TensorSpec` stores it.

DaCe's ONNX importer gives every tensor the shape onnxruntime's symbolic shape inference infers. For the ops of
:data:`SHAPE_INPUTS` that inference names an output size it cannot compute (``OneHot_0_o0__d0``), a symbol
nothing gives a value, or writes no shape, even where the shape-giving inputs are constants.
:func:`infer_onnx_shapes`, which :func:`install_shape_inference` makes the inference DaCe's importer runs, takes
those outputs' shapes from ONNX's own shape inference with data propagation instead (Compress and MaxUnpool:
from their constant condition and ``output_shape``), and refuses in one line an op whose output shape depends
on input values. It does the same for the outputs onnxruntime's inference shapes wrongly (GatherND's with
``batch_dims``) or leaves without a shape (the opset-18 reductions); an output it shaped wrongly that other
nodes read is refused in one line (their shapes followed from the wrong one). A reduction's empty constant
``axes``, which that inference reads as no reduction, is left out first (:func:`_without_empty_axes`).
"""

import functools
from collections.abc import Iterable, Mapping

import dace
import numpy as np
import onnx

from dcaccel.errors import DcaccelError, ShapeError, UnboundSymbolError, UnsupportedOpError

AXES_INPUT_REDUCTIONS = (
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSum",
    "ReduceSumSquare",
)
"""The reductions whose axes are their input 1 (``ReduceSum`` from opset 13, the others from opset 18)."""

SHAPE_INPUTS: dict[str, tuple[int, ...]] = {
    "AffineGrid": (1,),
    "Col2Im": (1, 2),
    "Compress": (1,),
    "DFT": (1, 2),
    "MaxUnpool": (2,),
    "MelWeightMatrix": (0, 1),
    "OneHot": (1,),
    "STFT": (1, 3),
    "Upsample": (1,),
    # onnxruntime's inference ignores batch_dims (the output of batch_dims 0).
    "GatherND": (),
    # The axes input: onnxruntime's inference writes no shape for the opset-18 forms of most (ReduceL1's output
    # stays without one).
    **dict.fromkeys(AXES_INPUT_REDUCTIONS, (1,)),
}
"""The ONNX ops whose output shape follows from the values of some inputs, by their positions (or that
onnxruntime's inference shapes wrongly: no position): a constant there gives a concrete shape, anything else is
refused (:data:`DATA_SHAPED`)."""

DATA_SHAPED = frozenset({"NonMaxSuppression", "NonZero", "Unique"})
"""The ONNX ops whose output shape always depends on the values of their data."""


def dimension_str(dim) -> int | str:
    """A dimension as a TensorSpec stores it: an int when it is constant, else its expression as a string."""
    expr = dace.symbolic.pystr_to_symbolic(str(dim)) if not isinstance(dim, int | np.integer) else int(dim)
    if isinstance(expr, int) or expr.is_Integer:
        return int(expr)
    return str(expr)


def positive_size(what: str, value) -> int:
    """``value`` as an int when it is a positive integer (``bool`` is not); else :class:`DcaccelError`
    naming ``what`` (``"symbol 'batch'"``, ``"workload 'mmm': size 'N'"``)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise DcaccelError(f"{what}: expected a positive integer, got {value!r}")
    return int(value)


def check_symbols(symbols: Mapping[str, int] | None) -> dict[str, int] | None:
    """The values of symbolic sizes as ints (None stays None); raises :class:`DcaccelError` naming the
    first symbol whose value is not a positive integer."""
    if symbols is None:
        return None
    if not isinstance(symbols, Mapping):
        raise DcaccelError(f"symbols: expected a mapping from names to sizes, got a {type(symbols).__name__}")
    return {str(name): positive_size(f"symbol '{name}'", value) for name, value in symbols.items()}


def check_symbol_names(symbols: Mapping[str, int], known: Iterable[str], source: str) -> None:
    """Raise :class:`DcaccelError` naming the first of ``symbols`` that is none of the ``known`` symbolic
    sizes of ``source`` (a value for a size the model does not have is a mistake, not a default)."""
    known = sorted(known)
    unknown = sorted(set(symbols) - set(known))
    if unknown:
        has = f"its symbolic sizes: {', '.join(known)}" if known else "it has none"
        raise DcaccelError(f"symbol '{unknown[0]}': not a symbolic size of {source} ({has})")


def concrete_shape(tensor: str, shape: Iterable[int | str], symbols: Mapping[str, int]) -> tuple[int, ...]:
    """``shape`` with every symbolic size replaced by its value in ``symbols``.

    Raises :class:`DcaccelError` naming the dimension and ``tensor`` when a size has no value.
    """
    return tuple(_evaluate(tensor, dim, symbols) for dim in shape)


def bind_symbols(specs, arrays: Mapping[str, np.ndarray], defaults: Mapping[str, int]) -> dict[str, int]:
    """Symbol values that make the shapes of ``specs`` fit ``arrays``, starting from ``defaults``.

    A dimension that is a single symbol takes its value from the array (the array's shape wins over
    the default); every dimension is then checked. Raises :class:`ShapeError` naming the tensor when
    an array does not fit, and :class:`DcaccelError` when an input is missing or unknown.
    """
    names = {spec.name for spec in specs}
    missing = [name for name in names if name not in arrays]
    unknown = [name for name in arrays if name not in names]
    if missing or unknown:
        detail = f"missing {sorted(missing)}" if missing else f"unknown {sorted(unknown)}"
        raise DcaccelError(f"inputs do not match the workload's inputs {sorted(names)}: {detail}")
    bound: dict[str, int] = {}
    for spec in specs:
        got = np.shape(arrays[spec.name])
        if len(got) != len(spec.shape):
            raise ShapeError(spec.name, spec.shape, got)
        for dim, size in zip(spec.shape, got, strict=True):
            if isinstance(dim, str) and dim.isidentifier():
                bound.setdefault(dim, int(size))
    symbols = {**defaults, **bound}
    for spec in specs:
        got = tuple(np.shape(arrays[spec.name]))
        expected = tuple(_evaluate(spec.name, dim, symbols) for dim in spec.shape)
        if expected != got:
            raise ShapeError(spec.name, _display(spec.shape, symbols), got)
    return symbols


def _evaluate(tensor: str, dim: int | str, symbols: Mapping[str, int]) -> int:
    """The value of one dimension under ``symbols``."""
    if isinstance(dim, int | np.integer):
        return int(dim)
    expr = dace.symbolic.pystr_to_symbolic(dim)
    unbound = sorted(str(s) for s in expr.free_symbols if str(s) not in symbols)
    if unbound:
        raise UnboundSymbolError(tensor, unbound[0])
    return int(expr.subs({s: symbols[str(s)] for s in expr.free_symbols}))


def _display(shape: Iterable[int | str], symbols: Mapping[str, int]) -> tuple[int | str, ...]:
    """A shape for an error message: evaluated where possible, symbolic where not."""
    shown = []
    for dim in shape:
        try:
            shown.append(_evaluate("", dim, symbols))
        except DcaccelError:
            shown.append(dim)
    return tuple(shown)


def infer_onnx_shapes(model: onnx.ModelProto, auto_merge: bool = False) -> onnx.ModelProto:
    """``model`` with the shapes of its tensors inferred by DaCe's importer's inference (onnxruntime's symbolic
    one), the outputs of the :data:`SHAPE_INPUTS` ops shaped from their constant inputs.

    Raises :class:`UnsupportedOpError` for a node of a :data:`DATA_SHAPED` op, or of a :data:`SHAPE_INPUTS` op
    whose shape-giving input is not a constant: its output shape depends on input values (before any inference
    runs).
    """
    model = _without_empty_axes(model)
    nodes = [node for node in model.graph.node if not node.domain]
    if not any(node.op_type in SHAPE_INPUTS or node.op_type in DATA_SHAPED for node in nodes):
        return _dace_inference()(model, auto_merge=auto_merge)
    constants = _constants(model.graph)
    for index, node in enumerate(model.graph.node):
        if node.domain or node.op_type not in (*SHAPE_INPUTS, *DATA_SHAPED):
            continue
        given = [node.input[k] for k in SHAPE_INPUTS.get(node.op_type, ()) if k < len(node.input) and node.input[k]]
        variable = [name for name in given if name not in constants]
        if node.op_type in DATA_SHAPED or variable:
            why = f" (input '{variable[0]}' is not a constant)" if variable else ""
            raise UnsupportedOpError(
                node.op_type, node.name or f"{node.op_type}_{index}", f"output shape depends on input values{why}"
            )
    inferred = _dace_inference()(model, auto_merge=auto_merge)
    propagated = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    known = _values(propagated.graph)
    values = _values(inferred.graph)
    read = {name for node in model.graph.node for name in node.input}
    for index, node in enumerate(model.graph.node):
        if node.op_type not in SHAPE_INPUTS or node.domain:
            continue
        for name in node.output:
            rule = _SHAPE_RULES.get(node.op_type)
            dims = (rule and rule(node, values, constants)) or _concrete(known.get(name, [None])[0])
            if not name or dims is None:
                continue
            wrong = {tuple(found) for found in map(_concrete, values.get(name, ())) if found not in (None, dims)}
            if wrong and name in read:  # the shapes inferred from it downstream are wrong too
                raise UnsupportedOpError(
                    node.op_type,
                    node.name or f"{node.op_type}_{index}",
                    f"onnxruntime's shape inference gives '{name}' the shape {list(wrong.pop())}, not {dims}, "
                    "and shapes the nodes reading it from that",
                )
            for value in values.get(name, ()):
                _set_shape(value, dims, known.get(name, [value])[0])
    for name, found in values.items():  # downstream of those outputs (OneHot → Cast), onnxruntime's shapes are symbols
        dims = _concrete(known.get(name, [None])[0])
        for value in found:
            if dims is not None and _concrete(value) is None:
                _set_shape(value, dims, known[name][0])
    return inferred


def _without_empty_axes(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with the empty constant ``axes`` input of every reduction that then reduces every axis
    (``noop_with_empty_axes`` 0) left out, which means the same (``model`` itself when it has none): onnxruntime's
    inference reads empty axes as no reduction, and shapes the nodes after it from that."""

    def empty_axes(node: onnx.NodeProto, constants: dict) -> bool:
        noop = any(a.name == "noop_with_empty_axes" and a.i for a in node.attribute)
        axes = node.input[1] if node.op_type in AXES_INPUT_REDUCTIONS and len(node.input) > 1 else ""
        return not node.domain and not noop and axes in constants and constants[axes].size == 0

    constants = _constants(model.graph)
    if not any(empty_axes(node, constants) for node in model.graph.node):
        return model
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    dropped = set()
    for node in rewritten.graph.node:
        if empty_axes(node, constants):
            dropped.add(node.input[1])
            del node.input[1:]
    read = {name for node in rewritten.graph.node for name in node.input}
    kept = [init for init in rewritten.graph.initializer if init.name in read or init.name not in dropped]
    del rewritten.graph.initializer[:]
    rewritten.graph.initializer.extend(kept)
    return rewritten


def install_shape_inference() -> None:
    """Make :func:`infer_onnx_shapes` the shape inference DaCe's ONNX importer runs on every model it imports
    (it looks the function up by name in its module when it imports a model); idempotent."""
    from dace.frontend.ml.onnx import importer

    _dace_inference()
    importer.infer_shapes_onnx_model = infer_onnx_shapes


@functools.cache
def _dace_inference():
    """DaCe's own ``infer_shapes_onnx_model`` (before :func:`install_shape_inference` replaced it)."""
    from dace.frontend.ml.onnx import importer

    return importer.infer_shapes_onnx_model


def _values(graph: onnx.GraphProto) -> dict[str, list[onnx.ValueInfoProto]]:
    """The typed values of ``graph`` (inputs, outputs and value infos) by name."""
    values: dict[str, list[onnx.ValueInfoProto]] = {}
    for value in (*graph.input, *graph.output, *graph.value_info):
        values.setdefault(value.name, []).append(value)
    return values


def _constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """The values of the initializers and ``Constant`` nodes (of a ``value`` tensor) of ``graph``."""
    values = {init.name: onnx.numpy_helper.to_array(init) for init in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and not node.domain:
            for attribute in node.attribute:
                if attribute.name == "value":
                    values[node.output[0]] = onnx.numpy_helper.to_array(attribute.t)
    return values


def _concrete(value: onnx.ValueInfoProto | None) -> list[int] | None:
    """The dimensions of ``value`` when each is a value, else None."""
    if value is None or not value.type.tensor_type.HasField("shape"):
        return None
    dims = value.type.tensor_type.shape.dim
    return [dim.dim_value for dim in dims] if all(dim.HasField("dim_value") for dim in dims) else None


def _compressed_shape(node: onnx.NodeProto, values: dict, constants: dict) -> list[int] | None:
    """The output shape of a Compress of constant condition: the kept slices along ``axis`` (the flattened
    input without one), a condition shorter than the axis dropping the rest."""
    data = _concrete(values.get(node.input[0], [None])[0])
    if data is None:
        return None
    axis = next((attribute.i for attribute in node.attribute if attribute.name == "axis"), None)
    length = int(np.prod(data)) if axis is None else data[axis]
    kept = int(np.count_nonzero(np.asarray(constants[node.input[1]]).reshape(-1)[:length]))
    if axis is None:
        return [kept]
    return [kept if d == axis % len(data) else size for d, size in enumerate(data)]


def _unpooled_shape(node: onnx.NodeProto, values: dict, constants: dict) -> list[int] | None:
    """The output shape of a MaxUnpool of constant ``output_shape`` (None without one)."""
    given = node.input[2] if len(node.input) > 2 else ""
    return [int(v) for v in constants[given].reshape(-1)] if given else None


_SHAPE_RULES = {"Compress": _compressed_shape, "MaxUnpool": _unpooled_shape}
"""The output shape of the ops ONNX's inference does not compute from their constant inputs, by op type: a
function of the node, the typed values by name and the constants (None: no shape)."""


def _set_shape(value: onnx.ValueInfoProto, dims: list[int], typed: onnx.ValueInfoProto) -> None:
    """Give ``value`` the shape ``dims`` (and the element type of ``typed`` when it has none)."""
    tensor_type = value.type.tensor_type
    if not tensor_type.elem_type:
        tensor_type.elem_type = typed.type.tensor_type.elem_type
    tensor_type.shape.Clear()
    for size in dims:
        tensor_type.shape.dim.add().dim_value = size
