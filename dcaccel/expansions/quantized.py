"""Quantized and integer ops: ``QuantizeLinear``, ``DequantizeLinear``, ``DynamicQuantizeLinear`` (element-wise)
and the integer products ``MatMulInteger``, ``ConvInteger``, ``QLinearMatMul``, ``QLinearConv`` through the
canonical MMM shapes.

- ``QuantizeLinear`` — y = saturate(rint(x / scale) + zero_point), rounding half to even, saturating to the
  output type (int8, uint8, int16, uint16); ``DequantizeLinear`` — y = (x - zero_point) · scale (x of those
  types or int32; the zero point subtracted in int32, the product in float). One flat map ``Quantize`` /
  ``Dequantize`` over x, row-major: x is read once, the output written once in x's order. The scale and zero
  point are per tensor (one element), per axis (a vector along ``axis``) or blocked (``block_size`` consecutive
  elements along ``axis`` share one); read once per element of x, they are REUSE buffers when another task
  produces them. ``DynamicQuantizeLinear`` (float32 to uint8) reduces x to its range first, computes its scale
  and zero point (outputs y_scale and y_zero_point) in one task, then quantizes like ``QuantizeLinear``.
- ``MatMulInteger`` — Y = (A - a_zero_point) · (B - b_zero_point) in int32 (numpy semantics, batched): ``ShiftA``
  and ``ShiftB`` write the operands minus their zero points in int32, row by row (a zero point per tensor, per
  row of A, per column of B, or of higher rank broadcast by numpy rules), then one (batched) MMM node in the
  chosen shape writes Y.
- ``QLinearMatMul`` — the same integer product into a transient ``Y_acc``, then ``Requantize`` reads it row by
  row: y = saturate(rint(acc · a_scale · b_scale / y_scale) + y_zero_point), the multiplier in float32 as
  onnxruntime computes it (scales per tensor, per row of A and Y, per column of B).
- ``ConvInteger`` — ``ShiftX`` and ``ShiftW`` (x minus its zero point per tensor, w minus its zero point per
  tensor or per output channel, in int32, row-major), then the im2col convolution of Conv
  (:func:`dcaccel.expansions.conv.build_im2col_sdfg`, nested: ``Wr``, ``Xr``, MMM, ``ReshapeOut``) on int32, so
  that padding reads a shifted zero; ``QLinearConv`` adds its int32 bias in the im2col's ``AddBias`` and a
  ``Requantize`` task (w_scale per tensor or per output channel).

The transients between the tasks carry the marks the MMM shape's orders imply
(:func:`~dcaccel.expansions.mmm.buffer_reason_between`); the shifted convolution input is a REUSE buffer (the
im2col reads its elements once per kernel position). Rounding is half to even (``std::nearbyint``) and every
division is rounded once (:func:`quotient`). Refused in one line naming the op, the node and the input or
attribute: the types DaCe cannot represent (float8, int4, int2, float4), a scale or zero point of another shape
than above, an ``output_dtype`` the import did not type the output with, a ``precision`` other than float.
"""

import math

import dace
import numpy as np
import onnx
from dace import Memlet
from dace.libraries.onnx.converters import onnx_tensor_type_to_typeclass
from dace.sdfg.utils import in_desc_with_name, out_desc_with_name

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import (
    WCR_MAX,
    ExpansionBuilder,
    at_axis,
    broadcast_indices,
    index_params,
    index_ranges,
    is_broadcast,
    subscript,
    whole,
)
from dcaccel.expansions.conv import ConvGeometry, build_im2col_sdfg, conv_geometry_of
from dcaccel.expansions.gemm import add_mmm, check_matmul_shapes
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.mmm import MMM, Order, buffer_reason_between
from dcaccel.expansions.node import CanonicalForward, input_shape, node_builder, normalize_axis, unsupported
from dcaccel.expansions.reduce import WCR_MIN

ACCUMULATOR = dace.int32
"""The element type of the integer products."""

PRODUCT_TYPES = (dace.int8, dace.uint8)
"""Element types of the quantized operands of the products."""

QUANTIZED_TYPES = (dace.int8, dace.uint8, dace.int16, dace.uint16)
"""Element types QuantizeLinear writes (DequantizeLinear also reads int32)."""

