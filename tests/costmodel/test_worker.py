"""Timing in fresh worker processes (compiles: slow)."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import dcaccel
from dcaccel.costmodel.measure import measure

pytestmark = pytest.mark.slow


def test_a_float16_scalar_argument_reaches_the_worker():
    """A float16 model scaled by a 0-d weight: the worker passes the scalar as the measuring process does."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "c"], ["y"])],
        "half_mul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [8])],
        [numpy_helper.from_array(np.array(1.5, np.float16), "c")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    lowered = dcaccel.load(model, name="half_mul").lower()
    rows = measure(lowered, family="half", repeat=2, processes=2)
    assert rows and all(row.timing.n == 4 and row.timing.median_ns > 0 for row in rows)
