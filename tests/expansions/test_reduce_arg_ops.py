"""Canonical ReduceProd, ReduceL1, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp, ArgMin and Hardmax: values
against onnxruntime (one compile per opset, slow), the tasks of each op's lowering (fast), refusals."""

import itertools

import numpy as np
import pytest

from tests.expansions.canonical_onnx import (
    OpCase,
    arg_cases,
    assert_node_tasks,
    assert_output_matches,
    build_model,
    lowered_dags,
    opset_case_id,
    opset_cases,
    outputs_per_opset,
    random_feed,
)

REDUCE_OPS = ("ReduceProd", "ReduceL1", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")

# (label, input shape, axes; None reduces every axis, [] with noop_with_empty_axes none): a middle axis, two
# axes, a negative axis, a reduced axis of size 1, every axis by default, an empty reduced axis (the identity:
# 1 for the product, 0 for the sums, -inf for the logarithms).
AXES = [
    ("middle", (2, 3, 4), [1]),
    ("first_and_last", (2, 3, 4), [0, 2]),
    ("negative", (2, 3, 4), [-1]),
    ("size_one_axis", (3, 1, 2), [1]),
    ("all_by_default", (2, 3), None),
    ("empty_set", (2, 0, 4), [1]),
]


def _reduce(op, label, shape, axes, keepdims, **attributes):
    name = f"{op}_{label}_keep{keepdims}".lower()
    constants = {} if axes is None else {"axes": np.array(axes, np.int64)}
    inputs = ["x", "axes"] if axes is not None else ["x"]
    return OpCase(name, op, inputs, {"x": shape}, constants, {"keepdims": keepdims, **attributes})


def _hardmax(label, shape, axis, dtype=np.float32):
    return OpCase(f"hardmax_{label}_axis{axis}".replace("-", "m"), "Hardmax", ["x"], {"x": shape}, {}, {"axis": axis})


REDUCE_CASES = [
    _reduce(op, label, shape, axes, keepdims)
    for op, (label, shape, axes), keepdims in itertools.product(REDUCE_OPS, AXES, (0, 1))
] + [_reduce(op, "noop", (2, 3), [], 1, noop_with_empty_axes=1) for op in REDUCE_OPS]

# ReduceLogSumExp of elements up to 1,000: exp overflows float32 beyond 88, the shift by the maximum keeps it finite.
LARGE = np.array([[1000.0, 999.0, -1000.0], [500.0, 500.0, 0.0]], np.float32)
LARGE_CASE = OpCase("reducelogsumexp_large", "ReduceLogSumExp", ["x", "axes"], {}, {"x": LARGE, "axes": [1]})

ARGMIN_CASES = arg_cases("ArgMin")

HARDMAX_CASES = [_hardmax("rank3", (3, 4, 5), axis) for axis in (0, 1, 2, -1)] + [
    _hardmax("rank1", (7,), 0),
    _hardmax("size_one_axis", (3, 1, 2), 1),
    _hardmax("empty", (0, 3), 1),
]
# Hardmax before opset 13 flattens the input to 2-D at axis: along the last axis that is the same.
OPSET11_CASES = [_hardmax("opset11_last", (2, 3, 4), -1), _hardmax("opset11_rank2", (4, 6), 1)]

MODELS = {18: REDUCE_CASES + [LARGE_CASE] + ARGMIN_CASES + HARDMAX_CASES, 11: OPSET11_CASES}


def _feed(cases, seed):
    """The seeded random feed, absolute values for ReduceLogSum (a logarithm of a positive sum) and rows of ties
    for Hardmax's first row (the first maximum wins)."""
    values = random_feed(cases, seed=seed)
    for case in cases:
        name = case.tensor("x")
        if case.op_type == "ReduceLogSum":
            values[name] = np.abs(values[name])
        if case.op_type == "Hardmax" and values[name].size:
            values[name].reshape(-1)[:3] = values[name].max()
    return values


@pytest.fixture(scope="module")
def results():
    """Outputs of every case per opset, from onnxruntime and from the canonical implementations (one compile each)."""
    return outputs_per_opset(MODELS, "test_reduce_arg_ops", feed=_feed)


@pytest.mark.slow
@pytest.mark.parametrize(("opset", "case"), opset_cases(MODELS), ids=opset_case_id)
def test_matches_onnxruntime(opset, case, results):
    exact = case.op_type in ("ArgMin", "Hardmax")
    rtol = None if exact else 1e-5
    assert_output_matches(results[opset], case.tensor("y"), rtol=rtol, atol=0 if exact else 1e-6, same_dtype=True)


@pytest.mark.slow
def test_logsumexp_of_large_elements_is_finite(results):
    reference, canonical = results[18]
    np.testing.assert_allclose(
        canonical[LARGE_CASE.tensor("y")], [[1000 + np.log1p(np.exp(-1.0))], [500 + np.log(2)]], rtol=1e-6
    )
    assert np.isfinite(reference[LARGE_CASE.tensor("y")]).all()


#: One case per op: the tasks of its lowering, in dataflow order (labels without the case's prefix).
TASKS = {
    "reduceprod_middle_keep0": ["init_accumulator", "reduce", "output"],
    "reducel1_middle_keep0": ["init_accumulator", "reduce", "output"],
    "reducesumsquare_middle_keep0": ["init_accumulator", "reduce", "output"],
    "reducelogsum_middle_keep0": ["init_accumulator", "reduce", "output"],
    "reducelogsumexp_middle_keep0": ["init_row_max", "init_accumulator", "max", "reduce", "output"],
    "argmin_float_axis1_keep0_last0": ["init_row_min", "init_index", "min", "index", "output"],
    "hardmax_rank3_axis1": ["init_row_max", "init_index", "max", "index", "output"],
}


@pytest.fixture(scope="module")
def dags():
    cases = [c for c in MODELS[18] if c.name in TASKS]
    return lowered_dags(cases, "reduce_arg_ops_dag", group=1)


@pytest.mark.parametrize("name", TASKS)
def test_lowers_to_its_tasks_none_opaque(name, dags):
    assert_node_tasks(dags[name], name, TASKS[name])


def test_hardmax_before_opset13_off_the_last_axis_is_refused():
    from dace.ml import ONNXModel

    from dcaccel.errors import UnsupportedOpError
    from dcaccel.expansions import register
    from dcaccel.expansions.registry import implementation_of

    register()
    case = _hardmax("opset11_middle", (2, 3, 4), 1)
    sdfg = ONNXModel("hardmax_refused", build_model([case], opset=11), onnx_simplify=False).sdfg
    ((node, state),) = [(n, s) for n, s in sdfg.all_nodes_recursive() if getattr(n, "label", "") == case.name]
    with pytest.raises(UnsupportedOpError, match=r"Hardmax.*hardmax_opset11_middle_axis1.*axis=1 before opset 13"):
        implementation_of(node, "canonical").expansion.check(node, state, sdfg)


def _output_dims(model) -> list[int]:
    from dcaccel.frontend.shapes import infer_onnx_shapes

    (output,) = infer_onnx_shapes(model).graph.output
    return [d.dim_value for d in output.type.tensor_type.shape.dim]


def test_import_shapes_the_reductions_of_axes_inputs():
    """onnxruntime's shape inference (DaCe's importer's) writes no shape for ReduceL1's output (opset 18, axes an
    input) and reads ReduceSum's empty axes as no reduction; the import takes ONNX's shape, and leaves the empty
    axes out (``frontend.shapes``)."""
    l1 = _reduce("ReduceL1", "middle", (2, 3, 4), [1], 0)
    assert _output_dims(build_model([l1], opset=18)) == [2, 4]
    every = _reduce("ReduceSum", "empty_axes", (2, 3), [], 1)
    assert _output_dims(build_model([every], opset=18)) == [1, 1]


def test_empty_axes_read_by_another_node_shape_it():
    """A ReduceSum of empty axes read by a Relu: the axes are left out (every axis reduced, the same), so that
    onnxruntime's inference, which reads empty axes as no reduction, shapes the Relu [1, 1] too."""
    from onnx import helper

    model = build_model([_reduce("ReduceSum", "empty_axes", (2, 3), [], 1)], opset=18)
    summed = model.graph.output[0].name
    model.graph.node.append(helper.make_node("Relu", [summed], ["relu"], name="relu"))
    model.graph.output[0].name = "relu"
    model.graph.output[0].type.tensor_type.ClearField("shape")
    assert _output_dims(model) == [1, 1]


def test_every_op_has_a_canonical_implementation():
    import dcaccel.expansions

    ops = {*REDUCE_OPS, "ArgMin", "Hardmax"}
    assert {op: dcaccel.expansions.implementations(op) for op in ops} == {op: ["canonical"] for op in ops}
