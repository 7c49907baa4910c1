"""Canonical reductions: ReduceMean, ReduceSum, ReduceMax (and, through :func:`add_reduction`, the global pools).

A reduction is two flat map steps: the input is read once, row-major, and accumulated with WCR
into an accumulator shaped like the output (an ACCUMULATE buffer, set to the identity by an
initialisation map); then one map writes the output from the accumulator, row-major.
"""

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
    max_identity,
    subscript,
)
from dcaccel.expansions.node import (
    CanonicalForward,
    constant_ints,
    input_edge,
    input_shape,
    node_builder,
    normalize_axis,
    onnx_shape,
    output_shape,
    unsupported,
)
from dcaccel.expansions.registry import CANONICAL, Implementation


@dataclass(frozen=True)
class Reduction:
    """How a reduction combines elements (``wcr``), starts (``identity``) and ends (``mean`` divides by the count)."""

    op: str
    wcr: str
    max_identity: bool
    mean: bool


REDUCTIONS = (
    Reduction("ReduceMean", WCR_SUM, max_identity=False, mean=True),
    Reduction("ReduceSum", WCR_SUM, max_identity=False, mean=False),
    Reduction("ReduceMax", WCR_MAX, max_identity=True, mean=False),
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

    1. ``reduce``: ``acc[kept] = wcr(acc[kept], source[i])`` over the input, row-major; ``acc``
       (an ACCUMULATE buffer) starts at the identity;
    2. ``output``: ``output = acc`` (divided by the count of reduced elements for a mean),
       row-major.
    """
    in_shape = onnx_shape(steps.desc(source))
    dtype = steps.desc(output).dtype
    params = index_params(len(in_shape))
    kept_shape = [1 if d in axes else s for d, s in enumerate(in_shape)]
    kept = ["0" if d in axes else p for d, p in enumerate(params)]
    accumulator = steps.transient("accumulator", kept_shape, dtype, BufferReason.ACCUMULATE)
    if reduction.max_identity:
        steps.init(accumulator, max_identity(dtype), dace.Language.CPP)
    else:
        steps.init(accumulator, literal(0, dtype))
    steps.flat_map(
        "reduce",
        index_ranges(params, in_shape),
        {"v": Memlet(f"{source}[{subscript(params)}]")},
        "a = v",
        {"a": Memlet(f"{accumulator}[{subscript(kept)}]", wcr=reduction.wcr)},
    )
    out_params = [p for d, p in enumerate(params) if d not in axes]
    out_index = kept if keepdims else out_params
    count = math.prod(in_shape[d] for d in axes)
    value = f"a / {literal(count, dtype)}" if reduction.mean else "a"
    steps.flat_map(
        "output",
        index_ranges(out_params, [s for d, s in enumerate(in_shape) if d not in axes]),
        {"a": Memlet(f"{accumulator}[{subscript(kept)}]")},
        f"out = {value}",
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
            if axes is None:
                params = index_params(len(shape))
                steps.flat_map(
                    "copy",
                    index_ranges(params, shape),
                    {"v": Memlet(f"data[{subscript(params)}]")},
                    "out = v",
                    {"out": Memlet(f"reduced[{subscript(params)}]")},
                )
            else:
                add_reduction(steps, reduction, "data", axes, "reduced", bool(node.keepdims))
            return steps.sdfg

    Forward.__name__ = Forward.__qualname__ = f"Canonical{reduction.op}"
    Forward.__doc__ = (
        f"Canonical {reduction.op} over the ``axes`` (all if none; a copy with ``noop_with_empty_axes``). "
        "Two flat maps: a WCR reduction of the input, read row-major, into an ACCUMULATE buffer, then "
        "the output, produced row-major (see :func:`add_reduction`)."
    )
    return Implementation(reduction.op, CANONICAL, Forward)


IMPLEMENTATIONS = tuple(_implementation(reduction) for reduction in REDUCTIONS)
