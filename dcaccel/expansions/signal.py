"""Canonical signal ops: DFT and STFT as sums of twiddled terms.

A complex tensor is ONNX's real one with a last dimension of 2 (real, imaginary); a real signal has a last
dimension of 1. Every output element is a sum over the signal (or over the frequencies of an inverse
transform) of terms ``x[n] * e^(∓2πi kn/L)``: one flat map over the output positions and the summed index
(innermost) computes each term in double precision, the twiddle angle reduced to ``(k n) mod L``, and
accumulates it with a WCR sum into a double-precision REUSE buffer zeroed first; a second flat map writes the
buffer into the output in its element type. Both produce the output row-major. The lengths (``dft_length``,
``frame_step``, ``frame_length``) and DFT's ``axis`` are constants: they set the output shape at import.
"""

import math
from collections.abc import Mapping

import dace
from dace import SDFG, Memlet, SDFGState
from dace.sdfg.utils import in_desc_with_name

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import (
    FLOAT_TYPES,
    WCR_SUM,
    ExpansionBuilder,
    index_params,
    index_ranges,
    literal,
    subscript,
)
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.node import (
    CanonicalForward,
    constant_ints,
    input_edge,
    input_shape,
    node_builder,
    onnx_shape,
    output_shape,
    unsupported,
)

TWO_PI = 2 * math.pi


def _constant_int(node, state: SDFGState, sdfg: SDFG, name: str) -> int | None:
    """The value of the scalar constant input ``name``, None when absent; :class:`UnsupportedOpError` if data."""
    if input_edge(node, state, name) is None:
        return None
    value = constant_ints(node, state, sdfg, name)
    if value is None or len(value) != 1:
        raise unsupported(node, f"input '{name}' must be a constant scalar")
    return value[0]


def _check_components(node, shape: tuple, name: str) -> None:
    """:class:`UnsupportedOpError` unless ``shape`` ends in 1 (real) or 2 (complex) components."""
    if len(shape) < 2 or shape[-1] not in (1, 2):
        raise unsupported(node, f"{name} {list(shape)} does not end in 1 (real) or 2 (complex) components")


def _add_terms(
    steps: ExpansionBuilder,
    out_shape: tuple,
    summed: tuple[str, int],
    read: Mapping[str, Memlet],
    phase: tuple[str, int],
    term: tuple[str, ...],
) -> None:
    """The two flat maps of the module docstring: ``sum`` over the output positions (all but the components) and
    the ``summed`` (name, count) index accumulates ``term`` (one expression per output component, in the
    connectors of ``read``, ``c`` and ``s`` the cosine and sine of ``2π p / L`` for ``phase`` ``(p, L)``) into a
    double buffer, ``write`` copies it into ``output``."""
    params = index_params(len(out_shape) - 1)
    acc = steps.transient("acc", out_shape, dace.float64, BufferReason.REUSE)
    steps.init(acc, literal(0, dace.float64))
    index, count = summed
    if count and math.prod(out_shape):
        product, length = phase
        angle = f"dace.float64({TWO_PI!r}) * dace.float64(({product}) % {length}) / dace.float64({length})"
        code = [f"a = {angle}", "c = cos(a)", "s = sin(a)"]
        code += [f"o{k} = {expression}" for k, expression in enumerate(term)]
        steps.flat_map(
            "sum",
            {**index_ranges(params, out_shape[:-1]), index: f"0:{count}"},
            read,
            "\n".join(code),
            {f"o{k}": Memlet(f"{acc}[{subscript([*params, k])}]", wcr=WCR_SUM) for k in range(len(term))},
        )
    every = index_params(len(out_shape))
    if math.prod(out_shape):
        steps.flat_map(
            "write",
            index_ranges(every, out_shape),
            {"v": Memlet(f"{acc}[{subscript(every)}]")},
            "out = v",
            {"out": Memlet(f"output[{subscript(every)}]")},
        )


def _complex_read(source: str, index: list, components: int) -> dict[str, Memlet]:
    """The real (``xr``) and, for 2 components, imaginary (``xi``) part of ``source`` at ``index``."""
    read = {"xr": Memlet(f"{source}[{subscript([*index, 0])}]")}
    if components == 2:
        read["xi"] = Memlet(f"{source}[{subscript([*index, 1])}]")
    return read


