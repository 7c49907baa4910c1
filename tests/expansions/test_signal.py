"""Canonical DFT, STFT and MelWeightMatrix (folded): values against onnxruntime (one compile) over real and
complex inputs, signal axes, ``dft_length`` shorter and longer than the signal (truncated, zero-padded), one-sided
and inverse transforms, frame steps and windows, real STFT signals without a components dimension (``[batch,
length]``, as ``torch.stft`` exports them), mel matrices of float and double type; ONNX's inverse one-sided
DFT (irfft, which onnxruntime does not run) against numpy; the output shapes the import gives them (fast); task
DAGs (none opaque); ``torch.stft`` of a (batch, samples) signal exported, lowered and verified.
"""

import numpy as np
import onnx
import pytest

from tests.expansions.canonical_onnx import (
    OpCase,
    build_model,
    lowered_dags,
    random_feed,
    run_canonical,
    run_reference,
)

I64, F32, F64 = np.int64, np.float32, np.float64


def _dft(name, shape, axis=-2, length=None, dtype=F32, **attributes) -> OpCase:
    constants = {"a": np.array(axis, I64)}
    if length is not None:
        constants["n"] = np.array(length, I64)
    return OpCase(
        name, "DFT", ["x", "n" if length is not None else "", "a"], {"x": shape}, constants, attributes, dtype=dtype
    )


def _stft(name, shape, step, length=None, window=None, **attributes) -> OpCase:
    constants = {"s": np.array(step, I64)}
    if length is not None:
        constants["n"] = np.array(length, I64)
    inputs = {"x": shape}
    if window is not None:
        inputs["w"] = (window,)
    node_inputs = ["x", "s", "w" if window is not None else "", "n" if length is not None else ""]
    return OpCase(name, "STFT", node_inputs, inputs, constants, attributes)


def _mel(name, bins, length, rate, low, high, **attributes) -> OpCase:
    values = {"b": np.array(bins, I64), "n": np.array(length, I64), "r": np.array(rate, I64)}
    values |= {"l": np.array(low, F32), "h": np.array(high, F32)}
    return OpCase(name, "MelWeightMatrix", list(values), constants=values, attributes=attributes, outputs=("y",))


