"""Canonical Resize and Upsample: nearest and (multi-)linear interpolation with constant scales or sizes.

Every output position ``o`` of axis ``d`` faces the input coordinate ``x = (a·o + b) / c`` given by
the coordinate transformation mode (``asymmetric``, ``half_pixel``, ``pytorch_half_pixel``,
``align_corners``, ``tf_half_pixel_for_nn``) and the axis' scale, a rational number (the scale as
given, or output size / input size for ``sizes``), so that ``a``, ``b`` and ``c`` are integers and
the input index is computed exactly, in the memlet:

- ``nearest``: ``x`` rounded by ``nearest_mode`` (``floor``, ``ceil``, ``round_prefer_floor``,
  ``round_prefer_ceil``) is one floor division ``(a'·o + b') // c'``, clamped to the input;
- ``linear``: ``x`` clamped to the input lies between the indices ``floor(x)`` and ``floor(x) + 1``
  (clamped), weighted by the fraction ``((a·o + b) mod c) / c``; an axis whose fraction is always 0
  is read at ``floor(x)`` only. The tasklet of one output element reads the 2^k corners of the k
  interpolated axes.

One flat map over the output, produced row-major. An input element read more than once (an
upsampled axis, a linear corner) makes an input produced by another task be copied into a REUSE
buffer first (see :meth:`~dcaccel.expansions.builder.ExpansionBuilder.operand`). Upsample and
Resize of opset 10 use the ``asymmetric`` transformation and round a nearest coordinate down when
upsampling and up when downsampling (as onnxruntime does for these versions).
"""

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from dace import SDFG, Memlet, SDFGState

from dcaccel.expansions.builder import index_params, index_ranges, subscript
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.node import (
    CanonicalForward,
    constant_input,
    input_edge,
    input_shape,
    node_builder,
    normalize_axis,
    output_shape,
    unsupported,
    wrong_shape,
)

TRANSFORMATIONS = ("asymmetric", "half_pixel", "pytorch_half_pixel", "align_corners", "tf_half_pixel_for_nn")
NEAREST_MODES = ("floor", "ceil", "round_prefer_floor", "round_prefer_ceil")
MAX_DENOMINATOR = 10_000
"""Scales given as floating-point numbers are read as the nearest fraction with at most this denominator."""


@dataclass(frozen=True)
class AxisMap:
    """The input coordinate of output index ``o`` along one axis: ``(numerator·o + offset) / denominator``."""

    numerator: int
    offset: int
    denominator: int

    def value(self, o: int) -> Fraction:
        """The exact coordinate of output index ``o``."""
        return Fraction(self.numerator * o + self.offset, self.denominator)

    def floor_of(self, half: int) -> "AxisMap":
        """The map whose floor is this coordinate plus ``half``/2 (rounding as a floor division)."""
        return AxisMap(2 * self.numerator, 2 * self.offset + half * self.denominator, 2 * self.denominator)

    def expression(self, param: str) -> str:
        """The floor of the coordinate at ``param``, as an index expression."""
        linear = f"{self.numerator} * {param}" if self.numerator != 1 else param
        if self.offset:
            linear = f"{linear} + {self.offset}" if self.offset > 0 else f"{linear} - {-self.offset}"
        return f"({linear}) // {self.denominator}" if self.denominator != 1 else linear


def _axis_map(mode: str, size: int, out_size: int, scale: Fraction) -> AxisMap:
    """The coordinate of an output index on an axis of ``size`` resized to ``out_size`` by ``scale`` (``mode``)."""
    if mode == "pytorch_half_pixel" and out_size == 1:
        return AxisMap(0, 0, 1)
    if mode == "align_corners":  # the resized length is the output size, as onnxruntime takes it
        ratio = Fraction(size - 1, out_size - 1) if out_size > 1 else Fraction(0)
        return AxisMap(ratio.numerator, 0, ratio.denominator)
    inverse = 1 / scale
    offset = {"asymmetric": 0, "tf_half_pixel_for_nn": inverse / 2}.get(mode, inverse / 2 - Fraction(1, 2))
    denominator = math.lcm(inverse.denominator, Fraction(offset).denominator)
    return AxisMap(int(inverse * denominator), int(offset * denominator), denominator)


def _rounded(axis: AxisMap, rounding: str) -> AxisMap:
    """The map whose floor is the nearest index of ``axis`` under ``rounding`` (a ``nearest_mode``)."""
    if rounding == "floor":
        return axis
    if rounding == "ceil":
        return AxisMap(axis.numerator, axis.offset + axis.denominator - 1, axis.denominator)
    if rounding == "round_prefer_ceil":
        return axis.floor_of(1)  # floor(x + 1/2)
    shifted = axis.floor_of(-1)  # ceil(x - 1/2) = floor of (x - 1/2) rounded up
    return AxisMap(shifted.numerator, shifted.offset + shifted.denominator - 1, shifted.denominator)


