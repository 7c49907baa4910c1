"""Canonical OneHot, Compress, Col2Im and MaxUnpool: values against onnxruntime (one compile) over axes (negative
ones included), out-of-range and negative indices, constant and data ``values``, conditions shorter than their
axis, strides, pads, dilations, 1-D to 3-D images and an ``output_shape`` larger than the unpooled one; the
output shapes the import gives them from their constant inputs (fast); task DAGs (none opaque) and rejections.
"""

import numpy as np
import onnx
import pytest

from tests.expansions.canonical_onnx import (
    OpCase,
    assert_output_matches,
    build_model,
    lowered_dag,
    random_feed,
    run_canonical,
    run_reference,
)

I64, I32, F32 = np.int64, np.int32, np.float32
ON_OFF = np.array([-2.5, 7], F32)


def _onehot(name, indices, depth, axis=-1, values=ON_OFF) -> OpCase:
    """A OneHot case of constant ``values``: ``indices`` a shape (data, small integers from -5 to 5) or an array
    (constant)."""
    data = {"i": indices} if isinstance(indices, tuple) else {}
    constants = {"d": np.asarray(depth), "v": values} | ({} if data else {"i": np.asarray(indices)})
    return OpCase(name, "OneHot", ["i", "d", "v"], data, constants, {"axis": axis}, dtype=I64)


def _compress(name, shape, condition, axis=None, dtype=F32) -> OpCase:
    attributes = {} if axis is None else {"axis": axis}
    constants = {"c": np.array(condition, bool)}
    return OpCase(name, "Compress", ["x", "c"], {"x": shape}, constants, attributes, dtype=dtype)


def _col2im(name, channels, image, block, batch=1, **attributes) -> OpCase:
    dims = len(image)
    strides = attributes.get("strides", [1] * dims)
    pads = attributes.get("pads", [0] * 2 * dims)
    dilations = attributes.get("dilations", [1] * dims)
    blocks = int(
        np.prod(
            [
                (image[d] + pads[d] + pads[d + dims] - dilations[d] * (block[d] - 1) - 1) // strides[d] + 1
                for d in range(dims)
            ]
        )
    )
    shape = (batch, channels * int(np.prod(block)), blocks)
    constants = {"s": np.array(image, I64), "b": np.array(block, I64)}
    return OpCase(name, "Col2Im", ["x", "s", "b"], {"x": shape}, constants, attributes)


def _unpool(name, shape, indices, kernel, output_shape=None, **attributes) -> OpCase:
    constants = {"I": np.array(indices, I64)}
    node_inputs = ["x", "I"]
    if output_shape is not None:
        constants["o"] = np.array(output_shape, I64)
        node_inputs.append("o")
    return OpCase(name, "MaxUnpool", node_inputs, {"x": shape}, constants, {"kernel_shape": kernel, **attributes})


CASES = [
    _onehot("onehot_last", (2, 3), 4),
    _onehot("onehot_axis0_float_depth", (3,), np.array([6], F32), axis=0),
    _onehot("onehot_middle", (2, 3), 5, axis=1),
    _onehot("onehot_negative_axis", (2, 2), 3, axis=-2),
    _onehot("onehot_depth_one", (4,), 1),
    _onehot("onehot_constant_indices", np.array([-1, 3, 2], I64), 3),
    _onehot("onehot_int_values", (2, 3), 3, values=np.array([0, 1], I64)),
    OpCase(
        "onehot_data_values",
        "OneHot",
        ["i", "d", "v"],
        {"v": (2,)},
        {"i": np.array([[1, -3], [9, 0]], I64), "d": np.array(4, I64)},
        {"axis": 1},
    ),
    _compress("compress_axis0", (3, 2), [0, 1, 1], axis=0),
    _compress("compress_negative_axis", (3, 4), [1, 0, 1, 1], axis=-1),
    _compress("compress_flattened", (2, 3), [0, 1, 0, 0, 1, 1]),
    _compress("compress_short_condition", (4, 2), [1, 0, 1], axis=0),
    _compress("compress_every_other", (2, 6, 2), [1, 0, 1, 0, 1, 0], axis=1),
    _compress("compress_int", (3, 3), [1, 1, 0, 1, 1, 1, 0, 0, 1], dtype=I32),
    _col2im("col2im_basic", 1, [4, 5], [2, 2]),
    _col2im("col2im_strides_pads", 2, [5, 5], [2, 3], strides=[2, 1], pads=[1, 0, 0, 1]),
    _col2im("col2im_dilations", 1, [6, 6], [2, 2], batch=2, dilations=[2, 3]),
    _col2im("col2im_1d", 3, [7], [3], strides=[2], pads=[1, 1]),
    _col2im("col2im_3d", 1, [3, 4, 3], [2, 2, 1]),
    _unpool("unpool_2d", (1, 1, 2, 2), [[[[5, 7], [13, 15]]]], [2, 2], strides=[2, 2]),
    _unpool("unpool_output_shape", (1, 1, 2, 2), [[[[5, 7], [13, 15]]]], [2, 2], (1, 1, 5, 5), strides=[2, 2]),
    _unpool("unpool_1d_batch", (2, 1, 3), [[[1, 2, 5]], [[6, 9, 11]]], [2], strides=[2]),
    _unpool(
        "unpool_pads", (1, 2, 2, 2), [[[[0, 2], [6, 8]], [[9, 13], [14, 17]]]], [3, 3], strides=[2, 2], pads=[1] * 4
    ),
]


