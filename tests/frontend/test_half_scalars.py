"""Float16 scalar arguments of DaCe programs (``dcaccel.frontend.half_scalars``): DaCe's conversion passes their
bits (fast), and a float16 model with scalar weights and a scalar input (a float16 ``Range`` as ONNX's
``test_range_float16_type_positive_delta``, a ``Mul`` by a 0-d constant) lowers, runs and verifies against
onnxruntime (slow)."""

import ctypes

import dace
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from dcaccel.frontend.half_scalars import install_half_scalar_arguments

HALF = TensorProto.FLOAT16


def test_a_float16_scalar_is_passed_as_its_bits_and_other_arguments_as_dace_does():
    install_half_scalar_arguments()
    half = dace.data.make_ctypes_argument(np.float16(-1.375), dace.data.Scalar(dace.float16), "c")
    assert isinstance(half, ctypes.c_ushort)
    assert half.value == np.float16(-1.375).view(np.uint16)
    from_array = dace.data.make_ctypes_argument(np.array(2.5, np.float16), dace.data.Scalar(dace.float16), "c")
    assert from_array.value == np.float16(2.5).view(np.uint16)
    single = dace.data.make_ctypes_argument(np.float32(0.5), dace.data.Scalar(dace.float32), "s")
    assert isinstance(single, ctypes.c_float) and single.value == 0.5


def half_model() -> onnx.ModelProto:
    """``y = x * s * c`` (``s`` a float16 scalar input, ``c`` a 0-d float16 weight) and ``r = Range(1, 5, 2)`` in
    float16 (opset 27: Range takes float16 from there)."""
    constants = {"c": np.float16(-1.375), "start": np.float16(1), "limit": np.float16(5), "delta": np.float16(2)}
    nodes = [
        helper.make_node("Mul", ["x", "s"], ["scaled"]),
        helper.make_node("Mul", ["scaled", "c"], ["y"]),
        helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
    ]
    graph = helper.make_graph(
        nodes,
        "half_scalars",
        [helper.make_tensor_value_info("x", HALF, (2, 3)), helper.make_tensor_value_info("s", HALF, ())],
        [helper.make_tensor_value_info("y", HALF, (2, 3)), helper.make_tensor_value_info("r", HALF, (2,))],
        [onnx.numpy_helper.from_array(np.asarray(value), name) for name, value in constants.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)], ir_version=10)


@pytest.mark.slow
def test_a_float16_model_with_scalar_weights_and_inputs_lowers_and_verifies():
    from dcaccel.frontend.load import load
    from dcaccel.verification import verify

    workload = load(half_model(), fold=False)
    assert {"c", "start", "delta"} <= set(workload.weights)
    lowered = workload.lower()
    assert lowered.opaque == {}
    inputs = {"x": np.arange(-3, 3, dtype=np.float16).reshape(2, 3), "s": np.array(0.75, np.float16)}
    report = verify(workload, lowered, inputs=inputs, rtol=0, atol=0)
    assert report.passed, report
