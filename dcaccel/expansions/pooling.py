"""Canonical pooling: MaxPool, AveragePool and LpPool (window maps), GlobalAveragePool and GlobalMaxPool
(reductions).

A window is clipped to the input first: along each spatial axis only the kernel positions that fall
inside the input for some output are read (:meth:`PoolGeometry.clipped`; a 320-wide kernel over a
2-wide input reads 2 positions). The other positions hold padding (or lie beyond it, with
``ceil_mode``) for every output, so they never win a max and add nothing to a sum; an average
still divides by the count ONNX prescribes (:func:`_divisor`). How the positions of a window combine
is a :class:`WindowReduction`: their maximum, or the sum of a function of each (the element itself, or
``|x|^p``) ended by a function of the sum (divided by the count, or its ``p``-th root).

A clipped window of at most :data:`UNROLLED_WINDOW` positions is read by one flat map over the
output (N, C, O...), produced row-major. The tasklet of one output element reads its window: one
input connector per clipped kernel position, each a one-element memlet. A larger window is a WCR
reduction (as :func:`dcaccel.expansions.reduce.add_reduction`): one flat map over the output and
the clipped window positions, (N, C, O..., K...) row-major so each output's window is read in
turn, accumulates into an ACCUMULATE buffer shaped like the output (set to the identity by an
initialisation map); then one map writes the output from it, row-major.

Volume rule: either way, the pool task reads ``outputs × clipped window`` elements of X. A clipped
position that falls outside the input for some output is still read there, at the nearest input
element (its index is clamped), and masked in the tasklet. Windows overlap (stride < kernel) or
visit the input out of row-major order, so an input produced by another task is copied into a
buffer first (REUSE if windows overlap, else REORDER), unless the kernel is 1×…×1.
"""

import itertools
import math
from dataclasses import dataclass

import dace
from dace import SDFG, Memlet, SDFGState

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import (
    WCR_MAX,
    WCR_SUM,
    ExpansionBuilder,
    index_params,
    index_ranges,
    literal,
    lowest,
    max_identity,
    subscript,
)
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.node import (
    CanonicalForward,
    input_shape,
    node_builder,
    onnx_pads,
    onnx_shape,
    output_shape,
    unsupported,
)
from dcaccel.expansions.reduce import WCR_MIN, add_reduction, reduction_named

