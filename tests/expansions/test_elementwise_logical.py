"""Canonical logical and bitwise element-wise ops: And, Or, Xor, Not, BitwiseAnd/Or/Xor/Not and BitShift.

Values against onnxruntime (every case in one compiled SDFG; the signed shifts of BitShift-28 in a second),
over shapes with numpy broadcasting (size-1 axes, rank 0) and every integer width; each op lowers to one
task of the task DAG reading each data input once per output element.
"""

import math

import numpy as np
import pytest

from tests.expansions.canonical_onnx import (
    OPSET,
    OpCase,
    assert_flat_maps,
    assert_output_matches,
    build_model,
    canonical_model,
    lowered_dags,
    run_canonical,
    run_reference,
)

LOGICAL = ("And", "Or", "Xor")
BITWISE = ("BitwiseAnd", "BitwiseOr", "BitwiseXor")
BINARY_SHAPES = {
    "same": [(2, 3), (2, 3)],
    "bcast": [(2, 3, 4), (3, 1)],
    "outer": [(4, 1), (1, 5)],
    "scalar": [(4,), ()],
    "rank0": [(), ()],
}
UNARY_SHAPES = {"2x3x4": (2, 3, 4), "1x1x5": (1, 1, 5), "rank0": ()}
SIGNED, UNSIGNED = (np.int8, np.int16, np.int32, np.int64), (np.uint8, np.uint16, np.uint32, np.uint64)


def _binary(op: str, label: str, shapes, dtype, **attributes) -> OpCase:
    return OpCase(f"{op}_{label}", op, ["a", "b"], dict(zip("ab", shapes, strict=True)), {}, attributes, dtype=dtype)


CASES = [
    *(_binary(op, label, shapes, np.bool_) for op in LOGICAL for label, shapes in BINARY_SHAPES.items()),
    *(OpCase(f"Not_{label}", "Not", ["x"], {"x": shape}, dtype=np.bool_) for label, shape in UNARY_SHAPES.items()),
    *(_binary(op, label, shapes, np.int32) for op in BITWISE for label, shapes in BINARY_SHAPES.items()),
    *(_binary(op, np.dtype(t).name, [(3, 4), (4,)], t) for op in BITWISE for t in (*SIGNED[:1], *UNSIGNED)),
    *(OpCase(f"BitwiseNot_{np.dtype(t).name}", "BitwiseNot", ["x"], {"x": (2, 5)}, dtype=t) for t in SIGNED + UNSIGNED),
    OpCase("BitwiseNot_rank0", "BitwiseNot", ["x"], {"x": ()}, dtype=np.int32),
    *(
        _binary("BitShift", f"{direction.lower()}_{np.dtype(t).name}", [(3, 4), (4,)], t, direction=direction)
        for direction in ("LEFT", "RIGHT")
        for t in UNSIGNED
    ),
    _binary("BitShift", "left_bcast", [(2, 1, 3), (4, 1)], np.uint8, direction="LEFT"),
    _binary("BitShift", "right_scalar", [(5,), ()], np.uint32, direction="RIGHT"),
]
OPSET_SIGNED_SHIFTS = 28
SIGNED_SHIFTS = [
    _binary("BitShift", f"{direction.lower()}_{np.dtype(t).name}_signed", [(4, 6), (6,)], t, direction=direction)
    for direction in ("LEFT", "RIGHT")
    for t in (*SIGNED, np.uint16)
]
"""BitShift-28: signed types, and shift amounts that are negative or at least the width of the type."""


def feed(cases, seed: int = 0) -> dict[str, np.ndarray]:
    """Random booleans, and integers over the whole range of their type; shift amounts below the type's width
    (BitShift-11 leaves wider shifts undefined), from -3 to the width + 3 for BitShift-28."""
    rng = np.random.default_rng(seed)
    values = {}
    for case in cases:
        for name, shape in case.inputs.items():
            if case.dtype is np.bool_:
                value = rng.random(shape) < 0.5
            elif case.op_type == "BitShift" and name == "b":
                bits = 8 * np.dtype(case.dtype).itemsize
                low, high = (-3, bits + 3) if case.name.endswith("_signed") else (0, bits - 1)
                value = rng.integers(low, high, size=shape, endpoint=True)
            else:
                info = np.iinfo(case.dtype)
                value = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=case.dtype)
            values[case.tensor(name)] = np.asarray(value, dtype=case.dtype)
    return values


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementations (one compile)."""
    reference, canonical = {}, {}
    for cases, opset in ((CASES, OPSET), (SIGNED_SHIFTS, OPSET_SIGNED_SHIFTS)):
        model = build_model(cases, opset=opset)
        inputs = feed(cases)
        reference.update(run_reference(model, inputs))
        canonical.update(run_canonical(model, inputs, f"test_elementwise_logical_{opset}"))
    return reference, canonical


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES + SIGNED_SHIFTS, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    assert_output_matches(results, case.tensor("y"), same_dtype=True)


def test_feed_shifts_bits_out_and_covers_both_truth_values():
    inputs = feed(CASES)
    shifted = next(c for c in CASES if c.name == "BitShift_left_uint8")
    x, y = (inputs[shifted.tensor(n)].astype(np.int64) for n in "ab")
    assert ((x << y) > np.iinfo(np.uint8).max).any()
    signed = feed(SIGNED_SHIFTS)
    amounts = np.concatenate([signed[c.tensor("b")] for c in SIGNED_SHIFTS])
    assert amounts.min() < 0 and amounts.max() >= 64
    booleans = inputs[next(c for c in CASES if c.name == "And_same").tensor("a")]
    assert booleans.any() and not booleans.all()


@pytest.fixture(scope="module")
def dags():
    """The task DAG of every case lowered canonically (nothing compiled), by case name."""
    return lowered_dags(CASES, "elementwise_logical_dag")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_one_task_per_op_reading_every_input_per_output_element(case, dags):
    from dcaccel.dag import NodeKind
    from dcaccel.dag.metrics import opaque_work

    dag = dags[case.name]
    assert opaque_work(dag)[0] == 0
    (task,) = [t for t in dag.tasks if dag.info(t).node == case.name]
    assert dag.info(task).op == case.op_type
    size = math.prod(np.broadcast_shapes(*case.inputs.values()))
    reads = {dag.info(p).container: dag.volume(p, task) for p in dag.predecessors(task)}
    assert reads == {case.tensor(n): size for n in case.node_inputs}
    (output,) = dag.successors(task)
    assert dag.kind(output) is NodeKind.BUFFER
    assert dag.volume(task, output) == size


@pytest.mark.slow
def test_every_task_is_one_flat_map():
    cases = [c for c in CASES if c.name in ("Xor_bcast", "Not_1x1x5", "BitwiseNot_uint8", "BitShift_left_bcast")]
    scopes = assert_flat_maps(canonical_model(build_model(cases), "elementwise_logical_structure").sdfg)
    assert sorted(s.label for s in scopes) == sorted(f"{c.name}_{c.op_type.lower()}_map" for c in cases)


def test_every_op_has_a_canonical_implementation():
    import dcaccel.expansions

    ops = {*LOGICAL, "Not", *BITWISE, "BitwiseNot", "BitShift"}
    assert {op: dcaccel.expansions.implementations(op) for op in ops} == {op: ["canonical"] for op in ops}
