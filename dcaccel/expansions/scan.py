"""Canonical ops over the lines of an axis, as maps: TopK, CumSum and CumProd.

They compare or combine every pair of positions along their axis in one flat map (a square of ``n²``
iterations per line of the axis, masked by a condition on the two positions) and accumulate with WCR, as
the reductions do (:mod:`dcaccel.expansions.reduce`): no step depends on the result of another iteration of
its own map, at the price of ``n²`` instead of ``n log n`` or ``n`` operations per line.
"""

import math

import dace
from dace import SDFG, Memlet, SDFGState

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import WCR_SUM, at_axis, index_params, index_ranges, literal, subscript, whole
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.node import (
    CanonicalForward,
    axis_input_shape,
    constant_int,
    input_edge,
    node_builder,
    normalize_axis,
    onnx_shape,
    unsupported,
)
from dcaccel.expansions.reduce import WCR_PRODUCT


def _with(params: list[str], axis: int, index: str) -> str:
    """The subscript of ``params`` with the one of ``axis`` replaced by ``index``."""
    return subscript(at_axis(params, axis, index))


def _topk_k(node, state: SDFGState, sdfg: SDFG) -> int:
    if input_edge(node, state, "K") is None:  # TopK-1: k is an attribute
        return int(node.k)
    return constant_int(node, state, sdfg, "K", "the number of elements to keep")


