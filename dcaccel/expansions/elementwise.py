"""Canonical element-wise ops: one flat map over the output each.

Every op here computes ``out[i] = f(in_0[b_0(i)], in_1[b_1(i)], ...)`` for each output index
``i``, where ``b_k`` is numpy broadcasting of input ``k`` to the output shape. The map iterates
the output row-major, so the output is produced row-major and every input that is not broadcast
is read row-major, once: a task with rate 1. An input that is broadcast (read more than once)
and produced by another task is first copied into a REUSE buffer (see
:meth:`~dcaccel.expansions.builder.ExpansionBuilder.operand`). A constant input with a single element
(an ONNX initializer, e.g. the ``sqrt(2)`` of torch's GELU) is folded into the tasklet as a
literal: it is an operand of the instruction, not data. An op may have constant outputs besides (Dropout's
``mask``, all true), written by the same map.
"""

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import dace
import numpy as np
import onnx
from dace import SDFG, SDFGState
from dace.libraries.onnx.converters import onnx_tensor_type_to_typeclass
from dace.sdfg.utils import out_desc_with_name

from dcaccel.expansions.builder import broadcast_indices, index_params, index_ranges, is_broadcast, literal, subscript
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.node import (
    CanonicalForward,
    constant_input,
    input_edge,
    node_builder,
    onnx_shape,
    ordered_inputs,
    unsupported,
)

Operands = Mapping[str, str]
"""Tasklet expressions of the inputs of one element, keyed by ONNX connector name."""


@dataclass(frozen=True)
class ElementwiseOp:
    """An ONNX op computed element by element.

    ``formula(x, T, node)`` returns the tasklet expression of one output element from the operand
    expressions ``x`` (by connector name), the output type constructor ``T`` (e.g.
    ``"dace.float32"``) and the node (for attributes).
    """

    op: str
    formula: Callable[[Operands, str, object], str]
    summary: str
    parameters: tuple[str, ...] = ()
    """Inputs that are not data (CastLike's ``target_type`` only gives a type): disconnected."""
    constant_outputs: Mapping[str, str] = field(default_factory=dict)
    """Outputs besides the first, each with the tasklet expression of its constant elements (Dropout's ``mask``)."""
    check: Callable[[object, SDFGState, SDFG], None] = lambda node, state, sdfg: None
    """Raises :class:`UnsupportedOpError` for inputs the formula does not cover (Dropout's training mode)."""


def _clip(x: Operands, T: str, node) -> str:
    low = x.get("min")
    high = x.get("max")
    if node.schema.since_version < 11:
        low, high = f"{T}({node.min!r})", f"{T}({node.max!r})"
    # Conditional expressions, not min/max: the nested SDFG has containers named "min" and "max"
    value = x["input"]
    if low is not None:
        value = f"({low} if {value} < {low} else {value})"
    if high is not None:
        value = f"({high} if {value} > {high} else {value})"
    return value


def _gelu(x: Operands, T: str, node) -> str:
    v = x["X"]
    if node.approximate == "tanh":
        inner = f"{T}({math.sqrt(2 / math.pi)!r}) * ({v} + {T}(0.044715) * {v} * {v} * {v})"
        return f"{T}(0.5) * {v} * ({T}(1) + tanh({inner}))"
    if node.approximate != "none":
        raise unsupported(node, f"approximate='{node.approximate}'")
    return f"{T}(0.5) * {v} * ({T}(1) + erf({v} * {T}({1 / math.sqrt(2)!r})))"


def _select(pick: str) -> Callable[[Operands, str, object], str]:
    """The formula of the variadic Max (``pick`` is ``>``) or Min (``<``) as nested conditional expressions.

    (Not the functions max/min: the nested SDFG has a container named after the op's output.)
    """

    def formula(x: Operands, T: str, node) -> str:
        values = list(x.values())
        result = values[0]
        for value in values[1:]:
            result = f"({value} if {value} {pick} {result} else {result})"
        return result

    return formula


def _check_target_type(node) -> None:
    """Raise :class:`UnsupportedOpError` unless DaCe has a type for the attribute ``to`` (Cast, BitCast)."""
    try:
        onnx_tensor_type_to_typeclass(node.to)
    except ValueError:
        raise unsupported(node, f"to={onnx.TensorProto.DataType.Name(node.to)} (no DaCe type)") from None