@dataclass(frozen=True)
class Resizing:
    """What a Resize or Upsample node computes: its mode and the input coordinate map of every axis."""

    mode: str
    maps: tuple[AxisMap, ...]
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]


def _clamped(expression: str, values: list[int], size: int) -> str:
    """``expression`` clamped to ``[0, size)`` where ``values`` (its value at every output index) need it."""
    if min(values) < 0:
        expression = f"Max({expression}, 0)"
    if max(values) > size - 1:
        expression = f"Min({expression}, {size - 1})"
    return expression


def _scales(node, state: SDFGState, sdfg: SDFG, in_shape, out_shape) -> list[Fraction]:
    """The scale of every axis: the ``scales`` (input or Upsample-7 attribute) read as fractions, else output
    size / input size (``sizes``), checked against the imported output shape."""
    rank = len(in_shape)
    if node.schema.name == "Upsample" and node.schema.since_version < 9:
        scales = np.asarray(node.scales if node.scales is not None else [], dtype=np.float64)
    else:
        scales = constant_input(node, state, sdfg, "scales")
        if scales is None and input_edge(node, state, "scales") is not None:
            raise unsupported(node, "'scales' must be a constant")
    sizes = constant_input(node, state, sdfg, "sizes")
    if sizes is None and input_edge(node, state, "sizes") is not None:
        raise unsupported(node, "'sizes' must be a constant")
    axes = list(range(rank))
    if getattr(node, "axes", None):
        axes = [normalize_axis(a, rank, node) for a in node.axes]
    full = [Fraction(1)] * rank
    expected = list(in_shape)
    if scales is not None and scales.size:
        if scales.size != len(axes):
            raise unsupported(node, f"{scales.size} scales for {len(axes)} axes")
        for axis, scale in zip(axes, scales.reshape(-1), strict=True):
            if scale <= 0:
                raise unsupported(node, f"scale {scale}")
            full[axis] = Fraction(float(scale)).limit_denominator(MAX_DENOMINATOR)
            expected[axis] = math.floor(in_shape[axis] * float(scale))
    elif sizes is not None and sizes.size:
        if sizes.size != len(axes):
            raise unsupported(node, f"{sizes.size} sizes for {len(axes)} axes")
        if (getattr(node, "keep_aspect_ratio_policy", None) or "stretch") != "stretch":
            raise unsupported(node, f"keep_aspect_ratio_policy='{node.keep_aspect_ratio_policy}'")
        for axis, size in zip(axes, sizes.reshape(-1), strict=True):
            full[axis], expected[axis] = Fraction(int(size), in_shape[axis]), int(size)
    else:
        raise unsupported(node, "neither 'scales' nor 'sizes' is given")
    if list(out_shape) != expected:
        raise wrong_shape(node, f"imported output shape {list(out_shape)} != {expected}")
    return full


def resizing_of(node, state: SDFGState, sdfg: SDFG) -> Resizing:
    """The :class:`Resizing` of a Resize or Upsample node; raises :class:`UnsupportedOpError` for what it
    does not cover (cubic, antialias, tf_crop_and_resize, half_pixel_symmetric, data scales, and
    align_corners with a scale that makes the resized length fractional: ONNX's reference divides by that
    length, onnxruntime by the output size, so the two disagree)."""
    in_shape = tuple(input_shape(node, state, sdfg, "X"))
    out_shape = tuple(output_shape(node, state, sdfg, "Y"))
    mode = {"bilinear": "linear", "trilinear": "linear"}.get(node.mode, node.mode)
    if mode not in ("nearest", "linear"):
        raise unsupported(node, f"mode='{node.mode}' (supported: nearest, linear)")
    if 0 in in_shape or 0 in out_shape:
        raise unsupported(node, f"an empty input or output ({list(in_shape)} -> {list(out_shape)})")
    legacy = node.schema.name == "Upsample" or node.schema.since_version < 11
    transformation = "asymmetric" if legacy else node.coordinate_transformation_mode
    if transformation not in TRANSFORMATIONS:
        raise unsupported(node, f"coordinate_transformation_mode='{transformation}'")
    if getattr(node, "antialias", 0):
        raise unsupported(node, "antialias=1")
    rounding = None if legacy else node.nearest_mode
    if mode == "nearest" and rounding is not None and rounding not in NEAREST_MODES:
        raise unsupported(node, f"nearest_mode='{rounding}'")
    scales = _scales(node, state, sdfg, in_shape, out_shape)
    maps = []
    for size, out_size, scale in zip(in_shape, out_shape, scales, strict=True):
        if transformation == "align_corners" and (size * scale).denominator != 1:
            raise unsupported(
                node,
                f"align_corners with scale {float(scale):g} on an axis of {size}: the resized length "
                f"{float(size * scale):g} is fractional (ONNX divides by it, onnxruntime by the output size)",
            )
        axis = _axis_map(transformation, size, out_size, scale)
        if mode == "nearest":
            axis = _rounded(axis, rounding or ("floor" if scale >= 1 else "ceil"))
        maps.append(axis)
    return Resizing(mode, tuple(maps), in_shape, out_shape)


