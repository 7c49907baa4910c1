"""Canonical normalisations: BatchNormalization (inference), LayerNormalization, InstanceNormalization,
GroupNormalization, LRN (local response normalisation across channels) and LpNormalization.

The statistics normalisations (Layer, Instance, Group) share :func:`add_moments`: the mean and the
variance of every group of elements, accumulated with WCR, then one map producing the output
row-major.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import dace
from dace import SDFG, Memlet, SDFGState
from dace.sdfg import nodes

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import (
    WCR_SUM,
    ExpansionBuilder,
    at_axis,
    broadcast_indices,
    index_params,
    index_ranges,
    is_broadcast,
    literal,
    subscript,
)
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.node import (
    CanonicalForward,
    axis_input_shape,
    input_shape,
    node_builder,
    normalize_axis,
    onnx_shape,
    ordered_inputs,
    unsupported,
)
from dcaccel.expansions.reduce import add_reduction, reduction_named


@dataclass(frozen=True)
class Statistics:
    """Where the mean and variance of a normalisation live: their ``shape``, the subscript ``index`` of
    an element's group (in the map parameters of the steps), the ``count`` of elements per group and
    the ``dtype`` they are computed in."""

    shape: Sequence
    index: str
    count: int
    dtype: dace.typeclass


def statistics_dtype(dtype: dace.typeclass) -> dace.typeclass:
    """The type statistics are kept in: float32 for float16 data, else the data's type."""
    return dace.float32 if dtype == dace.float16 else dtype


def add_moments(
    steps: ExpansionBuilder, source: str, ranges: Mapping[str, str], element: str, statistics: Statistics
) -> tuple[str, str]:
    """Add the steps computing the mean and the (biased) variance of every group of ``source``.

    Both steps iterate ``ranges`` and read ``source[element]``:

    1. ``mean``: ``mean[group] += x / count`` (WCR sum from 0);
    2. ``var``: ``var[group] += (x - mean[group])^2 / count`` (WCR sum from 0).

    ``mean`` and ``var`` are REUSE buffers (re-read once per element of their group); returns their names.
    """
    inv_count = literal(1 / statistics.count, statistics.dtype)
    group = statistics.index
    mean = steps.transient("mean", statistics.shape, statistics.dtype, BufferReason.REUSE)
    var = steps.transient("var", statistics.shape, statistics.dtype, BufferReason.REUSE)
    steps.init(mean, literal(0, statistics.dtype))
    steps.init(var, literal(0, statistics.dtype))
    steps.flat_map(
        "mean", ranges, {"x": Memlet(f"{source}[{element}]")}, f"m = x * {inv_count}", {"m": _accumulate(mean, group)}
    )
    steps.flat_map(
        "var",
        ranges,
        {"x": Memlet(f"{source}[{element}]"), "m": Memlet(f"{mean}[{group}]")},
        f"v = (x - m) * (x - m) * {inv_count}",
        {"v": _accumulate(var, group)},
    )
    return mean, var


def _check_channels(node, state: SDFGState, sdfg: SDFG, data: str = "X") -> tuple:
    """The shape of input ``data``, which must be N x C x ... (rank 2 or more)."""
    shape = input_shape(node, state, sdfg, data)
    if len(shape) < 2:
        raise unsupported(node, f"input rank {len(shape)} (expected N x C x ...)")
    return shape


