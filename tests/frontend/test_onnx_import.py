"""Import of ONNX models and files: specs, weights, dynamic dimensions and bad input (no compilation)."""

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import dcaccel
from dcaccel.errors import DcaccelError, ShapeError, UnsupportedOpError
from dcaccel.frontend import Origin
from dcaccel.frontend.onnx_import import readable_node_names
from dcaccel.frontend.onnx_prepare import MIN_OPSET, check_shapes, without_inference_noops
from dcaccel.frontend.ops import operators


def _matmul_add(rows, inner, cols) -> onnx.ModelProto:
    """y = x · W + b with x of shape (rows, inner); ``rows`` may be a dim_param string."""
    rng = np.random.default_rng(1)
    weight = numpy_helper.from_array(rng.standard_normal((inner, cols)).astype(np.float32), "W")
    bias = numpy_helper.from_array(rng.standard_normal(cols).astype(np.float32), "b")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, inner])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, cols])
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"], name="matmul"),
        helper.make_node("Add", ["xw", "b"], ["y"], name="add"),
    ]
    graph = helper.make_graph(nodes, "affine", [x], [y], initializer=[weight, bias])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _single_op(op_type: str, opset: int = 18, domain: str = "") -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    node = helper.make_node(op_type, ["x"], ["y"], name="n0", domain=domain)
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=opsets)


@pytest.mark.parametrize(("rows", "inner", "cols"), [(4, 3, 2), (1, 1, 1), (2, 5, 1)])
@pytest.mark.parametrize("from_file", [False, True])
def test_specs_and_weights(rows, inner, cols, from_file, tmp_path):
    proto = _matmul_add(rows, inner, cols)
    model = proto
    if from_file:
        model = tmp_path / "affine.onnx"
        onnx.save(proto, model)
    workload = dcaccel.load(model)
    assert workload.origin is Origin.ONNX
    assert workload.name == "affine"
    assert [(s.name, s.shape, s.dtype) for s in workload.inputs] == [("x", (rows, inner), np.float32)]
    assert [(s.name, s.shape, s.container) for s in workload.outputs] == [("y", (rows, cols), "__return")]
    initializers = {init.name: numpy_helper.to_array(init) for init in proto.graph.initializer}
    assert set(workload.weights) == {"W", "b"}
    for name, value in initializers.items():
        np.testing.assert_array_equal(workload.weights[name], value)
        assert workload.weights[name].flags.owndata
    assert [n.op_type for n in workload.onnx_model.graph.node] == ["MatMul", "Add"]


@pytest.mark.parametrize("batch", [1, 3])
def test_dynamic_dimension_from_symbols(batch):
    workload = dcaccel.load(_matmul_add("batch", 3, 2), symbols={"batch": batch})
    assert workload.inputs[0].shape == (batch, 3)
    assert workload.outputs[0].shape == (batch, 2)
    assert workload.symbols == {"batch": batch}
    assert workload.sdfg.free_symbols == set()


def test_dynamic_dimension_from_example_inputs():
    workload = dcaccel.load(_matmul_add("batch", 3, 2), [np.zeros((5, 3), np.float32)])
    assert workload.inputs[0].shape == (5, 3)
    assert workload.symbols == {"batch": 5}


def test_dynamic_dimension_without_value():
    with pytest.raises(DcaccelError, match=r"^tensor 'x': dimension 'batch' has no value"):
        dcaccel.load(_matmul_add("batch", 3, 2))


@pytest.mark.parametrize("shape", [(4, 2), (4, 3, 1), (3,)])
def test_wrong_example_input_shape(shape):
    with pytest.raises(ShapeError, match=r"^tensor 'x': expected shape \(4, 3\), got"):
        dcaccel.load(_matmul_add(4, 3, 2), {"x": np.zeros(shape, np.float32)})


@pytest.mark.parametrize(
    ("op_type", "domain", "shown"),
    [("StringNormalizer", "", "StringNormalizer"), ("Frobnicate", "com.example", "com.example.Frobnicate")],
)
def test_unsupported_op(op_type, domain, shown):
    with pytest.raises(UnsupportedOpError) as error:
        dcaccel.load(_single_op(op_type, domain=domain))
    assert str(error.value) == f"unsupported op {shown} (node 'n0'): DaCe's ONNX importer has no node for it"
    assert (error.value.op_type, error.value.node_name) == (shown, "n0")


