"""The inference graph as deployed (BatchNormalization folded into the Conv before it, constants folded) and
the switch that keeps it as written (``fold=False``: only the values that set shapes are computed).

The folding steps are checked on ONNX graphs against onnxruntime on the graph as written (no compilation);
the end-to-end cases (a built-in CNN, a Llama-style rotary embedding and a T5-style relative-position bucket
model built from ``transformers`` configs with random weights) lower, compile and verify: slow.
"""

import os
from collections import Counter

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from dcaccel.frontend import onnx_prepare
from dcaccel.frontend.load import load, resolve
from dcaccel.frontend.ops import nodes_by_op_type
from dcaccel.verification import verify

OPSET = 17
CHANNELS = 6


def _model(nodes, initializers, inputs, output_shape) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "folding",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, output_shape)],
        [numpy_helper.from_array(value.astype(np.float32), name) for name, value in initializers.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def _norm_parameters(rng, prefix: str) -> dict[str, np.ndarray]:
    """Scale, bias, mean and (positive) variance of a BatchNormalization over CHANNELS channels."""
    return {
        f"{prefix}_scale": rng.normal(size=CHANNELS),
        f"{prefix}_bias": rng.normal(size=CHANNELS),
        f"{prefix}_mean": rng.normal(size=CHANNELS),
        f"{prefix}_var": rng.uniform(0.2, 3.0, size=CHANNELS),
    }


def _norm(prefix: str, x: str, y: str, **attributes) -> onnx.NodeProto:
    inputs = [x, *(f"{prefix}_{p}" for p in ("scale", "bias", "mean", "var"))]
    return helper.make_node("BatchNormalization", inputs, [y], name=prefix, **attributes)


def conv_norm(bias: bool, groups: int, epsilon: float, empty_bias: bool = False) -> onnx.ModelProto:
    """``y = BN(Conv(x))`` on a 1x4x7x7 input, the Conv with or without bias (``empty_bias``: an input
    named ``""``, as some exporters write an absent one) and in ``groups`` groups."""
    rng = np.random.default_rng(groups + 2 * bias)
    weights = {"w": rng.normal(size=(CHANNELS, 4 // groups, 3, 3)), **_norm_parameters(rng, "bn")}
    conv_inputs = ["x", "w"]
    if bias:
        weights["b"] = rng.normal(size=CHANNELS)
        conv_inputs.append("b")
    elif empty_bias:
        conv_inputs.append("")
    nodes = [
        helper.make_node("Conv", conv_inputs, ["c"], name="conv", group=groups),
        _norm("bn", "c", "y", epsilon=epsilon),
    ]
    return _model(nodes, weights, [("x", [1, 4, 7, 7])], [1, CHANNELS, 5, 5])


def shared_weight() -> onnx.ModelProto:
    """Two Convs reading one weight, each followed by its own BatchNormalization, summed."""
    rng = np.random.default_rng(7)
    weights = {
        "w": rng.normal(size=(CHANNELS, 4, 1, 1)),
        **_norm_parameters(rng, "bn0"),
        **_norm_parameters(rng, "bn1"),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c0"], name="conv0"),
        helper.make_node("Conv", ["x", "w"], ["c1"], name="conv1"),
        _norm("bn0", "c0", "n0"),
        _norm("bn1", "c1", "n1"),
        helper.make_node("Add", ["n0", "n1"], ["y"], name="add"),
    ]
    return _model(nodes, weights, [("x", [1, 4, 5, 5])], [1, CHANNELS, 5, 5])


def _run(proto: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> np.ndarray:
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(["y"], inputs)[0]


def _op_types(proto: onnx.ModelProto) -> Counter:
    return Counter(node.op_type for node in proto.graph.node)


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(conv_norm(bias=False, groups=1, epsilon=1e-5), id="no-bias"),
        pytest.param(conv_norm(bias=False, groups=1, epsilon=1e-5, empty_bias=True), id="empty-bias-input"),
        pytest.param(conv_norm(bias=True, groups=1, epsilon=1e-3), id="bias"),
        pytest.param(conv_norm(bias=True, groups=2, epsilon=1e-5), id="grouped"),
        pytest.param(shared_weight(), id="shared-weight"),
    ],
)
def test_folded_batch_norm_computes_what_the_graph_as_written_does(model):
    shape = [dim.dim_value for dim in model.graph.input[0].type.tensor_type.shape.dim]
    inputs = {"x": np.random.default_rng(1).normal(size=shape).astype(np.float32)}
    folded = onnx_prepare.fold_batch_norms(model, "test")
    assert "BatchNormalization" not in _op_types(folded)
    assert _op_types(folded)["Conv"] == _op_types(model)["Conv"]
    np.testing.assert_allclose(_run(folded, inputs), _run(model, inputs), rtol=1e-5, atol=1e-5)
    assert {init.name for init in folded.graph.initializer} <= {init.name for init in model.graph.initializer} | {
        "w_folded"
    }


def test_a_weight_two_convs_read_is_not_overwritten():
    folded = onnx_prepare.fold_batch_norms(shared_weight(), "test")
    weights = {node.name: node.input[1] for node in folded.graph.node if node.op_type == "Conv"}
    assert weights["conv0"] != weights["conv1"]
    assert sorted(weights.values()) == ["w", "w_folded"]


def _unfoldable_cases():
    """Graphs whose BatchNormalization must stay as written, and the reason the fold logs."""
    rng = np.random.default_rng(3)
    weights = {"w": rng.normal(size=(CHANNELS, 4, 1, 1)), **_norm_parameters(rng, "bn")}
    conv = helper.make_node("Conv", ["x", "w"], ["c"], name="conv")
    shape = [("x", [1, 4, 5, 5])]
    out = [1, CHANNELS, 5, 5]
    read_twice = _model(
        [conv, _norm("bn", "c", "n"), helper.make_node("Add", ["n", "c"], ["y"], name="add")], weights, shape, out
    )
    after_relu = _model(
        [conv, helper.make_node("Relu", ["c"], ["r"], name="relu"), _norm("bn", "r", "y")], weights, shape, out
    )
    variable = {key: value for key, value in weights.items() if key != "bn_mean"}
    mean_input = _model([conv, _norm("bn", "c", "y")], variable, [*shape, ("bn_mean", [CHANNELS])], out)
    return [
        pytest.param(
            read_twice, "the output 'c' of Conv 'conv' is read by another node too", id="conv-output-read-twice"
        ),
        pytest.param(after_relu, "its input is not written by a Conv", id="after-relu"),
        pytest.param(mean_input, "'bn_mean' is not a constant", id="mean-is-an-input"),
    ]


@pytest.mark.parametrize(("model", "reason"), _unfoldable_cases())
def test_a_batch_norm_that_cannot_be_folded_stays_as_written(model, reason, caplog):
    with caplog.at_level("DEBUG", logger=onnx_prepare.logger.name):
        folded = onnx_prepare.fold_batch_norms(model, "test")
    assert folded.graph.node == model.graph.node
    assert f"BatchNormalization 'bn' stays as written: {reason}" in caplog.text


def positions() -> onnx.ModelProto:
    """A rotary-style position table added to ``x`` (1x4x8): ``Range`` over the sequence length (from
    ``Shape``), times inverse frequencies, ``Sin`` and ``Cos`` concatenated; then a ``Reshape`` to
    ``[batch, -1]`` whose shape is computed from ``Shape`` too."""
    inverse = np.array([[1.0, 0.5, 0.25, 0.125]])
    constants = {
        "one": np.array(1, dtype=np.int64),
        "zero": np.array(0, dtype=np.int64),
        "minus_one": np.array([-1], dtype=np.int64),
        "first": np.array([0], dtype=np.int64),
        "axes": np.array([1], dtype=np.int64),
    }
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "one"], ["length"], name="length"),
        helper.make_node("Range", ["zero", "length", "one"], ["index"], name="range"),
        helper.make_node("Cast", ["index"], ["position"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["position", "axes"], ["column"], name="column"),
        helper.make_node("Mul", ["column", "inverse"], ["angle"], name="angle"),
        helper.make_node("Sin", ["angle"], ["sin"], name="sin"),
        helper.make_node("Cos", ["angle"], ["cos"], name="cos"),
        helper.make_node("Concat", ["sin", "cos"], ["table"], name="table", axis=-1),
        helper.make_node("Add", ["x", "table"], ["sum"], name="add"),
        helper.make_node("Gather", ["shape", "first"], ["batch"], name="batch"),
        helper.make_node("Concat", ["batch", "minus_one"], ["flat"], name="flat", axis=0),
        helper.make_node("Reshape", ["sum", "flat"], ["y"], name="reshape"),
    ]
    graph = helper.make_graph(
        nodes,
        "positions",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])],
        [numpy_helper.from_array(inverse.astype(np.float32), "inverse")]
        + [numpy_helper.from_array(value, name) for name, value in constants.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


@pytest.mark.parametrize(
    ("prepare", "ops"),
    [
        pytest.param(onnx_prepare.simplify, {"Add": 1, "Reshape": 1}, id="folded"),
        pytest.param(
            onnx_prepare.simplify_as_written,
            {"Range": 1, "Cast": 1, "Unsqueeze": 1, "Mul": 1, "Sin": 1, "Cos": 1, "Concat": 1, "Add": 1, "Reshape": 1},
            id="as-written",
        ),
    ],
)
def test_position_arithmetic_is_folded_or_kept_and_shape_operands_are_computed(prepare, ops):
    model = positions()
    prepared = prepare(model, "test")
    assert _op_types(prepared) == Counter(ops)
    initializers = {init.name: numpy_helper.to_array(init) for init in prepared.graph.initializer}
    reshape = next(node for node in prepared.graph.node if node.op_type == "Reshape")
    assert initializers[reshape.input[1]].tolist() == [1, -1]  # the Reshape's shape, computed from Shape in both
    inputs = {"x": np.random.default_rng(2).normal(size=(1, 4, 8)).astype(np.float32)}
    np.testing.assert_allclose(_run(prepared, inputs), _run(model, inputs), rtol=1e-6, atol=1e-6)


def test_a_shape_operand_that_depends_on_data_is_left_computed():
    """``Reshape(x, Cast(Abs(s)))`` with ``s`` an input: its shape is data, not folded (nothing computes it)."""
    nodes = [
        helper.make_node("Abs", ["s"], ["a"], name="abs"),
        helper.make_node("Reshape", ["x", "a"], ["y"], name="reshape"),
    ]
    graph = helper.make_graph(
        nodes,
        "data_shape",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    assert _op_types(onnx_prepare.simplify_as_written(model, "test")) == Counter({"Abs": 1, "Reshape": 1})


# End to end: import, lower, compile, verify against onnxruntime on the model as written.


@pytest.fixture(scope="module")
def block_workloads():
    """The built-in MobileNetV2 block (three Conv + BatchNormalization pairs), small, folded and as written."""
    sizes = {"channels": 8, "image": 7}
    return {fold: resolve("mobilenetv2-block", symbols=sizes, fold=fold) for fold in (True, False)}


@pytest.mark.slow
@pytest.mark.parametrize("fold", [True, False])
def test_builtin_cnn_folded_or_as_written_verifies_against_the_model_as_written(block_workloads, fold):
    workload = block_workloads[fold]
    ops = {op: len(names) for op, names in nodes_by_op_type(workload.sdfg).items()}
    assert ops == (
        {"Conv": 3, "Clip": 2, "Add": 1} if fold else {"Conv": 3, "BatchNormalization": 3, "Clip": 2, "Add": 1}
    )
    assert _op_types(workload.onnx_model)["BatchNormalization"] == 3  # verify's reference is the model as written
    report = verify(workload, workload.lower({}))
    assert report.reference == "onnxruntime"
    assert all(check.passed for check in report.outputs), report.outputs


def _llama():
    from transformers import LlamaConfig, LlamaModel

    from tests.models.corpus import TINY_TEXT_TRANSFORMER

    config = LlamaConfig(**{**TINY_TEXT_TRANSFORMER, "num_hidden_layers": 1}, num_key_value_heads=2, use_cache=False)
    return LlamaModel(config)


def _t5():
    from transformers import T5Config, T5EncoderModel

    from tests.models.corpus import TINY_T5

    config = T5Config(**{**TINY_T5, "num_layers": 1})
    return T5EncoderModel(config)


#: Position models: the builder, and the op types their position arithmetic is made of.
POSITION_MODELS = {"llama-rotary": (_llama, {"Sin", "Cos"}), "t5-buckets": (_t5, {"Abs", "Log", "Less", "Min"})}


@pytest.fixture(scope="module")
def position_workloads():
    """Each position model imported as written and folded (random weights, no download)."""
    from tests.models.corpus import TOKENS, VOCABULARY, SingleOutput

    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch

    built = {}
    for name, (factory, _) in POSITION_MODELS.items():
        torch.manual_seed(0)
        module = SingleOutput(factory().eval(), "last_hidden_state", attention_mask=True)
        tokens = torch.randint(0, VOCABULARY, (1, TOKENS), generator=torch.Generator().manual_seed(0))
        built[name] = {fold: load(module, (tokens,), name=name, fold=fold) for fold in (True, False)}
    return built


@pytest.mark.slow
@pytest.mark.parametrize("name", list(POSITION_MODELS))
def test_position_arithmetic_kept_as_written_lowers_and_verifies(position_workloads, name):
    position_ops = POSITION_MODELS[name][1]
    folded, written = position_workloads[name][True], position_workloads[name][False]
    assert not position_ops & set(nodes_by_op_type(folded.sdfg))
    assert position_ops <= set(nodes_by_op_type(written.sdfg))
    lowered = written.lower({})
    assert lowered.opaque == {}
    from tests.models.corpus import TOKENS, VOCABULARY

    tokens = np.random.default_rng(0).integers(0, VOCABULARY, (1, TOKENS))
    report = verify(written, lowered, inputs={written.inputs[0].name: tokens})
    assert all(check.passed for check in report.outputs), report.outputs
