"""ONNX Conv lowered as im2col + MMM (mv, op, lmv) and as a direct convolution.

Structure tests lower single-node models (cheap, no compile). The numerical test builds ONE ONNX
model holding every configuration once per implementation (nodes chosen by name), compiles it once
and compares every output with onnxruntime.
"""

import dace
import numpy as np
import onnx
import onnxruntime
import pytest
from dace.ml import ONNXModel
from onnx import TensorProto, helper, numpy_helper

from dcaccel.buffers import BufferReason, buffer_reason
from dcaccel.expansions.conv import ConvGeometry, build_im2col_sdfg, im2col_marks
from dcaccel.transforms.checks import assert_fully_lowered
from dcaccel.transforms.lower import lower

IM2COL = ("mv", "op", "lmv")
IMPLEMENTATIONS = (*IM2COL, "direct")
OPSET = 17


def _value(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def _output_shape(x_shape, w_shape, attributes) -> tuple:
    """The Conv output shape by the ONNX formula (explicit pads, or auto_pad SAME_*)."""
    spatial = len(x_shape) - 2
    strides = attributes.get("strides", [1] * spatial)
    dilations = attributes.get("dilations", [1] * spatial)
    pads = attributes.get("pads", [0] * 2 * spatial)
    out = []
    for d in range(spatial):
        if attributes.get("auto_pad", "NOTSET").startswith("SAME"):
            out.append(-(-x_shape[2 + d] // strides[d]))
            continue
        extent = x_shape[2 + d] + pads[d] + pads[spatial + d] - dilations[d] * (w_shape[2 + d] - 1) - 1
        out.append(extent // strides[d] + 1)
    return (x_shape[0], w_shape[0], *out)


def conv_model(configs: dict[str, tuple], implementations=IMPLEMENTATIONS, seed: int = 0):
    """An ONNX model with one Conv node per (configuration, implementation), named ``conv_<config>_<impl>``.

    A configuration is (X shape, W shape, has bias, attributes); the nodes of one configuration share
    its input ``x_<config>`` and its weights. Returns the model and the choices selecting each node's
    implementation.
    """
    rng = np.random.default_rng(seed)
    nodes, inputs, outputs, initializers, choices = [], [], [], [], {}
    for name, (x_shape, w_shape, has_bias, attributes) in configs.items():
        inputs.append(_value(f"x_{name}", x_shape))
        operands = [f"x_{name}", f"w_{name}"]
        initializers.append(numpy_helper.from_array(rng.standard_normal(w_shape).astype(np.float32), f"w_{name}"))
        if has_bias:
            operands.append(f"b_{name}")
            initializers.append(
                numpy_helper.from_array(rng.standard_normal(w_shape[0]).astype(np.float32), f"b_{name}")
            )
        for implementation in implementations:
            node = f"conv_{name}_{implementation}"
            outputs.append(_value(f"y_{name}_{implementation}", _output_shape(x_shape, w_shape, attributes)))
            nodes.append(helper.make_node("Conv", operands, [f"y_{name}_{implementation}"], name=node, **attributes))
            choices[node] = implementation
    graph = helper.make_graph(nodes, "convs", inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=9)
    onnx.checker.check_model(model, full_check=True)
    return model, choices


SEED = {"seed": ((1, 1, 28, 28), (6, 1, 5, 5), True, {"kernel_shape": [5, 5]})}

CONFIGS = {
    **SEED,
    "pads": ((1, 2, 6, 5), (3, 2, 3, 3), True, {"pads": [1, 2, 0, 1]}),
    "strides": ((1, 3, 7, 8), (4, 3, 3, 3), True, {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "dilations": ((1, 2, 7, 7), (3, 2, 3, 3), False, {"dilations": [2, 2]}),
    "groups": ((1, 4, 5, 5), (6, 2, 3, 3), True, {"group": 2, "pads": [1, 1, 1, 1]}),
    "depthwise": ((1, 3, 6, 6), (3, 1, 3, 3), True, {"group": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "batch": ((2, 2, 5, 5), (3, 2, 3, 3), False, {}),
    "pointwise": ((1, 3, 4, 4), (5, 3, 1, 1), True, {}),
    "stride_over_kernel": ((1, 1, 8, 8), (2, 1, 2, 2), True, {"strides": [3, 3]}),
    "conv1d": ((1, 2, 10), (3, 2, 3), True, {"pads": [1, 2]}),
    "same_upper": ((1, 1, 7, 7), (2, 1, 3, 3), False, {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "single_output": ((1, 2, 3, 3), (1, 2, 3, 3), True, {}),
}


def _lower_single(config: str, implementation: str):
    model, choices = conv_model({config: CONFIGS[config]}, implementations=(implementation,))
    return lower(ONNXModel(f"conv_{config}_{implementation}", model).sdfg, choices)


def _state(sdfg: dace.SDFG) -> dace.SDFGState:
    (state,) = sdfg.states()
    return state


def _top_level_maps(state: dace.SDFGState) -> list[dace.nodes.MapEntry]:
    return [n for n in state.nodes() if isinstance(n, dace.nodes.MapEntry) and state.entry_node(n) is None]


def _is_task_map(state, entry) -> bool:
    return any(isinstance(n, dace.nodes.MapEntry) for n in state.scope_children()[entry])


# Contract 3: which im2col containers are buffers in each shape, and why.
SEED_MARKS = {
    "mv": {"W_col": BufferReason.WEIGHTS, "X_col": None, "Y_col": None, "Y_col_bias": BufferReason.LAYER_OUTPUT},
    "op": {
        "W_col": BufferReason.WEIGHTS,
        "X_col": None,
        "Y_col": BufferReason.REORDER,
        "Y_col_bias": BufferReason.LAYER_OUTPUT,
    },
    "lmv": {
        "W_col": BufferReason.WEIGHTS,
        "X_col": BufferReason.REORDER,
        "Y_col": BufferReason.REORDER,
        "Y_col_bias": BufferReason.LAYER_OUTPUT,
    },
}
SEED_TASK_MAPS = {"mv": ("MV", 576), "op": ("OP", 25), "lmv": ("LMV", 6)}
SEED_SINGLE_TASKS = {
    "mv": ["Xr", "Wr", "BcastA", "Gather", "AddBias", "ReshapeOut"],
    "op": ["Xr", "Wr", "Reduce", "AddBias", "ReshapeOut"],
    "lmv": ["Xr", "Wr", "BcastB", "Gather", "AddBias", "ReshapeOut"],
}


@pytest.mark.parametrize("implementation", IM2COL)
def test_seed_buffer_marks_follow_the_mmm_orders(implementation):
    lowered = _lower_single("seed", implementation)
    marks = {name: buffer_reason(desc) for name, desc in lowered.sdfg.arrays.items() if name in SEED_MARKS["mv"]}
    assert marks == SEED_MARKS[implementation]
    assert im2col_marks(implementation, has_bias=True) == SEED_MARKS[implementation]


@pytest.mark.parametrize("implementation", IM2COL)
def test_seed_structure(implementation):
    lowered = _lower_single("seed", implementation)
    assert_fully_lowered(lowered.sdfg)
    state = _state(lowered.sdfg)
    maps = _top_level_maps(state)
    task_maps = [(e.map.label, e.map.range.num_elements()) for e in maps if _is_task_map(state, e)]
    assert task_maps == [SEED_TASK_MAPS[implementation]]
    assert sorted(e.map.label for e in maps if not _is_task_map(state, e)) == sorted(SEED_SINGLE_TASKS[implementation])
    volumes = {
        (e.src.data, e.dst.map.label): e.data.volume
        for e in state.edges()
        if isinstance(e.src, dace.nodes.AccessNode) and isinstance(e.dst, dace.nodes.MapEntry)
    }
    # the seed table's volumes: X → Xr 14,400 (K·M), W → Wr 150, B → AddBias 3,456 (N·M)
    assert volumes[("x_seed", "Xr")] == 14400
    assert volumes[("w_seed", "Wr")] == 150
    assert volumes[("b_seed", "AddBias")] == 3456
    assert volumes[("Y_col_bias", "ReshapeOut")] == 3456


def test_direct_is_one_conv_task_then_a_bias_task():
    lowered = _lower_single("seed", "direct")
    state = _state(lowered.sdfg)
    conv, bias = _top_level_maps(state)
    assert (conv.map.label, bias.map.label) == ("Conv", "AddBias")
    assert not _is_task_map(state, conv) and conv.map.range.num_elements() == 6 * 24 * 24
    assert {e.data.data: e.data.volume for e in state.in_edges(conv)} == {"x_seed": 3456 * 25, "w_seed": 3456 * 25}
    assert sorted(e.data.volume for e in state.in_edges(bias)) == [3456, 3456]  # the convolution's stream and B


def test_direct_dag_keeps_the_contract():
    """Regression: the bias read inside the convolution's task gave it in-edges of 86,400 and 3,456."""
    from dcaccel.dag import extract

    dag = extract(_lower_single("seed", "direct"))
    dag.validate()
    assert [dag.label(t) for t in dag.tasks] == ["Conv", "AddBias"]


@pytest.mark.parametrize("implementation", IM2COL)
def test_without_bias_the_mmm_output_is_the_layer_output(implementation):
    lowered = _lower_single("batch", implementation)
    assert buffer_reason(lowered.sdfg.arrays["Y_col"]) is BufferReason.LAYER_OUTPUT
    assert "Y_col_bias" not in lowered.sdfg.arrays
    assert "AddBias" not in {e.map.label for e in _top_level_maps(_state(lowered.sdfg))}


# Per group: "groups" is 2 groups of N = F/G = 3, K = 2·3·3 = 18, M = 5·5 = 25; "depthwise" is 3 groups of
# N = 1, K = 3·3 = 9, M = 3·3 = 9. The batched MMM has one task per group and task of the shape.
GROUPED_TASKS = {
    ("groups", "mv"): ("MV", 2 * 25),
    ("groups", "op"): ("OP", 2 * 18),
    ("groups", "lmv"): ("LMV", 2 * 3),
    ("depthwise", "mv"): ("MV", 3 * 9),
    ("depthwise", "op"): ("OP", 3 * 9),
    ("depthwise", "lmv"): ("LMV", 3 * 1),
}


@pytest.mark.parametrize("config, implementation", sorted(GROUPED_TASKS))
def test_groups_are_one_batched_mmm(config, implementation):
    from dcaccel.dag import extract

    lowered = _lower_single(config, implementation)
    state = _state(lowered.sdfg)
    task_maps = [(e.map.label, e.map.range.num_elements()) for e in _top_level_maps(state) if _is_task_map(state, e)]
    assert task_maps == [GROUPED_TASKS[config, implementation]]
    assert not any(isinstance(d, dace.data.View) for d in lowered.sdfg.arrays.values())
    dag = extract(lowered)
    dag.validate()
    labels = [dag.label(t) for t in dag.tasks]
    task, count = GROUPED_TASKS[config, implementation]
    assert sum(label.startswith(task) for label in labels) == count
    # the shape's single tasks and the im2col steps run once over all groups
    singles = sorted(label for label in labels if not label.startswith(task))
    assert singles == sorted(SEED_SINGLE_TASKS[implementation])


def test_batch_is_folded_into_the_columns():
    geometry = ConvGeometry(2, 2, 3, 1, (5, 5), (3, 3), (3, 3), (1, 1), (1, 1), (0, 0))
    assert (geometry.patch, geometry.columns) == (18, 18)
    sdfg = build_im2col_sdfg(geometry, dace.float32, "mv", has_bias=False)
    assert sdfg.arrays["X_col"].shape == (1, 18, 18)
    assert sdfg.arrays["W_col"].shape == (1, 3, 18)


@pytest.mark.parametrize(
    "in_size, kernel, stride, dilation, pad, out_size, padded",
    [
        (28, 5, 1, 1, 0, 24, False),
        (6, 3, 1, 1, 1, 6, True),
        (8, 2, 3, 1, 0, 3, False),
        (7, 3, 2, 1, 0, 3, False),
        (7, 3, 2, 1, 1, 4, True),  # reads beyond the end: padded although the begin pad is 0 below
        (7, 3, 1, 2, 0, 3, False),
    ],
)
def test_padding_is_detected_per_dimension(in_size, kernel, stride, dilation, pad, out_size, padded):
    geometry = ConvGeometry(1, 1, 1, 1, (in_size,), (kernel,), (out_size,), (stride,), (dilation,), (pad,))
    assert geometry.is_padded(0) is padded


def _reference(model, feeds):
    session = onnxruntime.InferenceSession(model.SerializeToString())
    names = [o.name for o in model.graph.output]
    return dict(zip(names, session.run(names, feeds), strict=True))


@pytest.fixture(scope="module")
def compiled_convs():
    """Every configuration under every implementation in one lowered SDFG, compiled once; returns the
    outputs of the lowered program and of onnxruntime on the same seeded inputs."""
    model, choices = conv_model(CONFIGS)
    onnx_model = ONNXModel("conv_configs", model)
    lowered = lower(onnx_model.sdfg, choices)
    assert_fully_lowered(lowered.sdfg)
    rng = np.random.default_rng(1)
    feeds = {
        i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in model.graph.input
    }
    weights = {name: np.array(value) for name, value in onnx_model.weights.items()}
    results = lowered.sdfg.compile()(**{k: v.copy() for k, v in feeds.items()}, **weights)
    names = [o.name for o in model.graph.output]
    return dict(zip(names, results, strict=True)), _reference(model, feeds)


@pytest.mark.slow
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_matches_onnxruntime(compiled_convs, config, implementation):
    outputs, reference = compiled_convs
    name = f"y_{config}_{implementation}"
    np.testing.assert_allclose(outputs[name], reference[name], rtol=1e-4, atol=1e-4)
