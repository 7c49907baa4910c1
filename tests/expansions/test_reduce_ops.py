"""Canonical ReduceSum, ReduceMax, ReduceMin, ReduceL2 and ArgMax over axes, keepdims and shapes: values
against onnxruntime (one compile per opset), task structure and volumes of the extracted DAG, rejections."""

import itertools
import math

import numpy as np
import pytest

from tests.expansions.canonical_onnx import (
    OpCase,
    arg_case,
    arg_cases,
    assert_output_matches,
    build_model,
    lowered_dag,
    opset_case_id,
    opset_cases,
    outputs_per_opset,
    task_volumes,
)

REDUCE_OPS = ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2")

# (label, input shape, axes; None reduces every axis): a middle axis, two axes, a negative axis, a
# reduced axis of size 1, every axis of a rank-1 input, every axis by default.
AXES = [
    ("middle", (2, 3, 4), [1]),
    ("first_and_last", (2, 3, 4), [0, 2]),
    ("negative", (2, 3, 4), [-1]),
    ("size_one_axis", (3, 1, 2), [1]),
    ("rank_one", (5,), [0]),
    ("all_by_default", (2, 3), None),
]


def _reduce(op, label, shape, axes, keepdims, opset=18, **attributes):
    name = f"{op}_{label}_keep{keepdims}".lower()
    attributes = {"keepdims": keepdims, **attributes}
    if axes is not None and opset < 18 and not (op == "ReduceSum" and opset >= 13):
        return OpCase(name, op, ["x"], {"x": shape}, {}, {**attributes, "axes": axes})
    constants = {} if axes is None else {"axes": np.array(axes, np.int64)}
    return OpCase(name, op, ["x", "axes"] if axes is not None else ["x"], {"x": shape}, constants, attributes)


REDUCE_CASES = [
    _reduce(op, label, shape, axes, keepdims)
    for op, (label, shape, axes), keepdims in itertools.product(REDUCE_OPS, AXES, (0, 1))
] + [_reduce(op, "noop", (2, 3), None, 1, noop_with_empty_axes=1) for op in REDUCE_OPS]

ARGMAX_CASES = arg_cases("ArgMax")

# Axes as an attribute (opset 11; ReduceSum took them as an input from opset 13 on) and ArgMax-11.
ATTRIBUTE_CASES = [
    _reduce(op, label, shape, axes, 0, opset=11)
    for op, (label, shape, axes) in itertools.product(REDUCE_OPS, [AXES[1], AXES[3]])
] + [arg_case("ArgMax", "opset11", (2, 3, 4), 2, 1, 0)]
for case in ATTRIBUTE_CASES[-1:]:
    case.attributes.pop("select_last_index")

MODELS = {18: REDUCE_CASES + ARGMAX_CASES, 11: ATTRIBUTE_CASES}


@pytest.fixture(scope="module")
def results():
    """Outputs of every case per opset, from onnxruntime and from the canonical implementations (one compile each)."""
    return outputs_per_opset(MODELS, "test_reduce_ops")


@pytest.mark.slow
@pytest.mark.parametrize(("opset", "case"), opset_cases(MODELS), ids=opset_case_id)
def test_matches_onnxruntime(opset, case, results):
    assert_output_matches(results[opset], case.tensor("y"), rtol=1e-5, atol=1e-6, same_dtype=True)


def _task_volumes(case: OpCase) -> dict[str, tuple[int, int]]:
    """Per task of ``case`` lowered at opset 18 (label without the case's prefix, DAG validated): total volume in
    and out."""
    dag = lowered_dag(build_model([case], opset=18), case.name)
    dag.validate()
    return task_volumes(dag, case.name)


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize(("label", "shape", "axes"), AXES, ids=[a[0] for a in AXES])
def test_reduction_tasks_read_the_input_once(op, label, shape, axes):
    """init (the accumulator), reduce (reads every input element, accumulates into every one), output."""
    case = OpCase("case", op, ["x", "axes"] if axes else ["x"], {"x": shape}, _axes(axes), {"keepdims": 0})
    size = math.prod(shape)
    kept = math.prod(s for d, s in enumerate(shape) if axes is not None and d not in [a % len(shape) for a in axes])
    assert _task_volumes(case) == {
        "init_accumulator": (kept, kept),
        "reduce": (size + size, size),  # the input and the accumulator it combines with, element by element
        "output": (kept, kept),
    }


def _axes(axes):
    return {} if axes is None else {"axes": np.array(axes, np.int64)}


@pytest.mark.parametrize("keepdims", (0, 1))
@pytest.mark.parametrize(("shape", "axis"), [((2, 3, 4), 1), ((3, 1, 2), 1), ((6,), 0)])
def test_argmax_tasks_max_then_index(shape, axis, keepdims):
    """The maximum and the index steps read the input once each; the output reads the index of each row."""
    case = OpCase("case", "ArgMax", ["x"], {"x": shape}, {}, {"axis": axis, "keepdims": keepdims})
    size, rows = math.prod(shape), math.prod(shape) // shape[axis]
    assert _task_volumes(case) == {
        "init_row_max": (rows, rows),
        "init_index": (rows, rows),
        "max": (2 * size, size),
        "index": (3 * size, size),  # input, row maximum and the index it combines with
        "output": (rows, rows),
    }


def test_argmax_buffers():
    from dcaccel.buffers import BufferReason, buffer_reason
    from tests.expansions.canonical_onnx import assert_flat_maps, canonical_model

    case = arg_case("ArgMax", "marks", (2, 3), 1, 1, 0)
    sdfg = canonical_model(build_model([case], opset=18), "argmax_marks").sdfg
    assert_flat_maps(sdfg)  # inlines the expansion
    transients = {name: d for name, d in sdfg.arrays.items() if d.transient and buffer_reason(d)}
    marks = {name.rstrip("_0123456789"): buffer_reason(d) for name, d in transients.items()}
    assert marks == {"row_max": BufferReason.REUSE, "index": BufferReason.ACCUMULATE}
