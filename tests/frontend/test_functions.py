"""Function ops replaced by their ONNX function bodies at import (``dcaccel.frontend.functions``), and scalar
``Constant`` nodes written as tensors (``onnx_prepare.tensor_constants``).

The bodies are checked against onnxruntime on the op itself (the expanded model computes what the node did;
``ai.onnx.preview``'s FlexAttention, which onnxruntime has no kernel for, against numpy), then through
``dcaccel.load``: lowered with no opaque or host task, and (slow) compiled and verified.
"""

import logging

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from dcaccel.frontend import functions
from dcaccel.frontend.onnx_prepare import tensor_constants
from tests.expansions.canonical_onnx import run_reference

IMPLEMENTED = {"Add", "Cast", "Div", "Mul", "ReduceMean", "Sqrt", "Cos", "Range", "Sub", "Pow"}


def _model(node: onnx.NodeProto, inputs: dict, opset: int, initializers=(), outputs=("y",)) -> onnx.ModelProto:
    """A one-node model of float32 ``inputs`` (name → shape) at ``opset``."""
    graph = helper.make_graph(
        [node],
        node.op_type,
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in inputs.items()],
        [onnx.ValueInfoProto(name=name) for name in outputs],
        list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def _rms(axis: int = -1, epsilon: float = 1e-5) -> onnx.ModelProto:
    node = helper.make_node("RMSNormalization", ["x", "scale"], ["y"], name="/norm/RMS", axis=axis, epsilon=epsilon)
    return _model(node, {"x": (2, 3, 4), "scale": (4,) if axis == -1 else (3, 4)}, 23)


def _window(op: str, size: int, periodic: int) -> onnx.ModelProto:
    size_tensor = onnx.numpy_helper.from_array(np.asarray(size, dtype=np.int64), "size")
    return _model(helper.make_node(op, ["size"], ["y"], periodic=periodic), {}, 17, [size_tensor])


FAST_CASES = {
    "rms_last_axis": (_rms, {"x": (2, 3, 4), "scale": (4,)}),
    "rms_axis1_epsilon": (lambda: _rms(axis=1, epsilon=0.5), {"x": (2, 3, 4), "scale": (3, 4)}),
    "hann_periodic": (lambda: _window("HannWindow", 10, 1), {}),
    "hann_symmetric": (lambda: _window("HannWindow", 10, 0), {}),
    "blackman_size_1": (lambda: _window("BlackmanWindow", 1, 1), {}),
}


def _feed(shapes: dict) -> dict:
    rng = np.random.default_rng(0)
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


