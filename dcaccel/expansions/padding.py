"""Canonical Pad: modes ``constant``, ``reflect`` and ``edge``, pads from an attribute or a constant input.

Pad is one flat map over the output, produced row-major. Output position ``o`` of axis ``d``
faces input position ``o - begin[d]``; where that position lies outside the input:

- ``constant``: the nearest input element is read (its index is clamped, the idiom of the padded
  windows of Conv and pooling) and masked to the constant value;
- ``edge``: the nearest input element is the value (the same clamped read);
- ``reflect``: the input element mirrored at the border (without repeating the border) is read.

Negative pads crop. An input read in order and once (no positive pad) is read directly; otherwise
(border elements are read again, and ``reflect`` reads out of order) an input produced by another
task is first copied into a REUSE buffer (see :meth:`~dcaccel.expansions.builder.ExpansionBuilder.operand`).
"""

from dataclasses import dataclass

import numpy as np
from dace import SDFG, Memlet, SDFGState

from dcaccel.expansions.builder import index_params, index_ranges, literal, subscript
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.node import (
    CanonicalForward,
    constant_input,
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

MODES = ("constant", "reflect", "edge")


@dataclass(frozen=True)
class Padding:
    """The begin and end pads of every axis of a Pad node, its mode, and its constant value.

    ``value`` is a tasklet literal, or None when the constant value is data (the ``constant_value``
    input, read by the map).
    """

    mode: str
    begin: tuple[int, ...]
    end: tuple[int, ...]
    value: str | None

    @property
    def reads_again(self) -> bool:
        """Whether some input element is read more than once or out of order (a positive pad)."""
        return any(p > 0 for p in (*self.begin, *self.end))

    def out_shape(self, in_shape) -> list[int]:
        """The padded shape of an input of ``in_shape``."""
        return [s + b + e for s, b, e in zip(in_shape, self.begin, self.end, strict=True)]


def _pads(node, state: SDFGState, sdfg: SDFG, rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Begin and end pads of every axis, from the ``pads`` attribute (opset < 11) or the constant input and ``axes``."""
    if node.schema.since_version < 11:
        pads = getattr(node, "pads", None) or getattr(node, "paddings", None) or [0] * (2 * rank)
        axes = list(range(rank))
    else:
        pads = constant_ints(node, state, sdfg, "pads")
        if pads is None:
            raise unsupported(node, "'pads' must be a constant")
        axes = constant_ints(node, state, sdfg, "axes")
        if axes is None:
            if input_edge(node, state, "axes") is not None:
                raise unsupported(node, "'axes' must be a constant")
            axes = list(range(rank))
    if len(pads) != 2 * len(axes):
        raise unsupported(node, f"{len(pads)} pads for {len(axes)} axes")
    begin, end = [0] * rank, [0] * rank
    for k, axis in enumerate(axes):
        axis = normalize_axis(axis, rank, node)
        begin[axis], end[axis] = int(pads[k]), int(pads[k + len(axes)])
    return tuple(begin), tuple(end)


def _value(node, state: SDFGState, sdfg: SDFG, dtype) -> str | None:
    """The literal of the constant value (attribute ``value`` before opset 11, else the optional input), or
    None if the ``constant_value`` input is data."""
    if node.schema.since_version < 11:
        return literal(getattr(node, "value", 0.0) or 0, dtype)
    if input_edge(node, state, "constant_value") is None:
        return literal(0, dtype)
    value = constant_input(node, state, sdfg, "constant_value")
    if value is None:
        return None
    return literal(np.asarray(value).reshape(-1)[0].item() if value.size else 0, dtype)


def padding_of(node, state: SDFGState, sdfg: SDFG) -> Padding:
    """The :class:`Padding` of ``node``, checked against its mode, its input and the imported output shape."""
    mode = node.mode or "constant"
    if mode not in MODES:
        raise unsupported(node, f"mode='{mode}' (supported: {', '.join(MODES)})")
    in_shape = input_shape(node, state, sdfg, "data")
    begin, end = _pads(node, state, sdfg, len(in_shape))
    dtype = sdfg.arrays[input_edge(node, state, "data").data.data].dtype
    padding = Padding(mode, begin, end, _value(node, state, sdfg, dtype) if mode == "constant" else None)
    if 0 in in_shape and padding.reads_again:
        raise unsupported(node, f"pads an empty input of shape {list(in_shape)}")
    if mode == "reflect" and any(max(b, e) > s - 1 for s, b, e in zip(in_shape, begin, end, strict=True) if b or e):
        raise unsupported(node, f"reflect pads {list(begin + end)} reach beyond one reflection of {list(in_shape)}")
    expected = padding.out_shape(in_shape)
    if list(output_shape(node, state, sdfg, "output")) != expected:
        raise wrong_shape(
            node, f"imported output shape {list(output_shape(node, state, sdfg, 'output'))} != {expected}"
        )
    return padding


def _input_index(padding: Padding, size: int, begin: int, end: int, param: str) -> tuple[str, str | None]:
    """The input index read at output index ``param`` of one axis, and the condition that it is inside the input
    (None if it always is)."""
    position = f"{param} - {begin}" if begin else param
    if begin <= 0 and end <= 0:
        return position, None
    last = size - 1
    if padding.mode == "reflect":
        distance = f"Max({position}, {begin} - {param})"  # |position|
        return f"{last} - Max({last} - {distance}, {distance} - {last})", None  # last - |last - |position||
    index = position
    if begin > 0:
        index = f"Max({index}, 0)"
    if end > 0:
        index = f"Min({index}, {last})"
    inside = []
    if begin > 0:
        inside.append(f"({param} >= {begin})")
    if end > 0:
        inside.append(f"({param} < {begin + size})")
    return index, " and ".join(inside) if padding.mode == "constant" else None


class CanonicalPad(CanonicalForward):
    """Canonical Pad: ``output[o] = data[o - begin]`` inside the input, else the constant, the nearest
    (``edge``) or the mirrored (``reflect``) element (see the module docstring).

    One flat map over the output; the output is produced row-major.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        padding_of(node, state, sdfg)

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        padding = padding_of(node, state, sdfg)
        folded = ("pads", "axes") + (("constant_value",) if padding.value is not None else ())
        steps = node_builder(node, state, sdfg, drop=[c for c in folded if input_edge(node, state, c) is not None])
        in_shape, out_shape = onnx_shape(steps.desc("data")), onnx_shape(steps.desc("output"))
        if 0 in out_shape:
            return steps.sdfg
        params = index_params(len(out_shape))
        source = steps.operand("data", reused=padding.reads_again)
        indices, inside = [], []
        for size, begin, end, param in zip(in_shape, padding.begin, padding.end, params, strict=True):
            index, condition = _input_index(padding, size, begin, end, param)
            indices.append(index)
            inside += [condition] if condition else []
        inputs = {"v": Memlet(f"{source}[{subscript(indices)}]")}
        code = "out = v"
        if inside:
            value = padding.value
            if value is None:
                inputs["value"] = Memlet(f"{steps.operand('constant_value', reused=True)}[0]")
                value = "value"
            code = f"out = v if ({' and '.join(inside)}) else {value}"
        steps.flat_map(
            "pad", index_ranges(params, out_shape), inputs, code, {"out": Memlet(f"output[{subscript(params)}]")}
        )
        return steps.sdfg


IMPLEMENTATIONS = (Implementation("Pad", CANONICAL, CanonicalPad),)
