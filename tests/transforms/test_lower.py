"""lower(): choice resolution, errors, unused choices, and the fully lowered result (no compile)."""

import warnings

import dace
import numpy as np
import onnx
import pytest
from dace.ml import ONNXModel
from dace.sdfg.utils import inline_sdfgs
from dace.transformation.passes.simplify import SimplifyPass
from onnx import TensorProto, helper, numpy_helper

from dcaccel.buffers import BufferReason, buffer_reason
from dcaccel.errors import DcaccelError, UnsupportedOpError
from dcaccel.transforms.checks import assert_fully_lowered, lowering_violations
from dcaccel.transforms.lower import LoweredWorkload, expand_all, lower


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.checker.check_model(model, full_check=True)
    return model


def _value(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def _weight(name, shape, rng):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


@pytest.fixture(scope="module")
def two_convs_and_a_matmul():
    """x → conv1 → conv2 → y, and a → mm (MatMul with a weight) → z: the ONNX-imported SDFG."""
    rng = np.random.default_rng(0)
    model = _model(
        [
            helper.make_node("Conv", ["x", "w1", "b1"], ["h"], name="conv1"),
            helper.make_node("Conv", ["h", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1]),
            helper.make_node("MatMul", ["a", "m"], ["z"], name="mm"),
        ],
        [_value("x", (1, 2, 8, 8)), _value("a", (3, 4))],
        [_value("y", (1, 3, 6, 6)), _value("z", (3, 5))],
        [
            _weight("w1", (4, 2, 3, 3), rng),
            _weight("b1", (4,), rng),
            _weight("w2", (3, 4, 3, 3), rng),
            _weight("m", (4, 5), rng),
        ],
    )
    return ONNXModel("two_convs", model).sdfg


@pytest.mark.parametrize(
    "choices, expected",
    [
        ({}, {"conv1": "mv", "conv2": "mv", "mm": "mv"}),
        ({"Conv": "op"}, {"conv1": "op", "conv2": "op", "mm": "mv"}),
        ({"Conv": "op", "conv2": "lmv"}, {"conv1": "op", "conv2": "lmv", "mm": "mv"}),
        ({"conv1": "direct", "MatMul": "lmv"}, {"conv1": "direct", "conv2": "mv", "mm": "lmv"}),
    ],
)
def test_node_name_wins_over_op_type(two_convs_and_a_matmul, choices, expected):
    lowered = lower(two_convs_and_a_matmul, choices)
    assert lowered.implementations == expected
    assert lowered.unused_choices == {}
    assert lowered.workload is None


def test_lowered_sdfg_is_maps_only_and_marks_program_io(two_convs_and_a_matmul):
    lowered = lower(two_convs_and_a_matmul, {"Conv": "lmv"})
    assert_fully_lowered(lowered.sdfg)
    program_io = {name for name, desc in lowered.sdfg.arrays.items() if not desc.transient}
    assert program_io >= {"x", "a", "w1", "b1", "w2", "m"}
    assert {buffer_reason(lowered.sdfg.arrays[name]) for name in program_io} == {BufferReason.PROGRAM_IO}
    # the weights stay containers passed at run time
    assert set(lowered.sdfg.arg_names) | set(lowered.sdfg.arrays) >= {"w1", "w2", "m"}


def test_source_sdfg_is_not_modified(two_convs_and_a_matmul):
    lower(two_convs_and_a_matmul, {"Conv": "op"})
    violations = lowering_violations(two_convs_and_a_matmul)
    assert len(violations) == 3 and all(v.startswith("ONNX node") for v in violations)


def test_unknown_implementation_lists_the_available_ones(two_convs_and_a_matmul):
    with pytest.raises(
        DcaccelError, match=r"Conv node 'conv2': no implementation 'fast'; available: direct, lmv, mv, op"
    ):
        lower(two_convs_and_a_matmul, {"conv2": "fast"})


def test_choices_for_absent_ops_or_nodes_are_unused_with_one_warning(two_convs_and_a_matmul):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lowered = lower(two_convs_and_a_matmul, {"Softmax": "canonical", "conv9": "op", "Conv": "op"})
    assert lowered.unused_choices == {"Softmax": "canonical", "conv9": "op"}
    unused_warnings = [w for w in caught if "choices naming no node or op type" in str(w.message)]
    assert len(unused_warnings) == 1
    assert "Softmax" in str(unused_warnings[0].message) and "conv9" in str(unused_warnings[0].message)


@pytest.mark.parametrize(
    ("strict", "detail"),
    [
        (
            False,
            "onnxruntime cannot run it on the host: [ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an "
            "implementation for GlobalLpPool(2) node with name ''",
        ),
        (True, "no dcaccel implementation"),
    ],
)
def test_op_without_any_implementation_is_unsupported(strict, detail):
    """GlobalLpPool of doubles has neither a dcaccel nor a DaCe implementation, and onnxruntime has no kernel for
    it on doubles, so no host task (dcaccel/transforms/host.py) can run it: not even an opaque task
    (tests/dag/test_opaque.py)."""
    model = _model(
        [helper.make_node("GlobalLpPool", ["x"], ["y"], name="pool1")],
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [1, 2, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [1, 2, 1, 1])],
    )
    with pytest.raises(UnsupportedOpError) as raised:
        lower(ONNXModel("pool", model).sdfg, strict=strict)
    assert str(raised.value) == f"unsupported op GlobalLpPool (node 'pool1'): {detail}"