def _declared(cases) -> onnx.ModelProto:
    """The model of ``cases`` with the shape of every output declared, onnxruntime's (ONNX's inference leaves
    MaxUnpool's of ``output_shape`` unknown; an exported model declares it)."""
    model = build_model(cases)
    reference = run_reference(model, random_feed(cases))
    for output in model.graph.output:
        output.type.tensor_type.shape.Clear()
        for size in reference[output.name].shape:
            output.type.tensor_type.shape.dim.add().dim_value = size
    return model


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementations (one compile)."""
    model, feed = _declared(CASES), random_feed(CASES)
    return run_reference(model, feed), run_canonical(model, feed, "test_indexing")


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if c.name != "unpool_output_shape"], ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    assert_output_matches(results, case.tensor("y"), same_dtype=True)


@pytest.mark.slow
def test_unpool_output_shape_pads_the_unpooled_positions(results):
    """ONNX's reference (its test_maxunpool_export_with_output_shape): an index names a position of the unpooled
    4×4 plane, which keeps its place in the 5×5 output; onnxruntime instead writes the index's position in the
    flattened output."""
    (case,) = (c for c in CASES if c.name == "unpool_output_shape")
    expected = np.zeros((1, 1, 5, 5), F32)
    unpooled = expected[0, 0, :4, :4].copy()
    unpooled.flat[case.constants["I"].reshape(-1)] = random_feed(CASES)[case.tensor("x")].reshape(-1)
    expected[0, 0, :4, :4] = unpooled
    np.testing.assert_array_equal(results[1][case.tensor("y")], expected)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_import_gives_the_output_shape_of_the_constant_inputs(case):
    """The shape inference DaCe's importer runs gives the output the shape of onnxruntime's result."""
    from dcaccel.frontend.shapes import infer_onnx_shapes

    model = _declared([case])
    (expected,) = run_reference(model, random_feed([case])).values()
    for output in model.graph.output:
        output.type.tensor_type.ClearField("shape")
    (found,) = infer_onnx_shapes(model).graph.output
    assert tuple(d.dim_value for d in found.type.tensor_type.shape.dim) == expected.shape


@pytest.fixture(scope="module")
def dag():
    """The task DAG of every case lowered canonically (nothing compiled)."""
    return lowered_dag(_declared(CASES), "indexing_dag")


STEPS = {"OneHot": ["onehot"], "Col2Im": ["col2im", "init_output"], "MaxUnpool": ["zero", "unpool"]}
COMPRESS_TASKS = {"compress_negative_axis": 3, "compress_flattened": 3, "compress_int": 6}
"""Tasks of the Compress cases of several runs, one kept position each: kept 0, 2 | 3; 1, 4 | 5; 0, 1 | 3, 4, 5 |
8. Every other case keeps one run: one task."""


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_tasks_of_equal_volume_none_opaque(case, dag):
    from dcaccel.dag.metrics import opaque_work

    assert opaque_work(dag)[0] == 0
    tasks = sorted(dag.label(t) for t in dag.tasks if dag.info(t).node == case.name)
    if case.op_type == "Compress":
        assert len(tasks) == COMPRESS_TASKS.get(case.name, 1)
        assert (
            len({dag.volume(t, s) for t in dag.tasks if dag.info(t).node == case.name for s in dag.successors(t)}) == 1
        )
    else:
        assert tasks == sorted(f"{case.name}_{step}_map" for step in STEPS[case.op_type])
