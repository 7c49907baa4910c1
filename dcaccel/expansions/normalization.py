"""Canonical normalisations: BatchNormalization (inference) and LayerNormalization."""

import math

import dace
from dace import SDFG, Memlet, SDFGState

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import (
    WCR_SUM,
    broadcast_indices,
    index_params,
    index_ranges,
    is_broadcast,
    literal,
    subscript,
)
from dcaccel.expansions.node import (
    CanonicalForward,
    input_shape,
    node_builder,
    normalize_axis,
    onnx_shape,
    unsupported,
)
from dcaccel.expansions.registry import CANONICAL, Implementation

_BATCHNORM_PARAMETERS = {
    "gamma": ("scale",),
    "beta": ("B",),
    "mu": ("input_mean", "mean"),
    "sigma2": ("input_var", "var"),
}
"""Tasklet connectors of the per-channel parameters of BatchNormalization and their ONNX connectors
(renamed in opset 9)."""


class CanonicalBatchNormalization(CanonicalForward):
    """Canonical BatchNormalization, inference mode, as one flat map.

    ``Y[n, c, ...] = (X[n, c, ...] - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + B[c]``,
    iterating X row-major: the output is produced row-major, X is read once in order and the
    per-channel parameters are re-read for every element of their channel (weights are buffers
    already; a parameter produced by another task is copied into a REUSE buffer first). Training
    mode and the running statistics outputs are not supported.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        if getattr(node, "training_mode", 0) or len(state.out_edges(node)) != 1:
            raise unsupported(node, "training mode (running statistics outputs)")
        if getattr(node, "spatial", 1) != 1:
            raise unsupported(node, "spatial=0")
        rank = len(input_shape(node, state, sdfg, "X"))
        if rank < 2:
            raise unsupported(node, f"input rank {rank} (expected N x C x ...)")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        connectors = {edge.dst_conn for edge in state.in_edges(node)}
        steps = node_builder(node, state, sdfg)
        shape = onnx_shape(steps.desc("X"))
        dtype = steps.desc("Y").dtype
        params = index_params(len(shape))
        element = subscript(params)
        memlets = {}
        for name, candidates in _BATCHNORM_PARAMETERS.items():
            (connector,) = [c for c in candidates if c in connectors]
            source = steps.operand(connector, reused=True)
            memlets[name] = Memlet(f"{source}[{params[1]}]")
        memlets["x"] = Memlet(f"X[{element}]")
        epsilon = literal(node.epsilon, dtype)
        steps.flat_map(
            "normalize",
            index_ranges(params, shape),
            memlets,
            f"y = (x - mu) / sqrt(sigma2 + {epsilon}) * gamma + beta",
            {"y": Memlet(f"Y[{element}]")},
        )
        return steps.sdfg


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
        stat_dtype = dace.float32 if dtype == dace.float16 else dtype
        count = math.prod(shape[axis:])
        rows = math.prod(shape[:axis])
        params = index_params(len(shape))
        ranges = index_ranges(params, shape)
        element = subscript(params)
        row_shape = [s if d < axis else 1 for d, s in enumerate(shape)]
        row = subscript([p if d < axis else "0" for d, p in enumerate(params)])
        inv_count = literal(1 / count, stat_dtype)
        epsilon = literal(node.epsilon, stat_dtype)

        source = steps.operand("X", reused=True)
        mean = steps.transient("mean", row_shape, stat_dtype, BufferReason.REUSE)
        var = steps.transient("var", row_shape, stat_dtype, BufferReason.REUSE)
        steps.init(mean, literal(0, stat_dtype))
        steps.init(var, literal(0, stat_dtype))
        steps.flat_map(
            "mean", ranges, {"x": Memlet(f"{source}[{element}]")}, f"m = x * {inv_count}", {"m": _accumulate(mean, row)}
        )
        steps.flat_map(
            "var",
            ranges,
            {"x": Memlet(f"{source}[{element}]"), "m": Memlet(f"{mean}[{row}]")},
            f"v = (x - m) * (x - m) * {inv_count}",
            {"v": _accumulate(var, row)},
        )
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


IMPLEMENTATIONS = (
    Implementation("BatchNormalization", CANONICAL, CanonicalBatchNormalization),
    Implementation("LayerNormalization", CANONICAL, CanonicalLayerNormalization),
)


def _accumulate(name: str, index: str) -> Memlet:
    return Memlet(f"{name}[{index}]", wcr=WCR_SUM)