@pytest.mark.parametrize(
    ("choices", "strict"),
    [({"MatMul": "mv"}, False), ({"dot": "mv"}, False), ({}, True)],
    ids=["op_chosen", "node_chosen", "strict"],
)
def test_implementation_that_does_not_apply_is_unsupported_when_chosen_or_strict(choices, strict):
    """A dot product of two vectors, which the MMM's implementations refuse: an opaque task when nothing names it
    (tests/transforms/test_refused_to_host.py), refused in one line with the graph untouched when the user chose
    its implementation (by op type or node name) or lowers strictly."""
    model = _model(
        [helper.make_node("MatMul", ["u", "v"], ["d"], name="dot")],
        [_value("u", (4,)), _value("v", (4,))],
        [_value("d", ())],
    )
    sdfg = ONNXModel("dot", model).sdfg
    before = sdfg.to_json()
    with pytest.raises(
        UnsupportedOpError, match=r"^unsupported op MatMul \(node 'dot'\): a dot product of two vectors$"
    ):
        lower(sdfg, choices, strict=strict)
    assert sdfg.to_json() == before


@pytest.mark.parametrize("choices", [["Conv"], "Conv=op", ("Conv", "op")])
def test_choices_that_are_not_a_mapping_are_one_line_errors(conv_seed, choices):
    with pytest.raises(DcaccelError, match=r"^lower: choices must map op types or node names to implementation names"):
        lower(conv_seed, choices)


@pytest.mark.slow
def test_simplify_would_remove_the_im2col_container_so_lower_skips_that_pass(two_convs_and_a_matmul):
    """DaCe's full simplification eliminates X_col (a copy into the MMM operand buffer) as redundant;
    lower() keeps it, as Contract 3 needs."""
    expanded = lower(two_convs_and_a_matmul, {"Conv": "mv"}).sdfg
    assert any(name.startswith("X_col") for name in expanded.arrays)
    reference = _expanded_copy(two_convs_and_a_matmul)
    SimplifyPass().apply_pass(reference, {})
    assert not any(name.startswith("X_col") for name in reference.arrays)


def _expanded_copy(sdfg):
    copy = dace.SDFG.from_json(sdfg.to_json())
    expand_all(copy, {"Conv": "mv"})
    inline_sdfgs(copy)
    return copy


def test_assert_fully_lowered_names_the_library_nodes(two_convs_and_a_matmul):
    with pytest.raises(AssertionError, match=r"ONNX node 'conv1' \(Conv\)"):
        assert_fully_lowered(two_convs_and_a_matmul)


