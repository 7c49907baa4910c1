"""Canonical reductions: ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
ReduceSumSquare, ReduceLogSum, ReduceLogSumExp (and, through :func:`add_reduction`, the global pools),
ArgMax, ArgMin and Hardmax.

A reduction is two flat map steps: the input is read once, row-major, and accumulated with WCR
into an accumulator shaped like the output (an ACCUMULATE buffer, set to the identity by an
initialisation map); then one map writes the output from the accumulator, row-major. ReduceLogSumExp
first takes the maximum of every reduced row (one more step), so that its exponentials do not
overflow. ArgMax and ArgMin add one step: the maximum (minimum) first, then the index of the first (or
last) element equal to it; Hardmax writes a one-hot row from that index.
"""

import enum
import math
from dataclasses import dataclass

import dace
import numpy as np
from dace import SDFG, Memlet, SDFGState

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import (
    WCR_MAX,
    WCR_SUM,
    ExpansionBuilder,
    at_axis,
    index_params,
    index_ranges,
    literal,
    max_identity,
    subscript,
)
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.node import (
    CanonicalForward,
    axis_input_shape,
    constant_ints,
    input_edge,
    input_shape,
    node_builder,
    normalize_axis,
    onnx_shape,
    output_shape,
    unsupported,
    wrong_shape,
)

WCR_MIN = "lambda a, b: min(a, b)"
WCR_PRODUCT = "lambda a, b: a * b"

HARDMAX_AXIS_OPSET = 13
"""The opset from which Hardmax works along one axis (before, on the input flattened to 2-D at ``axis``)."""


def min_identity(dtype: dace.typeclass) -> str:
    """A C++ expression for the identity of a min reduction over ``dtype``: +infinity, or the highest value."""
    if np.issubdtype(dtype.type, np.floating):
        return f"std::numeric_limits<{dtype.ctype}>::infinity()"
    return f"std::numeric_limits<{dtype.ctype}>::max()"


class Identity(enum.Enum):
    """The value a reduction's accumulator starts from."""

    ZERO = "zero"
    ONE = "one"  # product reductions
    LOWEST = "lowest"  # -infinity, or the lowest value of the type (max reductions)
    HIGHEST = "highest"  # +infinity, or the highest value of the type (min reductions)

    def code(self, dtype: dace.typeclass) -> tuple[str, dace.Language]:
        """The initialisation expression over ``dtype`` and its language."""
        if self is Identity.LOWEST:
            return max_identity(dtype), dace.Language.CPP
        if self is Identity.HIGHEST:
            return min_identity(dtype), dace.Language.CPP
        return literal(1 if self is Identity.ONE else 0, dtype), dace.Language.Python


@dataclass(frozen=True)
class Reduction:
    """How a reduction maps each element (``element``, of the element ``v``), combines the results
    (``wcr``), starts (``identity``) and ends (``result``, of the accumulator ``a``, where ``{count}`` stands
    for the number of reduced elements). With ``shifted``, ``element`` and ``result`` also read ``m``, the
    maximum of the reduced elements (a first step computes it)."""

    op: str
    wcr: str
    identity: Identity
    element: str = "v"
    result: str = "a"
    shifted: bool = False


REDUCTIONS = (
    Reduction("ReduceMean", WCR_SUM, Identity.ZERO, result="a / {count}"),
    Reduction("ReduceSum", WCR_SUM, Identity.ZERO),
    Reduction("ReduceMax", WCR_MAX, Identity.LOWEST),
    Reduction("ReduceMin", WCR_MIN, Identity.HIGHEST),
    Reduction("ReduceL2", WCR_SUM, Identity.ZERO, element="v * v", result="sqrt(a)"),
    Reduction("ReduceProd", WCR_PRODUCT, Identity.ONE),
    Reduction("ReduceL1", WCR_SUM, Identity.ZERO, element="abs(v)"),
    Reduction("ReduceSumSquare", WCR_SUM, Identity.ZERO, element="v * v"),
    Reduction("ReduceLogSum", WCR_SUM, Identity.ZERO, result="log(a)"),
    Reduction("ReduceLogSumExp", WCR_SUM, Identity.ZERO, element="exp(v - m)", result="log(a) + m", shifted=True),
)


