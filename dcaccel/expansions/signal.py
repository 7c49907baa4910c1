"""Canonical signal ops: DFT and STFT as sums of twiddled terms; MelWeightMatrix (of constant inputs) folded.

A complex tensor is ONNX's real one with a last dimension of 2 (real, imaginary); a real signal has a last
dimension of 1 (an STFT signal may also be real without it, ``[batch, length]``, as onnxruntime takes it and
``torch.stft`` exports it). Every output element is a sum over the signal (or over the frequencies of an inverse
transform) of terms ``x[n] * e^(∓2πi kn/L)``: one flat map over the output positions, the output component, the
summed index and the input component (innermost) computes each term's contribution to one output component in
double precision, the twiddle angle reduced to ``(k n) mod L``, and accumulates it with a WCR sum into a
double-precision REUSE buffer zeroed first (every iteration reads one element and writes one); a second flat map
writes the buffer into the output in its element type. Both produce the output row-major. The lengths (``dft_length``,
``frame_step``, ``frame_length``) and DFT's ``axis`` are constants: they set the output shape at import.

ONNX's float32 ``test_dft_inverse`` cases fail at their tolerance (atol 1e-7, rtol 1e-3) with this exact sum: their
expected output is numpy's ``ifft`` of a complex64 array, which numpy 2 computes in single precision. Where the exact
value is 0 (the imaginary part of the Nyquist term, 10 elements) it is 1.9e-7 and the double sum 4e-15; elsewhere
the output is within a float32 rounding of the exact transform (4.4e-7 off it, the expected output 1.5e-6).
numpy's double ``ifft`` fails the same comparison, and onnxruntime's kernel is 1.9e-5 off.
"""

import math
from dataclasses import dataclass

import dace
from dace import SDFG, Memlet, SDFGState
from dace.sdfg.utils import in_desc_with_name, out_desc_with_name

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import (
    FLOAT_TYPES,
    WCR_SUM,
    ExpansionBuilder,
    at_axis,
    index_params,
    index_ranges,
    literal,
    subscript,
)
from dcaccel.expansions.implementation import CANONICAL, Implementation
from dcaccel.expansions.node import (
    CanonicalForward,
    constant_input,
    constant_int,
    input_edge,
    input_shape,
    node_builder,
    onnx_shape,
    output_shape,
    unsupported,
    wrong_shape,
)

TWO_PI = 2 * math.pi


def _check_components(node, shape: tuple, name: str) -> None:
    """:class:`UnsupportedOpError` unless ``shape`` ends in 1 (real) or 2 (complex) components."""
    if len(shape) < 2 or shape[-1] not in (1, 2):
        raise unsupported(node, f"{name} {list(shape)} does not end in 1 (real) or 2 (complex) components")


@dataclass(frozen=True)
class Terms:
    """The terms one output element of a transform sums: ``x[n] e^(∓2πi p/L)`` (``-`` forward, ``+`` inverse) over
    the ``summed`` index (name, count), ``p`` the integer ``phase``, ``x`` read from ``source`` at ``index`` (every
    dimension but the components) with ``components`` 1 (real) or 2 (complex), times ``weight`` (an expression).
    Without ``component_axis``, ``source`` is real and has no dimension of components."""

    source: str
    index: list
    components: int
    summed: tuple[str, int]
    phase: str
    length: int
    inverse: bool = False
    weight: str = ""
    component_axis: bool = True


