"""Canonical reductions: ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceL2 (and, through
:func:`add_reduction`, the global pools), and ArgMax.

A reduction is two flat map steps: the input is read once, row-major, and accumulated with WCR
into an accumulator shaped like the output (an ACCUMULATE buffer, set to the identity by an
initialisation map); then one map writes the output from the accumulator, row-major. ArgMax adds
one step: the maximum first, then the index of the first (or last) element equal to it.
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
)

WCR_MIN = "lambda a, b: min(a, b)"


def min_identity(dtype: dace.typeclass) -> str:
    """A C++ expression for the identity of a min reduction over ``dtype``: +infinity, or the highest value."""
    if np.issubdtype(dtype.type, np.floating):
        return f"std::numeric_limits<{dtype.ctype}>::infinity()"
    return f"std::numeric_limits<{dtype.ctype}>::max()"


class Identity(enum.Enum):
    """The value a reduction's accumulator starts from."""

    ZERO = "zero"
    LOWEST = "lowest"  # -infinity, or the lowest value of the type (max reductions)
    HIGHEST = "highest"  # +infinity, or the highest value of the type (min reductions)

    def code(self, dtype: dace.typeclass) -> tuple[str, dace.Language]:
        """The initialisation expression over ``dtype`` and its language."""
        if self is Identity.LOWEST:
            return max_identity(dtype), dace.Language.CPP
        if self is Identity.HIGHEST:
            return min_identity(dtype), dace.Language.CPP
        return literal(0, dtype), dace.Language.Python


@dataclass(frozen=True)
class Reduction:
    """How a reduction maps each element (``element``, of the element ``v``), combines the results
    (``wcr``), starts (``identity``) and ends (``result``, of the accumulator ``a``, where ``{count}`` stands
    for the number of reduced elements)."""

    op: str
    wcr: str
    identity: Identity
    element: str = "v"
    result: str = "a"