def add_reduction(
    steps: ExpansionBuilder,
    reduction: Reduction,
    source: str,
    axes: list[int],
    output: str,
    keepdims: bool,
) -> None:
    """Add the steps reducing ``source`` over ``axes`` into ``output`` (with or without the reduced axes).

    0. ``max`` (a ``shifted`` reduction only): ``row_max[kept] = max(source[i])`` over the input, row-major
       (a REUSE buffer, see :meth:`ExpansionBuilder.row_max`); ``source`` is then read twice, so the caller
       passes an operand buffer (:meth:`ExpansionBuilder.operand`);
    1. ``reduce``: ``acc[kept] = wcr(acc[kept], element(source[i]))`` over the input, row-major;
       ``acc`` (an ACCUMULATE buffer) starts at the identity;
    2. ``output``: ``output = result(acc)`` (e.g. divided by the count of reduced elements for a
       mean), row-major.
    """
    in_shape = onnx_shape(steps.desc(source))
    dtype = steps.desc(output).dtype
    params = index_params(len(in_shape))
    kept_shape = [1 if d in axes else s for d, s in enumerate(in_shape)]
    kept = ["0" if d in axes else p for d, p in enumerate(params)]
    ranges = index_ranges(params, in_shape)
    row_max = (
        steps.row_max(source, ranges, subscript(params), subscript(kept), kept_shape) if reduction.shifted else None
    )

    def shift() -> dict[str, Memlet]:
        return {"m": Memlet(f"{row_max}[{subscript(kept)}]")} if row_max else {}

    accumulator = steps.transient("accumulator", kept_shape, dtype, BufferReason.ACCUMULATE)
    steps.init(accumulator, *reduction.identity.code(dtype))
    steps.flat_map(
        "reduce",
        ranges,
        {"v": Memlet(f"{source}[{subscript(params)}]"), **shift()},
        f"a = {reduction.element}",
        {"a": Memlet(f"{accumulator}[{subscript(kept)}]", wcr=reduction.wcr)},
    )
    out_params = [p for d, p in enumerate(params) if d not in axes]
    out_index = kept if keepdims else out_params
    count = literal(math.prod(in_shape[d] for d in axes), dtype)
    steps.flat_map(
        "output",
        index_ranges(out_params, [s for d, s in enumerate(in_shape) if d not in axes]),
        {"a": Memlet(f"{accumulator}[{subscript(kept)}]"), **shift()},
        f"out = {reduction.result.format(count=count)}",
        {"out": Memlet(f"{output}[{subscript(out_index)}]")},
    )


def reduced_axes(node, state: SDFGState, sdfg: SDFG, rank: int) -> list[int] | None:
    """The axes a Reduce* node reduces, or None for no reduction (``noop_with_empty_axes``).

    Axes come from the ``axes`` attribute (older opsets) or the constant ``axes`` input; none
    given means all axes.
    """
    if input_edge(node, state, "axes") is not None:
        axes = constant_ints(node, state, sdfg, "axes")
        if axes is None:
            raise unsupported(node, "the 'axes' input must be a constant")
    else:
        axes = getattr(node, "axes", None)
    if not axes:
        return None if getattr(node, "noop_with_empty_axes", 0) else list(range(rank))
    return sorted({normalize_axis(a, rank, node) for a in axes})


