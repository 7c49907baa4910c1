"""Adversarial models for the host fallback and the reference run (issue 22's bar applied to
transforms/host.py and verify): an op whose attributes ONNX and onnxruntime refuse (CumSum exclusive=5) is refused
in one line when lowered (its canonical implementation refuses it, and so does onnxruntime on the host: both
reasons), and verify says in one line that onnxruntime cannot run the reference model instead of raising
onnxruntime's exception; an op without any implementation that onnxruntime has no kernel for (RandomUniformLike
into float16) is refused in one line naming op and node."""

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from dcaccel.errors import DcaccelError


def _model(
    node: onnx.NodeProto, output_shape: list[int], *initializers, output_type: int = onnx.TensorProto.FLOAT
) -> onnx.ModelProto:
    """x (4 × 4) → MatMul by ones → ``node`` → y (of ``output_type``)."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"), node],
        "adversarial",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("y", output_type, output_shape)],
        [numpy_helper.from_array(np.ones((4, 4), np.float32), "w"), *initializers],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=9)


def _cumsum(exclusive: int) -> onnx.ModelProto:
    axis = numpy_helper.from_array(np.array(1, np.int64), "axis")
    return _model(helper.make_node("CumSum", ["h", "axis"], ["y"], name="scan", exclusive=exclusive), [4, 4], axis)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            _cumsum(5),
            "unsupported op CumSum (node 'scan'): exclusive=5 (0 or 1); onnxruntime cannot run it on the host: "
            "[ONNXRuntimeError] : 1 : FAIL : Exception during initialization: ",
        ),
        (
            _model(
                helper.make_node("RandomUniformLike", ["h"], ["y"], name="noise", dtype=onnx.TensorProto.FLOAT16),
                [4, 4],
                output_type=onnx.TensorProto.FLOAT16,
            ),
            "unsupported op RandomUniformLike (node 'noise'): onnxruntime cannot run it on the host: "
            "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for RandomUniformLike(1) "
            "node with name ''",
        ),
    ],
    ids=["cumsum-exclusive-5", "random-float16-no-kernel"],
)
def test_refused_in_one_line_when_lowered(model, message):
    import dcaccel

    with pytest.raises(DcaccelError) as refusal:
        dcaccel.load(model).lower({})
    assert str(refusal.value).startswith(message) and "\n" not in str(refusal.value)


@pytest.mark.slow
def test_verify_of_a_model_onnxruntime_refuses_is_one_line():
    import dcaccel

    workload = dcaccel.load(_cumsum(5), name="scan5")
    with pytest.raises(DcaccelError, match=r"^verify scan5: onnxruntime cannot run the reference model: .*exclusive"):
        dcaccel.verify(workload)


@pytest.mark.slow
def test_cumsum_exclusive_1_still_lowers():
    import dcaccel

    assert dcaccel.load(_cumsum(1)).lower({}) is not None
