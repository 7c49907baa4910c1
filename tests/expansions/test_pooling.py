"""Canonical pooling: values against onnxruntime (one compile), the window map, buffer marks."""

import numpy as np
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


def _pool(name, op, shape=IMAGE, outputs=("y",), dtype=np.float32, **attributes):
    return OpCase(name, op, ["x"], {"x": shape}, attributes=attributes, outputs=outputs, dtype=dtype)


def _argmax(name, shape=IMAGE, **attributes):
    """A MaxPool case with its Indices output ``i``."""
    return _pool(name, "MaxPool", shape, outputs=("y", "i"), **attributes)


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
    _argmax("argmax_2x2_s2", kernel_shape=[2, 2], strides=[2, 2]),
    _argmax("argmax_2x2_s2_columns", kernel_shape=[2, 2], strides=[2, 2], storage_order=1),
    _argmax("argmax_3x3_p1_columns", kernel_shape=[3, 3], pads=[1, 1, 1, 1], storage_order=1),
    _argmax("argmax_dilated_ceil", kernel_shape=[2, 2], dilations=[2, 2], strides=[2, 2], ceil_mode=1),
    _argmax("argmax_5x5_p2", (1, 1, 5, 5), kernel_shape=[5, 5], pads=[2, 2, 2, 2]),  # 25 positions: a reduction
    _argmax("argmax_5x5_p2_columns", IMAGE, kernel_shape=[5, 5], pads=[2, 2, 2, 2], storage_order=1),
    _argmax("argmax_1d", (2, 2, 9), kernel_shape=[3], strides=[2], pads=[1, 1]),
    _argmax("argmax_3d_columns", (1, 2, 4, 5, 3), kernel_shape=[2, 2, 2], storage_order=1),
    _argmax("argmax_1x1", (2, 1, 1, 3), kernel_shape=[1, 1]),
    _argmax("argmax_fp64", kernel_shape=[3, 2], strides=[2, 1], dtype=np.float64),
    _argmax("argmax_int8_columns", kernel_shape=[2, 3], dtype=np.int8, storage_order=1),
    _argmax("argmax_int8_large", kernel_shape=[4, 5], dtype=np.uint8),
    _pool("max_fp64", "MaxPool", kernel_shape=[3, 3], pads=[1, 1, 1, 1], dtype=np.float64),
]


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementations (one compile)."""
    return reference_and_canonical(CASES, "test_pooling")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    exact = np.issubdtype(case.dtype, np.integer)
    assert_output_matches(results, case.tensor("y"), rtol=None if exact else 1e-5, atol=1e-6, same_dtype=True)


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if "i" in c.outputs], ids=lambda c: c.name)
def test_indices_match_onnxruntime(case, results):
    assert_output_matches(results, case.tensor("i"), same_dtype=True)


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


@pytest.mark.parametrize(
    ("name", "maps"),
    [
        ("argmax_2x2_s2", ["pool"]),
        ("argmax_5x5_p2", ["init_accumulator", "init_first_max", "reduce", "index", "output"]),
    ],
)
def test_indices_are_written_by_the_pool_map_or_after_the_reduction(name, maps):
    (case,) = [c for c in CASES if c.name == name]
    sdfg = canonical_model(build_model([case]), "argmax_structure").sdfg
    assert [s.label.removeprefix(f"{name}_").removesuffix("_map") for s in assert_flat_maps(sdfg)] == maps


def test_flat_index_row_and_column_major():
    from dcaccel.expansions.pooling import MaxIndex, PoolGeometry

    geometry = PoolGeometry((4, 5, 3), (4, 5, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), (0, 0, 0), (0, 0, 0))
    rows, columns = MaxIndex(geometry, 2, False), MaxIndex(geometry, 2, True)
    point = {"n": 1, "c": 1, "h": 3, "w": 2, "d": 1}
    coordinates = ["h", "w", "d"]
    assert eval(rows.flat(["n", "c"], coordinates), {}, point) == 3 * 60 + np.ravel_multi_index((3, 2, 1), (4, 5, 3))
    assert eval(columns.flat(["n", "c"], coordinates), {}, point) == 3 * 60 + 3 + 2 * 4 + 1 * 20
    assert [eval(e, {}, {"k": 41}) for e in rows.row_major_coordinates("k")] == [2, 3, 2]
