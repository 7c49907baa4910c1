"""Canonical pooling with windows larger than the input or than :data:`UNROLLED_WINDOW` positions: values
against onnxruntime (one compile), the clipped window, the WCR reduction's tasks and volumes."""

import math

import pytest

from dcaccel.expansions.pooling import UNROLLED_WINDOW, PoolGeometry
from tests.expansions.canonical_onnx import (
    OpCase,
    assert_output_matches,
    build_model,
    canonical_model,
    lowered_dag,
    reference_and_canonical,
    task_volumes,
)


def _pool(name, op, shape, **attributes):
    return OpCase(name, op, ["x"], {"x": shape}, attributes=attributes)


# EfficientNet's pooler: AvgPool2d(kernel=hidden_dim, ceil_mode=True) as PyTorch exports it (strides =
# kernel, count_include_pad=1), over a map smaller than the kernel.
CASES = [
    _pool(
        "avg_pooler",
        "AveragePool",
        (2, 3, 2, 2),
        kernel_shape=[320, 320],
        strides=[320, 320],
        ceil_mode=1,
        count_include_pad=1,
    ),
    _pool(
        "avg_pooler_exclude_pad", "AveragePool", (2, 3, 2, 2), kernel_shape=[320, 320], strides=[320, 320], ceil_mode=1
    ),
    _pool(
        "avg_over_input_ceil_pads_include",
        "AveragePool",
        (1, 2, 7, 7),
        kernel_shape=[9, 9],
        strides=[2, 2],
        pads=[2, 2, 2, 2],
        ceil_mode=1,
        count_include_pad=1,
    ),
    _pool(
        "avg_over_input_ceil_pads_exclude",
        "AveragePool",
        (1, 2, 7, 7),
        kernel_shape=[9, 9],
        strides=[2, 2],
        pads=[2, 2, 2, 2],
        ceil_mode=1,
    ),
    _pool("avg_global", "AveragePool", (2, 3, 7, 7), kernel_shape=[7, 7]),
    _pool(
        "avg_5x5_p2_include", "AveragePool", (2, 3, 7, 6), kernel_shape=[5, 5], pads=[2, 2, 2, 2], count_include_pad=1
    ),
    _pool("avg_5x5_p2_exclude", "AveragePool", (2, 3, 7, 6), kernel_shape=[5, 5], pads=[2, 2, 2, 2]),
    _pool(
        "avg_dilated_large_exclude",
        "AveragePool",
        (1, 2, 9, 9),
        kernel_shape=[5, 5],
        dilations=[2, 2],
        pads=[4, 4, 4, 4],
    ),
    _pool(
        "avg_dilated_small_exclude",
        "AveragePool",
        (1, 2, 7, 6),
        kernel_shape=[3, 3],
        dilations=[2, 2],
        pads=[2, 2, 2, 2],
    ),
    _pool("avg_1d_long", "AveragePool", (2, 2, 20), kernel_shape=[17], strides=[2], pads=[3, 3]),
    _pool(
        "avg_3x3_s2_p1_ceil_include",
        "AveragePool",
        (1, 2, 6, 6),
        kernel_shape=[3, 3],
        strides=[2, 2],
        pads=[1, 1, 1, 1],
        ceil_mode=1,
        count_include_pad=1,
    ),
    _pool(
        "avg_5x5_s3_p2_ceil_include",
        "AveragePool",
        (1, 2, 6, 6),
        kernel_shape=[5, 5],
        strides=[3, 3],
        pads=[2, 2, 2, 2],
        ceil_mode=1,
        count_include_pad=1,
    ),
    _pool("max_over_input_ceil", "MaxPool", (1, 2, 3, 3), kernel_shape=[8, 8], strides=[8, 8], ceil_mode=1),
    _pool("max_global", "MaxPool", (2, 3, 7, 7), kernel_shape=[7, 7]),
    _pool("max_5x5_p2", "MaxPool", (2, 3, 7, 6), kernel_shape=[5, 5], pads=[2, 2, 2, 2]),
    _pool(
        "max_4x4_ceil_s3", "MaxPool", (1, 2, 6, 6), kernel_shape=[4, 4], strides=[3, 3], pads=[1, 1, 1, 1], ceil_mode=1
    ),
]


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementations (one compile)."""
    return reference_and_canonical(CASES, "test_pooling_large")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    assert_output_matches(results, case.tensor("y"), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("in_size", "out_size", "kernel", "stride", "dilation", "pads", "clipped"),
    [
        (2, 1, 320, 320, 1, (0, 0), range(0, 2)),  # kernel far larger than the input
        (7, 1, 7, 1, 1, (0, 0), range(0, 7)),  # kernel = input
        (7, 2, 9, 2, 1, (2, 2), range(0, 9)),  # hangs over both ends: positions 0, 1 in the padding for output 0
        (4, 9, 2, 1, 1, (3, 3), range(0, 2)),
        (9, 9, 5, 1, 2, (4, 4), range(0, 5)),
        (6, 6, 1, 1, 1, (0, 0), range(0, 1)),  # 1-wide kernel
        (2, 1, 2, 10, 1, (5, 0), range(0)),  # the only window lies in the padding
    ],
)
def test_clipped_window_holds_the_positions_that_reach_the_input(
    in_size, out_size, kernel, stride, dilation, pads, clipped
):
    geometry = PoolGeometry((in_size,), (out_size,), (kernel,), (stride,), (dilation,), (pads[0],), (pads[1],))
    assert geometry.clipped(0) == clipped
    assert geometry.window == len(clipped)


def _case(name):
    return next(c for c in CASES if c.name == name)


def _task_volumes(name: str) -> dict[str, tuple[int, int]]:
    """Per task of case ``name`` lowered (DAG validated; label without the case's prefix): total volume in and
    out."""
    dag = lowered_dag(build_model([_case(name)]), name)
    dag.validate()
    return task_volumes(dag, name)


@pytest.mark.parametrize(
    ("name", "outputs", "window"),
    [
        ("avg_pooler", 2 * 3, 2 * 2),
        ("avg_over_input_ceil_pads_exclude", 2 * 2 * 2, 9 * 9),
        ("avg_global", 2 * 3, 7 * 7),
        ("avg_1d_long", 2 * 2 * 5, 17),
        ("max_over_input_ceil", 2, 3 * 3),
        ("max_5x5_p2", 2 * 3 * 7 * 6, 5 * 5),
    ],
)
def test_tasks_read_outputs_times_clipped_window(name, outputs, window):
    """Windows of more than UNROLLED_WINDOW positions: init, reduce (each output's clipped window, plus the
    accumulator it combines with), output; smaller ones: one pool map reading the clipped window."""
    volumes = _task_volumes(name)
    reads = outputs * window
    if window > UNROLLED_WINDOW:
        assert volumes == {
            "init_accumulator": (outputs, outputs),
            "reduce": (reads + reads, reads),
            "output": (outputs, outputs),
        }
    else:
        assert volumes == {"pool": (reads, outputs)}


@pytest.mark.parametrize(
    ("shape", "kernel", "labels"),
    [
        pytest.param((1, 1, 5, 5), [4, 4], ["pool"], marks=pytest.mark.slow),  # 16 positions: one tasklet
        ((1, 1, 20), [UNROLLED_WINDOW + 1], ["init_accumulator", "reduce", "output"]),
        ((1, 1, 3, 3), [UNROLLED_WINDOW, UNROLLED_WINDOW], ["pool"]),  # clipped to 3 x 3
    ],
)
def test_windows_above_the_unrolled_size_are_reductions(shape, kernel, labels):
    from tests.expansions.canonical_onnx import assert_flat_maps

    case = _pool("case", "MaxPool", shape, kernel_shape=kernel, strides=kernel, ceil_mode=1)
    scopes = assert_flat_maps(canonical_model(build_model([case]), "pool_unrolled").sdfg)
    assert [s.label.removeprefix("case_").removesuffix("_map") for s in scopes] == labels


def test_clipped_tasklet_reads_only_positions_inside_the_input():
    from dace.sdfg import nodes

    case = _pool("case", "AveragePool", (1, 1, 3, 3), kernel_shape=[16, 16], strides=[16, 16], ceil_mode=1)
    sdfg = canonical_model(build_model([case]), "pool_clipped").sdfg
    (tasklet,) = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, nodes.Tasklet)]
    assert len(tasklet.in_connectors) == math.prod((3, 3))
    assert " if " not in tasklet.code.as_string  # every clipped position is inside the input


def test_window_reaching_no_input_is_rejected():
    from dcaccel.errors import UnsupportedOpError

    case = _pool("case", "MaxPool", (1, 1, 2, 2), kernel_shape=[2, 2], strides=[10, 10], pads=[5, 5, 0, 0])
    with pytest.raises(UnsupportedOpError, match="MaxPool.*no window reaches the input"):
        canonical_model(build_model([case]), "pool_outside")