SCALE_TYPES = (dace.float16, dace.float32)
"""Element types of the scales (and of DequantizeLinear's output)."""

REFUSED_TYPES = "float8, int4, int2 and float4 are not lowered"


# ---------------------------------------------------------------------------------------------
# Checks and parameter indices


def _check_type(node, state, sdfg, connector: str, allowed) -> None:
    """:class:`UnsupportedOpError` unless the element type of input ``connector`` (if connected) is ``allowed``."""
    if connector in node.in_connectors:
        _check_allowed(node, f"input '{connector}'", in_desc_with_name(node, state, sdfg, connector).dtype, allowed)


def _check_output_type(node, state, sdfg, connector: str, allowed) -> None:
    """:class:`UnsupportedOpError` unless the element type of output ``connector`` is ``allowed``."""
    _check_allowed(node, f"output '{connector}'", out_desc_with_name(node, state, sdfg, connector).dtype, allowed)


def _check_allowed(node, what: str, dtype: dace.typeclass, allowed) -> None:
    if dtype not in allowed:
        names = ", ".join(t.to_string() for t in allowed)
        raise unsupported(node, f"{what} of type {dtype.to_string()} ({names}; {REFUSED_TYPES})")


def _check_output_dtype(node, state, sdfg) -> None:
    """:class:`UnsupportedOpError` when the ``output_dtype`` attribute names another type than the import gave y
    (DaCe's type inference ignores the attribute: y is then typed as without it)."""
    declared = int(getattr(node, "output_dtype", 0) or 0)
    typed = out_desc_with_name(node, state, sdfg, "y").dtype
    if declared and onnx_tensor_type_to_typeclass(declared) != typed:
        name = onnx.TensorProto.DataType.Name(declared)
        raise unsupported(node, f"output_dtype {name}, but the import typed y {typed.to_string()} (ignoring it)")


