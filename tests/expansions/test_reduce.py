"""Canonical ReduceMean, ReduceSum, ReduceMax: values against onnxruntime (one compile), steps, marks."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.expansions.canonical_onnx import (
    OpCase,
    assert_flat_maps,
    assert_output_matches,
    build_model,
    canonical_model,
    random_feed,
    run_canonical,
    run_reference,
)


def _reduce(name, op, shape, axes=None, keepdims=1, **attributes):
    constants = {} if axes is None else {"axes": np.array(axes, np.int64)}
    inputs = ["x", "axes"] if axes is not None else ["x"]
    return OpCase(name, op, inputs, {"x": shape}, constants, {"keepdims": keepdims, **attributes})


CASES = [
    _reduce("mean_last", "ReduceMean", (2, 3, 4), [-1]),
    _reduce("mean_first_and_last", "ReduceMean", (2, 3, 4), [0, 2], keepdims=0),
    _reduce("mean_all", "ReduceMean", (2, 3, 4)),
    _reduce("mean_all_to_scalar", "ReduceMean", (2, 3), keepdims=0),
    _reduce("mean_size_one_axis", "ReduceMean", (3, 1, 2), [1], keepdims=0),
    _reduce("mean_noop", "ReduceMean", (2, 3), noop_with_empty_axes=1),
    _reduce("sum_middle", "ReduceSum", (2, 3, 4), [1]),
    _reduce("sum_all", "ReduceSum", (5,), keepdims=0),
    _reduce("max_middle", "ReduceMax", (2, 3, 4), [1], keepdims=0),
    _reduce("max_negative_values", "ReduceMax", (4, 2), [0]),
]


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementations (one compile)."""
    model = build_model(CASES, opset=18)
    feed = random_feed(CASES)
    feed["max_negative_values__x"] = -np.abs(feed["max_negative_values__x"]) - 10
    return run_reference(model, feed), run_canonical(model, feed, "test_reduce")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    assert_output_matches(results, case.tensor("y"), rtol=1e-5, atol=1e-6)


def test_reduction_then_output_with_an_accumulate_buffer():
    from dcaccel.buffers import BufferReason, buffer_reason

    sdfg = canonical_model(build_model([CASES[1]], opset=18), "reduce_structure").sdfg
    labels = [s.label for s in assert_flat_maps(sdfg)]
    assert labels == [
        "mean_first_and_last_init_accumulator_map",
        "mean_first_and_last_reduce_map",
        "mean_first_and_last_output_map",
    ]
    marks = [buffer_reason(d) for d in sdfg.arrays.values() if d.transient]
    assert marks.count(BufferReason.ACCUMULATE) == 1


def test_noop_with_empty_axes_is_one_elementwise_map():
    sdfg = canonical_model(build_model([CASES[5]], opset=18), "reduce_noop").sdfg
    assert [s.label for s in assert_flat_maps(sdfg)] == ["mean_noop_elementwise_map"]


def test_axes_from_data_are_rejected():
    from dcaccel.errors import UnsupportedOpError

    node = helper.make_node("ReduceMean", ["x", "axes"], ["y"], name="mean")
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("axes", TensorProto.INT64, [1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    with pytest.raises(UnsupportedOpError, match="ReduceMean.*axes"):
        canonical_model(model, "reduce_data_axes")