class CanonicalBatchNormalization(CanonicalForward):
    """Canonical BatchNormalization, inference mode, as one flat map; every opset form (6 to 15).

    ``Y[n, c, d...] = (X[n, c, d...] - mean[p]) / sqrt(var[p] + epsilon) * scale[p] + B[p]`` with ``p = c``
    (``spatial`` 1, the default and the only form from opset 9 on) or ``p = c, d...`` (``spatial`` 0 of
    opsets 6 and 7: one parameter per activation), iterating X row-major: the output is produced
    row-major, X is read once in order and the parameters are re-read for every element they apply to
    (weights are buffers already; a parameter produced by another task is copied into a REUSE buffer
    first). The inputs are taken by their schema positions (X, scale, B, mean, var), whatever the
    opset calls them. Older exporters declare the running and saved statistics outputs too: outputs
    nothing reads are disconnected. Training mode (``training_mode`` 1, ``is_test`` 0 of opset 6, or a
    statistics output that is read) is not supported.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        statistics = _read_statistics(node, state, sdfg)
        if statistics:
            raise unsupported(node, f"training mode (statistics outputs {', '.join(statistics)} are read)")
        if getattr(node, "training_mode", 0) or not getattr(node, "is_test", 1):
            raise unsupported(node, "training mode (training_mode=1 or is_test=0)")
        x_shape, *parameters = (input_shape(node, state, sdfg, c) for c in ordered_inputs(node, state))
        if len(x_shape) < 2:
            raise unsupported(node, f"input rank {len(x_shape)} (expected N x C x ...)")
        expected = x_shape[1:] if getattr(node, "spatial", 1) == 0 else x_shape[1:2]
        if len(parameters) != 4 or any(shape != expected for shape in parameters):
            shapes = ", ".join(str(shape) for shape in parameters)
            raise unsupported(node, f"parameter shapes {shapes} for input {x_shape} (expected 4 of {expected})")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        for edge in state.out_edges(node):
            if edge.src_conn != "Y":
                _disconnect_output(node, state, edge)
        x, scale, bias, mean, var = ordered_inputs(node, state)
        steps = node_builder(node, state, sdfg)
        shape = onnx_shape(steps.desc(x))
        dtype = steps.desc("Y").dtype
        params = index_params(len(shape))
        element = subscript(params)
        parameter = subscript(params[1 : 1 + len(onnx_shape(steps.desc(scale)))])
        memlets = {
            name: Memlet(f"{steps.operand(connector, reused=True)}[{parameter}]")
            for name, connector in (("gamma", scale), ("beta", bias), ("mu", mean), ("sigma2", var))
        }
        memlets["x"] = Memlet(f"{x}[{element}]")
        epsilon = literal(node.epsilon, dtype)
        steps.flat_map(
            "normalize",
            index_ranges(params, shape),
            memlets,
            f"y = (x - mu) / sqrt(sigma2 + {epsilon}) * gamma + beta",
            {"y": Memlet(f"Y[{element}]")},
        )
        return steps.sdfg


def _read_statistics(node, state: SDFGState, sdfg: SDFG) -> list[str]:
    """The statistics outputs of a BatchNormalization (every output but ``Y``) whose data is read: by a node of
    ``sdfg``, or outside it (a non-transient container)."""
    return sorted(
        edge.src_conn
        for edge in state.out_edges(node)
        if edge.src_conn != "Y" and (not sdfg.arrays[edge.data.data].transient or _is_read(sdfg, edge.data.data))
    )


def _is_read(sdfg: SDFG, name: str) -> bool:
    return any(
        isinstance(access, nodes.AccessNode) and access.data == name and parent.out_degree(access) > 0
        for access, parent in sdfg.all_nodes_recursive()
    )


def _disconnect_output(node, state: SDFGState, edge) -> None:
    """Remove the output ``edge`` of ``node``, its connector and its access node (a transient nothing reads)."""
    state.remove_edge(edge)
    node.remove_out_connector(edge.src_conn)
    if state.degree(edge.dst) == 0:
        state.remove_node(edge.dst)


class CanonicalLayerNormalization(CanonicalForward):
    """Canonical LayerNormalization over the axes ``axis..rank-1``, as three flat map steps.

    With ``row`` the index of X without the normalised axes and ``D`` their element count:

    1. ``mean``: ``mean[row] += X / D`` (WCR sum from 0);
    2. ``var``: ``var[row] += (X - mean[row])^2 / D`` (WCR sum from 0);
    3. ``normalize``: ``Y = (X - mean[row]) / sqrt(var[row] + epsilon) * Scale + B``, produced
       row-major.

    The optional outputs ``Mean`` and ``InvStdDev = 1 / sqrt(var + epsilon)`` are written by one
    more step each. ``mean`` and ``var`` are re-read once per element of their row: REUSE
    buffers. X is read by three steps; if another task produces it, it is copied into a REUSE
    buffer first. Statistics are kept in float32 for float16 inputs (``stash_type``).
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        normalize_axis(node.axis, len(input_shape(node, state, sdfg, "X")), node)

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg)
        shape = onnx_shape(steps.desc("X"))
        axis = normalize_axis(node.axis, len(shape), node)
        dtype = steps.desc("Y").dtype
        stat_dtype = statistics_dtype(dtype)
        count = math.prod(shape[axis:])
        rows = math.prod(shape[:axis])
        params = index_params(len(shape))
        ranges = index_ranges(params, shape)
        element = subscript(params)
        row_shape = [s if d < axis else 1 for d, s in enumerate(shape)]
        row = subscript([p if d < axis else "0" for d, p in enumerate(params)])
        epsilon = literal(node.epsilon, stat_dtype)

        source = steps.operand("X", reused=True)
        mean, var = add_moments(steps, source, ranges, element, Statistics(row_shape, row, count, stat_dtype))
        inputs = {
            "x": Memlet(f"{source}[{element}]"),
            "m": Memlet(f"{mean}[{row}]"),
            "v": Memlet(f"{var}[{row}]"),
        }
        expression = f"(x - m) / sqrt(v + {epsilon})"
        for connector, operation in (("Scale", "*"), ("B", "+")):
            if connector not in steps.sdfg.arrays:
                continue
            param_shape = onnx_shape(steps.desc(connector))
            indices = broadcast_indices(param_shape, shape[axis:], params[axis:])
            param = steps.operand(connector, reused=rows > 1 or is_broadcast(param_shape, shape[axis:]))
            inputs[connector.lower()] = Memlet(f"{param}[{subscript(indices)}]")
            expression = f"{expression} {operation} {connector.lower()}"
        steps.flat_map("normalize", ranges, inputs, f"y = {expression}", {"y": Memlet(f"Y[{element}]")})

        row_params = [p for d, p in enumerate(params) if d < axis]
        row_ranges = index_ranges(row_params, shape[:axis])
        stat = subscript(row_params + ["0"] * (len(shape) - axis))
        if "Mean" in steps.sdfg.arrays:
            steps.flat_map(
                "mean_out", row_ranges, {"m": Memlet(f"{mean}[{stat}]")}, "out = m", {"out": Memlet(f"Mean[{stat}]")}
            )
        if "InvStdDev" in steps.sdfg.arrays:
            steps.flat_map(
                "inv_std_dev_out",
                row_ranges,
                {"v": Memlet(f"{var}[{stat}]")},
                f"out = 1 / sqrt(v + {epsilon})",
                {"out": Memlet(f"InvStdDev[{stat}]")},
            )
        return steps.sdfg