def quantization_index(node, x_shape: tuple, parameter_shape: tuple, params: list[str]) -> str:
    """The subscript of the scale (or zero point) of ``parameter_shape`` that element ``params`` of x reads:
    one element (per tensor), ``params[axis]`` (a vector along ``axis``) or, with ``block_size``, the block
    ``params[axis] // block_size`` along ``axis`` (the parameter has x's shape elsewhere).
    :class:`UnsupportedOpError` for a parameter shape that is none of these."""
    if math.prod(parameter_shape) == 1:
        return subscript([0] * len(parameter_shape))
    axis = normalize_axis(int(getattr(node, "axis", 1)), len(x_shape), node)
    block = int(getattr(node, "block_size", 0) or 0)
    if not block:
        if tuple(parameter_shape) != (x_shape[axis],):
            raise unsupported(node, f"a scale of shape {tuple(parameter_shape)} for axis {axis} of x {tuple(x_shape)}")
        return params[axis]
    blocked = tuple(at_axis(x_shape, axis, -(-x_shape[axis] // block)))
    if tuple(parameter_shape) != blocked:
        raise unsupported(node, f"a scale of shape {tuple(parameter_shape)} for blocks of {block} along {axis}")
    return subscript(at_axis(params, axis, f"{params[axis]} // {block}"))


def side_index(node, name: str, parameter_shape: tuple, shape: tuple, params: list[str], axis: int | None) -> str:
    """The subscript of the zero point (or scale) ``name`` of ``parameter_shape`` that element ``params`` of
    an operand of ``shape`` reads: one element (per tensor), a vector as long as ``axis`` (per row, per column
    or per output channel), or a higher-rank parameter broadcast by numpy rules; :class:`UnsupportedOpError`
    otherwise, and for anything but one element when ``axis`` is None (per tensor only)."""
    if math.prod(parameter_shape) == 1:
        return subscript([0] * len(parameter_shape))
    if axis is None:
        raise unsupported(node, f"'{name}' of shape {tuple(parameter_shape)} (one element only)")
    if len(parameter_shape) == 1:
        if len(shape) < abs(axis) or parameter_shape[0] != shape[axis]:
            raise unsupported(node, f"'{name}' of shape {tuple(parameter_shape)} for axis {axis} of {tuple(shape)}")
        return params[axis]
    try:
        if np.broadcast_shapes(tuple(parameter_shape), tuple(shape)) == tuple(shape):
            return subscript(broadcast_indices(parameter_shape, shape, params))
    except (ValueError, TypeError):  # shapes that do not broadcast, or symbolic sizes
        pass
    raise unsupported(node, f"'{name}' of shape {tuple(parameter_shape)} for an operand of shape {tuple(shape)}")


def _parameter_inputs(builder: ExpansionBuilder, indices: dict[str, str], shape: tuple) -> dict[str, Memlet]:
    """The memlets of the parameters (connector -> subscript) an element of ``shape`` reads, each from a
    REUSE buffer when it is broadcast and another task produces it."""
    memlets = {}
    for name, index in indices.items():
        desc = builder.desc(name)
        own = tuple(desc.shape) if isinstance(desc, dace.data.Array) else ()
        memlets[name] = Memlet(f"{builder.operand(name, is_broadcast(own, shape))}[{index}]")
    return memlets


def quotient(dividend: str, divisor: str, dtype: str = "float") -> str:
    """A C++ expression for ``dividend / divisor`` rounded once to ``dtype`` (float: divided in double, then
    rounded; the compiler's ``-freciprocal-math`` may make a division a multiplication by the reciprocal, which
    is off by an ulp in float, enough to move a value across a rounding tie)."""
    wide = "double" if dtype == "float" else dtype
    return f"static_cast<{dtype}>(static_cast<{wide}>({dividend}) / static_cast<{wide}>({divisor}))"


def _limits(dtype: dace.typeclass) -> tuple[str, str]:
    info = np.iinfo(dtype.type)
    return f"{float(info.min)!r}f", f"{float(info.max)!r}f"


def _saturated(value: str, zero: str | None, dtype: dace.typeclass) -> str:
    """C++ statements writing ``__y``: rint(``value``) (a float expression) plus the zero point, saturated to
    ``dtype`` (rounding half to even: the default rounding mode of ``std::nearbyint``)."""
    low, high = _limits(dtype)
    shifted = f"std::nearbyint({value})" + (f" + static_cast<float>({zero})" if zero else "")
    return (
        f"const float __q = {shifted};\n"
        f"__y = static_cast<{dtype.ctype}>(__q < {low} ? {low} : (__q > {high} ? {high} : __q));"
    )


# ---------------------------------------------------------------------------------------------
# QuantizeLinear, DequantizeLinear


def build_linear_quantization_sdfg(builder: ExpansionBuilder, quantize: bool, shape: tuple, indices: dict[str, str]):
    """``Quantize`` (``quantize``) or ``Dequantize``: one flat map over x (``shape``) in row-major order writing
    y = saturate(rint(x / scale) + zero_point) or y = (x - zero_point) · scale; ``indices`` gives the subscript
    of each parameter (``y_scale``/``x_scale``, zero point) an element reads. ``builder`` holds the node's
    arguments (``x``, the parameters, ``y``)."""
    params = index_params(len(shape))
    element = subscript(params)
    inputs = {"x": Memlet(f"x[{element}]"), **_parameter_inputs(builder, indices, shape)}
    scale, *zero = list(indices)
    zero = f"__{zero[0]}" if zero else None
    out_type = builder.desc("y").dtype
    if quantize:
        value = quotient("__x", f"__{scale}", "double" if builder.desc("x").dtype == dace.float64 else "float")
        code = _saturated(value, zero, out_type)
    else:
        difference = f"static_cast<int>(__x) - static_cast<int>({zero})" if zero else "static_cast<int>(__x)"
        code = f"__y = static_cast<{out_type.ctype}>(static_cast<float>({difference}) * static_cast<float>(__{scale}));"
    builder.flat_map(
        "Quantize" if quantize else "Dequantize",
        index_ranges(params, shape),
        inputs,
        code,
        {"y": Memlet(f"y[{element}]")},
        language=dace.Language.CPP,
    )
    return builder.sdfg


def _linear_indices(node, state, sdfg, scale: str, zero: str) -> tuple[tuple, dict[str, str]]:
    """x's shape and the subscripts of the connected parameters ``scale`` and ``zero`` per element of x."""
    shape = input_shape(node, state, sdfg, "x")
    params = index_params(len(shape))
    connected = [c for c in (scale, zero) if c in node.in_connectors]
    return shape, {c: quantization_index(node, shape, input_shape(node, state, sdfg, c), params) for c in connected}


class QuantizeLinear(CanonicalForward):
    """ONNX QuantizeLinear as one flat map (see :func:`build_linear_quantization_sdfg`)."""

    @staticmethod
    def check(node, state, sdfg) -> None:
        _check_type(node, state, sdfg, "x", (dace.float16, dace.float32, dace.float64))
        _check_type(node, state, sdfg, "y_scale", (*SCALE_TYPES, dace.float64))
        _check_type(node, state, sdfg, "y_zero_point", QUANTIZED_TYPES)
        _check_output_type(node, state, sdfg, "y", QUANTIZED_TYPES)
        _check_output_dtype(node, state, sdfg)
        if int(getattr(node, "precision", 0) or 0) not in (0, onnx.TensorProto.FLOAT):
            raise unsupported(node, f"precision {node.precision} (float only)")
        _linear_indices(node, state, sdfg, "y_scale", "y_zero_point")

    @staticmethod
    def forward(node, state, sdfg):
        shape, indices = _linear_indices(node, state, sdfg, "y_scale", "y_zero_point")
        return build_linear_quantization_sdfg(node_builder(node, state, sdfg), True, shape, indices)


class DequantizeLinear(CanonicalForward):
    """ONNX DequantizeLinear as one flat map (see :func:`build_linear_quantization_sdfg`)."""

    @staticmethod
    def check(node, state, sdfg) -> None:
        _check_type(node, state, sdfg, "x", (*QUANTIZED_TYPES, dace.int32))
        _check_type(node, state, sdfg, "x_zero_point", (*QUANTIZED_TYPES, dace.int32))
        _check_type(node, state, sdfg, "x_scale", SCALE_TYPES)
        _check_output_type(node, state, sdfg, "y", SCALE_TYPES)
        _check_output_dtype(node, state, sdfg)
        _linear_indices(node, state, sdfg, "x_scale", "x_zero_point")

    @staticmethod
    def forward(node, state, sdfg):
        shape, indices = _linear_indices(node, state, sdfg, "x_scale", "x_zero_point")
        return build_linear_quantization_sdfg(node_builder(node, state, sdfg), False, shape, indices)


def build_dynamic_quantize_sdfg(builder: ExpansionBuilder, shape: tuple) -> dace.SDFG:
    """DynamicQuantizeLinear of x (``shape``, float32) in ``builder`` (its arguments added), as onnxruntime
    computes it: ``MinMax`` reads x once, row-major, into the ACCUMULATE scalars ``x_min`` and ``x_max``
    (initialised to 0: the range includes zero); ``Parameters`` (one iteration) writes the REUSE scalars
    ``scale`` = (x_max - x_min) / 255 (1 when the range is empty) and ``zero`` = rint(saturate(-x_min / scale)),
    copied into the outputs y_scale and y_zero_point (plain copies); ``Quantize`` writes
    y = saturate(rint(x / scale) + zero) row-major, reading x a second time."""
    params = index_params(len(shape))
    element = subscript(params)
    ranges = index_ranges(params, shape)
    bounds = {name: builder.transient(name, (), dace.float32, BufferReason.ACCUMULATE) for name in ("x_min", "x_max")}
    for bound in bounds.values():
        builder.init(bound, "dace.float32(0)")
    builder.flat_map(
        "MinMax",
        ranges,
        {"v": Memlet(f"x[{element}]")},
        "low = v\nhigh = v",
        {"low": Memlet(f"{bounds['x_min']}[0]", wcr=WCR_MIN), "high": Memlet(f"{bounds['x_max']}[0]", wcr=WCR_MAX)},
    )
    scale = builder.transient("scale", (), dace.float32, BufferReason.REUSE)
    zero = builder.transient("zero", (), dace.uint8, BufferReason.REUSE)
    builder.flat_map(
        "Parameters",
        index_ranges([], ()),
        {"low": Memlet(f"{bounds['x_min']}[0]"), "high": Memlet(f"{bounds['x_max']}[0]")},
        "const float __range = __high - __low;\n"
        f"const float __scale = __range == 0.0f ? 1.0f : {quotient('__range', '255')};\n"
        f"const float __zero = {quotient('-__low', '__scale')};\n"
        "__s = __scale;\n"
        "__z = static_cast<uint8_t>(std::nearbyint(__zero < 0.0f ? 0.0f : (__zero > 255.0f ? 255.0f : __zero)));",
        {"s": Memlet(f"{scale}[0]"), "z": Memlet(f"{zero}[0]")},
        language=dace.Language.CPP,
    )
    builder.copy(scale, "0", "y_scale", "0")
    builder.copy(zero, "0", "y_zero_point", "0")
    builder.flat_map(
        "Quantize",
        ranges,
        {"x": Memlet(f"x[{element}]"), "s": Memlet(f"{scale}[0]"), "z": Memlet(f"{zero}[0]")},
        _saturated(quotient("__x", "__s"), "__z", dace.uint8),
        {"y": Memlet(f"y[{element}]")},
        language=dace.Language.CPP,
    )
    return builder.sdfg


class DynamicQuantizeLinear(CanonicalForward):
    """ONNX DynamicQuantizeLinear as three tasks (see :func:`build_dynamic_quantize_sdfg`)."""

    @staticmethod
    def check(node, state, sdfg) -> None:
        _check_type(node, state, sdfg, "x", (dace.float32,))

    @staticmethod
    def forward(node, state, sdfg):
        shape = input_shape(node, state, sdfg, "x")
        return build_dynamic_quantize_sdfg(node_builder(node, state, sdfg), shape)


# ---------------------------------------------------------------------------------------------
# The integer products


def add_shift(builder: ExpansionBuilder, label: str, source: str, zero: str | None, zero_index: str, reason) -> str:
    """``label``: ``<source>_shifted`` = int32(source) - zero[zero_index] (the int32 copy without a zero point), a
    flat map over ``source`` in row-major order (parameters ``__i0, __i1, ...``, which ``zero_index`` uses) into a
    new int32 transient marked ``reason`` (None: it streams). Returns the transient's name."""
    shape = tuple(builder.desc(source).shape)
    params = index_params(len(shape))
    shifted = builder.transient(f"{source}_shifted", shape, ACCUMULATOR, reason)
    inputs = {"v": Memlet(f"{source}[{subscript(params)}]")}
    code = "out = dace.int32(v)"
    if zero is not None:
        inputs.update(_parameter_inputs(builder, {zero: zero_index}, shape))
        code = f"out = dace.int32(v) - dace.int32({zero})"
    builder.flat_map(
        label, index_ranges(params, shape), inputs, code, {"out": Memlet(f"{shifted}[{subscript(params)}]")}
    )
    return shifted


def add_requantize(builder: ExpansionBuilder, source: str, shape: tuple, indices: dict[str, str]) -> None:
    """``Requantize``: y = saturate(rint(source · s0 · s1 / s2) + zero point), a flat map over ``shape`` reading
    the int32 ``source`` row by row; ``indices`` maps the three scales (input, weight, output) and the output's
    zero point, if any, to the subscript an element reads. The multiplier s0 · s1 / s2 is computed in float32,
    left to right, as onnxruntime computes it."""
    params = index_params(len(shape))
    element = subscript(params)
    inputs = {"acc": Memlet(f"{source}[{element}]"), **_parameter_inputs(builder, indices, shape)}
    s0, s1, s2, *zero = (f"__{name}" for name in indices)
    multiplier = quotient(f"static_cast<float>({s0}) * static_cast<float>({s1})", s2)
    value = f"static_cast<float>(__acc) * ({multiplier})"
    builder.flat_map(
        "Requantize",
        index_ranges(params, shape),
        inputs,
        _saturated(value, zero[0] if zero else None, builder.desc("y").dtype),
        {"y": Memlet(f"y[{element}]")},
        language=dace.Language.CPP,
    )


def _operand_reason(consumed: Order, shape: tuple, y_shape: tuple) -> BufferReason | None:
    """The mark of a shifted operand written row by row and consumed by the MMM in order ``consumed``: REORDER
    for another order, REUSE when the MMM reads it once per batch element it is broadcast over."""
    reason = buffer_reason_between(Order.ROW, consumed)
    if reason is None and consumed is not Order.ANY and is_broadcast(shape[:-2], y_shape[:-2]):
        return BufferReason.REUSE
    return reason


def build_integer_matmul_sdfg(
    builder: ExpansionBuilder,
    implementation: str,
    operands: tuple[str, str, str],
    zeros: dict[str, tuple[str | None, str]],
    requantize: dict[str, str] | None = None,
) -> dace.SDFG:
    """Y = (A - a_zero_point) · (B - b_zero_point) in int32 (numpy semantics) in ``builder`` (its arguments
    added): ``ShiftA`` and ``ShiftB`` row by row, then one (batched) MMM node with ``implementation`` writing
    Y, in the shape's order. ``operands`` names A, B and Y; ``zeros`` maps A and B to their zero point's
    connector (None: absent) and subscript. With ``requantize`` (scales and output zero point -> subscript, see
    :func:`add_requantize`) the MMM writes ``Y_acc``, which ``Requantize`` reads row by row into y."""
    a, b, y = operands
    y_shape = tuple(builder.desc(y).shape)
    expansion = MMM.implementations[implementation]
    shifted = []
    for label, name, consumed in (("ShiftA", a, expansion.consumes_a), ("ShiftB", b, expansion.consumes_b)):
        shape = tuple(builder.desc(name).shape)
        shifted.append(
            (add_shift(builder, label, name, *zeros[name], _operand_reason(consumed, shape, y_shape)), shape)
        )
    product = y
    if requantize is not None:
        reason = buffer_reason_between(expansion.produces, Order.ROW)
        product = builder.transient("Y_acc", y_shape, ACCUMULATOR, reason)
    memlets = [Memlet(data=name, subset=whole(shape)) for name, shape in shifted]
    add_mmm(builder, implementation, *memlets, Memlet(data=product, subset=whole(y_shape)))
    if requantize is not None:
        add_requantize(builder, product, y_shape, requantize)
    return builder.sdfg


def build_integer_conv_sdfg(
    builder: ExpansionBuilder,
    geometry: ConvGeometry,
    implementation: str,
    zeros: dict[str, tuple[str | None, str]],
    requantize: dict[str, str] | None = None,
) -> dace.SDFG:
    """The integer convolution of ``x`` and ``w`` in ``builder`` (its arguments added): ``ShiftX`` and ``ShiftW``
    (row-major; ``zeros`` maps ``x`` and ``w`` to their zero point's connector, None if absent, and subscript),
    then the im2col convolution on int32 (a nested SDFG: ``Wr``, ``Xr``, MMM with ``implementation``,
    ``AddBias`` with the int32 bias ``B`` if connected, ``ReshapeOut``) writing y, row-major. With
    ``requantize`` it writes ``Y_acc`` and ``Requantize`` reads it row by row into y (:func:`add_requantize`).
    The shifted x is a REUSE buffer: the im2col reads each element once per kernel position reaching it."""
    x = add_shift(builder, "ShiftX", "x", *zeros["x"], BufferReason.REUSE)
    w = add_shift(builder, "ShiftW", "w", *zeros["w"], None)
    has_bias = "B" in builder.sdfg.arrays
    y_shape = tuple(builder.desc("y").shape)
    output = "y" if requantize is None else builder.transient("Y_acc", y_shape, ACCUMULATOR)
    nested = build_im2col_sdfg(geometry, ACCUMULATOR, implementation, has_bias, f"{builder.sdfg.name}_im2col")
    inputs = {"X": x, "W": w, **({"B": "B"} if has_bias else {})}
    node = builder.state.add_nested_sdfg(nested, dict.fromkeys(inputs), {"Y": None})
    for connector, name in inputs.items():
        memlet = Memlet(data=name, subset=whole(builder.desc(name).shape))
        builder.state.add_edge(builder.read_node(name), None, node, connector, memlet)
    builder.state.add_edge(node, "Y", builder.write_node(output), None, Memlet(data=output, subset=whole(y_shape)))
    if requantize is not None:
        add_requantize(builder, output, y_shape, requantize)
    return builder.sdfg


ZeroPoints = dict[str, tuple[str, int | None]]
"""Per operand connector: its zero point's connector and the axis a vector zero point runs along (None: per
tensor only)."""

MATMUL_INTEGER_ZEROS: ZeroPoints = {"A": ("a_zero_point", -2), "B": ("b_zero_point", -1)}
QLINEAR_MATMUL_ZEROS: ZeroPoints = {"a": ("a_zero_point", -2), "b": ("b_zero_point", -1)}
CONV_ZEROS: ZeroPoints = {"x": ("x_zero_point", None), "w": ("w_zero_point", 0)}


def _side_indices(node, state, sdfg, shape: tuple, parameters: dict[str, int | None]) -> dict[str, str]:
    """The subscripts, per element of an operand of ``shape``, of its connected ``parameters`` (connector ->
    the axis a vector parameter runs along)."""
    params = index_params(len(shape))
    return {
        name: side_index(node, name, input_shape(node, state, sdfg, name), shape, params, axis)
        for name, axis in parameters.items()
        if name in node.in_connectors
    }


def _zeros(node, state, sdfg, operands: ZeroPoints) -> dict[str, tuple[str | None, str]]:
    """Per operand of ``operands``: its zero point's connector (None if absent) and the subscript an element
    reads."""
    zeros = {}
    for operand, (zero, axis) in operands.items():
        indices = _side_indices(node, state, sdfg, input_shape(node, state, sdfg, operand), {zero: axis})
        zeros[operand] = (zero, indices[zero]) if zero in indices else (None, "")
    return zeros


def _check_product_types(node, state, sdfg, operands: ZeroPoints) -> None:
    for operand, (zero, _) in operands.items():
        _check_type(node, state, sdfg, operand, PRODUCT_TYPES)
        _check_type(node, state, sdfg, zero, PRODUCT_TYPES)


def _check_matmul(node, state, sdfg, operands: ZeroPoints, y: str) -> None:
    _check_product_types(node, state, sdfg, operands)
    a, b = (input_shape(node, state, sdfg, name) for name in operands)
    check_matmul_shapes(node, a, b, tuple(out_desc_with_name(node, state, sdfg, y).shape))
    _zeros(node, state, sdfg, operands)


def _qlinear_requantize(node, state, sdfg, scales: tuple[str, str, str], axes: tuple) -> dict[str, str]:
    """The subscripts, per element of y, of the input, weight and output scales and of ``y_zero_point``: the
    input's and output's scales along ``axes[0]`` of y, the weight's along ``axes[1]``."""
    y_shape = tuple(out_desc_with_name(node, state, sdfg, "y").shape)
    along = {scales[0]: axes[0], scales[1]: axes[1], scales[2]: axes[0], "y_zero_point": axes[0]}
    return _side_indices(node, state, sdfg, y_shape, along)


def _check_qlinear(node, state, sdfg, scales: tuple[str, ...], axes: tuple) -> None:
    for scale in scales:
        _check_type(node, state, sdfg, scale, SCALE_TYPES)
    _check_type(node, state, sdfg, "y_zero_point", PRODUCT_TYPES)
    _check_output_type(node, state, sdfg, "y", PRODUCT_TYPES)
    _qlinear_requantize(node, state, sdfg, scales, axes)


class _MatMulInteger(CanonicalForward):
    """ONNX MatMulInteger through MMM (see :func:`build_integer_matmul_sdfg`); subclasses fix the MMM shape."""

    mmm_implementation: str

    @staticmethod
    def check(node, state, sdfg) -> None:
        _check_matmul(node, state, sdfg, MATMUL_INTEGER_ZEROS, "Y")
        _check_output_type(node, state, sdfg, "Y", (ACCUMULATOR,))

    @classmethod
    def forward(cls, node, state, sdfg):
        zeros = _zeros(node, state, sdfg, MATMUL_INTEGER_ZEROS)
        builder = node_builder(node, state, sdfg)
        return build_integer_matmul_sdfg(builder, cls.mmm_implementation, ("A", "B", "Y"), zeros)


QLINEAR_MATMUL_SCALES = ("a_scale", "b_scale", "y_scale")
QLINEAR_CONV_SCALES = ("x_scale", "w_scale", "y_scale")


class _QLinearMatMul(CanonicalForward):
    """ONNX QLinearMatMul through MMM and ``Requantize`` (see :func:`build_integer_matmul_sdfg`); subclasses fix
    the MMM shape."""

    mmm_implementation: str

    @staticmethod
    def check(node, state, sdfg) -> None:
        _check_matmul(node, state, sdfg, QLINEAR_MATMUL_ZEROS, "y")
        _check_qlinear(node, state, sdfg, QLINEAR_MATMUL_SCALES, (-2, -1))

    @classmethod
    def forward(cls, node, state, sdfg):
        zeros = _zeros(node, state, sdfg, QLINEAR_MATMUL_ZEROS)
        requantize = _qlinear_requantize(node, state, sdfg, QLINEAR_MATMUL_SCALES, (-2, -1))
        builder = node_builder(node, state, sdfg)
        return build_integer_matmul_sdfg(builder, cls.mmm_implementation, ("a", "b", "y"), zeros, requantize)


def _integer_conv_geometry(node, state, sdfg) -> ConvGeometry:
    x, w = (in_desc_with_name(node, state, sdfg, name) for name in ("x", "w"))
    return conv_geometry_of(node, x, w, out_desc_with_name(node, state, sdfg, "y"))


class _ConvInteger(CanonicalForward):
    """ONNX ConvInteger as shifts and the im2col convolution (see :func:`build_integer_conv_sdfg`); subclasses
    fix the MMM shape."""

    mmm_implementation: str

    @staticmethod
    def check(node, state, sdfg) -> None:
        _check_product_types(node, state, sdfg, CONV_ZEROS)
        _check_output_type(node, state, sdfg, "y", (ACCUMULATOR,))
        _integer_conv_geometry(node, state, sdfg)
        _zeros(node, state, sdfg, CONV_ZEROS)

    @classmethod
    def forward(cls, node, state, sdfg):
        geometry, zeros = _integer_conv_geometry(node, state, sdfg), _zeros(node, state, sdfg, CONV_ZEROS)
        return build_integer_conv_sdfg(node_builder(node, state, sdfg), geometry, cls.mmm_implementation, zeros)


class _QLinearConv(CanonicalForward):
    """ONNX QLinearConv as shifts, the im2col convolution with its int32 bias and ``Requantize`` (see
    :func:`build_integer_conv_sdfg`); subclasses fix the MMM shape."""

    mmm_implementation: str

    @staticmethod
    def check(node, state, sdfg) -> None:
        _check_product_types(node, state, sdfg, CONV_ZEROS)
        _check_type(node, state, sdfg, "B", (ACCUMULATOR,))
        _check_qlinear(node, state, sdfg, QLINEAR_CONV_SCALES, (None, 1))
        _integer_conv_geometry(node, state, sdfg)
        _zeros(node, state, sdfg, CONV_ZEROS)

    @classmethod
    def forward(cls, node, state, sdfg):
        geometry, zeros = _integer_conv_geometry(node, state, sdfg), _zeros(node, state, sdfg, CONV_ZEROS)
        requantize = _qlinear_requantize(node, state, sdfg, QLINEAR_CONV_SCALES, (None, 1))
        builder = node_builder(node, state, sdfg)
        return build_integer_conv_sdfg(builder, geometry, cls.mmm_implementation, zeros, requantize)


def _by_shape(base: type, op: str) -> tuple[Implementation, ...]:
    """One implementation of ``op`` per MMM shape: a subclass of ``base`` named ``<op><SHAPE>``."""
    return tuple(
        Implementation(
            op, shape, type(f"{op}{shape.upper()}", (base,), {"mmm_implementation": shape, "__doc__": base.__doc__})
        )
        for shape in MMM.implementations
    )


IMPLEMENTATIONS = (
    Implementation("QuantizeLinear", CANONICAL, QuantizeLinear),
    Implementation("DequantizeLinear", CANONICAL, DequantizeLinear),
    Implementation("DynamicQuantizeLinear", CANONICAL, DynamicQuantizeLinear),
    *_by_shape(_MatMulInteger, "MatMulInteger"),
    *_by_shape(_QLinearMatMul, "QLinearMatMul"),
    *_by_shape(_ConvInteger, "ConvInteger"),
    *_by_shape(_QLinearConv, "QLinearConv"),
)