UNROLLED_WINDOW = 16
"""The largest clipped window (in positions) read by one tasklet; larger ones are WCR reductions."""


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
        geometry = cls(in_sizes, out_sizes, kernel, strides, dilations, begin, end)
        for d in geometry.dims:
            if not geometry.clipped(d):
                raise unsupported(node, f"no window reaches the input along spatial axis {d}")
        return geometry

    @property
    def dims(self) -> range:
        """The spatial axes, counted from 0."""
        return range(len(self.kernel))

    def position(self, d: int, out_param: str, k) -> str:
        """Input index along spatial axis ``d`` of kernel position ``k`` (a number or a map parameter) in
        the window of output ``out_param``."""
        if isinstance(k, int):
            return f"{out_param} * {self.strides[d]} + {k * self.dilations[d] - self.pads_begin[d]}"
        return f"{out_param} * {self.strides[d]} + {k} * {self.dilations[d]} - {self.pads_begin[d]}"

    def low(self, d: int, k: int) -> bool:
        """Whether kernel position ``k`` of axis ``d`` falls before the input for some output."""
        return k * self.dilations[d] - self.pads_begin[d] < 0

    def high(self, d: int, k: int) -> bool:
        """Whether kernel position ``k`` of axis ``d`` falls after the input for some output."""
        last = (self.out_sizes[d] - 1) * self.strides[d] + k * self.dilations[d] - self.pads_begin[d]
        return last > self.in_sizes[d] - 1

    def counted(self, d: int, k: int, out: int, low: int, high: int) -> bool:
        """Whether kernel position ``k`` of axis ``d`` falls in ``[low, high)`` in the window of output ``out``."""
        return low <= out * self.strides[d] + k * self.dilations[d] - self.pads_begin[d] < high

    def reaches(self, d: int, k: int, low: int, high: int) -> bool:
        """Whether kernel position ``k`` of axis ``d`` falls in ``[low, high)`` for some output."""
        first = k * self.dilations[d] - self.pads_begin[d]
        out = max(0, -((first - low) // self.strides[d]))  # the first output whose position is >= low
        return out < self.out_sizes[d] and self.counted(d, k, out, low, high)

    def clipped(self, d: int) -> range:
        """The kernel positions of axis ``d`` read: from the first to the last that falls inside the input
        for some output (empty if none does)."""
        inside = [k for k in range(self.kernel[d]) if self.reaches(d, k, 0, self.in_sizes[d])]
        return range(inside[0], inside[-1] + 1) if inside else range(0)

    @property
    def window(self) -> int:
        """The number of positions of the clipped window."""
        return math.prod(len(self.clipped(d)) for d in self.dims)

    @property
    def overlapping(self) -> bool:
        """Whether windows of neighbouring outputs share input elements (elements are re-read)."""
        return any((k - 1) * d + 1 > s for k, d, s in zip(self.kernel, self.dilations, self.strides, strict=True))


@dataclass(frozen=True)
class WindowReduction:
    """How the positions of a window combine: their maximum (not ``summed``), or the sum of ``element`` (of the
    element ``{v}``); the output is ``result`` of the maximum or sum ``{a}``. A position outside the input is
    masked: it adds 0 to a sum, and never wins a maximum."""

    summed: bool
    element: str = "{v}"
    result: str = "{a}"

    @staticmethod
    def of(node, kind: str, geometry: PoolGeometry, spatial: list[str], dtype: dace.typeclass) -> "WindowReduction":
        """The window reduction of a ``kind`` (``max``, ``average`` or ``lp``) pooling node."""
        if kind == "max":
            return WindowReduction(summed=False)
        if kind == "average":
            return WindowReduction(summed=True, result=f"{{a}} / {_divisor(node, geometry, spatial, dtype)}")
        p = node.p
        element, root = {1: ("abs({v})", "{a}"), 2: ("{v} * {v}", "sqrt({a})")}.get(
            p, (f"abs({{v}}) ** {float(p)!r}", f"{{a}} ** {1 / p!r}")
        )
        return WindowReduction(summed=True, element=element, result=root)

    def term(self, value: str, condition: str, dtype: dace.typeclass) -> str:
        """The tasklet expression of one position of value ``value``, masked unless ``condition`` ("": always)."""
        term = self.element.format(v=value)
        if not condition:
            return term
        return f"({term} if {condition} else {literal(0, dtype) if self.summed else lowest(dtype)})"


@dataclass(frozen=True)
class MaxIndex:
    """MaxPool's ``Indices`` output: the flat index into X of the first maximum of every window (in the window's
    scan order, positions in the input only, as onnxruntime), ``(n · C + c) · S + s`` with ``S`` the number of
    spatial positions and ``s`` the position's spatial index, row-major (``storage_order`` 0) or column-major (1:
    the first spatial axis varies fastest)."""

    geometry: PoolGeometry
    channels: int
    column_major: bool

    def flat(self, params: list[str], coordinates: list[str]) -> str:
        """The tasklet expression of the flat index of the input element at spatial ``coordinates`` (expressions)
        for output ``params`` (N, C, spatial)."""
        sizes = self.geometry.in_sizes
        axes = list(range(len(sizes)))
        terms, stride = [], 1
        for d in axes if self.column_major else reversed(axes):
            terms.append(f"({coordinates[d]}) * {stride}")
            stride *= sizes[d]
        return f"({params[0]} * {self.channels} + {params[1]}) * {math.prod(sizes)} + " + " + ".join(terms)

    def row_major_coordinates(self, index: str) -> list[str]:
        """The spatial coordinates (expressions) of the spatial index ``index`` counted row-major."""
        sizes = self.geometry.in_sizes
        return [f"({index} // {math.prod(sizes[d + 1 :])}) % {sizes[d]}" for d in range(len(sizes))]


def _read(geometry: PoolGeometry, source: str, params: list[str], offsets) -> tuple[Memlet, str]:
    """The memlet reading kernel position ``offsets`` (numbers, or map parameters over the clipped ranges)
    of the window of output ``params``, and the condition of it being inside the input ("" if always)."""
    spatial = params[2:]
    indices, conditions = [params[0], params[1]], []
    for d, k in enumerate(offsets):
        positions = geometry.clipped(d) if isinstance(k, str) else [k]
        position = geometry.position(d, spatial[d], k)
        index = position
        if any(geometry.low(d, p) for p in positions):
            index = f"Max({index}, 0)"
            conditions.append(f"({position} >= 0)")
        if any(geometry.high(d, p) for p in positions):
            index = f"Min({index}, {geometry.in_sizes[d] - 1})"
            conditions.append(f"({position} < {geometry.in_sizes[d]})")
        indices.append(index)
    return Memlet(f"{source}[{subscript(indices)}]"), " and ".join(conditions)


def _check_rank(node, state: SDFGState, sdfg: SDFG) -> None:
    rank = len(input_shape(node, state, sdfg, "X"))
    if rank < 3:
        raise unsupported(node, f"input rank {rank} (expected N x C x spatial)")


def _check_pool(node, state: SDFGState, sdfg: SDFG) -> None:
    """Raise :class:`UnsupportedOpError` for what the window maps of :func:`_pool_steps` do not cover."""
    _check_rank(node, state, sdfg)
    PoolGeometry.from_node(node, input_shape(node, state, sdfg, "X"), output_shape(node, state, sdfg, "Y"))


def _pool_steps(node, state: SDFGState, sdfg: SDFG, kind: str) -> SDFG:
    """The nested SDFG of a MaxPool, AveragePool or LpPool node (``kind`` ``max``, ``average``, ``lp``): one map
    over the output windows, or a WCR reduction over them for windows of more than :data:`UNROLLED_WINDOW`
    positions; a MaxPool's ``Indices`` output (:class:`MaxIndex`) is written beside Y."""
    steps = node_builder(node, state, sdfg)
    in_shape, out_shape = onnx_shape(steps.desc("X")), onnx_shape(steps.desc("Y"))
    geometry = PoolGeometry.from_node(node, in_shape, out_shape)
    pointwise = math.prod(geometry.kernel) == 1
    source = steps.operand(
        "X", reused=not pointwise, reason=BufferReason.REUSE if geometry.overlapping else BufferReason.REORDER
    )
    params = index_params(len(out_shape))
    window = WindowReduction.of(node, kind, geometry, params[2:], steps.desc("Y").dtype)
    indices = None
    if "Indices" in steps.sdfg.arrays:
        indices = MaxIndex(geometry, in_shape[1], bool(getattr(node, "storage_order", 0)))
    if geometry.window > UNROLLED_WINDOW:
        _reduced_window(steps, geometry, source, params, out_shape, window, indices)
    else:
        _unrolled_window(steps, geometry, source, params, out_shape, window, indices)
    return steps.sdfg


def _unrolled_window(
    steps: ExpansionBuilder,
    geometry: PoolGeometry,
    source: str,
    params: list[str],
    out_shape: tuple,
    window: WindowReduction,
    indices: MaxIndex | None = None,
) -> None:
    """One flat map ``pool`` over the output whose tasklet reads every clipped window position and combines
    them by ``window``; with ``indices`` it also writes the flat index of the first maximum (a later position
    replaces it only if greater) into ``Indices``."""
    dtype = steps.desc("Y").dtype
    inputs, lines = {}, []
    found = literal(-1, dace.int64)
    for offsets in itertools.product(*(geometry.clipped(d) for d in geometry.dims)):
        connector = "w_" + "_".join(str(k) for k in offsets)
        inputs[connector], condition = _read(geometry, source, params, offsets)
        term = window.term(connector, condition, dtype)
        if indices is not None:
            coordinates = [geometry.position(d, params[2 + d], k) for d, k in enumerate(offsets)]
            wins = f"({condition or 'True'}) and (__idx == {found} or {connector} > __acc)"
            lines.append(f"__idx = {indices.flat(params, coordinates)} if {wins} else __idx")
        lines.append(f"__acc = __acc + {term}" if window.summed else f"__acc = max(__acc, {term})")
    first = literal(0, dtype) if window.summed else lowest(dtype)
    code = [f"__acc = {first}", *([f"__idx = {found}"] if indices else []), *lines]
    outputs = {"y": Memlet(f"Y[{subscript(params)}]")}
    code.append(f"y = {window.result.format(a='__acc')}")
    if indices is not None:
        outputs["i"] = Memlet(f"Indices[{subscript(params)}]")
        code.append("i = __idx")
    steps.flat_map("pool", index_ranges(params, out_shape), inputs, "\n".join(code), outputs)


def _reduced_window(
    steps: ExpansionBuilder,
    geometry: PoolGeometry,
    source: str,
    params: list[str],
    out_shape: tuple,
    window: WindowReduction,
    indices: MaxIndex | None = None,
) -> None:
    """A WCR reduction of the clipped windows: ``reduce`` accumulates every window position of every
    output, (N, C, O..., K...) row-major, into an ACCUMULATE buffer (the max, or the sum of ``window``'s
    elements); ``output`` writes Y from it (``window``'s result), row-major.

    With ``indices``, ``index`` reads the windows again after ``reduce``: the smallest row-major spatial index of a
    position in the input equal to its window's maximum (WCR min; the first in the window's scan order, which
    visits positions row-major) into a second ACCUMULATE buffer; ``output`` also writes ``Indices`` from it."""
    dtype = steps.desc("Y").dtype
    accumulator = steps.transient("accumulator", out_shape, dtype, BufferReason.ACCUMULATE)
    if window.summed:
        steps.init(accumulator, literal(0, dtype))
    else:
        steps.init(accumulator, max_identity(dtype), dace.Language.CPP)
    offsets = index_params(len(geometry.kernel), prefix="__k")
    ranges = index_ranges(params, out_shape)
    ranges.update({k: f"{geometry.clipped(d).start}:{geometry.clipped(d).stop}" for d, k in enumerate(offsets)})
    memlet, condition = _read(geometry, source, params, offsets)
    steps.flat_map(
        "reduce",
        ranges,
        {"v": memlet},
        f"a = {window.term('v', condition, dtype)}",
        {"a": Memlet(f"{accumulator}[{subscript(params)}]", wcr=WCR_SUM if window.summed else WCR_MAX)},
    )
    element = subscript(params)
    inputs = {"a": Memlet(f"{accumulator}[{element}]")}
    code = f"y = {window.result.format(a='a')}"
    outputs = {"y": Memlet(f"Y[{element}]")}
    if indices is not None:
        spatial = [geometry.position(d, params[2 + d], k) for d, k in enumerate(offsets)]
        never = literal(math.prod(geometry.in_sizes), dace.int64)
        first = steps.transient("first_max", out_shape, dace.int64, BufferReason.ACCUMULATE)
        steps.init(first, never)
        row_major = MaxIndex(geometry, 1, column_major=False).flat(["0", "0"], spatial)
        steps.flat_map(
            "index",
            ranges,
            {"v": _read(geometry, source, params, offsets)[0], "m": Memlet(f"{accumulator}[{element}]")},
            f"k = {row_major} if ({condition or 'True'}) and v == m else {never}",
            {"k": Memlet(f"{first}[{element}]", wcr=WCR_MIN)},
        )
        inputs["k"] = Memlet(f"{first}[{element}]")
        code += f"\ni = {indices.flat(params, indices.row_major_coordinates('k'))}"
        outputs["i"] = Memlet(f"Indices[{element}]")
    steps.flat_map("output", index_ranges(params, out_shape), inputs, code, outputs)


def _divisor(node, geometry: PoolGeometry, spatial: list[str], dtype: dace.typeclass) -> str:
    """The tasklet expression of the element count an average divides by: per spatial axis, the kernel
    positions of the window that count, multiplied.

    Positions in the input count; with ``count_include_pad`` positions in the padding count too,
    but not those beyond it (a ``ceil_mode`` window that hangs over the end), as onnxruntime
    divides. An axis where every window counts the same is a number, else (counting the kernel
    positions ``k`` with ``low <= start + k * dilation < high``, ``start`` the window's first position)
    ``min(kernel, ceil((high - start) / dilation)) - ceil(max(low - start, 0) / dilation)``.
    """
    include_pad = bool(node.count_include_pad)
    factors = []
    for d in geometry.dims:
        low = -geometry.pads_begin[d] if include_pad else 0
        high = geometry.in_sizes[d] + (geometry.pads_end[d] if include_pad else 0)
        kernel, dilation = geometry.kernel[d], geometry.dilations[d]
        starts = [out * geometry.strides[d] - geometry.pads_begin[d] for out in range(geometry.out_sizes[d])]
        counts = {min(kernel, -((start - high) // dilation)) - -(min(start - low, 0) // dilation) for start in starts}
        if len(counts) == 1:
            factors.append(str(counts.pop()))
            continue
        start = f"({spatial[d]} * {geometry.strides[d]} - {geometry.pads_begin[d]})"
        if dilation == 1:
            factors.append(f"(min({kernel}, {high} - {start}) - max({low} - {start}, 0))")
        else:
            upper = f"({high} - {start} + {dilation - 1}) // {dilation}"
            lower = f"(max({low} - {start}, 0) + {dilation - 1}) // {dilation}"
            factors.append(f"(min({kernel}, {upper}) - {lower})")
    return f"dace.{dtype.to_string()}({' * '.join(factors)})"


class CanonicalMaxPool(CanonicalForward):
    """Canonical MaxPool: ``Y[n, c, o] = max over the window of o`` (pads, strides, dilations, ceil_mode, auto_pad).

    One flat map over the output, produced row-major; each output reads its kh·kw window
    positions (see the module docstring). The ``Indices`` output (``storage_order`` 0 or 1, see
    :class:`MaxIndex`) is written by the same map, or, for a WCR reduction, by its ``output`` map after an
    ``index`` map that reads the windows again.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        _check_pool(node, state, sdfg)

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        return _pool_steps(node, state, sdfg, "max")


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
        return _pool_steps(node, state, sdfg, "average")


class CanonicalLpPool(CanonicalForward):
    """Canonical LpPool: ``Y[n, c, o] = (sum over the window of o of |x|^p)^(1/p)`` (``p``, pads, strides,
    dilations, ceil_mode, auto_pad; padding adds 0).

    One flat map over the output, produced row-major; each output reads its kh·kw window positions (see
    the module docstring). ``p`` 1 and 2 are computed as ``|x|`` and ``x·x`` (then the sum, and its square root).
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        if node.p <= 0:
            raise unsupported(node, f"p={node.p} (a positive order)")
        _check_pool(node, state, sdfg)

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        return _pool_steps(node, state, sdfg, "lp")


def _global_pool(op: str, reduction_op: str, summary: str) -> Implementation:
    reduction = reduction_named(reduction_op)

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
    Implementation("LpPool", CANONICAL, CanonicalLpPool),
    _global_pool("GlobalAveragePool", "ReduceMean", "mean"),
    _global_pool("GlobalMaxPool", "ReduceMax", "max"),
)