REDUCTIONS = (
    Reduction("ReduceMean", WCR_SUM, Identity.ZERO, result="a / {count}"),
    Reduction("ReduceSum", WCR_SUM, Identity.ZERO),
    Reduction("ReduceMax", WCR_MAX, Identity.LOWEST),
    Reduction("ReduceMin", WCR_MIN, Identity.HIGHEST),
    Reduction("ReduceL2", WCR_SUM, Identity.ZERO, element="v * v", result="sqrt(a)"),
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
    accumulator = steps.transient("accumulator", kept_shape, dtype, BufferReason.ACCUMULATE)
    steps.init(accumulator, *reduction.identity.code(dtype))
    steps.flat_map(
        "reduce",
        index_ranges(params, in_shape),
        {"v": Memlet(f"{source}[{subscript(params)}]")},
        f"a = {reduction.element}",
        {"a": Memlet(f"{accumulator}[{subscript(kept)}]", wcr=reduction.wcr)},
    )
    out_params = [p for d, p in enumerate(params) if d not in axes]
    out_index = kept if keepdims else out_params
    count = literal(math.prod(in_shape[d] for d in axes), dtype)
    steps.flat_map(
        "output",
        index_ranges(out_params, [s for d, s in enumerate(in_shape) if d not in axes]),
        {"a": Memlet(f"{accumulator}[{subscript(kept)}]")},
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
                raise unsupported(node, f"imported output shape {imported} is not the reduction's {expected}")

        @staticmethod
        def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
            axes = reduced_axes(node, state, sdfg, len(input_shape(node, state, sdfg, "data")))
            steps = node_builder(node, state, sdfg, drop=["axes"])
            shape = onnx_shape(steps.desc("data"))
            if axes is None:  # every element reduced on its own: a copy, |v| for ReduceL2
                params = index_params(len(shape))
                one = literal(1, steps.desc("reduced").dtype)
                steps.flat_map(
                    "elementwise",
                    index_ranges(params, shape),
                    {"v": Memlet(f"data[{subscript(params)}]")},
                    f"a = {reduction.element}\nout = {reduction.result.format(count=one)}",
                    {"out": Memlet(f"reduced[{subscript(params)}]")},
                )
            else:
                add_reduction(steps, reduction, "data", axes, "reduced", bool(node.keepdims))
            return steps.sdfg

    Forward.__name__ = Forward.__qualname__ = f"Canonical{reduction.op}"
    Forward.__doc__ = (
        f"Canonical {reduction.op} over the ``axes`` (all if none; with ``noop_with_empty_axes`` none, "
        "every element reduced on its own by one flat map ``elementwise``): "
        f"``reduced = {reduction.result}`` where ``a`` accumulates ``{reduction.element}`` of every element "
        f"``v`` with ``{reduction.wcr}``. Two flat maps: a WCR reduction of the input, read row-major, into an "
        "ACCUMULATE buffer, then the output, produced row-major (see :func:`add_reduction`)."
    )
    return Implementation(reduction.op, CANONICAL, Forward)


class CanonicalArgMax(CanonicalForward):
    """Canonical ArgMax along ``axis`` (``keepdims``, ``select_last_index``), as three flat map steps.

    With ``row`` the index of the input without ``axis`` and ``k`` the position along it:

    1. ``max``: ``row_max[row] = max(data)`` (WCR max; ``row_max`` starts at -infinity or the
       lowest value);
    2. ``index``: ``index[row] = min(k where data == row_max[row])`` (WCR min; the last index:
       WCR max). An element that is not the maximum contributes the index that never wins
       (the last one, or 0 for the last index), so a row of NaNs yields that index;
    3. ``output``: ``reduced = index``, produced row-major (int64).

    Steps 1 and 2 read the input row-major. ``row_max`` is re-read once per element of its row
    (REUSE buffer), ``index`` is accumulated into (ACCUMULATE buffer). The input is read by two
    steps; if another task produces it, it is copied into a REUSE buffer first.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        shape = axis_input_shape(node, state, sdfg, "data")
        axis = normalize_axis(node.axis, len(shape), node)
        if shape[axis] == 0:
            raise unsupported(node, f"axis {axis} is empty: no index to return")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg)
        shape = onnx_shape(steps.desc("data"))
        axis = normalize_axis(node.axis, len(shape), node)
        index_dtype = steps.desc("reduced").dtype
        params = index_params(len(shape))
        ranges = index_ranges(params, shape)
        element = subscript(params)
        row_shape = [1 if d == axis else s for d, s in enumerate(shape)]
        row = subscript(["0" if d == axis else p for d, p in enumerate(params)])
        last = bool(getattr(node, "select_last_index", 0))
        never_wins = literal(0 if last else shape[axis] - 1, index_dtype)

        source = steps.operand("data", reused=True)
        row_max = steps.row_max(source, ranges, element, row, row_shape)
        index = steps.transient("index", row_shape, index_dtype, BufferReason.ACCUMULATE)
        steps.init(index, never_wins)
        steps.flat_map(
            "index",
            ranges,
            {"v": Memlet(f"{source}[{element}]"), "m": Memlet(f"{row_max}[{row}]")},
            f"k = {params[axis]} if v == m else {never_wins}",
            {"k": Memlet(f"{index}[{row}]", wcr=WCR_MAX if last else WCR_MIN)},
        )
        out_params = [p for d, p in enumerate(params) if d != axis]
        out_index = row if node.keepdims else subscript(out_params)
        steps.flat_map(
            "output",
            index_ranges(out_params, [s for d, s in enumerate(shape) if d != axis]),
            {"k": Memlet(f"{index}[{row}]")},
            "out = k",
            {"out": Memlet(f"reduced[{out_index}]")},
        )
        return steps.sdfg


IMPLEMENTATIONS = (
    *(_implementation(reduction) for reduction in REDUCTIONS),
    Implementation("ArgMax", CANONICAL, CanonicalArgMax),
)