def test_control_flow_is_rewritten_before_the_ops_are_checked():
    """An If (DaCe's importer has no node for it) on a computed condition loads as both branches and a select."""
    then_branch = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["t"])], "then", [], [_value("t", [4])])
    else_branch = onnx.helper.make_graph([onnx.helper.make_node("Neg", ["x"], ["e"])], "else", [], [_value("e", [4])])
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            onnx.helper.make_node("Greater", ["s", "zero"], ["c"]),
            onnx.helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch),
        ],
        "choose",
        [_value("x", [4])],
        [_value("y", [4])],
        [onnx.numpy_helper.from_array(np.array(0, np.float32), "zero")],
    )
    workload = dcaccel.load(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]))
    op_types = {node.op_type for node in workload.onnx_model.graph.node}
    assert "If" not in op_types
    assert {"Relu", "Neg", "Where"} <= op_types


@pytest.mark.parametrize("after", [[], ["Relu"]], ids=["output", "read-by-relu"])
def test_an_output_shaped_by_a_constant_input_has_its_size(after):
    """OneHot's output length is its constant depth (a scalar, as torch exports it), whether or not lowering
    registered its implementations, and so is the length of what is computed from it (onnxruntime's inference left
    the Relu's output a symbol)."""
    names = ["one_hot", *(op.lower() for op in after)]
    nodes = [onnx.helper.make_node("OneHot", ["i", "depth", "values"], [names[0]])]
    nodes += [onnx.helper.make_node(op, [names[k]], [names[k + 1]]) for k, op in enumerate(after)]
    graph = onnx.helper.make_graph(
        nodes,
        "one_hot",
        [onnx.helper.make_tensor_value_info("i", onnx.TensorProto.INT64, [3])],
        [_value(names[-1], [3, "k"])],
        [
            onnx.numpy_helper.from_array(np.array(5, np.int64), "depth"),
            onnx.numpy_helper.from_array(np.array([0, 1], np.float32), "values"),
        ],
    )
    workload = dcaccel.load(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)]))
    assert workload.outputs[0].shape == (3, 5)


def _value(name: str, shape: list) -> onnx.ValueInfoProto:
    return onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape)


def test_missing_file(tmp_path):
    with pytest.raises(DcaccelError, match=r"^file '.*missing\.onnx' not found$"):
        dcaccel.load(tmp_path / "missing.onnx")


@pytest.mark.parametrize("content", [b"not a model at all\n", b""])
def test_not_an_onnx_model(tmp_path, content):
    path = tmp_path / "model.onnx"
    path.write_bytes(content)
    with pytest.raises(DcaccelError, match=r"model\.onnx'? is not (an|a valid) ONNX model"):
        dcaccel.load(path)


def test_operators_are_not_fused():
    """onnx-simplifier's fusions (MatMul + Add into Gemm) are off: the ops stay as written."""
    workload = dcaccel.load(_matmul_add(4, 3, 2))
    assert [op.op_type for op in operators(workload.sdfg)] == ["MatMul", "Add"]


def _relu_chain(names: list[str]) -> onnx.ModelProto:
    """A chain of Relu nodes with the given node names."""
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=name) for i, name in enumerate(names)]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(f"t{len(names)}", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph)


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["/conv1/Relu"], ["conv1"]),
        (["/layer1/layer1.0/conv1/Relu", "/layer1/layer1.0/Relu"], ["layer1_0_conv1", "layer1_0_Relu"]),
        (["/attn/Relu", "/attn/Relu_1"], ["attn_Relu", "attn_Relu_1"]),
        (["/Relu", "/Relu_1"], ["Relu_0", "Relu_1"]),
        (["", ""], ["Relu_0", "Relu_1"]),
        (["/a/Relu", "a"], ["a", "a_1"]),
    ],
)
def test_nodes_are_named_after_their_module(names, expected):
    assert [node.name for node in readable_node_names(_relu_chain(names)).graph.node] == expected