class CanonicalInstanceNormalization(CanonicalForward):
    """Canonical InstanceNormalization: every (n, c) normalised over the spatial axes, as three flat map steps.

    With ``(n, c)`` the group of an element, all steps iterating the input row-major:

    1. ``mean``, 2. ``var``: the group's mean and variance (:func:`add_moments`);
    3. ``normalize``: ``output = (input - mean[n, c]) / sqrt(var[n, c] + epsilon) * scale[c] + B[c]``,
       produced row-major.

    ``mean`` and ``var`` are REUSE buffers; ``scale`` and ``B`` are re-read for every element of
    their channel, and the input is read by three steps: each is copied into a REUSE buffer first
    if another task produces it. Statistics are kept in float32 for float16 inputs.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        _check_channels(node, state, sdfg, "input")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg)
        shape = onnx_shape(steps.desc("input"))
        params = index_params(len(shape))
        dtype = statistics_dtype(steps.desc("output").dtype)
        statistics = Statistics(shape[:2], subscript(params[:2]), math.prod(shape[2:]), dtype)
        connectors = ("input", "scale", "B", "output")
        ranges = index_ranges(params, shape)
        return _normalize_groups(steps, node, connectors, params, ranges, params[1], statistics)


class CanonicalGroupNormalization(CanonicalForward):
    """Canonical GroupNormalization: the channels split into ``num_groups`` consecutive groups, every
    (n, group) normalised over its channels and the spatial axes, as three flat map steps.

    The steps iterate ``(n, g, k, spatial...)`` with channel ``c = g * C/G + k``, which is X row-major:

    1. ``mean``, 2. ``var``: the mean and variance of every ``(n, g)`` (:func:`add_moments`);
    3. ``normalize``: ``Y = (X - mean[n, g]) / sqrt(var[n, g] + epsilon) * scale + bias``, produced
       row-major; ``scale`` and ``bias`` are per channel (opset 21) or per group (opset 18).

    ``mean`` and ``var`` are REUSE buffers; ``scale``, ``bias`` and X are re-read (each copied
    into a REUSE buffer first if another task produces it). Statistics are kept in float32 for
    float16 inputs (``stash_type`` 1, the default; other stash types are rejected).
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        shape = _check_channels(node, state, sdfg)
        groups = int(node.num_groups)
        if groups < 1 or shape[1] % groups:
            raise unsupported(node, f"{shape[1]} channels do not split into num_groups={groups}")
        if getattr(node, "stash_type", 1) != 1:
            raise unsupported(node, f"stash_type={node.stash_type} (only 1, float32)")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg)
        shape = onnx_shape(steps.desc("X"))
        groups = int(node.num_groups)
        per_group = shape[1] // groups
        params = index_params(len(shape) + 1)
        n, g, k, spatial = params[0], params[1], params[2], params[3:]
        ranges = index_ranges(params, (shape[0], groups, per_group, *shape[2:]))
        channel = f"{g} * {per_group} + {k}"
        count = per_group * math.prod(shape[2:])
        statistics = Statistics((shape[0], groups), subscript([n, g]), count, statistics_dtype(steps.desc("Y").dtype))
        parameter = channel if node.schema.since_version >= 21 else g
        connectors = ("X", "scale", "bias", "Y")
        return _normalize_groups(steps, node, connectors, [n, channel, *spatial], ranges, parameter, statistics)