CASES = [
    _dft("dft_real", (2, 8, 1)),
    _dft("dft_complex", (2, 5, 2)),
    _dft("dft_axis1_of_rank4", (2, 6, 3, 2), axis=1),
    _dft("dft_negative_axis", (3, 4, 7, 1), axis=-3),
    _dft("dft_truncated", (2, 9, 1), length=6),
    _dft("dft_zero_padded", (1, 5, 2), length=8),
    _dft("dft_onesided_even", (2, 8, 1), onesided=1),
    _dft("dft_onesided_odd", (3, 7, 1), onesided=1),
    _dft("dft_inverse", (2, 6, 2), inverse=1),
    _dft("dft_inverse_padded", (1, 3, 2), length=5, inverse=1),
    _dft("dft_double", (2, 6, 2), dtype=F64),
    _dft("dft_length_one", (4, 1, 2)),
    _stft("stft_real", (2, 16, 1), 4, length=8, onesided=1),
    _stft("stft_complex_full", (1, 12, 2), 3, length=5, onesided=0),
    _stft("stft_window", (2, 15, 1), 2, window=6, onesided=1),
    _stft("stft_window_and_length", (1, 10, 2), 4, length=4, window=4, onesided=0),
    _stft("stft_one_frame", (1, 7, 1), 10, length=7, onesided=1),
    _stft("stft_2d_signal", (2, 16), 4, length=8, onesided=1),
    _stft("stft_2d_signal_window", (3, 13), 3, window=5, onesided=0),
    _mel("mel_onnx_test", 8, 16, 8192, 0, 8192 / 2),
    _mel("mel_double", 5, 31, 16000, 100, 6000, output_datatype=11),
]


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementations (one compile)."""
    model, feed = build_model(CASES), random_feed(CASES)
    return run_reference(model, feed), run_canonical(model, feed, "test_signal")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    reference, canonical = (outputs[case.tensor("y")] for outputs in results)
    assert canonical.shape == reference.shape and canonical.dtype == reference.dtype
    tolerance = 1e-12 if reference.dtype == F64 else 1e-5
    np.testing.assert_allclose(canonical, reference, rtol=tolerance, atol=tolerance * np.abs(reference).max())


IRFFT = [
    _dft("irfft_even", (2, 5, 2), axis=1, onesided=1, inverse=1),
    _dft("irfft_odd_length", (1, 4, 2), axis=1, length=7, onesided=1, inverse=1),
]


@pytest.mark.slow
def test_inverse_onesided_is_numpys_irfft():
    """ONNX 1.23's inverse one-sided DFT: numpy's irfft along the axis, a real output (onnxruntime has no kernel)."""
    feed = random_feed(IRFFT)
    outputs = run_canonical(build_model(IRFFT), feed, "test_signal_irfft")
    for case, length in zip(IRFFT, (8, 7), strict=True):
        x = feed[case.tensor("x")].astype(F64)
        expected = np.fft.irfft(x[..., 0] + 1j * x[..., 1], n=length, axis=1)[..., np.newaxis]
        np.testing.assert_allclose(outputs[case.tensor("y")], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", CASES + IRFFT, ids=lambda c: c.name)
def test_import_gives_the_output_shape(case):
    """The shape inference DaCe's importer runs gives the output ONNX's shape (its strict inference, build_model's)."""
    from dcaccel.frontend.shapes import infer_onnx_shapes

    model = build_model([case])
    (output,) = model.graph.output
    expected = [d.dim_value for d in output.type.tensor_type.shape.dim]
    output.type.tensor_type.ClearField("shape")
    (found,) = infer_onnx_shapes(model).graph.output
    assert [d.dim_value for d in found.type.tensor_type.shape.dim] == expected


@pytest.fixture(scope="module")
def dags():
    """The task DAG of every case lowered canonically (nothing compiled), by case name."""
    from dcaccel.expansions import register

    register()
    return lowered_dags(CASES, "signal_dag")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_tasks_none_opaque(case, dags):
    """The zeroing of the double buffer, the sum, the write (and the window's frames)."""
    from dcaccel.dag.metrics import opaque_work

    dag = dags[case.name]
    assert opaque_work(dag)[0] == 0
    tasks = sorted(dag.label(t) for t in dag.tasks if dag.info(t).node == case.name)
    steps = ["init_acc", "sum", "write", *(["window"] if "window" in case.name else [])]
    if case.op_type == "MelWeightMatrix":
        steps = ["matrix"]
    assert tasks == sorted(f"{case.name}_{step}_map" for step in steps)


def torch_stft_model() -> onnx.ModelProto:
    """``torch.stft`` of a real (batch, samples) signal [2, 32] (8-sample Hann frames every 4 samples, not centered),
    exported by TorchScript's exporter at opset 17: an STFT of the 2-D signal, then a Transpose."""
    import io

    import torch

    class Spectrogram(torch.nn.Module):
        def forward(self, x):
            window = torch.hann_window(8)
            return torch.stft(x, n_fft=8, hop_length=4, window=window, center=False, return_complex=False)

    buffer = io.BytesIO()
    torch.onnx.export(Spectrogram(), (torch.ones(2, 32),), buffer, dynamo=False, opset_version=17, input_names=["x"])
    return onnx.load_from_string(buffer.getvalue())


@pytest.mark.slow
def test_torch_stft_of_a_2d_signal_lowers_and_verifies():
    from dcaccel.frontend.load import load
    from dcaccel.verification import verify

    model = torch_stft_model()
    assert [len(value.type.tensor_type.shape.dim) for value in model.graph.input] == [2]
    workload = load(model, fold=False)
    assert workload.outputs[0].shape == (2, 5, 7, 2)
    lowered = workload.lower()
    assert lowered.opaque == {}
    report = verify(workload, lowered)
    assert report.passed, report
