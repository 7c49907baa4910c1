"""Canonical pooling: values against onnxruntime (one compile), the window map, buffer marks."""

import pytest

from tests.expansions.canonical_onnx import (
    OpCase,
    assert_flat_maps,
    assert_output_matches,
    buffer_copies,
    build_model,
    canonical_model,
    reference_and_canonical,
)

IMAGE = (2, 3, 7, 6)


def _pool(name, op, shape=IMAGE, **attributes):
    return OpCase(name, op, ["x"], {"x": shape}, attributes=attributes)


CASES = [
    _pool("max_2x2_s2", "MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
    _pool("max_3x3_s2_p1", "MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    _pool("max_asymmetric_pads", "MaxPool", kernel_shape=[3, 2], pads=[2, 0, 0, 1]),
    _pool("max_stride_gt_kernel", "MaxPool", kernel_shape=[2, 2], strides=[3, 3]),
    _pool("max_1x1", "MaxPool", kernel_shape=[1, 1]),
    _pool("max_1x1_s2", "MaxPool", kernel_shape=[1, 1], strides=[2, 2]),
    _pool("max_dilated", "MaxPool", kernel_shape=[2, 2], dilations=[2, 3], pads=[1, 1, 1, 1]),
    _pool("max_ceil", "MaxPool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    _pool("max_same_upper", "MaxPool", kernel_shape=[3, 2], strides=[2, 1], auto_pad="SAME_UPPER"),
    _pool("max_same_lower", "MaxPool", kernel_shape=[2, 2], auto_pad="SAME_LOWER"),
    _pool("max_1d", "MaxPool", (2, 2, 9), kernel_shape=[3], strides=[2], pads=[1, 1]),
    _pool("max_3d", "MaxPool", (1, 2, 4, 5, 3), kernel_shape=[2, 2, 2]),
    _pool("max_whole_image", "MaxPool", (1, 1, 3, 3), kernel_shape=[3, 3]),
    _pool("avg_2x2_s2", "AveragePool", kernel_shape=[2, 2], strides=[2, 2]),
    _pool("avg_3x3_p1_exclude_pad", "AveragePool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    _pool("avg_3x3_p1_include_pad", "AveragePool", kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
    _pool("avg_asymmetric_include", "AveragePool", kernel_shape=[2, 3], pads=[1, 2, 0, 1], count_include_pad=1),
    _pool("avg_ceil", "AveragePool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    _pool("avg_stride_gt_kernel", "AveragePool", kernel_shape=[1, 2], strides=[3, 3]),
    _pool("avg_dilated", "AveragePool", kernel_shape=[2, 2], dilations=[2, 2]),
    _pool("avg_same_upper", "AveragePool", kernel_shape=[3, 3], auto_pad="SAME_UPPER"),
    _pool("avg_valid", "AveragePool", kernel_shape=[2, 4], auto_pad="VALID"),
    _pool("avg_1d", "AveragePool", (2, 2, 9), kernel_shape=[4], strides=[2], pads=[1, 2]),
    _pool("gap", "GlobalAveragePool"),
    _pool("gap_1x1", "GlobalAveragePool", (2, 4, 1, 1)),
    _pool("gap_3d", "GlobalAveragePool", (1, 2, 3, 2, 2)),
    _pool("gmp", "GlobalMaxPool"),
]


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementations (one compile)."""
    return reference_and_canonical(CASES, "test_pooling")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    assert_output_matches(results, case.tensor("y"), rtol=1e-5, atol=1e-6)


def _window_tasklet(case):
    from dace.sdfg import nodes

    imported = canonical_model(build_model([case]), "pool_structure")
    (scope,) = assert_flat_maps(imported.sdfg)
    (tasklet,) = [n for n, _ in imported.sdfg.all_nodes_recursive() if isinstance(n, nodes.Tasklet)]
    return scope, tasklet


@pytest.mark.parametrize(("name", "connectors"), [("max_3x3_s2_p1", 9), ("max_1x1", 1), ("avg_1d", 4), ("max_3d", 8)])
def test_one_map_reading_one_connector_per_window_position(name, connectors):
    (case,) = [c for c in CASES if c.name == name]
    scope, tasklet = _window_tasklet(case)
    assert scope.label == f"{name}_pool_map"
    assert len(tasklet.in_connectors) == connectors


@pytest.mark.slow
def test_padding_is_masked_only_where_windows_leave_the_image():
    _, padded = _window_tasklet(next(c for c in CASES if c.name == "max_3x3_s2_p1"))
    _, unpadded = _window_tasklet(next(c for c in CASES if c.name == "max_2x2_s2"))
    assert " if " in padded.code.as_string
    assert " if " not in unpadded.code.as_string


@pytest.mark.parametrize(
    ("attributes", "reason"),
    [
        ({"kernel_shape": [3, 3], "strides": [1, 1]}, "reuse"),
        ({"kernel_shape": [2, 2], "strides": [2, 2]}, "reorder"),
        ({"kernel_shape": [1, 1], "strides": [2, 2]}, None),
    ],
)
def test_input_made_by_another_task_is_buffered_by_window_overlap(attributes, reason):
    from dcaccel.buffers import buffer_reason

    model = build_model([OpCase("pre", "Relu", ["x"], {"x": IMAGE}), _pool("pool", "MaxPool", **attributes)])
    model.graph.node[1].input[0] = "pre__y"
    del model.graph.input[1]
    sdfg = canonical_model(model, "pool_buffer").sdfg
    labels = [s.label for s in assert_flat_maps(sdfg)]
    assert labels == ["pre_relu_map", "pool_pool_map"]  # the copy into the buffer is no task
    marks = [buffer_reason(d) for d in sdfg.arrays.values() if d.transient and buffer_reason(d) is not None]
    assert [m.value for m in marks] == ([reason] if reason else [])
    assert buffer_copies(sdfg) == ([("pre__y", "X_copy", reason)] if reason else [])


def test_global_pool_is_a_reduction_then_the_output():
    from dcaccel.buffers import BufferReason, buffer_reason

    sdfg = canonical_model(build_model([_pool("gap", "GlobalAveragePool")]), "gap_structure").sdfg
    labels = [s.label for s in assert_flat_maps(sdfg)]
    assert labels == ["gap_init_accumulator_map", "gap_reduce_map", "gap_output_map"]
    (accumulator,) = [d for d in sdfg.arrays.values() if d.transient and buffer_reason(d) is not None]
    assert buffer_reason(accumulator) is BufferReason.ACCUMULATE


def test_argmax_output_is_rejected():
    from dcaccel.errors import UnsupportedOpError

    case = OpCase("pool", "MaxPool", ["x"], {"x": IMAGE}, attributes={"kernel_shape": [2, 2]}, outputs=("y", "i"))
    with pytest.raises(UnsupportedOpError, match="MaxPool.*Indices"):
        canonical_model(build_model([case]), "argmax")