@pytest.mark.parametrize(("build", "shapes"), FAST_CASES.values(), ids=FAST_CASES)
def test_the_body_computes_what_the_op_does(build, shapes):
    model = build()
    expanded = functions.with_function_bodies(model, "test", IMPLEMENTED)
    op = model.graph.node[0].op_type
    assert op not in {node.op_type for node in expanded.graph.node}
    assert len(expanded.graph.node) > 1
    feed = _feed(shapes)
    expected, actual = run_reference(model, feed), run_reference(expanded, feed)
    np.testing.assert_allclose(actual["y"], expected["y"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("name", "prefix"),
    [
        ("/norm/RMS", "/norm/RMS/RMSNormalization/"),
        ("/norm/RMSNormalization", "/norm/RMSNormalization/"),
        ("", "RMSNormalization_0/"),
    ],
    ids=["named", "named_after_the_op", "unnamed"],
)
def test_body_nodes_and_tensors_are_named_after_the_node_and_op(caplog, name, prefix):
    """``<node>/<op>/...``, or ``<node>/...`` when the node's name ends with its op (PyTorch's names), unique."""
    model = _rms()
    model.graph.node[0].name = name
    with caplog.at_level(logging.INFO, logger=functions.__name__):
        expanded = functions.with_function_bodies(model, "model 'm'", IMPLEMENTED)
    names = [node.name for node in expanded.graph.node]
    assert all(name.startswith(prefix) for name in names), names
    assert "ReduceMean" in {name.removeprefix(prefix).rpartition("_")[0] for name in names}
    assert len(set(names)) == len(names)
    internal = {name for node in expanded.graph.node for name in node.output} - {"y"}
    assert all(name.startswith(prefix) for name in internal), internal
    assert caplog.messages == [
        "model 'm': 1 RMSNormalization node(s) replaced by the ONNX function body of RMSNormalization-23"
    ]


def test_an_implemented_op_and_a_switched_off_expansion_keep_the_node():
    model = _rms()
    assert functions.with_function_bodies(model, "m", {*IMPLEMENTED, "RMSNormalization"}) is model
    with functions.kept_as_written():
        assert functions.with_function_bodies(model, "m", IMPLEMENTED) is model


@pytest.mark.parametrize("opset", [13, 18])
def test_each_opset_gets_the_body_written_for_it(opset):
    """MeanVarianceNormalization-13 has a body for opset 13 (``ReduceMean`` with an ``axes`` attribute) and
    one for opset 18 (``axes`` an input)."""
    model = _model(helper.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=[0, 2]), {"x": (2, 3, 4)}, opset)
    expanded = functions.with_function_bodies(model, "m", IMPLEMENTED)
    assert "MeanVarianceNormalization" not in {node.op_type for node in expanded.graph.node}
    feed = _feed({"x": (2, 3, 4)})
    np.testing.assert_allclose(run_reference(expanded, feed)["y"], run_reference(model, feed)["y"], atol=1e-5)


def _reduce_mean_body(**attributes) -> onnx.FunctionProto:
    """A body written for opset 13: the ``ReduceMean`` of its input, with ``attributes``."""
    node = helper.make_node("ReduceMean", ["x"], ["y"], **attributes)
    return helper.make_function("test", "Mean", ["x"], ["y"], [node], [helper.make_opsetid("", 13)])


@pytest.mark.parametrize(
    ("attributes", "opset", "reason"),
    [
        ({"keepdims": 0}, 18, ""),
        ({}, 18, ""),
        ({"axes": [1]}, 17, ""),
        ({"axes": [1]}, 18, "its body's ReduceMean (opset 13) was redefined by opset 18"),
    ],
    ids=["keepdims", "no_attribute", "axes_before_18", "axes_at_18"],
)
def test_a_body_whose_ops_were_redefined_since_it_was_written_is_not_used(attributes, opset, reason):
    """``ReduceMean``'s ``axes`` became an input at opset 18: a body written for opset 13 that sets it means
    something else at 18 (the node stays as written, lowering's host fallback runs it); one that does not set
    it reads the same (absent, the attribute and the input both reduce every axis)."""
    body = _reduce_mean_body(**attributes)
    function, why = functions._check_versions(body, opset)
    assert why == reason
    assert function is (None if reason else body)


def test_mvn_before_opset_13_expands_too():
    """At opset 12, MeanVarianceNormalization-9's body (written for opset 9) has a ``ReduceMean`` that opset 11
    redefined to take negative axes: the body reads the same."""
    model = _model(helper.make_node("MeanVarianceNormalization", ["x"], ["y"]), {"x": (2, 3, 4, 5)}, 12)
    expanded = functions.with_function_bodies(model, "m", IMPLEMENTED)
    feed = _feed({"x": (2, 3, 4, 5)})
    np.testing.assert_allclose(run_reference(expanded, feed)["y"], run_reference(model, feed)["y"], atol=1e-5)


PREVIEW = "ai.onnx.preview"

FLEX_SHAPES = {"q": (1, 4, 3, 8), "k": (1, 2, 5, 8), "v": (1, 2, 5, 6)}
"""Grouped-query attention: 4 query heads over 2 key/value heads, 3 queries, 5 keys, value size 6."""


