"""Canonical pooling: MaxPool and AveragePool (window maps), GlobalAveragePool and GlobalMaxPool (reductions).

MaxPool and AveragePool are one flat map over the output (N, C, O...), produced row-major. The
tasklet of one output element reads its window: one input connector per kernel position, each a
one-element memlet (so the memlet volumes count kh·kw accesses per output). A window position in
the padding is read at the nearest input element (its index is clamped) and masked in the
tasklet: it never wins a max and does not add to an average. Windows overlap (stride < kernel)
or visit the input out of row-major order, so an input produced by another task is copied into
a buffer first (REUSE if windows overlap, else REORDER), unless the kernel is 1×…×1.
"""

import itertools
import math
from dataclasses import dataclass

import dace
from dace import SDFG, Memlet, SDFGState

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import index_params, index_ranges, literal, lowest, subscript
from dcaccel.expansions.node import (
    CanonicalForward,
    input_shape,
    node_builder,
    onnx_pads,
    onnx_shape,
    output_shape,
    unsupported,
)
from dcaccel.expansions.reduce import REDUCTIONS, add_reduction
from dcaccel.expansions.registry import CANONICAL, Implementation


@dataclass(frozen=True)
class PoolGeometry:
    """Sizes of a pooling window over the spatial axes: input, output, kernel, strides, dilations, pads."""

    in_sizes: tuple[int, ...]
    out_sizes: tuple[int, ...]
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]

    @classmethod
    def from_node(cls, node, in_shape: tuple, out_shape: tuple) -> "PoolGeometry":
        """The geometry of a MaxPool/AveragePool node; output sizes are the node's output shape."""
        dims = len(in_shape) - 2
        kernel = tuple(node.kernel_shape)
        if len(kernel) != dims:
            raise unsupported(node, f"kernel_shape {list(kernel)} for {dims} spatial axes")
        strides = tuple(node.strides or [1] * dims)
        dilations = tuple(getattr(node, "dilations", None) or [1] * dims)
        in_sizes, out_sizes = tuple(in_shape[2:]), tuple(out_shape[2:])
        begin, end = onnx_pads(node, in_sizes, out_sizes, kernel, strides, dilations)
        return cls(in_sizes, out_sizes, kernel, strides, dilations, begin, end)

    @property
    def dims(self) -> range:
        """The spatial axes, counted from 0."""
        return range(len(self.kernel))

    def position(self, d: int, out_param: str, k: int) -> str:
        """Input index along spatial axis ``d`` of kernel position ``k`` in the window of output ``out_param``."""
        return f"{out_param} * {self.strides[d]} + {k * self.dilations[d] - self.pads_begin[d]}"

    def low(self, d: int, k: int) -> bool:
        """Whether kernel position ``k`` of axis ``d`` falls before the input for some output."""
        return k * self.dilations[d] - self.pads_begin[d] < 0

    def high(self, d: int, k: int) -> bool:
        """Whether kernel position ``k`` of axis ``d`` falls after the input for some output."""
        last = (self.out_sizes[d] - 1) * self.strides[d] + k * self.dilations[d] - self.pads_begin[d]
        return last > self.in_sizes[d] - 1

    @property
    def overlapping(self) -> bool:
        """Whether windows of neighbouring outputs share input elements (elements are re-read)."""
        return any((k - 1) * d + 1 > s for k, d, s in zip(self.kernel, self.dilations, self.strides, strict=True))


def _window(geometry: PoolGeometry, source: str, params: list[str]):
    """Connectors, memlets and validity conditions of every kernel position of an output's window."""
    spatial = params[2:]
    for offsets in itertools.product(*(range(k) for k in geometry.kernel)):
        indices, conditions = [params[0], params[1]], []
        for d, k in enumerate(offsets):
            position = geometry.position(d, spatial[d], k)
            index = position
            if geometry.low(d, k):
                index = f"Max({index}, 0)"
                conditions.append(f"({position} >= 0)")
            if geometry.high(d, k):
                index = f"Min({index}, {geometry.in_sizes[d] - 1})"
                conditions.append(f"({position} < {geometry.in_sizes[d]})")
            indices.append(index)
        connector = "w_" + "_".join(str(k) for k in offsets)
        yield connector, Memlet(f"{source}[{subscript(indices)}]"), " and ".join(conditions)


def _check_rank(node, state: SDFGState, sdfg: SDFG) -> None:
    rank = len(input_shape(node, state, sdfg, "X"))
    if rank < 3:
        raise unsupported(node, f"input rank {rank} (expected N x C x spatial)")


def _check_pool(node, state: SDFGState, sdfg: SDFG) -> None:
    """Raise :class:`UnsupportedOpError` for what the window maps of :func:`_pool_steps` do not cover."""
    if len(state.out_edges(node)) != 1:
        raise unsupported(node, "the Indices output")
    _check_rank(node, state, sdfg)
    PoolGeometry.from_node(node, input_shape(node, state, sdfg, "X"), output_shape(node, state, sdfg, "Y"))


