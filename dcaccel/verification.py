"""Numerical verification: does a workload's SDFG (or its lowered version) compute what the model does?

The reference is independent of DaCe where one exists: onnxruntime on the stored ONNX model (for
ONNX and PyTorch workloads), or the plain Python function of a ``@dace.program``. A bare SDFG has no
reference of its own, so its lowered version is checked against the unlowered SDFG.
An output passes when every element satisfies ``|actual - expected| <= atol + rtol * |expected|``
(numpy's ``allclose``) and no element is NaN.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dcaccel.errors import DcaccelError
from dcaccel.frontend.execution import run_sdfg
from dcaccel.frontend.workload import Workload


@dataclass(frozen=True)
class OutputCheck:
    """The comparison of one output with its reference."""

    output: str
    shape: tuple[int, ...]
    max_abs_error: float
    max_rel_error: float
    passed: bool


@dataclass(frozen=True)
class VerifyReport:
    """The result of :func:`verify`: one check per output, and what was compared against what."""

    workload: str
    program: str  # "unlowered" or "lowered"
    reference: str  # "onnxruntime", "python" or "unlowered SDFG"
    rtol: float
    atol: float
    seed: int
    outputs: tuple[OutputCheck, ...]

    @property
    def passed(self) -> bool:
        """Whether every output matches its reference."""
        return all(check.passed for check in self.outputs)


def verify(
    workload: Workload | str,
    lowered: Any = None,
    *,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    seed: int = 0,
    inputs: Mapping[str, np.ndarray] | None = None,
) -> VerifyReport:
    """Run the workload's SDFG (or ``lowered.sdfg``) on seeded random inputs and compare with the reference.

    ``workload`` is a Workload or what :func:`dcaccel.frontend.load.resolve` reads (a built-in name, an ONNX
    file, ``path/to/file.py:attribute``). ``lowered`` is a lowered version of ``workload`` (anything with an
    ``sdfg`` attribute whose program inputs and outputs are the workload's). ``inputs`` replaces the random
    inputs.
    """
    if isinstance(workload, str):
        from dcaccel.frontend.load import resolve

        workload = resolve(workload)
    inputs = dict(inputs) if inputs is not None else workload.random_inputs(seed)
    reference, expected = reference_outputs(workload, inputs, against_sdfg=lowered is not None)
    sdfg = workload.sdfg if lowered is None else lowered.sdfg
    actual = run_sdfg(sdfg, workload, inputs)
    checks = tuple(compare(spec.name, actual[spec.name], expected[spec.name], rtol, atol) for spec in workload.outputs)
    return VerifyReport(
        workload=workload.name,
        program="unlowered" if lowered is None else "lowered",
        reference=reference,
        rtol=rtol,
        atol=atol,
        seed=seed,
        outputs=checks,
    )


def reference_outputs(
    workload: Workload, inputs: Mapping[str, np.ndarray], against_sdfg: bool = False
) -> tuple[str, dict[str, np.ndarray]]:
    """The reference outputs of ``workload`` on ``inputs``, and the name of the reference used.

    With ``against_sdfg``, a workload without a reference of its own is compared with its unlowered SDFG.
    """
    if workload.onnx_model is not None:
        return "onnxruntime", _onnxruntime_outputs(workload, inputs)
    if workload.reference is not None:
        return "python", _python_outputs(workload, inputs)
    if against_sdfg:
        return "unlowered SDFG", workload.run(inputs)
    raise DcaccelError(f"workload '{workload.name}' has no reference to verify against (no ONNX model or function)")


def compare(output: str, actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> OutputCheck:
    """Compare one output with its reference: max absolute and relative error, and allclose-style pass."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        return OutputCheck(output, tuple(actual.shape), float("inf"), float("inf"), False)
    if actual.size == 0:
        return OutputCheck(output, tuple(actual.shape), 0.0, 0.0, True)
    error = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    magnitude = np.abs(expected.astype(np.float64))
    relative = np.divide(error, magnitude, out=np.zeros_like(error), where=magnitude > 0)
    passed = bool(np.all(error <= atol + rtol * magnitude))
    return OutputCheck(
        output=output,
        shape=tuple(actual.shape),
        max_abs_error=float(np.max(error)),
        max_rel_error=float(np.max(relative)),
        passed=passed,
    )


def _onnxruntime_outputs(workload: Workload, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs of onnxruntime on the workload's stored ONNX model, with its basic graph optimizations only: the
    extended ones rewrite a model's ops into kernels that compute otherwise (a QDQ model's DequantizeLinear → Conv →
    QuantizeLinear into one QLinearConv of integer arithmetic, which rounds one quantum off the float model's
    values that onnxruntime computes without them)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    try:
        session = onnxruntime.InferenceSession(
            workload.onnx_model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    except Exception as err:  # onnxruntime's own errors: a model its kernels refuse (CumSum exclusive=5)
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DcaccelError(f"verify {workload.name}: onnxruntime cannot run the reference model: {detail}") from None
    names = [spec.name for spec in workload.outputs]
    feeds = {spec.name: np.array(inputs[spec.name], dtype=spec.dtype) for spec in workload.inputs}
    return dict(zip(names, session.run(names, feeds), strict=True))


def _python_outputs(workload: Workload, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs of the workload's Python function, called on copies of the inputs.

    Returned values map to the returned outputs in order; outputs that are parameters written in
    place are read back from the copies.
    """
    symbols = workload.bind_symbols(inputs)
    arguments = {spec.name: np.array(inputs[spec.name], dtype=spec.dtype) for spec in workload.inputs}
    returned_specs = [spec for spec in workload.outputs if spec.container.startswith("__return")]
    written_specs = [spec for spec in workload.outputs if not spec.container.startswith("__return")]
    for spec in written_specs:
        arguments.setdefault(spec.name, np.zeros(spec.concrete_shape(symbols), dtype=spec.dtype))
    returned = workload.reference(**arguments)
    returned = list(returned) if isinstance(returned, tuple) else [] if returned is None else [returned]
    if len(returned) != len(returned_specs):
        raise DcaccelError(
            f"reference of '{workload.name}' returns {len(returned)} values for {len(returned_specs)} outputs"
        )
    outputs = {spec.name: np.asarray(value) for spec, value in zip(returned_specs, returned, strict=True)}
    outputs.update({spec.name: arguments[spec.name] for spec in written_specs})
    return outputs