def _cast(x: Operands, T: str, node) -> str:
    """Cast is the tasklet's conversion on assignment (C++: truncation towards zero from float to int,
    non-zero to true for bool); only targets DaCe has a type for."""
    _check_target_type(node)
    return x["input"]


def _bit_cast(x: Operands, T: str, node) -> str:
    """BitCast reinterprets the bits of each element as the type ``to`` of the same width (GCC's and Clang's
    ``__builtin_bit_cast``, what C++20's ``std::bit_cast`` is built on; ONNX's type inference refuses other widths);
    only targets DaCe has a type for."""
    _check_target_type(node)
    return f"__builtin_bit_cast({T}, {x['input']})"


def _leaky(value: str, slope: str, T: str) -> str:
    """``value`` where it is not negative, else ``slope * value`` (LeakyRelu, PRelu).

    Products are converted back to ``T``: in C++ a product of two float16 values is a float.
    """
    return f"({value} if {value} >= {T}(0) else {T}({slope} * {value}))"


def _hard_sigmoid(value: str, alpha: float, beta: float, T: str) -> str:
    """``max(0, min(1, alpha * value + beta))`` (HardSigmoid; HardSwish multiplies it by its input)."""
    return f"max({T}(0), min({T}(1), {T}({T}({alpha!r}) * {value} + {T}({beta!r}))))"


def _softplus(value: str, T: str) -> str:
    """``log(1 + exp(value))`` without overflow: ``value + log(1 + exp(-value))`` for positive values."""
    return f"({value} + log1p(exp(-{value})) if {value} > {T}(0) else log1p(exp({value})))"


def _shift(x: Operands, T: str, node) -> str:
    """BitShift as opset 28 defines it (opset 11's, on unsigned types, is the same): the shifted value converted
    back to ``T`` (C++ shifts the promoted value, the conversion drops the bits shifted out; a right shift of a
    signed value extends its sign); a shift by a negative amount or by the width of ``T`` or more leaves what the
    sign extension alone gives, -1 for a right shift of a negative value, else 0."""
    operators = {"LEFT": "<<", "RIGHT": ">>"}
    if node.direction not in operators:
        raise unsupported(node, f"direction='{node.direction}'")
    value, amount = x["X"], x["Y"]
    typed = T.startswith("dace.")  # else the placeholder of check_elementwise
    bits = 8 * getattr(dace, T.removeprefix("dace.")).bytes if typed else 64
    outside = f"{T}(-1) if {value} < 0 else {T}(0)" if node.direction == "RIGHT" else f"{T}(0)"
    shifted = f"{T}({value} {operators[node.direction]} {amount})"
    return f"({shifted} if {amount} >= 0 and {amount} < {bits} else ({outside}))"


def _call(function: str, connector: str) -> Callable[[Operands, str, object], str]:
    """The formula ``function(x)`` of the input ``connector`` (a C++ math function, e.g. ``asinh``)."""
    return lambda x, T, node: f"{function}({x[connector]})"


def _abs(value: str, T: str) -> str:
    """``|value|`` as a conditional expression (C's unqualified ``abs`` takes an int; the negation of a float16
    is a float, converted back)."""
    return f"({value} if {value} >= {T}(0) else {T}(-{value}))"


def _elu(value: str, alpha: float, T: str, exponent: str | None = None) -> str:
    """``value`` where it is positive, else ``alpha (exp(exponent) - 1)``, ``exponent`` being ``value`` unless given
    (Elu; Selu scales it; Celu's exponent is ``value / alpha``)."""
    return f"({value} if {value} > {T}(0) else {T}({T}({alpha!r}) * expm1({exponent or value})))"


def _shrink(x: Operands, T: str, node) -> str:
    """``x + bias`` below ``-lambd``, ``x - bias`` above ``lambd``, else 0; the comparisons and sums in floating
    point (for an integer ``x`` too, as onnxruntime does), converted to ``T``."""
    v, lambd, bias = x["input"], float(node.lambd), float(node.bias)
    return f"({T}({v} + {bias!r}) if {v} < {-lambd!r} else ({T}({v} - {bias!r}) if {v} > {lambd!r} else {T}(0)))"