def _gemm(inner: int = 8, declared: tuple = (1, 4)) -> onnx.ModelProto:
    """y = x · Wᵀ + b: x of shape (1, inner), W of shape 4×8 (so ``inner`` must be 8), y declared ``declared``."""
    weight = numpy_helper.from_array(np.ones((4, 8), np.float32), "W")
    bias = numpy_helper.from_array(np.ones(4, np.float32), "b")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, inner])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(declared))
    node = helper.make_node("Gemm", ["x", "W", "b"], ["y"], name="fc", transB=1)
    graph = helper.make_graph([node], "dense", [x], [y], initializer=[weight, bias])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _dangling(model: onnx.ModelProto) -> None:
    model.graph.node[0].input[0] = "nowhere"


def _unknown_attribute(model: onnx.ModelProto) -> None:
    model.graph.node[0].attribute.append(helper.make_attribute("alpha2", 1.0))


def _integer_input(model: onnx.ModelProto) -> None:
    model.graph.input[0].type.tensor_type.elem_type = TensorProto.INT64


def _one_input(model: onnx.ModelProto) -> None:
    del model.graph.node[0].input[1:]


def _no_nodes(model: onnx.ModelProto) -> None:
    del model.graph.node[:]


@pytest.mark.parametrize(
    ("model", "mutate", "message"),
    [
        (_gemm(inner=7), None, "node 'fc' (Gemm): Dimension mismatch in unification between 8 and 7"),
        (
            _gemm(declared=(1, 5)),
            None,
            "node 'fc' (Gemm): Inferred shape and existing shape differ in dimension 1: (4) vs (5)",
        ),
        (_gemm(), _unknown_attribute, "node 'fc' (Gemm): Unrecognized attribute: alpha2 for operator Gemm"),
        (_gemm(), _integer_input, "node 'fc' (Gemm): B has inconsistent type tensor(float)"),
        (
            _gemm(),
            _one_input,
            "node 'fc' (Gemm): Node(fc) with schema(::Gemm:13) has input size 1 not in range [min=2, max=3].",
        ),
        (
            _gemm(),
            _dangling,
            "Nodes in a graph must be topologically sorted, however input 'nowhere' of node: name: fc OpType: Gemm "
            "is not output of any previous nodes.",
        ),
    ],
)
def test_inconsistent_model(model, mutate, message):
    if mutate is not None:
        mutate(model)
    with pytest.raises(DcaccelError) as error:
        dcaccel.load(model)
    assert str(error.value) == f"ONNX model 'dense' is not a valid ONNX model: {message}"


def test_dimension_values_must_fit_the_model():
    model = _gemm()
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "features"
    assert dcaccel.load(model, symbols={"features": 8}).inputs[0].shape == (1, 8)
    with pytest.raises(DcaccelError, match=r"^ONNX model 'dense' is not a valid ONNX model: node 'fc' \(Gemm\): Dim"):
        dcaccel.load(model, symbols={"features": 7})


def test_graph_without_nodes():
    model = _gemm()
    _no_nodes(model)
    with pytest.raises(DcaccelError, match=r"^ONNX model 'dense' has no operators \(its graph has no nodes\)$"):
        dcaccel.load(model)


def test_model_without_graph():
    with pytest.raises(DcaccelError, match=r"^ONNX model '' is not an ONNX model: it has no graph$"):
        dcaccel.load(onnx.ModelProto())


def test_a_task_dag_is_not_a_model(tmp_path):
    path = tmp_path / "dag.json"
    path.write_text('{"name": "conv-seed", "nodes": [], "edges": []}')
    with pytest.raises(DcaccelError) as error:
        dcaccel.load(path)
    assert str(error.value).startswith(f"'{path}' is not an ONNX model: Message type \"onnx.ModelProto\" has no field")