class CanonicalTopK(CanonicalForward):
    """Canonical TopK: the ``k`` largest (``largest`` 1) or smallest elements of every line of ``X`` along
    ``axis`` and their indices, best first (also for ``sorted`` 0, where ONNX leaves the order open); of equal
    elements the one of lower index comes first. Three flat map steps, with ``i``, ``l`` positions along the
    axis and ``p`` an output position:

    1. ``rank``: ``rank[i] += 1`` for every ``l`` whose element beats ``X[i]`` (greater, or smaller; or equal
       with ``l < i``), over the ``n × n`` pairs of every line (WCR sum from 0): ``rank`` is the position of
       every element in the sorted line, a permutation of ``0..n-1``;
    2. ``select``: ``values[p] += X[i] if rank[i] == p else 0``, ``indices[p] += i if rank[i] == p else 0``
       over the ``k × n`` pairs of every line (WCR sum from 0: exactly one ``i`` has rank ``p``);
    3. ``output``: ``Values = values``, ``Indices = indices``, produced row-major (``p`` ascending: the best
       element first).

    ``rank`` is re-read ``k`` times (REUSE), ``values`` and ``indices`` are accumulated into (ACCUMULATE); X
    is read by both steps, out of order: an X another task produces is copied into a REUSE buffer first. The
    element every other one is compared with in step 1, ``X[i]``, is read from a copy of X (``candidate``, a
    REUSE buffer: a plain copy, not a task), so that each iteration reads one element of each.
    ``K`` must be a constant. NaN compares false with everything: a line holding NaN ranks inconsistently.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        shape = axis_input_shape(node, state, sdfg, "X")
        size = shape[normalize_axis(node.axis, len(shape), node)]
        k = _topk_k(node, state, sdfg)
        if not 0 <= k <= size:
            raise unsupported(node, f"k={k} outside [0, {size}]")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        k = _topk_k(node, state, sdfg)
        steps = node_builder(node, state, sdfg, drop=["K"] if input_edge(node, state, "K") is not None else [])
        shape = onnx_shape(steps.desc("X"))
        axis = normalize_axis(node.axis, len(shape), node)
        out_shape = at_axis(shape, axis, k)
        if math.prod(out_shape) == 0:
            return steps.sdfg
        dtype, index_dtype = steps.desc("Values").dtype, steps.desc("Indices").dtype
        params = index_params(len(shape))
        i, other = params[axis], "__l"
        source = steps.operand("X", reused=True)
        candidate = steps.transient("candidate", shape, dtype, BufferReason.REUSE)
        steps.copy(source, whole(shape), candidate, whole(shape))
        rank = steps.transient("rank", shape, dace.int64, BufferReason.REUSE)
        steps.init(rank, literal(0, dace.int64))
        beats = ">" if getattr(node, "largest", 1) else "<"
        steps.flat_map(
            "rank",
            index_ranges([*params[: axis + 1], other, *params[axis + 1 :]], [*shape[: axis + 1], *shape[axis:]]),
            {"v": Memlet(f"{candidate}[{subscript(params)}]"), "w": Memlet(f"{source}[{_with(params, axis, other)}]")},
            f"r = 1 if w {beats} v or (w == v and {other} < {i}) else 0",
            {"r": Memlet(f"{rank}[{subscript(params)}]", wcr=WCR_SUM)},
        )
        values = steps.transient("values", out_shape, dtype, BufferReason.ACCUMULATE)
        indices = steps.transient("indices", out_shape, index_dtype, BufferReason.ACCUMULATE)
        steps.init(values, literal(0, dtype))
        steps.init(indices, literal(0, index_dtype))
        position = "__p"
        selected = _with(params, axis, position)
        steps.flat_map(
            "select",
            index_ranges([*params[:axis], position, *params[axis:]], [*out_shape[: axis + 1], *shape[axis:]]),
            {"v": Memlet(f"{source}[{subscript(params)}]"), "r": Memlet(f"{rank}[{subscript(params)}]")},
            f"value = v if r == {position} else {literal(0, dtype)}\nindex = {i} if r == {position} else 0",
            {
                "value": Memlet(f"{values}[{selected}]", wcr=WCR_SUM),
                "index": Memlet(f"{indices}[{selected}]", wcr=WCR_SUM),
            },
        )
        steps.flat_map(
            "output",
            index_ranges(params, out_shape),
            {"v": Memlet(f"{values}[{subscript(params)}]"), "j": Memlet(f"{indices}[{subscript(params)}]")},
            "out_values = v\nout_indices = j",
            {
                "out_values": Memlet(f"Values[{subscript(params)}]"),
                "out_indices": Memlet(f"Indices[{subscript(params)}]"),
            },
        )
        return steps.sdfg


def _cumulative_implementation(op: str, wcr: str, neutral: int, word: str) -> Implementation:
    """The canonical implementation of a cumulative ``op`` (CumSum, CumProd): ``wcr`` combines into a buffer named
    ``word``, ``neutral`` is what a position that is not included contributes (and where the buffer starts)."""
    label = op.lower()

    class Forward(CanonicalForward):
        @staticmethod
        def check(node, state: SDFGState, sdfg: SDFG) -> None:
            for flag in ("exclusive", "reverse"):  # ONNX: 0 or 1 (onnxruntime refuses 5; read as true, it ran)
                if getattr(node, flag) not in (0, 1):
                    raise unsupported(node, f"{flag}={getattr(node, flag)} (0 or 1)")
            shape = axis_input_shape(node, state, sdfg, "x")
            axis = constant_int(node, state, sdfg, "axis", "the axis to combine along")
            normalize_axis(axis, len(shape), node)

        @staticmethod
        def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
            axis_value = constant_int(node, state, sdfg, "axis", "the axis to combine along")
            steps = node_builder(node, state, sdfg, drop=["axis"])
            shape = onnx_shape(steps.desc("x"))
            if math.prod(shape) == 0:
                return steps.sdfg
            axis = normalize_axis(axis_value, len(shape), node)
            dtype = steps.desc("y").dtype
            params = index_params(len(shape))
            i, j = params[axis], "__j"
            order = ">" if node.reverse else "<"
            included = f"{j} {order}{'' if node.exclusive else '='} {i}"
            source = steps.operand("x", reused=True)
            accumulator = steps.transient(word, shape, dtype, BufferReason.ACCUMULATE)
            steps.init(accumulator, literal(neutral, dtype))
            steps.flat_map(
                label,
                index_ranges([*params[: axis + 1], j, *params[axis + 1 :]], [*shape[: axis + 1], *shape[axis:]]),
                {"v": Memlet(f"{source}[{_with(params, axis, j)}]")},
                f"s = v if {included} else {literal(neutral, dtype)}",
                {"s": Memlet(f"{accumulator}[{subscript(params)}]", wcr=wcr)},
            )
            steps.flat_map(
                "output",
                index_ranges(params, shape),
                {"s": Memlet(f"{accumulator}[{subscript(params)}]")},
                "out = s",
                {"out": Memlet(f"y[{subscript(params)}]")},
            )
            return steps.sdfg

    Forward.__name__ = Forward.__qualname__ = f"Canonical{op}"
    Forward.__doc__ = f"""Canonical {op} along the constant ``axis``: ``y[i] = the {word} of x[j]`` over the
    positions ``j`` along the axis up to ``i`` (``j <= i``; ``j < i`` if ``exclusive``, where none gives {neutral};
    ``j >= i`` or ``j > i`` if ``reverse``). Two flat map steps, with ``i``, ``j`` positions along the axis:

    1. ``{label}``: ``{word}[i]`` combines (``{wcr}``) ``x[j] if j is included in i else {neutral}`` over the
       ``n × n`` pairs of every line, ``j`` innermost after ``i`` (WCR from {neutral} into an ACCUMULATE buffer);
    2. ``output``: ``y = {word}``, produced row-major.

    x is read ``n`` times, out of order: an x another task produces is copied into a REUSE buffer first.
    """
    return Implementation(op, CANONICAL, Forward)


IMPLEMENTATIONS = (
    Implementation("TopK", CANONICAL, CanonicalTopK),
    _cumulative_implementation("CumSum", WCR_SUM, 0, "sum"),
    _cumulative_implementation("CumProd", WCR_PRODUCT, 1, "product"),
)