def _is_inf(x: Operands, T: str, node) -> str:
    """Whether ``X`` is an infinity of a sign the node detects (``detect_positive``, ``detect_negative``)."""
    sides = {
        (True, True): "isinf({v})",
        (True, False): "isinf({v}) and {v} > 0",
        (False, True): "isinf({v}) and {v} < 0",
    }
    detect = (bool(node.detect_positive), bool(node.detect_negative))
    return f"({sides[detect].format(v=x['X'])})" if detect in sides else "False"


def _kind(T: str) -> str:
    """The numpy kind of the type constructor ``T`` (``"dace.float32"``: ``"f"``; ``"i"``, ``"u"``, ``"b"``); ``"f"``
    for the placeholder ``"T"`` of :func:`check_elementwise`."""
    return np.dtype(getattr(dace, T.removeprefix("dace.")).type).kind if T.startswith("dace.") else "f"


def _mod(x: Operands, T: str, node) -> str:
    """Mod: with ``fmod=1`` C's remainder (the sign of the dividend; ``fmod`` for floats, ``%`` for integers); with
    ``fmod=0`` the remainder of the floored division (the sign of the divisor, as numpy's ``mod``): the C remainder
    plus the divisor where it is not zero and its sign differs from the divisor's (never, for unsigned types)."""
    a, b = x["A"], x["B"]
    remainder = f"{T}(fmod({a}, {b}))" if _kind(T) == "f" else f"{T}({a} % {b})"
    if node.fmod not in (0, 1):
        raise unsupported(node, f"fmod={node.fmod}")
    if node.fmod == 1 or _kind(T) == "u":
        return remainder
    zero = f"{T}(0)"
    differs = f"{remainder} != {zero} and ({remainder} < {zero}) != ({b} < {zero})"
    return f"({T}({remainder} + {b}) if {differs} else {remainder})"


def _sign(x: Operands, T: str, node) -> str:
    """1 for positive values, -1 for negative ones, 0 for zeros; NaN for NaN (as onnxruntime and numpy)."""
    v, zero = x["input"], f"{T}(0)"
    if _kind(T) == "u":
        return f"({T}(1) if {v} > {zero} else {zero})"
    return f"({T}(1) if {v} > {zero} else ({T}(-1) if {v} < {zero} else ({zero} if {v} == {zero} else {v})))"


def _dropout_is_identity(node, state: SDFGState, sdfg: SDFG) -> None:
    """Dropout is the identity (its mask all true) in inference mode, ``training_mode`` absent or a constant false,
    and in training mode with a constant ``ratio`` of 0; refused otherwise, and with a mask of the data's type
    (opsets 7 to 9), which onnxruntime fills with 0 and ONNX's reference with 1."""
    mask = any(e.src_conn == "mask" for e in state.out_edges(node))
    if mask and out_desc_with_name(node, state, sdfg, "mask").dtype != dace.bool_:
        raise unsupported(node, "a mask of the data's type (opset < 10: 0 in onnxruntime, 1 in ONNX's reference)")
    if input_edge(node, state, "training_mode") is None:
        return
    training = constant_input(node, state, sdfg, "training_mode")
    if training is None:
        raise unsupported(node, "training_mode not a constant (only inference, or a ratio of 0)")
    ratio = constant_input(node, state, sdfg, "ratio") if input_edge(node, state, "ratio") else None
    if training.any() and (ratio is None or ratio.any()):
        raise unsupported(node, "training_mode=True with a ratio other than a constant 0 (random)")


def _mean(x: Operands, T: str, node) -> str:
    return f"({' + '.join(x.values())}) / {T}({len(x)})"