def _implementation(reduction: Reduction) -> Implementation:
    class Forward(CanonicalForward):
        @staticmethod
        def check(node, state: SDFGState, sdfg: SDFG) -> None:
            shape = input_shape(node, state, sdfg, "data")
            axes = reduced_axes(node, state, sdfg, len(shape))
            if axes is None:
                return
            keep = bool(node.keepdims)
            expected = [1 if d in axes else s for d, s in enumerate(shape) if keep or d not in axes]
            imported = list(output_shape(node, state, sdfg, "reduced"))
            if imported != expected:
                raise wrong_shape(node, f"imported output shape {imported} is not the reduction's {expected}")

        @staticmethod
        def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
            axes = reduced_axes(node, state, sdfg, len(input_shape(node, state, sdfg, "data")))
            steps = node_builder(node, state, sdfg, drop=["axes"])
            shape = onnx_shape(steps.desc("data"))
            if axes is None:  # every element reduced on its own (its own maximum): a copy, |v| for ReduceL2
                params = index_params(len(shape))
                one = literal(1, steps.desc("reduced").dtype)
                steps.flat_map(
                    "elementwise",
                    index_ranges(params, shape),
                    {"v": Memlet(f"data[{subscript(params)}]")},
                    f"m = v\na = {reduction.element}\nout = {reduction.result.format(count=one)}",
                    {"out": Memlet(f"reduced[{subscript(params)}]")},
                )
            else:
                source = steps.operand("data", reused=reduction.shifted)
                add_reduction(steps, reduction, source, axes, "reduced", bool(node.keepdims))
            return steps.sdfg

    Forward.__name__ = Forward.__qualname__ = f"Canonical{reduction.op}"
    Forward.__doc__ = (
        f"Canonical {reduction.op} over the ``axes`` (all if none; with ``noop_with_empty_axes`` none, "
        "every element reduced on its own by one flat map ``elementwise``): "
        f"``reduced = {reduction.result}`` where ``a`` accumulates ``{reduction.element}`` of every element "
        f"``v`` with ``{reduction.wcr}``"
        + (", ``m`` the maximum of the reduced elements" if reduction.shifted else "")
        + ". Two flat maps"
        + (
            " after the maximum's (the input read twice, from a REUSE buffer if another task produces it)"
            if reduction.shifted
            else ""
        )
        + ": a WCR reduction of the input, read row-major, into an ACCUMULATE buffer, then the output, produced "
        "row-major (see :func:`add_reduction`)."
    )
    return Implementation(reduction.op, CANONICAL, Forward)


def reduction_named(op: str) -> Reduction:
    """The :class:`Reduction` of :data:`REDUCTIONS` whose op is ``op`` (``"ReduceMax"``)."""
    (reduction,) = [r for r in REDUCTIONS if r.op == op]
    return reduction


def add_arg_index(
    steps: ExpansionBuilder, source: str, axis: int, extreme: Reduction, last: bool, index_dtype: dace.typeclass
) -> str:
    """Add the steps of the index along ``axis`` of the first (``last``: the last) extreme element of every row
    of ``source`` (``extreme`` is ReduceMax or ReduceMin); returns the index buffer, shaped like ``source``
    with ``axis`` of size 1. With ``row`` the index of ``source`` without ``axis`` and ``k`` the position
    along it:

    1. ``max`` (``min``): ``row_max[row] = max(source)`` (the WCR and identity of ``extreme``; a REUSE
       buffer, re-read once per element of its row);
    2. ``index``: ``index[row] = min(k where source == row_max[row])`` (WCR min; the last index: WCR max;
       an ACCUMULATE buffer). An element that is not the extreme contributes the index that never wins
       (the last one, or 0 for the last index), so a row of NaNs yields that index.

    Both steps read ``source`` row-major: the caller passes an operand buffer
    (:meth:`ExpansionBuilder.operand`).
    """
    shape = onnx_shape(steps.desc(source))
    params = index_params(len(shape))
    ranges = index_ranges(params, shape)
    element = subscript(params)
    row_shape = at_axis(shape, axis, 1)
    row = subscript(at_axis(params, axis, "0"))
    label = extreme.op.removeprefix("Reduce").lower()
    dtype = steps.desc(source).dtype
    row_extreme = steps.transient(f"row_{label}", row_shape, dtype, BufferReason.REUSE)
    steps.init(row_extreme, *extreme.identity.code(dtype))
    steps.flat_map(
        label,
        ranges,
        {"v": Memlet(f"{source}[{element}]")},
        "m = v",
        {"m": Memlet(f"{row_extreme}[{row}]", wcr=extreme.wcr)},
    )
    never_wins = literal(0 if last else shape[axis] - 1, index_dtype)
    index = steps.transient("index", row_shape, index_dtype, BufferReason.ACCUMULATE)
    steps.init(index, never_wins)
    steps.flat_map(
        "index",
        ranges,
        {"v": Memlet(f"{source}[{element}]"), "m": Memlet(f"{row_extreme}[{row}]")},
        f"k = {params[axis]} if v == m else {never_wins}",
        {"k": Memlet(f"{index}[{row}]", wcr=WCR_MAX if last else WCR_MIN)},
    )
    return index