def _nearest(resizing: Resizing, params: list[str]) -> tuple[list[str], bool]:
    """The input index of every axis at output ``params``, and whether some input element is read again."""
    indices, again = [], False
    for axis, size, out_size, param in zip(resizing.maps, resizing.in_shape, resizing.out_shape, params, strict=True):
        values = [axis.value(o).__floor__() for o in range(out_size)]
        indices.append(_clamped(axis.expression(param), values, size))
        clamped = [min(max(v, 0), size - 1) for v in values]
        again |= len(set(clamped)) < len(clamped)
    return indices, again


def _linear(resizing: Resizing, params: list[str], dtype_name: str) -> tuple[dict[str, list[str]], list[str]]:
    """Per corner connector its input indices, and the tasklet lines computing ``out`` from the corners."""
    low, high, lines, weights = [], [], [], []
    for d, (axis, size, out_size, param) in enumerate(
        zip(resizing.maps, resizing.in_shape, resizing.out_shape, params, strict=True)
    ):
        coordinates = [axis.value(o) for o in range(out_size)]
        floors = [c.__floor__() for c in coordinates]
        index = _clamped(axis.expression(param), floors, size)
        interpolated = any(0 <= c < size - 1 and c != f for c, f in zip(coordinates, floors, strict=True))
        low.append(index)
        if not interpolated:
            high.append(None)
            continue
        high.append(f"Min({index} + 1, {size - 1})")
        linear = f"{axis.numerator} * {param} + {axis.offset}"
        lines.append(
            f"__w{d} = ({dtype_name}(({linear}) % {axis.denominator}) / {dtype_name}({axis.denominator})"
            f" if ({linear}) >= 0 else {dtype_name}(0))"
        )
        weights.append(d)
    corners, terms = {}, []
    for bits in itertools.product((0, 1), repeat=len(weights)):
        chosen = dict(zip(weights, bits, strict=True))
        name = "v" + "".join(str(b) for b in bits)
        corners[name] = [high[d] if chosen.get(d) else low[d] for d in range(len(low))]
        factors = [f"__w{d}" if chosen[d] else f"({dtype_name}(1) - __w{d})" for d in weights]
        terms.append(" * ".join([*factors, name]))
    return corners, [*lines, f"out = {' + '.join(terms)}"]


class CanonicalResize(CanonicalForward):
    """Canonical Resize (and Upsample): ``Y[o] = X`` at the coordinate of ``o``, nearest or interpolated
    linearly (see the module docstring for the transformations and roundings covered).

    One flat map over the output; the output is produced row-major.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        resizing_of(node, state, sdfg)

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        resizing = resizing_of(node, state, sdfg)
        parameters = [c for c in ("roi", "scales", "sizes") if input_edge(node, state, c) is not None]
        steps = node_builder(node, state, sdfg, drop=parameters)
        params = index_params(len(resizing.out_shape))
        if resizing.mode == "nearest":
            indices, again = _nearest(resizing, params)
            corners, code = {"v": indices}, ["out = v"]
        else:
            corners, code = _linear(resizing, params, f"dace.{steps.desc('Y').dtype.to_string()}")
            again = len(corners) > 1 or _nearest(resizing, params)[1]
        source = steps.operand("X", reused=again)
        steps.flat_map(
            "resize",
            index_ranges(params, resizing.out_shape),
            {name: Memlet(f"{source}[{subscript(indices)}]") for name, indices in corners.items()},
            "\n".join(code),
            {"out": Memlet(f"Y[{subscript(params)}]")},
        )
        return steps.sdfg


class CanonicalUpsample(CanonicalResize):
    """Canonical Upsample: Resize with the ``asymmetric`` transformation (see :class:`CanonicalResize`).

    One flat map over the output; the output is produced row-major.
    """


IMPLEMENTATIONS = (
    Implementation("Resize", CANONICAL, CanonicalResize),
    Implementation("Upsample", CANONICAL, CanonicalUpsample),
)