def _normalize_groups(
    steps: ExpansionBuilder,
    node,
    connectors: tuple[str, str, str, str],
    indices: Sequence[str],
    ranges: Mapping[str, str],
    parameter: str,
    statistics: Statistics,
) -> SDFG:
    """The steps of Instance- and GroupNormalization over ``ranges``: the moments of every group, then
    ``Y = (X - mean) / sqrt(var + epsilon) * scale[parameter] + bias[parameter]``, X and Y at ``indices``.

    ``connectors`` names X, scale, bias and Y.
    """
    data, scale, bias, output = connectors
    element = subscript(indices)
    source = steps.operand(data, reused=True)
    mean, var = add_moments(steps, source, ranges, element, statistics)
    epsilon = literal(node.epsilon, statistics.dtype)
    inputs = {
        "x": Memlet(f"{source}[{element}]"),
        "m": Memlet(f"{mean}[{statistics.index}]"),
        "v": Memlet(f"{var}[{statistics.index}]"),
        "scale": Memlet(f"{steps.operand(scale, reused=True)}[{parameter}]"),
        "bias": Memlet(f"{steps.operand(bias, reused=True)}[{parameter}]"),
    }
    steps.flat_map(
        "normalize",
        ranges,
        inputs,
        f"y = (x - m) / sqrt(v + {epsilon}) * scale + bias",
        {"y": Memlet(f"{output}[{element}]")},
    )
    return steps.sdfg