def test_assert_fully_lowered_rejects_an_opaque_tasklet():
    sdfg = dace.SDFG("opaque")
    sdfg.add_array("a", (4,), dace.float32)
    sdfg.add_array("b", (4,), dace.float32)
    state = sdfg.add_state("copy_all")
    tasklet = state.add_tasklet(
        "whole_op", {"__in": None}, {"__out": None}, "for i in range(4):\n    __out[i] = __in[i]"
    )
    state.add_edge(state.add_read("a"), None, tasklet, "__in", dace.Memlet("a[0:4]"))
    state.add_edge(tasklet, "__out", state.add_write("b"), None, dace.Memlet("b[0:4]"))
    assert lowering_violations(sdfg) == ["tasklet 'whole_op' outside a map moves whole arrays in state 'copy_all'"]


def test_workload_lower_delegates_and_keeps_the_workload(conv_seed):
    lowered = conv_seed.lower({"Conv": "lmv"})
    assert isinstance(lowered, LoweredWorkload)
    assert lowered.workload is conv_seed
    assert list(lowered.implementations.values()) == ["lmv"]
    assert_fully_lowered(lowered.sdfg)
    assert lowering_violations(conv_seed.sdfg)  # the workload keeps its ONNX node


@pytest.mark.parametrize("shape", ["mv", "op", "lmv"])
def test_program_workload_lowers_its_matrix_product(mmm, shape):
    lowered = lower(mmm, {"MatMul": shape})
    assert set(lowered.implementations.values()) == {shape}
    assert_fully_lowered(lowered.sdfg)


@pytest.mark.parametrize(
    ("choices", "maps"),
    [
        # mv: Xr, Wr, BcastA, MV, Gather, AddBias, ReshapeOut; no bias: no AddBias; MatMul: BcastA, MV, Gather
        ({}, {"conv1": 7, "conv2": 6, "mm": 3}),
        ({"Conv": "direct"}, {"conv1": 2, "conv2": 1, "mm": 3}),  # with a bias: Conv, AddBias
    ],
)
def test_every_top_level_map_knows_the_node_it_lowers(two_convs_and_a_matmul, choices, maps):
    lowered = lower(two_convs_and_a_matmul, choices)
    top_level = [
        node
        for state in lowered.sdfg.states()
        for node in state.nodes()
        if isinstance(node, dace.nodes.MapEntry) and state.entry_node(node) is None
    ]
    origins = [lowered.origins[entry] for entry in top_level]
    counts = {name: sum(origin.node == name for origin in origins) for name in maps}
    assert counts == maps
    assert {(o.node, o.op_type, o.implementation) for o in origins} == {
        ("conv1", "Conv", choices.get("Conv", "mv")),
        ("conv2", "Conv", choices.get("Conv", "mv")),
        ("mm", "MatMul", "mv"),
    }


@pytest.mark.slow
def test_lowering_again_reuses_expansions_and_gives_the_same_program():
    """A cache of a workload's lowerings keeps each node's expansion per implementation; a later lowering
    given it under another assignment re-expands only the nodes whose choice is new, and gives exactly the
    DAG of a lowering without it. The workload itself keeps nothing."""
    from dcaccel import workloads
    from dcaccel.dag import extract
    from dcaccel.transforms.lower import ExpansionCache

    workload = workloads.get("lenet")
    cache = ExpansionCache()
    sizes = []
    for choices in ({"Conv": "mv"}, {"Conv": "op", "Gemm": "lmv"}, {"Conv": "mv", "Gemm": "lmv"}, {"Conv": "op"}):
        lowered = lower(workload, choices, expansions=cache)
        fresh = workload.lower(choices)  # no cache; lowering leaves the SDFG as it was
        assert extract(lowered).to_json() == extract(fresh).to_json()
        assert lowered.implementations == fresh.implementations
        sizes.append(len(cache))
    # first: conv1-2, fc1-3 (mv), Relu_0-3, MaxPool_0-1, Softmax_0, Reshape_0 = 13 (Reshape disconnects
    # its constant shape input: a reuse disconnects it again); then conv1-2 under op and fc1-3 under lmv
    assert sizes == [13, 18, 18, 18]
    assert {key for key in cache if key[0] == "conv1"} == {("conv1", "mv"), ("conv1", "op")}
    assert not any("expansion" in name for name in vars(workload))