def _old_dense(opset: int) -> onnx.ModelProto:
    """y = Relu(Dropout(x · Wᵀ + b)) as old exporters wrote it: IR version 3, weights also graph inputs,
    Gemm with ``broadcast`` and Dropout with ``is_test`` (attributes of opsets before 7)."""
    weight = numpy_helper.from_array(np.arange(32, dtype=np.float32).reshape(4, 8) / 32, "W")
    bias = numpy_helper.from_array(np.ones(4, np.float32), "b")
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8]),
        helper.make_tensor_value_info("W", TensorProto.FLOAT, [4, 8]),
        helper.make_tensor_value_info("b", TensorProto.FLOAT, [4]),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "W", "b"], ["t"], name="fc", transB=1, broadcast=1),
        helper.make_node("Dropout", ["t"], ["u"], name="drop", is_test=1, ratio=0.5),
        helper.make_node("Relu", ["u"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes, "old", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [weight, bias]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=3)


@pytest.mark.parametrize("opset", [1, 3, 6])
def test_old_opsets_are_converted(opset):
    """Before opset 7 onnxruntime's symbolic shape inference, which DaCe's importer runs, refuses a model."""
    workload = dcaccel.load(_old_dense(opset))
    assert [(op.op_type, op.inputs) for op in operators(workload.sdfg)] == [
        ("Gemm", ((1, 8), (4, 8), (4,))),
        ("Relu", ((1, 4),)),
    ]
    assert [entry.version for entry in workload.onnx_model.opset_import] == [MIN_OPSET]
    assert [spec.name for spec in workload.inputs] == ["x"]
    assert set(workload.weights) == {"W", "b"}


def test_a_failed_conversion_is_one_line():
    model = _old_dense(6)
    model.graph.node.append(helper.make_node("Upsample", ["y"], ["z"], name="up", scales=[1.0, 1.0]))
    model.graph.output[0].name = "z"
    with pytest.raises(DcaccelError) as error:
        dcaccel.load(model)
    assert str(error.value) == (
        "cannot convert ONNX model 'old' from opset 6 to 7: "
        "Upsample in opset 1 needs to have width_scale and height_scale attributes"
    )


@pytest.mark.parametrize("with_default_domain", [False, True])
def test_default_domain_spelled_ai_onnx(with_default_domain):
    """DaCe's importer looks for the opset of the domain "" only (it failed: not enough values to unpack)."""
    model = _gemm()
    model.graph.node[0].domain = "ai.onnx"
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("ai.onnx", 18))
    if with_default_domain:
        model.opset_import.append(helper.make_opsetid("", 13))
    workload = dcaccel.load(model)
    assert [op.op_type for op in operators(workload.sdfg)] == ["Gemm"]
    assert [(entry.domain, entry.version) for entry in workload.onnx_model.opset_import] == [("", 18)]


def test_no_default_domain():
    model = _gemm()
    del model.opset_import[:]
    with pytest.raises(DcaccelError) as error:
        dcaccel.load(model)
    assert str(error.value) == (
        "ONNX model 'dense' does not import the default ONNX domain (its opset_import names no version)"
    )