def _add_terms(steps: ExpansionBuilder, out_shape: tuple, terms: Terms) -> None:
    """The two flat maps of the module docstring. ``sum`` runs over the output positions, the output component
    ``co``, the summed index and the input component ``ci`` (innermost): each reads one input element and adds its
    contribution to one output component, ``x cos(a)`` where ``co == ci``, else ``± x sin(a)`` (the imaginary unit
    of ``x`` or of the twiddle), ``a = 2π (p mod L) / L``; every iteration reads one element and writes one.
    ``write`` copies the double buffer into ``output``."""
    *positions, co = index_params(len(out_shape))
    ci, (summed, count) = "__c", terms.summed
    acc = steps.transient("acc", out_shape, dace.float64, BufferReason.REUSE)
    steps.init(acc, literal(0, dace.float64))
    if count and math.prod(out_shape):
        angle = f"{TWO_PI!r} * dace.float64(({terms.phase}) % {terms.length}) / {float(terms.length)!r}"
        below, above = ("-sin(a)", "sin(a)") if terms.inverse else ("sin(a)", "-sin(a)")
        code = f"a = {angle}\no = dace.float64(x){terms.weight} * (cos(a) if {co} == {ci} else "
        code += f"({below} if {co} < {ci} else {above}))"
        steps.flat_map(
            "sum",
            {
                **index_ranges(positions, out_shape[:-1]),
                co: f"0:{out_shape[-1]}",
                summed: f"0:{count}",
                ci: f"0:{terms.components}",
            },
            {"x": Memlet(f"{terms.source}[{subscript([*terms.index, ci] if terms.component_axis else terms.index)}]")},
            code,
            {"o": Memlet(f"{acc}[{subscript([*positions, co])}]", wcr=WCR_SUM)},
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


class DftGeometry:
    """What a DFT node computes: signal axis, DFT length, direction, one-sidedness, and the summed count."""

    def __init__(self, node, state: SDFGState, sdfg: SDFG):
        shape = input_shape(node, state, sdfg, "input")
        _check_components(node, shape, "input")
        rank = len(shape)
        if node.schema.since_version >= 20:
            axis = constant_int(node, state, sdfg, "axis", "the signal axis", default=-2)
        else:
            axis = node.axis
        if not (-rank <= axis < -1 or 0 <= axis < rank - 1):
            raise unsupported(node, f"axis {axis} is not a signal axis of rank {rank}")
        self.axis = axis % rank
        self.inverse, self.onesided = bool(node.inverse), bool(node.onesided)
        size = shape[self.axis]
        length = constant_int(node, state, sdfg, "dft_length", "the DFT length")
        if length is None:
            length = 2 * (size - 1) if self.inverse and self.onesided else size
        if length < 1:
            raise unsupported(node, f"dft_length {length}")
        self.length, self.components = length, shape[-1]
        bins = length // 2 + 1 if self.onesided and not self.inverse else length
        self.out_shape = tuple(at_axis(shape[:-1], self.axis, bins))
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
            raise wrong_shape(node, f"imported output shape is not {list(geometry.out_shape)}")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        geometry = DftGeometry(node, state, sdfg)
        steps = node_builder(node, state, sdfg, drop=("dft_length", "axis"))
        out_shape = onnx_shape(steps.desc("output"))
        positions = index_params(len(out_shape) - 1)
        summed = "__n"
        index = at_axis(positions, geometry.axis, summed)
        weight = ""
        if geometry.inverse:
            weight = f" / {float(geometry.length)!r}"
            if geometry.onesided:
                weight = f" * (1.0 if {summed} == 0 or 2 * {summed} == {geometry.length} else 2.0){weight}"
        terms = Terms(
            steps.operand("input", reused=True),
            index,
            geometry.components,
            (summed, geometry.count),
            f"{positions[geometry.axis]} * {summed}",
            geometry.length,
            geometry.inverse,
            weight,
        )
        _add_terms(steps, out_shape, terms)
        return steps.sdfg


def _stft_geometry(node, state: SDFGState, sdfg: SDFG) -> tuple[int, int, int, int]:
    """STFT's frame step and length (constants; the length is the window's without one), frames and bins."""
    shape = input_shape(node, state, sdfg, "signal")
    if len(shape) == 3:
        _check_components(node, shape, "signal")
    elif len(shape) != 2:
        raise unsupported(node, f"signal {list(shape)} is not [batch, length] or [batch, length, components]")
    step = constant_int(node, state, sdfg, "frame_step", "the hop between frames")
    window = input_shape(node, state, sdfg, "window") if input_edge(node, state, "window") is not None else None
    length = constant_int(node, state, sdfg, "frame_length", "the frame's length")
    if length is None:
        if window is None:
            raise unsupported(node, "neither a window nor a frame_length")
        (length,) = window
    if window is not None and tuple(window) != (length,):
        raise unsupported(node, f"window {list(window)} is not of frame_length {length}")
    if step is None or step < 1 or not 1 <= length <= shape[1]:
        raise unsupported(node, f"frame_step {step} and frame_length {length} over a signal of {shape[1]}")
    bins = length // 2 + 1 if node.onesided else length
    return step, length, (shape[1] - length) // step + 1, bins


class CanonicalSTFT(CanonicalForward):
    """Canonical STFT: ``y[b, f, k] = sum_n w[n] x[b, f * step + n] e^(-2πi kn/L)`` over the frames ``f`` of
    length ``L`` (``frame_length``, else the window's) every ``frame_step`` (constants), ``k < L`` (``L/2 + 1``
    bins when ``onesided``), ``w`` the window (1 without one); ``x`` is ``[batch, length, 1 or 2]``, or a real
    ``[batch, length]``.

    With a window, a flat map first writes the windowed frames ``w[n] x[b, f * step + n]`` into a REUSE buffer
    (row-major, every element reading one signal and one window element); then the steps of the module
    docstring over the frames, the summed index ``n``.
    """

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        step, length, frames, bins = _stft_geometry(node, state, sdfg)
        dtype = in_desc_with_name(node, state, sdfg, "signal").dtype
        if dtype not in FLOAT_TYPES:
            raise unsupported(node, f"element type {dtype}")
        batch = input_shape(node, state, sdfg, "signal")[0]
        if output_shape(node, state, sdfg, "output") != (batch, frames, bins, 2):
            raise wrong_shape(node, f"imported output shape is not {[batch, frames, bins, 2]}")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        step, length, frames, _ = _stft_geometry(node, state, sdfg)
        steps = node_builder(node, state, sdfg, drop=("frame_step", "frame_length"))
        signal_shape = onnx_shape(steps.desc("signal"))
        batch, components, component_axis = signal_shape[0], (*signal_shape, 1)[2], len(signal_shape) == 3
        b, f, k = index_params(3)
        summed = "__n"
        if "window" in steps.sdfg.arrays:
            shape = (batch, frames, length, components)
            windowed = steps.transient("frames", shape, steps.desc("signal").dtype, BufferReason.REUSE)
            every = index_params(4, "__w")
            signal, window = steps.operand("signal", reused=True), steps.operand("window", reused=True)
            read = [every[0], f"{every[1]} * {step} + {every[2]}", every[3]][: len(signal_shape)]
            steps.flat_map(
                "window",
                index_ranges(every, shape),
                {"x": Memlet(f"{signal}[{subscript(read)}]"), "w": Memlet(f"{window}[{every[2]}]")},
                "out = w * x",
                {"out": Memlet(f"{windowed}[{subscript(every)}]")},
            )
            source, index, component_axis = windowed, [b, f, summed], True
        else:
            source, index = steps.operand("signal", reused=True), [b, f"{f} * {step} + {summed}"]
        terms = Terms(
            source, index, components, (summed, length), f"{k} * {summed}", length, component_axis=component_axis
        )
        _add_terms(steps, onnx_shape(steps.desc("output")), terms)
        return steps.sdfg


MEL_INPUTS = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")


class CanonicalMelWeightMatrix(CanonicalForward):
    """Canonical MelWeightMatrix of constant inputs: a constant, folded. ONNX's reference evaluator computes the
    ``[dft_length / 2 + 1, num_mel_bins]`` matrix when the node is expanded; one flat map writes it into the
    output row-major from a constant of the nested program (no input is read)."""

    @staticmethod
    def check(node, state: SDFGState, sdfg: SDFG) -> None:
        for name in MEL_INPUTS:
            if constant_input(node, state, sdfg, name) is None:
                raise unsupported(node, f"input '{name}' must be a constant")

    @staticmethod
    def forward(node, state: SDFGState, sdfg: SDFG) -> SDFG:
        import onnx.reference

        from dcaccel.transforms.host import one_node_model

        feed = {name: constant_input(node, state, sdfg, name) for name in MEL_INPUTS}
        descs = {name: in_desc_with_name(node, state, sdfg, name) for name in MEL_INPUTS}
        descs["output"] = out_desc_with_name(node, state, sdfg, "output")
        model = one_node_model(node, descs, list(MEL_INPUTS), ["output"])
        (matrix,) = onnx.reference.ReferenceEvaluator(model).run(None, feed)
        steps = node_builder(node, state, sdfg, drop=MEL_INPUTS)
        out_shape = onnx_shape(steps.desc("output"))
        if matrix.shape != out_shape:
            raise wrong_shape(node, f"imported output shape {list(out_shape)} is not {list(matrix.shape)}")
        if matrix.size:
            table = f"{node.label}_matrix"
            steps.sdfg.add_constant(table, matrix.reshape(-1))
            row, column = index_params(2)
            steps.flat_map(
                "matrix",
                index_ranges([row, column], out_shape),
                {},
                f"out = {table}[{row} * {out_shape[1]} + {column}]",
                {"out": Memlet(f"output[{row}, {column}]")},
            )
        return steps.sdfg


IMPLEMENTATIONS = (
    Implementation("DFT", CANONICAL, CanonicalDFT),
    Implementation("STFT", CANONICAL, CanonicalSTFT),
    Implementation("MelWeightMatrix", CANONICAL, CanonicalMelWeightMatrix),
)
