"""Canonical Softmax: numerically stable, as four flat map steps."""

from dace import SDFG, Memlet, SDFGState

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import WCR_SUM, index_params, index_ranges, literal, subscript
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.node import (
    CanonicalForward,
    input_shape,
    node_builder,
    normalize_axis,
    onnx_shape,
    unsupported,
)


def softmax_axes(node, rank: int) -> list[int]:
    """The axes Softmax normalises over.

    Opset 13 and later: the single axis ``axis`` (default -1). Before: the input is read as a
    matrix split at ``axis`` (default 1), and every axis from ``axis`` on is normalised.
    """
    axis = normalize_axis(node.axis, rank, node)
    return [axis] if node.schema.since_version >= 13 else list(range(axis, rank))


class CanonicalSoftmax(CanonicalForward):
    """Canonical Softmax: ``output = exp(input - max) / sum(exp(input - max))`` along the softmax axes.

    Steps (flat maps over the input, row-major), with ``row`` the index without the softmax axes:

    1. ``max``: ``row_max[row] = max(input)`` (WCR max; ``row_max`` starts at -infinity);
    2. ``exp``: ``exps = exp(input - row_max[row])``;
    3. ``sum``: ``row_sum[row] = sum(exps)`` (WCR sum; ``row_sum`` starts at 0);
    4. ``div``: ``output = exps / row_sum[row]``, produced row-major.

    ``row_max`` and ``row_sum`` are re-read once per element of their row and ``exps`` is read by
    two steps: all three are REUSE buffers. The input is read by two steps; if another task
    produces it, it is copied into a REUSE buffer first.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        rank = len(input_shape(node, state, sdfg, "input"))
        if not rank:
            raise unsupported(node, "a rank-0 input has no axis to normalise")
        softmax_axes(node, rank)

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg)
        shape = onnx_shape(steps.desc("input"))
        axes = softmax_axes(node, len(shape))
        dtype = steps.desc("output").dtype
        params = index_params(len(shape))
        ranges = index_ranges(params, shape)
        element = subscript(params)
        row = subscript(["0" if d in axes else p for d, p in enumerate(params)])
        row_shape = [1 if d in axes else s for d, s in enumerate(shape)]

        source = steps.operand("input", reused=True)
        row_max = steps.row_max(source, ranges, element, row, row_shape)
        row_sum = steps.transient("row_sum", row_shape, dtype, BufferReason.REUSE)
        exps = steps.transient("exps", shape, dtype, BufferReason.REUSE)
        steps.init(row_sum, literal(0, dtype))
        steps.flat_map(
            "exp",
            ranges,
            {"v": Memlet(f"{source}[{element}]"), "m": Memlet(f"{row_max}[{row}]")},
            "e = exp(v - m)",
            {"e": Memlet(f"{exps}[{element}]")},
        )
        steps.flat_map(
            "sum", ranges, {"e": Memlet(f"{exps}[{element}]")}, "s = e", {"s": Memlet(f"{row_sum}[{row}]", wcr=WCR_SUM)}
        )
        steps.flat_map(
            "div",
            ranges,
            {"e": Memlet(f"{exps}[{element}]"), "s": Memlet(f"{row_sum}[{row}]")},
            "y = e / s",
            {"y": Memlet(f"output[{element}]")},
        )
        return steps.sdfg


IMPLEMENTATIONS = (Implementation("Softmax", CANONICAL, CanonicalSoftmax),)
