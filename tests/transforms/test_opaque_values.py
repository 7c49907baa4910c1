"""The opaque fallback leaves out a DaCe implementation known to compute wrong values: LogSoftmax's ``pure``
along another than the last axis (ONNX's test_logsoftmax_axis_0 and _1) runs on the host through onnxruntime
instead. The model: LogSoftmax nodes on one 3 × 4 × 5 input, along axes 0, 1, 2 and -1, imported with function bodies
kept as written (by default the import replaces LogSoftmax by its ONNX function body, whose ops are canonical)."""

import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

SHAPE = (3, 4, 5)
AXES = {"axis_0": 0, "axis_1": 1, "axis_2": 2, "axis_minus_1": -1}


def log_softmax_model() -> onnx.ModelProto:
    nodes = [helper.make_node("LogSoftmax", ["x"], [name], name=name, axis=axis) for name, axis in AXES.items()]
    graph = helper.make_graph(
        nodes,
        "log_softmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, SHAPE) for name in AXES],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)


@pytest.fixture(scope="module")
def workload():
    import dcaccel
    from dcaccel.frontend.functions import kept_as_written

    with kept_as_written():
        return dcaccel.load(log_softmax_model(), name="log_softmax")


@pytest.fixture(scope="module")
def lowered(workload):
    from dcaccel.transforms.lower import OpaqueOpWarning, lower

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OpaqueOpWarning)
        return lower(workload)


@pytest.mark.slow
def test_log_softmax_along_an_inner_axis_runs_on_the_host(lowered):
    from dcaccel.transforms.host import HOST_IMPLEMENTATION

    assert lowered.implementations == {
        "axis_0": HOST_IMPLEMENTATION,
        "axis_1": HOST_IMPLEMENTATION,
        "axis_2": "pure",
        "axis_minus_1": "pure",
    }


@pytest.mark.slow
def test_every_axis_matches_onnxruntime(workload, lowered):
    """Along axes 0 and 1 DaCe's ``pure`` expansion deviated by up to 3.8 from onnxruntime."""
    import onnxruntime

    from dcaccel.frontend.execution import run_sdfg

    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    expected = onnxruntime.InferenceSession(log_softmax_model().SerializeToString()).run(list(AXES), {"x": x})
    outputs = run_sdfg(lowered.sdfg, workload, {"x": x})
    for name, reference in zip(AXES, expected, strict=True):
        np.testing.assert_allclose(outputs[name], reference, rtol=1e-5, atol=1e-6, err_msg=name)