ELEMENTWISE_OPS = (
    ElementwiseOp("Relu", lambda x, T, n: f"max({x['X']}, {T}(0))", "Y = max(X, 0)"),
    ElementwiseOp("Sigmoid", lambda x, T, n: f"{T}(1) / ({T}(1) + exp(-{x['X']}))", "Y = 1 / (1 + exp(-X))"),
    ElementwiseOp("Tanh", lambda x, T, n: f"tanh({x['input']})", "output = tanh(input)"),
    ElementwiseOp("Exp", lambda x, T, n: f"exp({x['input']})", "output = exp(input)"),
    ElementwiseOp("Sqrt", lambda x, T, n: f"sqrt({x['X']})", "Y = sqrt(X)"),
    ElementwiseOp("Log", lambda x, T, n: f"log({x['input']})", "output = log(input)"),
    ElementwiseOp("Sin", lambda x, T, n: f"sin({x['input']})", "output = sin(input)"),
    ElementwiseOp("Cos", lambda x, T, n: f"cos({x['input']})", "output = cos(input)"),
    ElementwiseOp("Abs", lambda x, T, n: _abs(x["X"], T), "Y = |X|"),
    ElementwiseOp("Erf", lambda x, T, n: f"erf({x['input']})", "output = erf(input)"),
    ElementwiseOp("Neg", lambda x, T, n: f"-{x['X']}", "Y = -X"),
    ElementwiseOp("Reciprocal", lambda x, T, n: f"{T}(1) / {x['X']}", "Y = 1 / X"),
    ElementwiseOp("LeakyRelu", lambda x, T, n: _leaky(x["X"], f"{T}({n.alpha!r})", T), "Y = X if X >= 0 else alpha X"),
    ElementwiseOp("PRelu", lambda x, T, n: _leaky(x["X"], x["slope"], T), "Y = X if X >= 0 else slope X"),
    ElementwiseOp(
        "HardSigmoid", lambda x, T, n: _hard_sigmoid(x["X"], n.alpha, n.beta, T), "Y = max(0, min(1, alpha X + beta))"
    ),
    ElementwiseOp(
        "HardSwish",
        lambda x, T, n: f"{x['X']} * {_hard_sigmoid(x['X'], 1 / 6, 0.5, T)}",
        "Y = X max(0, min(1, X/6 + 1/2))",
    ),
    ElementwiseOp("Softplus", lambda x, T, n: _softplus(x["X"], T), "Y = log(1 + exp(X))"),
    ElementwiseOp("Mish", lambda x, T, n: f"{x['X']} * tanh({_softplus(x['X'], T)})", "Y = X tanh(log(1 + exp(X)))"),
    ElementwiseOp("Identity", lambda x, T, n: x["input"], "output = input (a copy task)"),
    ElementwiseOp("Cast", _cast, "output = input converted to the type `to`"),
    ElementwiseOp("BitCast", _bit_cast, "output = the bits of input read as the type `to` (of the same width)"),
    ElementwiseOp("Clip", _clip, "output = min(max(input, min), max)"),
    ElementwiseOp("Gelu", _gelu, "Y = X/2 (1 + erf(X/sqrt 2)), or the tanh approximation"),
    ElementwiseOp("Add", lambda x, T, n: f"{x['A']} + {x['B']}", "C = A + B"),
    ElementwiseOp("Sub", lambda x, T, n: f"{x['A']} - {x['B']}", "C = A - B"),
    ElementwiseOp("Mul", lambda x, T, n: f"{x['A']} * {x['B']}", "C = A * B"),
    ElementwiseOp("Div", lambda x, T, n: f"{x['A']} / {x['B']}", "C = A / B (truncating for integers)"),
    ElementwiseOp("Pow", lambda x, T, n: f"{x['X']} ** {x['Y']}", "Z = X ** Y"),
    ElementwiseOp("Sum", lambda x, T, n: " + ".join(x.values()), "sum = data_0 + data_1 + ..."),
    ElementwiseOp("Max", _select(">"), "max = the largest of data_0, data_1, ..."),
    ElementwiseOp("Min", _select("<"), "min = the smallest of data_0, data_1, ..."),
    ElementwiseOp("Mean", _mean, "mean = (data_0 + data_1 + ...) / number of inputs"),
    ElementwiseOp("Equal", lambda x, T, n: f"{x['A']} == {x['B']}", "C = A == B"),
    ElementwiseOp("Less", lambda x, T, n: f"{x['A']} < {x['B']}", "C = A < B"),
    ElementwiseOp("Greater", lambda x, T, n: f"{x['A']} > {x['B']}", "C = A > B"),
    ElementwiseOp("LessOrEqual", lambda x, T, n: f"{x['A']} <= {x['B']}", "C = A <= B"),
    ElementwiseOp("GreaterOrEqual", lambda x, T, n: f"{x['A']} >= {x['B']}", "C = A >= B"),
    ElementwiseOp(
        "Where", lambda x, T, n: f"({x['X']} if {x['condition']} else {x['Y']})", "output = X if condition else Y"
    ),
    ElementwiseOp(
        "CastLike", lambda x, T, n: x["input"], "output = input converted to the type of target_type", ("target_type",)
    ),
    ElementwiseOp("And", lambda x, T, n: f"{x['A']} and {x['B']}", "C = A and B"),
    ElementwiseOp("Or", lambda x, T, n: f"{x['A']} or {x['B']}", "C = A or B"),
    ElementwiseOp("Xor", lambda x, T, n: f"{x['A']} != {x['B']}", "C = A xor B"),
    ElementwiseOp("Not", lambda x, T, n: f"not {x['X']}", "Y = not X"),
    ElementwiseOp("BitwiseAnd", lambda x, T, n: f"{x['A']} & {x['B']}", "C = A & B"),
    ElementwiseOp("BitwiseOr", lambda x, T, n: f"{x['A']} | {x['B']}", "C = A | B"),
    ElementwiseOp("BitwiseXor", lambda x, T, n: f"{x['A']} ^ {x['B']}", "C = A ^ B"),
    ElementwiseOp("BitwiseNot", lambda x, T, n: f"~{x['X']}", "Y = ~X"),
    ElementwiseOp("BitShift", _shift, "Z = X << Y or X >> Y (direction), bits shifted out of the type dropped"),
    *(
        ElementwiseOp(op, _call(op.lower(), "input"), f"output = {op.lower()}(input)")
        for op in ("Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Cosh", "Sinh", "Tan")
    ),
    ElementwiseOp("Ceil", _call("ceil", "X"), "Y = ceil(X)"),
    ElementwiseOp("Floor", _call("floor", "X"), "Y = floor(X)"),
    ElementwiseOp("Round", _call("nearbyint", "X"), "Y = X rounded to the nearest integer, halves to even"),
    ElementwiseOp("Sign", _sign, "output = 1, -1 or 0 by the sign of input"),
    ElementwiseOp("IsInf", _is_inf, "Y = X is an infinity (of the signs detect_positive, detect_negative select)"),
    ElementwiseOp("IsNaN", _call("isnan", "X"), "Y = X is not a number"),
    ElementwiseOp("Mod", _mod, "C = A mod B (fmod=0: the sign of B; fmod=1: the sign of A)"),
    ElementwiseOp(
        "Celu",
        lambda x, T, n: _elu(x["X"], n.alpha, T, f"{x['X']} / {T}({n.alpha!r})"),
        "Y = max(0, X) + min(0, alpha (exp(X / alpha) - 1))",
    ),
    ElementwiseOp("Elu", lambda x, T, n: _elu(x["X"], n.alpha, T), "Y = X if X > 0 else alpha (exp(X) - 1)"),
    ElementwiseOp(
        "Selu",
        lambda x, T, n: f"{T}({T}({n.gamma!r}) * {_elu(x['X'], n.alpha, T)})",
        "Y = gamma (X if X > 0 else alpha (exp(X) - 1))",
    ),
    ElementwiseOp(
        "ThresholdedRelu",
        lambda x, T, n: f"({x['X']} if {x['X']} > {T}({n.alpha!r}) else {T}(0))",
        "Y = X if X > alpha else 0",
    ),
    ElementwiseOp("Shrink", _shrink, "output = input + bias below -lambd, input - bias above lambd, else 0"),
    ElementwiseOp(
        "Swish",
        lambda x, T, n: f"{T}({x['X']} / ({T}(1) + exp({T}({-n.alpha!r}) * {x['X']})))",
        "Y = X sigmoid(alpha X)",
    ),
    ElementwiseOp(
        "Softsign", lambda x, T, n: f"{T}({x['input']} / ({T}(1) + {_abs(x['input'], T)}))", "output = X / (1 + |X|)"
    ),
    ElementwiseOp(
        "Dropout",
        lambda x, T, n: x["data"],
        "output = data, mask all true (inference, or a ratio of 0)",
        ("ratio", "training_mode"),
        {"mask": "True"},
        _dropout_is_identity,
    ),
)


