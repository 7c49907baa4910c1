"""A graph output that is a constant (a ``Constant`` node, or an initializer once folded) is written.

DaCe's importer adds a graph output's container as a transient before it reads the constant into a
weight, so the program never took the weight as an argument and the output stayed uninitialised (ONNX's
``test_constant``: a deviation of 2e28). :func:`dcaccel.frontend.onnx_import.from_onnx` makes every weight
a program argument.
"""

import numpy as np
import onnx
import pytest
from onnx import helper

pytestmark = pytest.mark.slow  # every test imports a model (about 15 s)

VALUE = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5


def _model() -> onnx.ModelProto:
    """Outputs ``c``, a Constant, and ``y = Relu(x)``."""
    nodes = [
        helper.make_node("Constant", [], ["c"], value=onnx.numpy_helper.from_array(VALUE)),
        helper.make_node("Relu", ["x"], ["y"]),
    ]
    float_info = (onnx.TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph(
        nodes,
        "constant_output",
        [helper.make_tensor_value_info("x", *float_info)],
        [helper.make_tensor_value_info("c", *float_info), helper.make_tensor_value_info("y", *float_info)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def workload():
    from dcaccel.frontend.onnx_import import from_onnx

    return from_onnx(_model())


def test_a_constant_output_is_a_program_argument(workload):
    assert "c" in workload.sdfg.arglist()  # the weight's container, copied to the output's
    np.testing.assert_array_equal(workload.weights["c"], VALUE)


@pytest.mark.parametrize("lowered", [False, True], ids=["unlowered", "lowered"])
def test_a_constant_output_has_its_value(workload, lowered):
    from dcaccel.transforms.lower import lower
    from dcaccel.verification import verify

    report = verify(workload, lower(workload) if lowered else None)
    assert [check.output for check in report.outputs] == ["c", "y"]
    assert all(check.passed for check in report.outputs), report