def _dropout(opset: int, *, training: bool | None = None, mask_used: bool = False) -> onnx.ModelProto:
    """y = Relu(Dropout(x)) at ``opset``; ``training`` is the constant training_mode input (opset 12 on),
    ``mask_used`` makes the mask a graph output."""
    inputs, initializers = ["x"], []
    if opset >= 12:
        initializers.append(numpy_helper.from_array(np.array(0.5, np.float32), "ratio"))
        inputs.append("ratio")
        if training is not None:
            initializers.append(numpy_helper.from_array(np.array(training), "training"))
            inputs.append("training")
    attributes = {"ratio": 0.5} if opset < 12 else {}
    outputs = ["d", "mask"] if mask_used else ["d"]
    nodes = [
        helper.make_node("Dropout", inputs, outputs, name="drop", **attributes),
        helper.make_node("Relu", ["d"], ["y"], name="relu"),
    ]
    graph_outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])]
    if mask_used:
        mask_type = TensorProto.BOOL if opset >= 10 else TensorProto.FLOAT
        graph_outputs.append(helper.make_tensor_value_info("mask", mask_type, [2, 3]))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph(nodes, "drop", [x], graph_outputs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize(
    ("model", "ops"),
    [
        (_dropout(9), ["Relu"]),
        (_dropout(11), ["Relu"]),
        (_dropout(13), ["Relu"]),
        (_dropout(13, training=False), ["Relu"]),
        (_dropout(13, training=True), ["Dropout", "Relu"]),
        (_dropout(9, mask_used=True), ["Dropout", "Relu"]),
        (_dropout(13, mask_used=True), ["Dropout", "Relu"]),
    ],
)
def test_inference_dropout_is_removed(model, ops):
    """A Dropout is removed where it is the identity at inference and nothing reads its mask."""
    assert [node.op_type for node in without_inference_noops(model, "drop").graph.node] == ops


@pytest.mark.parametrize("output_of_identity", [False, True])
def test_identity_is_removed(output_of_identity):
    """An Identity goes; when its output is a graph output, the tensor before it takes the output's name."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Identity", ["r"], ["i"])]
    if not output_of_identity:
        nodes.append(helper.make_node("Neg", ["i"], ["y"], name="neg"))
    output = "i" if output_of_identity else "y"
    graph = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info(output, TensorProto.FLOAT, [2])])
    workload = dcaccel.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    assert [op.op_type for op in operators(workload.sdfg)] == ["Relu"] + ([] if output_of_identity else ["Neg"])
    assert [spec.name for spec in workload.outputs] == [output]


def test_a_tensor_without_a_shape_is_one_line():
    """DaCe's importer makes a container of every tensor: one without a tensor type is named with its node."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    nodes = [
        helper.make_node("SequenceConstruct", ["x", "x"], ["pair"], name="pack"),
        helper.make_node("ConcatFromSequence", ["pair"], ["y"], name="join", axis=0),
    ]
    graph = helper.make_graph(nodes, "seq", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])])
    with pytest.raises(DcaccelError) as error:
        check_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), "'seq.onnx'")
    assert str(error.value) == (
        "'seq.onnx': node 'pack' (SequenceConstruct): the element type or shape of tensor 'pair' cannot be inferred"
    )


@pytest.mark.parametrize("fails", [False, True])
def test_nothing_is_left_in_the_working_directory(fails, tmp_path, monkeypatch):
    """onnxruntime's shape inference saves ``sym_shape_infer_temp.onnx`` (and external data) into the working
    directory when it cannot infer every shape: the import runs in a scratch directory, removed afterwards.
    DaCe's importer runs dcaccel's inference (:func:`dcaccel.frontend.shapes.infer_onnx_shapes`), which runs
    onnxruntime's: that is the one replaced."""
    from dcaccel.frontend import shapes

    infer = shapes._dace_inference()
    written = []

    def writes_a_file(model, auto_merge=False):
        onnx.save(model, "sym_shape_infer_temp.onnx", save_as_external_data=True, size_threshold=0)
        written.extend(os.listdir("."))
        if fails:
            raise RuntimeError("Incomplete symbolic shape inference")
        return infer(model, auto_merge)

    monkeypatch.setattr(shapes, "_dace_inference", lambda: writes_a_file)
    monkeypatch.chdir(tmp_path)
    if fails:
        with pytest.raises(DcaccelError, match=r"^cannot infer the shapes of ONNX model 'affine': Incomplete symbolic"):
            dcaccel.load(_matmul_add(4, 3, 2))
    else:
        dcaccel.load(_matmul_add(4, 3, 2))
    assert "sym_shape_infer_temp.onnx" in written and len(written) >= 2  # the model and its external data
    assert list(tmp_path.iterdir()) == []


def test_a_weight_written_as_identity_of_another_stays_a_weight():
    """PyTorch's exporter writes a parameter equal to another as Identity of it: it is folded into a weight
    of its own (under its own name) before the Identity nodes go."""
    ones = numpy_helper.from_array(np.ones(3, np.float32), "norm1.weight")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    nodes = [
        helper.make_node("Identity", ["norm1.weight"], ["norm2.weight"], name="share"),
        helper.make_node("Mul", ["x", "norm1.weight"], ["a"], name="scale1"),
        helper.make_node("Mul", ["a", "norm2.weight"], ["y"], name="scale2"),
    ]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph(nodes, "shared", [x], [y], initializer=[ones])
    workload = dcaccel.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    assert [op.op_type for op in operators(workload.sdfg)] == ["Mul", "Mul"]
    assert sorted(workload.weights) == ["norm1DOTweight", "norm2DOTweight"]
    assert workload.parameter_count == 6
