"""Canonical reshape family, Transpose, Concat, Slice, Gather, Shape: values (one compile) and copy maps."""

import numpy as np
import pytest

from tests.expansions.canonical_onnx import (
    OpCase,
    assert_flat_maps,
    buffer_copies,
    build_model,
    canonical_model,
    reference_and_canonical,
)


def _ints(*values):
    return np.array(values, np.int64)


def _reshape(name, shape, target):
    return OpCase(name, "Reshape", ["x", "shape"], {"x": shape}, {"shape": _ints(*target)})


def _slice(name, shape, starts, ends, axes=None, steps=None):
    constants = {"starts": _ints(*starts), "ends": _ints(*ends)}
    inputs = ["x", "starts", "ends"]
    if axes is not None:
        constants["axes"] = _ints(*axes)
        inputs.append("axes")
    if steps is not None:
        constants["steps"] = _ints(*steps)
        inputs.append("steps")
    return OpCase(name, "Slice", inputs, {"x": shape}, constants)


CASES = [
    _reshape("reshape_split", (2, 12), (2, 3, 4)),
    _reshape("reshape_incompatible", (2, 6), (3, 4)),
    _reshape("reshape_infer", (2, 3, 4), (-1, 4)),
    _reshape("reshape_keep_zero", (2, 3, 4), (0, 12)),
    _reshape("reshape_to_vector", (1, 1, 1), (1,)),
    OpCase("flatten_1", "Flatten", ["x"], {"x": (2, 3, 4, 5)}, attributes={"axis": 1}),
    OpCase("flatten_0", "Flatten", ["x"], {"x": (2, 3, 4)}, attributes={"axis": 0}),
    OpCase("flatten_last", "Flatten", ["x"], {"x": (2, 3, 4)}, attributes={"axis": 3}),
    OpCase("squeeze", "Squeeze", ["x", "axes"], {"x": (1, 3, 1, 2)}, {"axes": _ints(0, -2)}),
    OpCase("squeeze_all", "Squeeze", ["x"], {"x": (1, 3, 1)}),
    OpCase("unsqueeze", "Unsqueeze", ["x", "axes"], {"x": (3, 2)}, {"axes": _ints(0, 3)}),
    OpCase("transpose_default", "Transpose", ["x"], {"x": (2, 3, 4)}),
    OpCase("transpose_heads", "Transpose", ["x"], {"x": (1, 4, 2, 3)}, attributes={"perm": [0, 2, 1, 3]}),
    OpCase("transpose_size_one", "Transpose", ["x"], {"x": (1, 3, 1, 4)}, attributes={"perm": [2, 1, 0, 3]}),
    OpCase("transpose_matrix", "Transpose", ["x"], {"x": (5, 1)}, attributes={"perm": [1, 0]}),
    OpCase("concat_0", "Concat", ["a", "b"], {"a": (2, 3), "b": (1, 3)}, attributes={"axis": 0}),
    OpCase("concat_last", "Concat", ["a", "b", "c"], {"a": (2, 1), "b": (2, 3), "c": (2, 2)}, attributes={"axis": -1}),
    OpCase("concat_single", "Concat", ["a"], {"a": (4,)}, attributes={"axis": 0}),
    _slice("slice_simple", (5, 6), [1, 2], [4, 5]),
    _slice("slice_axes_steps", (4, 5, 6), [0, 1], [6, 100], axes=[2, 0], steps=[2, 1]),
    _slice("slice_negative_step", (5, 6), [4, -2], [0, 0], axes=[0, 1], steps=[-2, -1]),
    _slice("slice_clamped", (3, 4), [-10], [10], axes=[1]),
    OpCase("gather_axis0", "Gather", ["x", "i"], {"x": (5, 3)}, {"i": _ints(4, 0, -1)}),
    OpCase(
        "gather_axis1_matrix", "Gather", ["x", "i"], {"x": (2, 5, 3)}, {"i": np.array([[1, 2], [-2, 0]])}, {"axis": 1}
    ),
    OpCase("gather_scalar", "Gather", ["x", "i"], {"x": (2, 3, 4)}, {"i": np.array(-1)}, {"axis": 2}),
    OpCase("shape", "Shape", ["x"], {"x": (2, 3, 4)}),
    OpCase("shape_sliced", "Shape", ["x"], {"x": (2, 3, 4, 5)}, attributes={"start": 1, "end": -1}),
]


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementations (one compile)."""
    return reference_and_canonical(CASES, "test_shape_ops")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    reference, canonical = results
    name = case.tensor("y")
    assert canonical[name].shape == reference[name].shape
    assert canonical[name].dtype == reference[name].dtype
    np.testing.assert_array_equal(canonical[name], reference[name])


def _scopes(*cases):
    return assert_flat_maps(canonical_model(build_model(cases), "shape_structure").sdfg)


def test_reshape_family_is_one_copy_map_each():
    names = ("reshape_split", "flatten_1", "squeeze", "unsqueeze", "transpose_size_one")
    scopes = _scopes(*[c for c in CASES if c.name in names])
    assert sorted(s.label for s in scopes) == sorted(f"{n}_copy_map" for n in names)


def test_permuting_transpose_of_a_task_output_reads_a_reorder_buffer():
    from dcaccel.buffers import BufferReason, buffer_reason

    model = build_model([OpCase("pre", "Relu", ["x"], {"x": (2, 3)}), OpCase("t", "Transpose", ["x"], {"x": (2, 3)})])
    model.graph.node[1].input[0] = "pre__y"
    del model.graph.input[1]
    sdfg = canonical_model(model, "transpose_buffer").sdfg
    labels = [s.label for s in assert_flat_maps(sdfg)]
    assert labels == ["pre_relu_map", "t_transpose_map"]
    assert buffer_copies(sdfg) == [("pre__y", "data_copy", "reorder")]
    marks = [buffer_reason(d) for d in sdfg.arrays.values() if d.transient and buffer_reason(d) is not None]
    assert marks == [BufferReason.REORDER]


@pytest.mark.parametrize(
    ("in_shape", "out_shape", "cuts"),
    [
        ((2, 3, 4, 5), (2, 60), [1, 5, 20, 60, 120]),
        ((2, 12), (2, 3, 4), [1, 4, 12, 24]),
        ((1, 3, 1, 2), (3, 2), [1, 2, 6]),
        ((2, 6), (3, 4), None),
    ],
)
def test_common_refinement_of_two_shapes(in_shape, out_shape, cuts):
    from dcaccel.expansions.shape_ops import _refinement

    assert _refinement(in_shape, out_shape) == cuts


def test_slice_with_data_starts_is_rejected():
    from onnx import TensorProto, helper

    from dcaccel.errors import UnsupportedOpError

    node = helper.make_node("Slice", ["x", "starts", "ends"], ["y"], name="slice")
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
            helper.make_tensor_value_info("starts", TensorProto.INT64, [1]),
            helper.make_tensor_value_info("ends", TensorProto.INT64, [1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    with pytest.raises(UnsupportedOpError, match="Slice.*constants"):
        canonical_model(model, "slice_data")