def _folded_constant(node, state: SDFGState, sdfg: SDFG, connector: str) -> str | None:
    """The literal of a finite single-element constant feeding ``connector``, or None."""
    value = constant_input(node, state, sdfg, connector)
    if value is None or value.size != 1 or not np.isfinite(value).all():
        return None
    return literal(value.reshape(()).item(), dace.typeclass(value.dtype.type))


def check_elementwise(spec: ElementwiseOp, node, state: SDFGState, sdfg: SDFG) -> None:
    """Raise :class:`UnsupportedOpError` unless ``node`` has one computed output (and any of ``spec``'s constant
    outputs), ``spec``'s formula covers its attributes (the formula is written with placeholder operands) and its
    own check passes."""
    computed = [e.src_conn for e in state.out_edges(node) if e.src_conn not in spec.constant_outputs]
    if len(computed) != 1:
        raise unsupported(node, f"{len(computed)} computed outputs")
    spec.formula({c: c for c in ordered_inputs(node, state)}, "T", node)
    spec.check(node, state, sdfg)


def expand_elementwise(spec: ElementwiseOp, node, state: SDFGState, sdfg: SDFG) -> SDFG:
    """The nested SDFG computing ``spec`` for ``node``: one flat map over the output (row-major), which also writes
    the constant outputs that are connected."""
    (out_name,) = [e.src_conn for e in state.out_edges(node) if e.src_conn not in spec.constant_outputs]
    constants = [e.src_conn for e in state.out_edges(node) if e.src_conn in spec.constant_outputs]
    out_desc = out_desc_with_name(node, state, sdfg, out_name)
    connectors = [c for c in ordered_inputs(node, state) if c not in spec.parameters]
    folded = {c: v for c in connectors if (v := _folded_constant(node, state, sdfg, c)) is not None}
    steps = node_builder(node, state, sdfg, drop=[*folded, *(c for c in spec.parameters if input_edge(node, state, c))])

    out_shape = onnx_shape(out_desc)
    params = index_params(len(out_shape))
    operands = {}
    memlets = {}
    for k, connector in enumerate(connectors):
        if connector in folded:
            operands[connector] = folded[connector]
            continue
        in_shape = onnx_shape(steps.desc(connector))
        source = steps.operand(connector, reused=is_broadcast(in_shape, out_shape))
        indices = broadcast_indices(in_shape, out_shape, params)
        memlets[f"in{k}"] = dace.Memlet(f"{source}[{subscript(indices)}]")
        operands[connector] = f"in{k}"
    expression = spec.formula(operands, f"dace.{out_desc.dtype.to_string()}", node)
    outputs = {"out": dace.Memlet(f"{out_name}[{subscript(params)}]")}
    code = [f"out = {expression}"]
    for k, name in enumerate(constants):
        outputs[f"const{k}"] = dace.Memlet(f"{name}[{subscript(params)}]")
        code.append(f"const{k} = {spec.constant_outputs[name]}")
    steps.flat_map(spec.op.lower(), index_ranges(params, out_shape), memlets, "\n".join(code), outputs)
    return steps.sdfg


def elementwise_implementation(spec: ElementwiseOp) -> Implementation:
    """The canonical implementation of the element-wise op ``spec`` (checked by :func:`check_elementwise`, expanded
    by :func:`expand_elementwise`)."""

    class Forward(CanonicalForward):
        @staticmethod
        def check(node, state: SDFGState, sdfg: SDFG) -> None:
            check_elementwise(spec, node, state, sdfg)

        @staticmethod
        def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
            return expand_elementwise(spec, node, state, sdfg)

    Forward.__name__ = Forward.__qualname__ = f"Canonical{spec.op}"
    Forward.__doc__ = (
        f"Canonical {spec.op}: {spec.summary}, element-wise with numpy broadcasting. "
        "One flat map over the output; the output is produced row-major."
    )
    return Implementation(spec.op, CANONICAL, Forward)


IMPLEMENTATIONS = tuple(elementwise_implementation(spec) for spec in ELEMENTWISE_OPS)
