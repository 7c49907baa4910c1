"""A host task writes a scalar (0-d) output (dcaccel/transforms/host.py): the tasklet passes the scalar's address
and the callback writes it as an array of one element. Det of one 3 × 3 matrix is the example: DaCe has no
implementation of it, so the unlowered program runs it as a host task, and a partition that puts it on the host
(``host``) lowers it as one; both verify against onnxruntime, as an intermediate and as the model's output.
"""

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

SIZE = 3


def det_model(scalar_output: bool) -> onnx.ModelProto:
    """x (3 × 3) → MatMul → Det → d (the output, 0-d) or → Mul with x → y (3 × 3, Det's scalar an intermediate)."""
    weights = numpy_helper.from_array(np.random.default_rng(0).standard_normal((SIZE, SIZE)).astype(np.float32), "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="fc"),
        helper.make_node("Det", ["m"], ["d"], name="det"),
    ]
    output = helper.make_tensor_value_info("d", onnx.TensorProto.FLOAT, [])
    if not scalar_output:
        nodes.append(helper.make_node("Mul", ["x", "d"], ["y"], name="scale"))
        output = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [SIZE, SIZE])
    graph = helper.make_graph(
        nodes, "det", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [SIZE, SIZE])], [output], [weights]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)


def _hosted(scalar_output: bool):
    """The workload of :func:`det_model` and its lowering with Det on the host."""
    import dcaccel
    from dcaccel.transforms.lower import lower

    workload = dcaccel.load(det_model(scalar_output), name=f"det_{'output' if scalar_output else 'intermediate'}")
    return workload, lower(workload, host=["det"])


def test_a_host_task_with_a_scalar_output_is_one_opaque_task_writing_one_element():
    """Det reads the 3 × 3 product and writes one element: one opaque task, one operation."""
    from dcaccel.dag import extract

    _, lowered = _hosted(scalar_output=False)
    dag = extract(lowered)
    dag.validate()
    (task,) = [t for t in dag.tasks if dag.info(t).opaque]
    assert (dag.info(task).op, dag.info(task).implementation, dag.info(task).ops) == ("Det", "onnxruntime", 1)
    assert {dag.volume(task, s) for s in dag.successors(task)} == {1}


@pytest.mark.slow
@pytest.mark.parametrize("scalar_output", [False, True], ids=["intermediate", "output"])
@pytest.mark.parametrize("program", ["unlowered", "lowered"])
def test_a_host_task_with_a_scalar_output_verifies(program, scalar_output):
    import dcaccel

    workload, lowered = _hosted(scalar_output)
    report = dcaccel.verify(workload, lowered if program == "lowered" else None)
    assert report.passed, report.outputs
    assert report.outputs[0].max_abs_error == 0.0
