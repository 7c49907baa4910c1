"""``Upsample`` of opsets 7-9 imports, lowers canonically and matches onnxruntime on the model as written.

Upsample-7 takes its scales as an attribute and imports as it is. Upsample-9 takes them as an input, and the
shape inference DaCe's importer runs leaves its output shape symbolic, so the preparation converts an opset-9
model with an Upsample to opset 10 (``onnx.version_converter`` makes it a ``Resize`` with the same mode and
the ``asymmetric`` coordinates), keeping the node's name. The numerical test compares the compiled lowering
with onnxruntime running the original model at its own opset.
"""

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import dcaccel
from dcaccel.dag import extract
from dcaccel.errors import DcaccelError
from dcaccel.frontend.ops import nodes_by_op_type
from dcaccel.transforms.lower import lower
from dcaccel.verification import compare, run_sdfg

X_SHAPE = (1, 2, 3, 4)
#: node name -> (mode, scales, output shape): an integer nearest upsampling and a fractional linear one
UPSAMPLES = {
    "nearest": ("nearest", (1.0, 1.0, 2.0, 3.0), (1, 2, 6, 12)),
    "linear": ("linear", (1.0, 1.0, 2.0, 1.5), (1, 2, 6, 6)),
}


def upsample_model(opset: int) -> onnx.ModelProto:
    """x → Relu → one Upsample per entry of :data:`UPSAMPLES`, its scales an attribute (opsets 7, 8) or a
    constant input (opset 9)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu")]
    initializers, outputs = [], []
    for name, (mode, scales, out_shape) in UPSAMPLES.items():
        if opset >= 9:
            initializers.append(numpy_helper.from_array(np.array(scales, np.float32), f"{name}_scales"))
            nodes.append(helper.make_node("Upsample", ["r", f"{name}_scales"], [name], name=name, mode=mode))
        else:
            nodes.append(helper.make_node("Upsample", ["r"], [name], name=name, mode=mode, scales=list(scales)))
        outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(out_shape)))
    graph = helper.make_graph(
        nodes, "upsample", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(X_SHAPE))], outputs, initializers
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=7)


@pytest.mark.parametrize(
    ("opset", "op", "kept_opset"),
    [
        pytest.param(7, "Upsample", 7, id="7"),
        pytest.param(8, "Upsample", 8, id="8", marks=pytest.mark.slow),
        pytest.param(9, "Resize", 10, id="9"),
    ],
)
def test_upsample_imports_with_concrete_shapes_and_lowers(opset, op, kept_opset):
    workload = dcaccel.load(upsample_model(opset), name=f"upsample{opset}")
    assert nodes_by_op_type(workload.sdfg) == {"Relu": ["relu"], op: list(UPSAMPLES)}
    assert [entry.version for entry in workload.onnx_model.opset_import] == [kept_opset]
    assert [spec.shape for spec in workload.outputs] == [shape for _, _, shape in UPSAMPLES.values()]
    lowered = lower(workload)
    assert lowered.implementations == {"relu": "canonical", "nearest": "canonical", "linear": "canonical"}
    assert not lowered.opaque
    dag = extract(lowered)
    dag.validate()
    # one flat map per node; the nearest output reads one input element, the linear one its 2 rows × 2 columns
    resize_tasks = {dag.info(t).node: t for t in dag.tasks if dag.info(t).node in UPSAMPLES}
    reads = {node: sum(dag.volume(u, task) for u in dag.predecessors(task)) for node, task in resize_tasks.items()}
    assert reads == {"nearest": 1 * 2 * 6 * 12, "linear": 4 * 2 * 6 * 6}


def test_an_upsample_of_opset_10_is_refused_in_one_line():
    """Upsample is deprecated from opset 10 (the model should have a Resize): nothing is converted."""
    model = upsample_model(9)
    model.opset_import[0].version = 10
    with pytest.raises(DcaccelError) as raised:
        dcaccel.load(model, name="upsample10")
    assert str(raised.value) == (
        "ONNX model 'upsample' is not a valid ONNX model: node 'nearest' (Upsample): "
        "Op registered for Upsample is deprecated in domain_version of 10"
    )


@pytest.mark.slow
@pytest.mark.parametrize("opset", [7, 9])
def test_lowered_upsample_matches_onnxruntime_at_its_own_opset(opset):
    model = upsample_model(opset)
    workload = dcaccel.load(model, name=f"upsample{opset}")
    inputs = workload.random_inputs(0)
    actual = run_sdfg(lower(workload).sdfg, workload, inputs)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = dict(zip(UPSAMPLES, session.run(list(UPSAMPLES), {"x": inputs["x"]}), strict=True))
    for name in UPSAMPLES:
        check = compare(name, actual[name], expected[name], rtol=1e-5, atol=1e-6)
        assert check.passed, check