def _flex_attention() -> onnx.ModelProto:
    """``ai.onnx.preview``'s FlexAttention (opset 1, default domain 26) of :data:`FLEX_SHAPES` whose ``score_mod``
    graph adds 0.5 to every score."""
    score_mod = helper.make_graph(
        [helper.make_node("Add", ["scores", "bias"], ["scores_out"])],
        "score_mod",
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("scores_out", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(np.float32(0.5), "bias")],
    )
    node = helper.make_node(
        "FlexAttention", ["q", "k", "v"], ["y"], name="/attn/FlexAttention", domain=PREVIEW, score_mod=score_mod
    )
    graph = helper.make_graph(
        [node],
        "flex",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in FLEX_SHAPES.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 4, 3, 6))],
    )
    opsets = [helper.make_opsetid("", 26), helper.make_opsetid(PREVIEW, 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``softmax(q kᵀ / sqrt(E) + 0.5) v``, each key/value head serving two query heads (numpy, float64)."""
    k, v = (np.repeat(t.astype(np.float64), q.shape[1] // t.shape[1], axis=1) for t in (k, v))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1]) + 0.5
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True) @ v


def test_an_op_of_another_domain_dace_cannot_import_is_replaced_by_its_function_body(caplog):
    """FlexAttention's body is built for the node (its ``score_mod`` graph inlined) at the model's opset of
    ``ai.onnx.preview``; the body's ops are default-domain, and it computes the attention numpy does."""
    model = _flex_attention()
    with caplog.at_level(logging.INFO, logger=functions.__name__):
        expanded = functions.with_function_bodies(model, "model 'm'", IMPLEMENTED | {"Softmax"})
    assert {node.domain for node in expanded.graph.node} == {""}
    assert all(node.name.startswith("/attn/FlexAttention/") for node in expanded.graph.node)
    assert caplog.messages == [
        "model 'm': 1 FlexAttention node(s) replaced by the ONNX function body of ai.onnx.preview.FlexAttention-1"
    ]
    feed = _feed(FLEX_SHAPES)
    np.testing.assert_allclose(run_reference(expanded, feed)["y"], _attention(**feed), rtol=1e-5, atol=1e-6)


def test_an_op_of_another_domain_is_kept_without_that_domain_in_the_opsets():
    model = _flex_attention()
    del model.opset_import[1:]
    assert functions.with_function_bodies(model, "m", IMPLEMENTED) is model


_ATTRIBUTE_TYPES = {
    "value": onnx.AttributeProto.TENSOR,
    "value_float": onnx.AttributeProto.FLOAT,
    "value_int": onnx.AttributeProto.INT,
    "value_floats": onnx.AttributeProto.FLOATS,
    "value_ints": onnx.AttributeProto.INTS,
}


def _constant(attribute: str, value) -> onnx.ModelProto:
    """A model of one ``Constant`` node whose ``attribute`` is ``value``."""
    node = helper.make_node("Constant", [], ["y"])
    node.attribute.append(helper.make_attribute(attribute, value, attr_type=_ATTRIBUTE_TYPES[attribute]))
    graph = helper.make_graph([node], "constant", [], [onnx.ValueInfoProto(name="y")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)


SCALAR_CONSTANTS = {
    "value_float": (2.5, np.float32(2.5)),
    "value_int": (-3, np.int64(-3)),
    "value_floats": ([1.0, 0.5], np.asarray([1.0, 0.5], dtype=np.float32)),
    "value_ints": ([4, 5, 6], np.asarray([4, 5, 6], dtype=np.int64)),
    "value_ints_empty": ([], np.zeros(0, dtype=np.int64)),
}


@pytest.mark.parametrize(("value", "expected"), SCALAR_CONSTANTS.values(), ids=SCALAR_CONSTANTS)
def test_scalar_constants_become_value_tensors(request, value, expected):
    attribute = request.node.callspec.id.removesuffix("_empty")
    model = _constant(attribute, value)
    rewritten = tensor_constants(model)
    (written,) = rewritten.graph.node[0].attribute
    assert written.name == "value"
    tensor = onnx.numpy_helper.to_array(written.t)
    assert tensor.dtype == expected.dtype and tensor.shape == np.shape(expected)
    np.testing.assert_array_equal(tensor, expected)
    np.testing.assert_array_equal(run_reference(rewritten, {})["y"], run_reference(model, {})["y"])


def test_tensor_constants_keep_a_model_without_scalar_constants():
    model = _constant("value", onnx.numpy_helper.from_array(np.ones(2, dtype=np.float32)))
    assert tensor_constants(model) is model


def _network() -> onnx.ModelProto:
    """MatMul → RMSNormalization → CenterCropPad, and a HannWindow added to the last axis (opset 23)."""
    rng = np.random.default_rng(1)
    weights = {
        "w": rng.standard_normal((6, 8)).astype(np.float32),
        "scale": rng.standard_normal(8).astype(np.float32),
        "crop": np.asarray([2, 6], dtype=np.int64),
        "size": np.asarray(6, dtype=np.int64),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="/proj/MatMul"),
        helper.make_node("RMSNormalization", ["h", "scale"], ["n"], name="/norm/RMSNormalization", epsilon=1e-3),
        helper.make_node("CenterCropPad", ["n", "crop"], ["c"], name="/crop/CenterCropPad", axes=[1, 2]),
        helper.make_node("HannWindow", ["size"], ["window"], name="/window/HannWindow"),
        helper.make_node("Add", ["c", "window"], ["y"], name="/add/Add"),
    ]
    graph = helper.make_graph(
        nodes,
        "functions",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 3, 6))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 2, 6))],
        [onnx.numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


@pytest.mark.slow
@pytest.mark.parametrize("fold", [True, False], ids=["folded", "as_written"])
def test_a_network_of_function_ops_lowers_canonically_and_verifies(fold):
    from dcaccel.frontend.load import load
    from dcaccel.verification import verify

    workload = load(_network(), fold=fold)
    lowered = workload.lower()
    assert lowered.opaque == {}
    report = verify(workload, lowered)
    assert report.passed, report


@pytest.mark.slow
def test_flex_attention_lowers_canonically_and_verifies():
    from dcaccel.frontend.load import load
    from dcaccel.verification import verify

    workload = load(_flex_attention(), fold=False)
    lowered = workload.lower()
    assert lowered.opaque == {}
    report = verify(workload, lowered)
    assert report.passed, report


@pytest.mark.slow
def test_a_range_reading_a_folded_one_element_operand_reads_a_scalar():
    """``AffineGrid``'s body splits its ``size`` input into one-element tensors and ranges over them:
    onnxruntime takes those inside the function, the shape inference of DaCe's importer (and onnxruntime on the
    graph) only scalars."""
    from dcaccel.frontend.onnx_prepare import check_shapes, simplify_as_written

    constants = {"start": np.asarray(0, np.int64), "step": np.asarray(1, np.int64), "i": np.asarray([1], np.int64)}
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "i"], ["width"]),
        helper.make_node("Range", ["start", "width", "step"], ["steps"]),
        helper.make_node("Cast", ["steps"], ["positions"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "positions"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "range",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 5))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (2, 5))],
        [onnx.numpy_helper.from_array(value, name) for name, value in constants.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    prepared = simplify_as_written(model, "range")
    check_shapes(prepared, "range")
    (range_node,) = [node for node in prepared.graph.node if node.op_type == "Range"]
    values = {init.name: onnx.numpy_helper.to_array(init) for init in prepared.graph.initializer}
    assert values[range_node.input[1]].shape == ()
    assert values[range_node.input[1]] == 5
    feed = _feed({"x": (2, 5)})
    np.testing.assert_array_equal(run_reference(prepared, feed)["y"], feed["x"] + np.arange(5, dtype=np.float32))