def _pool_steps(node, state: SDFGState, sdfg: SDFG, average: bool) -> SDFG:
    """The nested SDFG of a MaxPool (or, ``average``, AveragePool) node: one map over the output windows."""
    steps = node_builder(node, state, sdfg)
    in_shape, out_shape = onnx_shape(steps.desc("X")), onnx_shape(steps.desc("Y"))
    geometry = PoolGeometry.from_node(node, in_shape, out_shape)
    pointwise = math.prod(geometry.kernel) == 1
    source = steps.operand(
        "X", reused=not pointwise, reason=BufferReason.REUSE if geometry.overlapping else BufferReason.REORDER
    )
    dtype = steps.desc("Y").dtype
    params = index_params(len(out_shape))
    inputs, lines = {}, []
    for connector, memlet, condition in _window(geometry, source, params):
        inputs[connector] = memlet
        if average:
            term = f"({connector} if {condition} else {literal(0, dtype)})" if condition else connector
            lines.append(f"__acc = __acc + {term}")
        else:
            term = f"({connector} if {condition} else {lowest(dtype)})" if condition else connector
            lines.append(f"__acc = max(__acc, {term})")
    first = literal(0, dtype) if average else lowest(dtype)
    code = [f"__acc = {first}", *lines]
    code.append(f"y = __acc / {_divisor(node, geometry, params[2:], dtype)}" if average else "y = __acc")
    steps.flat_map(
        "pool",
        index_ranges(params, out_shape),
        inputs,
        "\n".join(code),
        {"y": Memlet(f"Y[{subscript(params)}]")},
    )
    return steps.sdfg


def _divisor(node, geometry: PoolGeometry, spatial: list[str], dtype: dace.typeclass) -> str:
    """The tasklet expression of the element count an average divides by.

    Positions in the input count; with ``count_include_pad`` positions in the padding count too,
    but not those beyond it (a ``ceil_mode`` window that hangs over the end).
    """
    include_pad = bool(node.count_include_pad)
    factors = []
    for d in geometry.dims:
        high = geometry.in_sizes[d] + (geometry.pads_end[d] if include_pad else 0)
        terms = []
        for k in range(geometry.kernel[d]):
            position = geometry.position(d, spatial[d], k)
            checks = []
            if geometry.low(d, k) and not include_pad:
                checks.append(f"({position} >= 0)")
            if geometry.high(d, k):
                checks.append(f"({position} < {high})")
            terms.append(f"(1 if {' and '.join(checks)} else 0)" if checks else "1")
        factors.append("(" + " + ".join(terms) + ")")
    return f"dace.{dtype.to_string()}({' * '.join(factors)})"


class CanonicalMaxPool(CanonicalForward):
    """Canonical MaxPool: ``Y[n, c, o] = max over the window of o`` (pads, strides, dilations, ceil_mode, auto_pad).

    One flat map over the output, produced row-major; each output reads its kh·kw window
    positions (see the module docstring). The Indices output is not supported.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        if getattr(node, "storage_order", 0):
            raise unsupported(node, "storage_order=1")
        _check_pool(node, state, sdfg)

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        return _pool_steps(node, state, sdfg, average=False)


class CanonicalAveragePool(CanonicalForward):
    """Canonical AveragePool: ``Y[n, c, o] = mean over the window of o`` (pads, strides, ceil_mode,
    count_include_pad, dilations, auto_pad).

    One flat map over the output, produced row-major; each output reads its kh·kw window
    positions and divides their sum by the number of positions inside the input (and inside the
    padding, with ``count_include_pad``).
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        _check_pool(node, state, sdfg)

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        return _pool_steps(node, state, sdfg, average=True)


def _global_pool(op: str, reduction_op: str, summary: str) -> Implementation:
    (reduction,) = [r for r in REDUCTIONS if r.op == reduction_op]

    class Forward(CanonicalForward):
        @staticmethod
        def check(node, state: SDFGState, sdfg: SDFG) -> None:
            _check_rank(node, state, sdfg)

        @staticmethod
        def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
            steps = node_builder(node, state, sdfg)
            rank = len(onnx_shape(steps.desc("X")))
            add_reduction(steps, reduction, "X", list(range(2, rank)), "Y", keepdims=True)
            return steps.sdfg

    Forward.__name__ = Forward.__qualname__ = f"Canonical{op}"
    Forward.__doc__ = (
        f"Canonical {op}: ``Y[n, c, 1...] = {summary} of X[n, c, :...]``. A WCR reduction of X, read "
        "row-major, into an ACCUMULATE buffer, then the output, produced row-major "
        "(see :func:`dcaccel.expansions.reduce.add_reduction`)."
    )
    return Implementation(op, CANONICAL, Forward)


IMPLEMENTATIONS = (
    Implementation("MaxPool", CANONICAL, CanonicalMaxPool),
    Implementation("AveragePool", CANONICAL, CanonicalAveragePool),
    _global_pool("GlobalAveragePool", "ReduceMean", "mean"),
    _global_pool("GlobalMaxPool", "ReduceMax", "max"),
)