def _check_axis(node, state: SDFGState, sdfg: SDFG, connector: str) -> int:
    """``axis`` of ``node`` in range; :class:`UnsupportedOpError` for an empty axis (no index to return)."""
    shape = axis_input_shape(node, state, sdfg, connector)
    axis = normalize_axis(node.axis, len(shape), node)
    if shape[axis] == 0:
        raise unsupported(node, f"axis {axis} is empty: no index to return")
    return axis


def _arg_implementation(op: str, extreme: Reduction) -> Implementation:
    class Forward(CanonicalForward):
        @staticmethod
        def check(node, state: SDFGState, sdfg: SDFG) -> None:
            _check_axis(node, state, sdfg, "data")

        @staticmethod
        def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
            steps = node_builder(node, state, sdfg)
            shape = onnx_shape(steps.desc("data"))
            axis = normalize_axis(node.axis, len(shape), node)
            last = bool(getattr(node, "select_last_index", 0))
            source = steps.operand("data", reused=True)
            index = add_arg_index(steps, source, axis, extreme, last, steps.desc("reduced").dtype)
            params = index_params(len(shape))
            row = subscript(at_axis(params, axis, "0"))
            out_params = [p for d, p in enumerate(params) if d != axis]
            steps.flat_map(
                "output",
                index_ranges(out_params, [s for d, s in enumerate(shape) if d != axis]),
                {"k": Memlet(f"{index}[{row}]")},
                "out = k",
                {"out": Memlet(f"reduced[{row if node.keepdims else subscript(out_params)}]")},
            )
            return steps.sdfg

    word = extreme.op.removeprefix("Reduce").lower()
    Forward.__name__ = Forward.__qualname__ = f"Canonical{op}"
    Forward.__doc__ = (
        f"Canonical {op} along ``axis`` (``keepdims``, ``select_last_index``): the steps of :func:`add_arg_index` "
        f"(the {word}imum of every row, then the index of its first or last element equal to it), then "
        "``output``: ``reduced = index``, produced row-major (int64). The input is read by two steps; if another "
        "task produces it, it is copied into a REUSE buffer first."
    )
    return Implementation(op, CANONICAL, Forward)


class CanonicalHardmax(CanonicalForward):
    """Canonical Hardmax along ``axis`` (opset 13 on; earlier opsets only along the last axis, where their
    flattening to 2-D is the same): ``output = 1`` at the first maximum of every row along ``axis``, ``0``
    elsewhere. The steps of :func:`add_arg_index` (ReduceMax, first index), then ``output``:
    ``output[i] = 1 if i[axis] == index[row] else 0``, produced row-major. The input is read by two steps;
    if another task produces it, it is copied into a REUSE buffer first.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        rank = len(axis_input_shape(node, state, sdfg, "input"))
        if node.schema.since_version < HARDMAX_AXIS_OPSET and normalize_axis(node.axis, rank, node) != rank - 1:
            raise unsupported(node, f"axis={node.axis} before opset {HARDMAX_AXIS_OPSET} (flattened to 2-D)")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg)
        shape = onnx_shape(steps.desc("input"))
        if math.prod(shape) == 0:
            return steps.sdfg
        axis = normalize_axis(node.axis, len(shape), node)
        dtype = steps.desc("output").dtype
        source = steps.operand("input", reused=True)
        index = add_arg_index(steps, source, axis, reduction_named("ReduceMax"), False, dace.int64)
        params = index_params(len(shape))
        row = subscript(at_axis(params, axis, "0"))
        steps.flat_map(
            "output",
            index_ranges(params, shape),
            {"k": Memlet(f"{index}[{row}]")},
            f"out = {literal(1, dtype)} if {params[axis]} == k else {literal(0, dtype)}",
            {"out": Memlet(f"output[{subscript(params)}]")},
        )
        return steps.sdfg


IMPLEMENTATIONS = (
    *(_implementation(reduction) for reduction in REDUCTIONS),
    _arg_implementation("ArgMax", reduction_named("ReduceMax")),
    _arg_implementation("ArgMin", reduction_named("ReduceMin")),
    Implementation("Hardmax", CANONICAL, CanonicalHardmax),
)
