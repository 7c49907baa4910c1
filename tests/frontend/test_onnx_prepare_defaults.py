"""Attributes ONNX's shape inference misreads when absent written with their schema's defaults
(``onnx_prepare.explicit_defaults``): an STFT without ``onesided`` (ONNX's ``test_stft``: a real signal, its output
declared with the default one-sided ``frame_length / 2 + 1`` bins) passes the checker, imports with those bins (fast),
lowers with no opaque task and verifies against onnxruntime (slow)."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from dcaccel.frontend.onnx_prepare import check_consistent, explicit_defaults, normalize

SIGNAL, STEP, LENGTH = (1, 64, 1), 8, 16
BINS = LENGTH // 2 + 1
FRAMES = (SIGNAL[1] - LENGTH) // STEP + 1


def stft_model() -> onnx.ModelProto:
    """ONNX's ``test_stft`` at a smaller size: an STFT of constant ``frame_step`` and ``frame_length`` without a
    ``onesided`` attribute, its output declared one-sided (opset 17)."""
    constants = {"step": np.array(STEP, np.int64), "length": np.array(LENGTH, np.int64)}
    graph = helper.make_graph(
        [helper.make_node("STFT", ["x", "step", "", "length"], ["y"], name="stft")],
        "stft",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, SIGNAL)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, FRAMES, BINS, 2))],
        [onnx.numpy_helper.from_array(value, name) for name, value in constants.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def test_onnx_infers_frame_length_bins_for_an_stft_without_onesided():
    """The misreading :func:`explicit_defaults` works around: ONNX's checker refuses the model as written."""
    with pytest.raises(onnx.shape_inference.InferenceError, match=f"\\({LENGTH}\\) vs \\({BINS}\\)"):
        onnx.checker.check_model(stft_model(), full_check=True)


def test_the_default_onesided_is_written_and_the_model_checks():
    normalized = normalize(stft_model(), "stft")
    (node,) = normalized.graph.node
    assert {attribute.name: attribute.i for attribute in node.attribute} == {"onesided": 1}
    check_consistent(normalized, "stft")
    inferred = onnx.shape_inference.infer_shapes(normalized, strict_mode=True)
    assert [dim.dim_value for dim in inferred.graph.output[0].type.tensor_type.shape.dim] == [1, FRAMES, BINS, 2]


def test_a_written_attribute_and_a_model_without_one_are_kept():
    model = stft_model()
    model.graph.node[0].attribute.append(helper.make_attribute("onesided", 0))
    assert explicit_defaults(model) is model
    relu = helper.make_model(
        helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])],
            "relu",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2,))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, (2,))],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    assert explicit_defaults(relu) is relu


@pytest.mark.slow
def test_an_stft_without_onesided_lowers_and_verifies():
    from dcaccel.frontend.load import load
    from dcaccel.verification import verify

    workload = load(stft_model(), fold=False)
    assert workload.outputs[0].shape == (1, FRAMES, BINS, 2)
    lowered = workload.lower()
    assert lowered.opaque == {}
    report = verify(workload, lowered)
    assert report.passed, report
