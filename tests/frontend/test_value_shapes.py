"""Ops whose output shape comes from an input's value (``dcaccel.frontend.shapes.infer_onnx_shapes``): a constant
shape input gives the output its shape at import; data there, or an op whose output shape always depends on its
data (NonZero, Unique, NonMaxSuppression), is refused in one line naming op, node and why, instead of a symbolic
size nothing binds (``KeyError: 'NonZero_0_o0__d0'`` when the program ran).
"""

import copy

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from dcaccel.errors import UnsupportedOpError
from dcaccel.frontend.shapes import infer_onnx_shapes

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _model(op, inputs, attributes=None, initializers=(), outputs=("y",), opset=20) -> onnx.ModelProto:
    """One ``op`` node named ``node`` reading graph inputs ``inputs`` (name -> (type, shape)) and ``initializers``."""
    names = [*inputs, *(init.name for init in initializers)]
    node = helper.make_node(op, names, list(outputs), name="node", **(attributes or {}))
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(name, kind, shape) for name, (kind, shape) in inputs.items()],
        [onnx.ValueInfoProto(name=name) for name in outputs],
        list(initializers),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


def _constant(name, value) -> onnx.TensorProto:
    return onnx.numpy_helper.from_array(np.asarray(value), name)


REFUSED = {
    "NonZero": (_model("NonZero", {"x": (F, [2, 3])}), ""),
    "Unique": (_model("Unique", {"x": (F, [5])}, outputs=("y", "i", "inverse", "counts")), ""),
    "NonMaxSuppression": (
        _model("NonMaxSuppression", {"boxes": (F, [1, 4, 4]), "scores": (F, [1, 1, 4])}),
        "",
    ),
    "Compress": (
        _model("Compress", {"x": (F, [3, 2]), "condition": (B, [3])}, {"axis": 0}),
        " (input 'condition' is not a constant)",
    ),
    "OneHot": (
        _model("OneHot", {"i": (I64, [3]), "depth": (I64, [])}, initializers=[_constant("v", [0.0, 1.0])]),
        " (input 'depth' is not a constant)",
    ),
}


@pytest.mark.parametrize("op", REFUSED)
def test_output_shaped_by_data_is_refused_in_one_line(op):
    model, why = REFUSED[op]
    with pytest.raises(UnsupportedOpError) as error:
        infer_onnx_shapes(model)
    assert str(error.value) == f"unsupported op {op} (node 'node'): output shape depends on input values{why}"


def test_constant_shape_inputs_give_the_output_shape():
    model = _model(
        "OneHot",
        {"i": (I64, [2, 3])},
        {"axis": 1},
        [_constant("depth", np.array([4.0], np.float32)), _constant("v", np.array([0.0, 1.0], np.float32))],
    )
    (output,) = infer_onnx_shapes(model).graph.output
    assert [d.dim_value for d in output.type.tensor_type.shape.dim] == [2, 4, 3]


def test_upsample_of_opset_9_takes_its_shape_from_the_constant_scales():
    """onnxruntime's inference names the sizes of an opset-9 Upsample (scales an input) symbols."""
    scales = _constant("scales", np.array([1, 1, 2, 1.5], np.float32))
    model = _model("Upsample", {"x": (F, [1, 1, 2, 4])}, {"mode": "nearest"}, [scales], opset=9)
    (output,) = infer_onnx_shapes(model).graph.output
    assert [d.dim_value for d in output.type.tensor_type.shape.dim] == [1, 1, 4, 6]


@pytest.mark.slow
def test_dace_importer_refuses_after_register():
    """register() makes the inference DaCe's importer runs refuse what it cannot shape (slow: imports DaCe's ONNX
    frontend)."""
    from dace.ml import ONNXModel

    from dcaccel.expansions import register

    register()
    model = copy.deepcopy(REFUSED["NonZero"][0])
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", I64, [2, "n"]))
    with pytest.raises(UnsupportedOpError, match="NonZero"):
        ONNXModel("nonzero", model, onnx_simplify=False)


@pytest.mark.slow
@pytest.mark.parametrize("fold", [True, False])
def test_load_lower_and_verify_a_onehot_of_constant_depth(fold):
    """dcaccel.load gives the output its shape from the constant depth; lowered canonically, it verifies against
    onnxruntime (slow: compiles). register() installs the shape inference first."""
    import dcaccel
    from dcaccel.expansions import register
    from dcaccel.transforms.lower import lower

    register()
    model = _model(
        "OneHot",
        {"i": (I64, [2, 3])},
        {"axis": 1},
        [_constant("depth", np.array(4, np.int64)), _constant("v", np.array([0.0, 1.0], np.float32))],
    )
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", F, [2, 4, 3]))
    workload = dcaccel.load(model, fold=fold)
    assert workload.outputs[0].shape == (2, 4, 3)
    assert all(check.passed for check in dcaccel.verify(workload, lower(workload)).outputs)
