"""Canonical reshape family, Transpose, Concat, Slice, Gather, Shape, Split, Expand, Tile, Range: values (one compile),
copy maps, task structure and volumes."""

import dace
import numpy as np
import pytest

from tests.expansions.canonical_onnx import (
    OpCase,
    assert_flat_maps,
    assert_output_matches,
    buffer_copies,
    build_model,
    canonical_model,
    lowered_dag,
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


def _split(name, shape, axis, sizes=None, parts=None):
    """A Split case: explicit ``sizes`` (constant input) or ``parts`` (num_outputs)."""
    outputs = tuple(f"y{k}" for k in range(len(sizes) if sizes else parts))
    attributes = {"axis": axis} | ({"num_outputs": parts} if parts else {})
    if sizes:
        return OpCase(name, "Split", ["x", "s"], {"x": shape}, {"s": _ints(*sizes)}, attributes, outputs)
    return OpCase(name, "Split", ["x"], {"x": shape}, {}, attributes, outputs)


def _range(name, start, limit, delta, dtype):
    values = {"start": start, "limit": limit, "delta": delta}
    return OpCase(name, "Range", list(values), constants={k: np.array(v, dtype) for k, v in values.items()})


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
    OpCase("gather_range", "Gather", ["x", "i"], {"x": (2, 6, 3)}, {"i": _ints(1, 3, 5)}, {"axis": 1}),
    OpCase("gather_reversed", "Gather", ["x", "i"], {"x": (2, 5)}, {"i": _ints(-1, -2, -3)}, {"axis": -1}),
    OpCase("gather_repeated", "Gather", ["x", "i"], {"x": (4, 3)}, {"i": np.array([[2, 2], [2, 2]])}),
    OpCase("shape", "Shape", ["x"], {"x": (2, 3, 4)}),
    OpCase("shape_sliced", "Shape", ["x"], {"x": (2, 3, 4, 5)}, attributes={"start": 1, "end": -1}),
    _split("split_sizes", (2, 6, 3), 1, sizes=(1, 2, 3)),
    _split("split_num_outputs", (7, 2), 0, parts=3),
    _split("split_equal", (2, 4), -1, parts=2),
    _split("split_into_one", (2, 3), 1, parts=1),
    _split("split_size_one", (1, 4, 1), 1, sizes=(1, 3)),
    OpCase("expand", "Expand", ["x", "s"], {"x": (3, 1)}, {"s": _ints(2, 1, 4)}),
    OpCase("expand_same", "Expand", ["x", "s"], {"x": (2, 3)}, {"s": _ints(1, 1)}),
    OpCase("expand_scalar", "Expand", ["x", "s"], {"x": ()}, {"s": _ints(2, 2)}),
    OpCase("tile", "Tile", ["x", "r"], {"x": (2, 3)}, {"r": _ints(2, 3)}),
    OpCase("tile_once", "Tile", ["x", "r"], {"x": (2, 1, 3)}, {"r": _ints(1, 4, 1)}),
    OpCase("tile_same", "Tile", ["x", "r"], {"x": (3,)}, {"r": _ints(1)}),
    _range("range_int", 1, 10, 3, np.int64),
    _range("range_float_down", 1.5, -2, -0.5, np.float32),
    _range("range_empty", 5, 1, 1, np.int32),
]


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementations (one compile)."""
    return reference_and_canonical(CASES, "test_shape_ops")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    for name in map(case.tensor, case.outputs):
        assert_output_matches(results, name, same_dtype=True)


def _scopes(*cases):
    return assert_flat_maps(canonical_model(build_model(cases), "shape_structure").sdfg)


@pytest.mark.slow
def test_reshape_family_is_one_copy_map_each():
    names = ("reshape_split", "flatten_1", "squeeze", "unsqueeze", "transpose_size_one")
    scopes = _scopes(*[c for c in CASES if c.name in names])
    assert sorted(s.label for s in scopes) == sorted(f"{n}_copy_map" for n in names)


@pytest.mark.slow
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


@pytest.fixture(scope="module")
def dag():
    """The task DAG of the Split, Expand, Tile and constant-index Gather cases, lowered together (no compile).

    (A Range of constants reads nothing: ``extract`` refuses its zero-volume edge from the pseudo source. DaCe's
    import of this model gives the uneven ``num_outputs`` Split wrong output shapes, which its check refuses.)
    """
    cases = [c for c in CASES if c.op_type in ("Split", "Expand", "Tile", "Gather") and c.name != "split_num_outputs"]
    return lowered_dag(build_model(cases), "shape_structure_dag")


def _reads(dag, label: str) -> dict[str, int]:
    (task,) = (t for t in dag.tasks if dag.label(t) == label)
    return {dag.label(u): w for u, v, w in dag.edges if v == task}


@pytest.mark.parametrize(
    ("case", "volumes"),
    [
        ("split_sizes", [6, 12, 18]),
        ("split_equal", [4, 4]),
        ("split_into_one", [6]),
        ("split_size_one", [1, 3]),
    ],
)
def test_split_is_one_copy_task_per_output_reading_its_block(case, volumes, dag):
    for k, volume in enumerate(volumes):
        assert _reads(dag, f"{case}_split_{k}_map") == {f"{case}__x": volume}
    assert f"{case}_split_{len(volumes)}_map" not in {dag.label(t) for t in dag.tasks}


@pytest.mark.parametrize(
    ("case", "reads"),
    [
        ("expand", {"expand__x": 24}),
        ("expand_scalar", {"expand_scalar__x": 4}),
        ("tile", {"tile__x": 36}),
        ("tile_once", {"tile_once__x": 24}),
        ("gather_range", {"gather_range__x": 18}),  # indices 1, 3, 5 are a range: a static memlet, no index read
        ("gather_reversed", {"gather_reversed__x": 6}),
        ("gather_axis0", {"gather_axis0__x": 9, "gather_axis0__i": 9}),  # 4, 0, -1: the indices are read
    ],
)
def test_one_task_with_its_read_volumes(case, reads, dag):
    label = {"Expand": "expand", "Tile": "tile", "Gather": "gather"}[next(c for c in CASES if c.name == case).op_type]
    assert _reads(dag, f"{case}_{label}_map") == reads


@pytest.mark.parametrize(("case", "maps"), [("range_int", ["range_int_range_map"]), ("range_empty", [])])
def test_range_of_constants_is_one_map_reading_nothing(case, maps):
    """start, limit and delta are folded into the tasklet (an empty range has no map)."""
    from tests.expansions.canonical_onnx import top_level_scopes

    (found,) = (c for c in CASES if c.name == case)
    sdfg = canonical_model(build_model([found]), case).sdfg
    assert [s.label for s in top_level_scopes(sdfg)] == maps
    tasklets = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet)]
    assert [t.in_connectors for t in tasklets] == [{}] * len(maps)


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        (OpCase("g", "Gather", ["x", "i"], {"x": (4, 3)}, {"i": _ints(3, 1)}), "reorder"),
        (OpCase("g", "Gather", ["x", "i"], {"x": (4, 3)}, {"i": _ints(2, 2)}), "reuse"),
        (OpCase("g", "Gather", ["x", "i"], {"x": (4, 3)}, {"i": _ints(0, 2)}), None),
        (OpCase("g", "Expand", ["x", "s"], {"x": (4, 1)}, {"s": _ints(4, 3)}), "reuse"),
        (OpCase("g", "Expand", ["x", "s"], {"x": (4, 3)}, {"s": _ints(4, 3)}), None),
        (OpCase("g", "Tile", ["x", "r"], {"x": (4, 3)}, {"r": _ints(2, 1)}), "reuse"),
        (OpCase("g", "Tile", ["x", "r"], {"x": (4, 3)}, {"r": _ints(1, 1)}), None),
    ],
    ids=[
        "gather reversed",
        "gather repeated",
        "gather increasing",
        "expand broadcast",
        "expand same shape",
        "tile repeated",
        "tile once",
    ],
)
def test_task_output_is_buffered_when_read_again_or_out_of_order(case, reason):
    model = build_model([OpCase("pre", "Relu", ["x"], {"x": case.inputs["x"]}), case])
    model.graph.node[1].input[0] = "pre__y"
    del model.graph.input[1]
    sdfg = canonical_model(model, "shape_buffer").sdfg
    assert_flat_maps(sdfg)
    source = "input" if case.op_type in ("Expand", "Tile") else "data"
    assert buffer_copies(sdfg) == ([("pre__y", f"{source}_copy", reason)] if reason else [])


def test_split_with_data_sizes_is_rejected():
    from onnx import TensorProto, helper

    from dcaccel.errors import UnsupportedOpError

    node = helper.make_node("Split", ["x", "split"], ["a", "b"], name="split")
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
            helper.make_tensor_value_info("split", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in "ab"],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    with pytest.raises(UnsupportedOpError, match="Split.*'split' must be a constant"):
        canonical_model(model, "split_data")