def _forward_terms(components: int, weight: str = "") -> tuple[str, str]:
    """The real and imaginary part of ``x e^(-ia)`` (times ``weight``), in double precision."""
    xr = f"dace.float64(xr){weight}"
    if components == 1:
        return f"{xr} * c", f"-{xr} * s"
    xi = f"dace.float64(xi){weight}"
    return f"{xr} * c + {xi} * s", f"{xi} * c - {xr} * s"


class DftGeometry:
    """What a DFT node computes: signal axis, DFT length, direction, one-sidedness, and the summed count."""

    def __init__(self, node, state: SDFGState, sdfg: SDFG):
        shape = input_shape(node, state, sdfg, "input")
        _check_components(node, shape, "input")
        rank = len(shape)
        if node.schema.since_version >= 20:
            axis = _constant_int(node, state, sdfg, "axis")
            axis = -2 if axis is None else axis
        else:
            axis = node.axis
        if not (-rank <= axis < -1 or 0 <= axis < rank - 1):
            raise unsupported(node, f"axis {axis} is not a signal axis of rank {rank}")
        self.axis = axis % rank
        self.inverse, self.onesided = bool(node.inverse), bool(node.onesided)
        size = shape[self.axis]
        length = _constant_int(node, state, sdfg, "dft_length")
        if length is None:
            length = 2 * (size - 1) if self.inverse and self.onesided else size
        if length < 1:
            raise unsupported(node, f"dft_length {length}")
        self.length, self.components = length, shape[-1]
        bins = length // 2 + 1 if self.onesided and not self.inverse else length
        self.out_shape = tuple(bins if d == self.axis else s for d, s in enumerate(shape[:-1]))
        self.out_shape += (1 if self.inverse and self.onesided else 2,)
        self.count = min(size, length // 2 + 1 if self.inverse and self.onesided else length)


class CanonicalDFT(CanonicalForward):
    """Canonical DFT along the signal ``axis`` of a real or complex input, of length ``L`` (``dft_length``, a
    constant, else the axis's size; the input truncated or zero-padded to it):

    - forward: ``y[k] = sum_n x[n] e^(-2πi kn/L)`` for ``k < L`` (``L/2 + 1`` bins when ``onesided``);
    - ``inverse``: ``y[n] = 1/L sum_k x[k] e^(2πi kn/L)``;
    - ``inverse`` and ``onesided`` (real output, ONNX 1.23's irfft): ``y[n] = 1/L sum_k w_k Re(x[k] e^(2πi kn/L))``
      over the ``L/2 + 1`` one-sided bins, ``w_k`` 1 at ``k = 0`` and ``k = L/2``, else 2 (Hermitian symmetry).

    The steps of the module docstring; the summed index is ``n`` (forward) or ``k`` (inverse).
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        geometry = DftGeometry(node, state, sdfg)
        dtype = in_desc_with_name(node, state, sdfg, "input").dtype
        if dtype not in FLOAT_TYPES:
            raise unsupported(node, f"element type {dtype}")
        if output_shape(node, state, sdfg, "output") != geometry.out_shape:
            raise unsupported(node, f"imported output shape is not {list(geometry.out_shape)}")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        geometry = DftGeometry(node, state, sdfg)
        steps = node_builder(node, state, sdfg, drop=("dft_length", "axis"))
        out_shape = onnx_shape(steps.desc("output"))
        params = index_params(len(out_shape) - 1)
        summed = "__n"
        index = [summed if d == geometry.axis else p for d, p in enumerate(params)]
        source = steps.operand("input", reused=True)
        read = _complex_read(source, index, geometry.components)
        phase = (f"{params[geometry.axis]} * {summed}", geometry.length)
        if not geometry.inverse:
            term = _forward_terms(geometry.components)
        else:
            scale = f" / {float(geometry.length)!r}"
            xr, xi = f"dace.float64(xr){scale}", f"dace.float64(xi){scale}" if geometry.components == 2 else "0.0"
            if geometry.onesided:
                weight = f"(1.0 if {summed} == 0 or 2 * {summed} == {geometry.length} else 2.0)"
                term = (f"{weight} * ({xr} * c - {xi} * s)",)
            else:
                term = (f"{xr} * c - {xi} * s", f"{xi} * c + {xr} * s")
        _add_terms(steps, out_shape, (summed, geometry.count), read, phase, term)
        return steps.sdfg


IMPLEMENTATIONS = (Implementation("DFT", CANONICAL, CanonicalDFT),)
