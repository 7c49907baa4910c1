"""ONNX ConvTranspose lowered as MMM (mv, op, lmv) + col2im.

Structure tests lower single-node models and extract their task DAGs (cheap, no compile). The numerical
test builds ONE model holding every configuration once per MMM shape, compiles it once and compares every
output with onnxruntime; another compiles a ``torch.nn.ConvTranspose2d`` loaded by ``dcaccel.load``.
"""

import math
from collections import Counter

import dace
import numpy as np
import pytest
from dace.ml import ONNXModel

from dcaccel.buffers import BufferReason, buffer_reason
from dcaccel.dag import extract
from dcaccel.errors import UnsupportedOpError
from dcaccel.expansions.conv import (
    ConvTransposeGeometry,
    build_col2im_sdfg,
    conv_transpose_geometry,
    conv_transpose_marks,
)
from dcaccel.transforms.checks import assert_fully_lowered
from dcaccel.transforms.lower import lower
from tests.expansions.canonical_onnx import OpCase, build_model, random_feed, run_reference

SHAPES = ("mv", "op", "lmv")

# name: (X shape, W shape (C, F/G, kernel...), bias, attributes)
CONFIGS = {
    "strides_pads_output_padding": (
        (1, 2, 4, 5),
        (2, 3, 3, 3),
        True,
        {"strides": [2, 2], "pads": [1, 0, 1, 1], "output_padding": [1, 0]},
    ),
    "groups_dilations_batch": ((2, 4, 3, 3), (4, 1, 2, 2), False, {"group": 2, "dilations": [2, 1]}),
    "depthwise": ((1, 3, 4, 4), (3, 1, 3, 3), True, {"group": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "pointwise": ((1, 3, 4, 4), (3, 2, 1, 1), True, {}),
    "stride_over_kernel": ((1, 1, 3, 3), (1, 2, 2, 2), True, {"strides": [3, 3]}),
    "conv1d": ((1, 2, 5), (2, 3, 3), True, {"strides": [2], "pads": [1, 1], "output_padding": [1]}),
    "single_input_element": ((1, 1, 1, 1), (1, 1, 2, 2), False, {}),
    # auto_pad and output_shape (pads from the ONNX rule): full output 9×10 of a 4×4 input, stride 2, 3×3 and
    # 3×4 kernels; SAME crops 1 and 2 (odd total: the extra one at the end for UPPER, at the start for LOWER)
    "same_upper": ((1, 2, 4, 4), (2, 2, 3, 4), True, {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "same_lower": ((1, 2, 4, 4), (2, 2, 3, 4), False, {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    "valid": ((1, 2, 3, 3), (2, 1, 3, 2), True, {"auto_pad": "VALID", "strides": [2, 1], "dilations": [1, 2]}),
    # output_shape: totals 2 and 3 (extra at the start), pads ignored; with output_padding; one size above the
    # full output (zeros at the end); with SAME_UPPER (extra at the end)
    "output_shape": (
        (1, 2, 4, 4),
        (2, 2, 3, 4),
        True,
        {"strides": [2, 2], "output_shape": [7, 7], "pads": [5, 5, 5, 5]},
    ),
    "output_shape_padding": (
        (1, 1, 4, 3),
        (1, 2, 3, 3),
        False,
        {"strides": [2, 2], "output_shape": [8, 6], "output_padding": [1, 0]},
    ),
    "output_shape_above_full": ((1, 1, 4, 4), (1, 1, 1, 1), True, {"strides": [2, 2], "output_shape": [8, 7]}),
    "output_shape_same_upper": (
        (1, 2, 4, 4),
        (2, 1, 3, 4),
        False,
        {"strides": [2, 2], "output_shape": [7, 7], "auto_pad": "SAME_UPPER"},
    ),
}

# (config, begin pads of the output) by the ONNX rule, as onnxruntime computes them: the total padding is
# full - output size (at least 0), its larger half at the end for SAME_UPPER and at the start otherwise
PADS_BEGIN = {
    "same_upper": (0, 1),  # full (9, 10) → (8, 8): totals 1, 2
    "same_lower": (1, 1),
    "valid": (0, 0),  # full (5, 5)
    "output_shape": (1, 2),  # full (9, 10) → (7, 7): totals 2, 3
    "output_shape_padding": (1, 1),  # full (10, 7) → (8, 6): totals 2, 1
    "output_shape_above_full": (0, 0),  # full (7, 7) → (8, 7): totals -1 → 0, 0
    "output_shape_same_upper": (1, 1),  # totals 2, 3 with the larger half at the end
    "strides_pads_output_padding": (1, 0),
}


def _cases(configs: dict, shapes=SHAPES) -> list[OpCase]:
    """One ConvTranspose case per (configuration, shape), named ``<config>_<shape>``, with seeded weights."""
    rng = np.random.default_rng(0)
    cases = []
    for config, (x_shape, w_shape, has_bias, attributes) in configs.items():
        constants = {"w": rng.standard_normal(w_shape).astype(np.float32)}
        if has_bias:
            constants["b"] = rng.standard_normal(w_shape[1] * attributes.get("group", 1)).astype(np.float32)
        for shape in shapes:
            cases.append(
                OpCase(
                    f"{config}_{shape}",
                    "ConvTranspose",
                    ["x", *constants],
                    inputs={"x": x_shape},
                    constants=constants,
                    attributes=attributes,
                )
            )
    return cases


def _lowered(cases: list[OpCase]):
    model = build_model(cases)
    imported = ONNXModel("conv_transpose", model, onnx_simplify=False)
    choices = {case.name: case.name.rsplit("_", 1)[1] for case in cases}
    return model, imported, lower(imported.sdfg, choices)


def _lower_single(config: str, shape: str):
    return _lowered(_cases({config: CONFIGS[config]}, shapes=(shape,)))[2]


def _task_counts(lowered) -> Counter:
    """Tasks of the extracted DAG per label, the task maps' iterations counted under their map's label."""
    dag = extract(lowered)
    dag.validate()
    return Counter(dag.label(t).rstrip("0123456789") for t in dag.tasks)


@pytest.mark.parametrize("shape", SHAPES)
def test_marks_follow_the_mmm_orders(shape):
    lowered = _lower_single("strides_pads_output_padding", shape)
    marks = {name: buffer_reason(lowered.sdfg.arrays[name]) for name in ("W_col", "X_col", "Y_col", "Y_acc")}
    assert marks == conv_transpose_marks(shape)
    assert marks["W_col"] is BufferReason.WEIGHTS and marks["Y_acc"] is BufferReason.ACCUMULATE
    assert marks["X_col"] is None  # Xr writes X_col row by row: streams into every shape
    assert marks["Y_col"] is (None if shape == "mv" else BufferReason.REORDER)


# C = 2, F = 3, 3×3 kernel, 4×5 input: the MMM is (F·9 = 27) × (C = 2) · 2 × (4·5 = 20)
SINGLE_TASKS = ["Wr", "Xr", "init_Y_acc", "Col2im", "AddBias"]
SHAPE_TASKS = {
    "mv": ("MV", 20, ["BcastA", "Gather"]),
    "op": ("OP", 2, ["Reduce"]),
    "lmv": ("LMV", 27, ["BcastB", "Gather"]),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_dag_has_one_task_per_mmm_task(shape):
    task, count, others = SHAPE_TASKS[shape]
    expected = Counter({task: count, **dict.fromkeys(SINGLE_TASKS + others, 1)})
    assert _task_counts(_lower_single("strides_pads_output_padding", shape)) == expected


@pytest.mark.parametrize("shape", SHAPES)
def test_groups_are_one_batched_mmm_and_no_bias_writes_out(shape):
    # 2 groups of C/G = 2 channels and F/G = 1 filter, 2×2 kernel, batch 2 of 3×3 inputs: 4 × 2 · 2 × 18
    lowered = _lower_single("groups_dilations_batch", shape)
    counts = _task_counts(lowered)
    task, per_group = {"mv": ("MV", 18), "op": ("OP", 2), "lmv": ("LMV", 4)}[shape]
    singles = ["Wr", "Xr", "init_Y_acc", "Col2im", "WriteOut", *SHAPE_TASKS[shape][2]]
    assert counts == Counter({task: 2 * per_group, **dict.fromkeys(singles, 1)})
    (mmm_state,) = [s for s in lowered.sdfg.states() if any(getattr(n, "label", "") == task for n in s.nodes())]
    task_maps = [n for n in mmm_state.nodes() if isinstance(n, dace.nodes.MapEntry) and n.map.label == task]
    assert len(task_maps) == 1  # one MMM over both groups


def test_col2im_volumes():
    lowered = _lower_single("strides_pads_output_padding", "mv")
    state = next(s for s in lowered.sdfg.states() if any(getattr(n, "label", "") == "Col2im" for n in s.nodes()))
    (col2im,) = [n for n in state.nodes() if isinstance(n, dace.nodes.MapEntry) and n.map.label == "Col2im"]
    (read,) = state.in_edges(col2im)
    assert (read.data.data, read.data.volume) == ("Y_col", 27 * 20)
    (write,) = state.out_edges(state.exit_node(col2im))
    assert (write.data.data, write.data.volume, write.data.wcr is not None) == ("Y_acc", 27 * 20, True)


@pytest.mark.parametrize(
    "in_size, kernel, stride, dilation, pad_begin, out_size, cropped",
    [
        (4, 3, 2, 1, 0, 9, False),  # every position lands in the output
        (4, 3, 2, 1, 1, 8, True),  # the begin pad crops position -1
        (4, 3, 2, 1, 0, 8, True),  # an end pad crops the last position
        (3, 2, 3, 1, 0, 8, False),  # stride > kernel: gaps, nothing cropped
        (1, 1, 1, 1, 0, 1, False),
    ],
)
def test_cropping_is_detected_per_dimension(in_size, kernel, stride, dilation, pad_begin, out_size, cropped):
    geometry = ConvTransposeGeometry(
        1, 1, 1, 1, (in_size,), (kernel,), (out_size,), (stride,), (dilation,), (pad_begin,)
    )
    assert geometry.is_cropped(0) is cropped


def test_geometry_sizes():
    geometry = ConvTransposeGeometry(2, 4, 6, 2, (3, 5), (2, 3), (5, 11), (1, 2), (2, 1), (0, 0))
    assert (geometry.rows, geometry.channels_per_group, geometry.columns) == (3 * 6, 2, 2 * 15)
    sdfg = build_col2im_sdfg(geometry, dace.float32, "op", has_bias=False)
    assert sdfg.arrays["W_col"].shape == (2, 18, 2)
    assert sdfg.arrays["X_col"].shape == (2, 2, 30)
    assert sdfg.arrays["Y_acc"].shape == (2, 6, 5, 11)


@pytest.mark.parametrize("config", sorted(PADS_BEGIN))
def test_pads_follow_the_onnx_rule(config):
    imported = ONNXModel(config, build_model(_cases({config: CONFIGS[config]}, shapes=("mv",))), onnx_simplify=False)
    ((node, state),) = [
        (n, parent) for n, parent in imported.sdfg.all_nodes_recursive() if getattr(n, "schema", None) is not None
    ]
    geometry = conv_transpose_geometry(node, state, imported.sdfg)
    assert geometry.pads_begin == PADS_BEGIN[config]
    assert geometry.out_sizes == tuple(state.sdfg.arrays[state.out_edges(node)[0].data.data].shape[2:])


@pytest.mark.parametrize(
    "attributes, detail",
    [
        # ONNX shape inference makes Y 9×9 (full output); the spec's SAME size is in·stride = 8
        ({"auto_pad": "SAME_UPPER", "strides": [2, 2], "output_padding": [1, 1]}, "output sizes \\(9, 9\\)"),
    ],
)
def test_inconsistent_attributes_raise_in_check(attributes, detail):
    config = {"bad": ((1, 1, 4, 4), (1, 2, 3, 3), False, attributes)}
    with pytest.raises(UnsupportedOpError, match=f"ConvTranspose \\(node 'bad_mv'\\): {detail}"):
        _lowered(_cases(config, shapes=("mv",)))


def _torch_conv_transpose():
    import torch

    torch.manual_seed(0)
    module = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=1)
    return module, torch.zeros(2, 4, 5, 5)


@pytest.mark.parametrize("shape", [s if s == "lmv" else pytest.param(s, marks=pytest.mark.slow) for s in SHAPES])
def test_torch_conv_transpose_lowers(shape):
    import dcaccel

    workload = dcaccel.load(*_torch_conv_transpose())
    lowered = lower(workload, {"ConvTranspose": shape})
    assert_fully_lowered(lowered.sdfg)
    assert set(lowered.implementations.values()) == {shape}
    # groups of C/G = 2 channels and F/G = 3 filters, 3×3 kernel, batch 2 of 5×5: 27 × 2 · 2 × 50 per group
    task, per_group = {"mv": ("MV", 50), "op": ("OP", 2), "lmv": ("LMV", 27)}[shape]
    assert _task_counts(lowered)[task] == 2 * per_group


@pytest.mark.slow
def test_torch_conv_transpose_matches_onnxruntime():
    import dcaccel
    from dcaccel.verification import verify

    workload = dcaccel.load(*_torch_conv_transpose())
    report = verify(workload, lower(workload, {"ConvTranspose": "lmv"}), rtol=1e-4, atol=1e-5)
    assert report.passed, report.outputs


@pytest.fixture(scope="module")
def compiled_conv_transposes():
    """Every configuration under every shape in one lowered SDFG, compiled once; its outputs and onnxruntime's."""
    cases = _cases(CONFIGS)
    model, imported, lowered = _lowered(cases)
    assert_fully_lowered(lowered.sdfg)
    feed = random_feed(cases)
    weights = {name: np.array(value) for name, value in imported.weights.items()}
    results = lowered.sdfg.compile()(**{k: v.copy() for k, v in feed.items()}, **weights)
    names = [o.name for o in model.graph.output]
    return dict(zip(names, results, strict=True)), run_reference(model, feed)


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_matches_onnxruntime(compiled_conv_transposes, config, shape):
    outputs, reference = compiled_conv_transposes
    name = f"{config}_{shape}__y"
    assert math.prod(reference[name].shape) > 0
    np.testing.assert_allclose(outputs[name], reference[name], rtol=1e-4, atol=1e-4)