class CanonicalLRN(CanonicalForward):
    """Canonical LRN (local response normalisation across channels) as one flat map.

    ``Y[n, c, ...] = X[n, c, ...] / (bias + alpha / size * sum(X[n, i, ...]^2))^beta`` over the
    channels ``i`` from ``c - floor((size-1)/2)`` to ``c + ceil((size-1)/2)`` inside ``[0, C)``,
    iterating X row-major: the output is produced row-major. Each output element reads its
    ``size`` window positions (one connector each; a position outside the channels is read at the
    nearest channel and masked). Windows of neighbouring channels overlap, so an input produced by
    another task is copied into a REUSE buffer first (unless ``size`` is 1).
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        _check_channels(node, state, sdfg)
        if int(node.size) < 1:
            raise unsupported(node, f"size={node.size}")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg)
        shape = onnx_shape(steps.desc("X"))
        dtype = steps.desc("Y").dtype
        size, channels = int(node.size), shape[1]
        source = steps.operand("X", reused=size > 1)
        params = index_params(len(shape))
        before = (size - 1) // 2
        inputs, lines = {}, [f"__square_sum = {literal(0, dtype)}"]
        for k in range(size):
            offset = k - before
            position = f"{params[1]} {'-' if offset < 0 else '+'} {abs(offset)}"
            index, condition = params[1], ""
            if offset < 0:
                index, condition = f"Max({position}, 0)", f"{position} >= 0"
            elif offset > 0:
                index, condition = f"Min({position}, {channels - 1})", f"{position} < {channels}"
            connector = f"w_{k}"
            inputs[connector] = Memlet(f"{source}[{subscript([params[0], index, *params[2:]])}]")
            square = f"{connector} * {connector}"
            term = f"({square} if {condition} else {literal(0, dtype)})" if condition else square
            lines.append(f"__square_sum = __square_sum + {term}")
        scale = literal(node.alpha / size, dtype)
        lines.append(
            f"y = w_{before} / ({literal(node.bias, dtype)} + {scale} * __square_sum) ** {literal(node.beta, dtype)}"
        )
        steps.flat_map(
            "normalize", index_ranges(params, shape), inputs, "\n".join(lines), {"y": Memlet(f"Y[{subscript(params)}]")}
        )
        return steps.sdfg


class CanonicalLpNormalization(CanonicalForward):
    """Canonical LpNormalization along ``axis`` (``p`` 1 or 2): ``output = input / norm`` with ``norm`` the L1 or
    L2 norm of the line of ``axis`` through the element (a zero norm gives 0, as ONNX's reference).

    The steps of :func:`~dcaccel.expansions.reduce.add_reduction` (ReduceL1 or ReduceL2 over ``axis``) into
    ``norm``, a REUSE buffer shaped like the input with ``axis`` of size 1 (re-read once per element of its
    line), then ``normalize``: ``output = input / norm``, produced row-major. The input is read by both;
    if another task produces it, it is copied into a REUSE buffer first.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        normalize_axis(node.axis, len(axis_input_shape(node, state, sdfg, "input")), node)
        if node.p not in (1, 2):
            raise unsupported(node, f"p={node.p} (1 or 2)")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        steps = node_builder(node, state, sdfg)
        shape = onnx_shape(steps.desc("input"))
        if math.prod(shape) == 0:
            return steps.sdfg
        axis = normalize_axis(node.axis, len(shape), node)
        dtype = steps.desc("output").dtype
        source = steps.operand("input", reused=True)
        params = index_params(len(shape))
        line = at_axis(shape, axis, 1)
        norm = steps.transient("norm", line, dtype, BufferReason.REUSE)
        add_reduction(steps, reduction_named(f"ReduceL{node.p}"), source, [axis], norm, keepdims=True)
        index = subscript(at_axis(params, axis, "0"))
        steps.flat_map(
            "normalize",
            index_ranges(params, shape),
            {"x": Memlet(f"{source}[{subscript(params)}]"), "n": Memlet(f"{norm}[{index}]")},
            f"y = x / n if n != {literal(0, dtype)} else {literal(0, dtype)}",
            {"y": Memlet(f"output[{subscript(params)}]")},
        )
        return steps.sdfg


IMPLEMENTATIONS = (
    Implementation("BatchNormalization", CANONICAL, CanonicalBatchNormalization),
    Implementation("LayerNormalization", CANONICAL, CanonicalLayerNormalization),
    Implementation("InstanceNormalization", CANONICAL, CanonicalInstanceNormalization),
    Implementation("GroupNormalization", CANONICAL, CanonicalGroupNormalization),
    Implementation("LRN", CANONICAL, CanonicalLRN),
    Implementation("LpNormalization", CANONICAL, CanonicalLpNormalization),
)


def _accumulate(name: str, index: str) -> Memlet:
    return Memlet(f"{name}[{index}]", wcr=WCR_SUM)
