"""Canonical element-wise ops real models use: variadic Sum/Max/Min/Mean, comparisons, Where, Cast, and the
activations (LeakyRelu, PRelu, HardSigmoid, HardSwish, Softplus, Mish).

Values against onnxruntime (all cases in one compiled SDFG); structure without compiling: each op lowers to
one task of the task DAG, which reads every data input once per output element and writes every output
element once.
"""

import math

import numpy as np
import pytest

from tests.expansions.canonical_onnx import (
    OpCase,
    build_model,
    lowered_dags,
    random_feed,
    run_canonical,
    run_reference,
)

F16, F32, I32 = np.float16, np.float32, np.int32
BOOL = np.bool_
TENSOR_TYPE = {"FLOAT16": 10, "DOUBLE": 11, "INT8": 3, "INT32": 6, "INT64": 7, "BOOL": 9, "FLOAT": 1}
"""ONNX element types (``TensorProto.DataType``) used as Cast's ``to``."""

ACTIVATIONS = ("LeakyRelu", "HardSigmoid", "HardSwish", "Softplus", "Mish")
VARIADIC = ("Sum", "Max", "Min", "Mean")
COMPARISONS = ("Equal", "Less", "Greater")
SHAPES = {"2x3x4": (2, 3, 4), "1x1x5": (1, 1, 5), "7": (7,), "rank0": ()}
VARIADIC_SHAPES = {
    "same": [(2, 3, 4), (2, 3, 4)],
    "three_with_scalar": [(2, 3, 4), (3, 1), ()],
    "outer": [(4, 1), (1, 5)],
    "single": [(3, 1)],
    "ones": [(1, 1, 5), (1, 1, 1)],
    "rank0": [(), ()],
}
BINARY_SHAPES = {
    "same": [(4, 5), (4, 5)],
    "bcast": [(2, 3, 4), (3, 1)],
    "scalar": [(4,), ()],
    "rank0": [(), ()],
}
WIDE = np.array([-100, -30, -6, -3.5, -3, -1.2, -0.25, 0, 0.25, 0.8, 1, 3, 3.5, 6, 30, 100], F32)
"""Inputs covering every branch: clamping of the hard functions, overflow of exp in Softplus and Mish."""


def _named(shapes) -> dict[str, tuple]:
    return {f"x{k}": shape for k, shape in enumerate(shapes)}


CASES = [
    *(OpCase(f"{op}_{label}", op, ["x"], {"x": shape}) for op in ACTIVATIONS for label, shape in SHAPES.items()),
    *(OpCase(f"{op}_wide", op, ["x"], constants={"x": WIDE}) for op in ACTIVATIONS),
    *(OpCase(f"{op}_float16", op, ["x"], {"x": (3, 4)}, dtype=F16) for op in ACTIVATIONS),
    OpCase("LeakyRelu_alpha", "LeakyRelu", ["x"], {"x": (3, 4)}, attributes={"alpha": 0.3}),
    OpCase("HardSigmoid_alpha_beta", "HardSigmoid", ["x"], {"x": (3, 4)}, attributes={"alpha": 0.5, "beta": 0.6}),
    OpCase("PRelu_slope_vector", "PRelu", ["x", "s"], {"x": (2, 3, 4)}, {"s": np.array([0.1, -0.2, 0.3, 2], F32)}),
    OpCase("PRelu_slope_data", "PRelu", ["x", "s"], {"x": (2, 3, 4), "s": (3, 1)}),
    OpCase("PRelu_slope_same", "PRelu", ["x", "s"], {"x": (2, 5), "s": (2, 5)}),
    OpCase("PRelu_slope_rank0", "PRelu", ["x", "s"], {"x": (6,), "s": ()}),
    OpCase("PRelu_slope_constant", "PRelu", ["x", "s"], {"x": (2, 3)}, {"s": np.array(0.25, F32)}),
    OpCase("PRelu_rank0", "PRelu", ["x", "s"], {"x": (), "s": ()}),
    OpCase("PRelu_float16", "PRelu", ["x", "s"], {"x": (3, 4), "s": (4,)}, dtype=F16),
    *(
        OpCase(f"{op}_{label}", op, list(_named(shapes)), _named(shapes))
        for op in VARIADIC
        for label, shapes in VARIADIC_SHAPES.items()
    ),
    *(OpCase(f"{op}_float16", op, ["x0", "x1"], _named([(3, 4), (4,)]), dtype=F16) for op in VARIADIC),
    *(OpCase(f"{op}_int", op, ["x0", "x1", "x2"], _named([(3, 4), (4,), (3, 1)]), dtype=I32) for op in ("Max", "Min")),
    *(
        OpCase(f"{op}_int_{label}", op, ["a", "b"], dict(zip("ab", shapes, strict=True)), dtype=I32)
        for op in COMPARISONS
        for label, shapes in BINARY_SHAPES.items()
    ),
    *(OpCase(f"{op}_float_bcast", op, ["a", "b"], {"a": (2, 3, 4), "b": (3, 1)}) for op in COMPARISONS[1:]),
    OpCase("Equal_float_ties", "Equal", ["a", "b"], constants={"a": WIDE, "b": np.abs(WIDE)}),
    OpCase("Equal_bool", "Equal", ["a", "b"], {"a": (2, 3), "b": (3,)}, dtype=BOOL),
    OpCase("Greater_float16", "Greater", ["a", "b"], {"a": (2, 3), "b": (3,)}, dtype=F16),
    OpCase(
        "Where_constant_condition", "Where", ["c", "a", "b"], {"a": (2, 3), "b": ()}, {"c": np.eye(2, 3, dtype=bool)}
    ),
    OpCase("Where_bcast", "Where", ["c", "a", "b"], {"a": (2, 1), "b": (1, 3)}, {"c": np.array([True, False, True])}),
    OpCase("Where_scalar_condition", "Where", ["c", "a", "b"], {"a": (2, 3), "b": (3,)}, {"c": np.array(False)}),
    OpCase(
        "Where_data_condition",
        "Where",
        ["c", "a", "b"],
        {"c": (2, 3)},
        {"a": WIDE[:3], "b": WIDE[3:5, None]},
        dtype=BOOL,
    ),
    OpCase("Where_rank0", "Where", ["c", "a", "b"], {"c": ()}, {"a": WIDE[8], "b": WIDE[9]}, dtype=BOOL),
    *(
        OpCase(f"Cast_float_to_{to}", "Cast", ["x"], constants={"x": WIDE[4:12]}, attributes={"to": TENSOR_TYPE[to]})
        for to in ("INT8", "INT32", "INT64", "BOOL", "FLOAT16", "DOUBLE")
    ),
    *(
        OpCase(f"Cast_int_to_{to}", "Cast", ["x"], {"x": (2, 5)}, attributes={"to": TENSOR_TYPE[to]}, dtype=I32)
        for to in ("FLOAT", "INT64", "BOOL", "FLOAT16")
    ),
    *(
        OpCase(f"Cast_bool_to_{to}", "Cast", ["x"], {"x": (2, 5)}, attributes={"to": TENSOR_TYPE[to]}, dtype=BOOL)
        for to in ("FLOAT", "INT32")
    ),
    OpCase(
        "Cast_float16_to_FLOAT", "Cast", ["x"], {"x": (1, 1, 5)}, attributes={"to": TENSOR_TYPE["FLOAT"]}, dtype=F16
    ),
    OpCase("Cast_rank0", "Cast", ["x"], {"x": ()}, attributes={"to": TENSOR_TYPE["INT32"]}),
]


def feed(cases, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs: standard normal, small integers (ties for the comparisons), random booleans."""
    values = random_feed(cases, seed)
    rng = np.random.default_rng(seed + 1)
    for case in cases:
        for name, shape in case.inputs.items():
            if case.dtype is BOOL:
                values[case.tensor(name)] = np.asarray(rng.random(shape) < 0.5)
            elif case.dtype is F32:  # beyond the clamping points of HardSigmoid (|x| > 2.5) and HardSwish (|x| > 3)
                values[case.tensor(name)] = np.asarray(3 * values[case.tensor(name)], F32)
    return values


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementations (one compile)."""
    model = build_model(CASES)
    inputs = feed(CASES)
    return run_reference(model, inputs), run_canonical(model, inputs, "test_elementwise_ops")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    reference, canonical = results
    name = case.tensor("y")
    actual, expected = canonical[name], reference[name]
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    if expected.dtype.kind != "f":
        np.testing.assert_array_equal(actual, expected)
    elif expected.dtype == F16:
        np.testing.assert_allclose(actual, expected, rtol=2e-3, atol=1e-3)
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


def test_feed_reaches_every_branch():
    """The random inputs cover both sides of the comparisons, ties included, and the clamped ranges."""
    inputs = feed(CASES)
    ties = [c for c in CASES if c.op_type == "Equal" and c.dtype is I32 and c.name.endswith(("same", "bcast"))]
    assert all(np.any(np.equal(*(inputs[c.tensor(n)] for n in "ab"))) for c in ties)
    wide = inputs[CASES[0].tensor("x")]
    assert wide.min() < -3 and wide.max() > 3
    condition = inputs[next(c for c in CASES if c.name == "Where_data_condition").tensor("c")]
    assert condition.any() and not condition.all()


def _data_inputs(case: OpCase) -> list[str]:
    """The inputs read as data: graph inputs and constants of more than one element (a single-element constant
    is folded into the tasklet)."""
    return [n for n in case.node_inputs if n in case.inputs or np.size(case.constants[n]) > 1]


def _output_size(case: OpCase) -> int:
    shapes = [*case.inputs.values(), *(np.shape(v) for v in case.constants.values())]
    return math.prod(np.broadcast_shapes(*shapes))


@pytest.fixture(scope="module")
def dags():
    """The task DAG of every case lowered canonically (symbolic: nothing compiled), by case name.

    Imported without constant folding, which would compute the cases whose inputs are all constants.
    """
    return lowered_dags(sorted(CASES, key=lambda c: c.name not in FAST_CASES), "elementwise_ops_dag")


#: The fast subset's cases of the task-DAG test: one per op, the one reading the most inputs as data (lowered
#: together, one group); the full suite checks every case.
FAST_CASES = {
    max((c for c in CASES if c.op_type == op), key=lambda c: len(_data_inputs(c))).name
    for op in dict.fromkeys(c.op_type for c in CASES)
}


@pytest.mark.parametrize(
    "case",
    [c if c.name in FAST_CASES else pytest.param(c, marks=pytest.mark.slow) for c in CASES],
    ids=lambda c: c.name,
)
def test_one_task_per_op_with_the_volumes_of_a_flat_map(case, dags):
    from dcaccel.dag import NodeKind

    dag = dags[case.name]
    (task,) = [t for t in dag.tasks if dag.info(t).node == case.name]
    assert dag.info(task).op == case.op_type
    size = _output_size(case)
    reads = {dag.info(p).container: dag.volume(p, task) for p in dag.predecessors(task)}
    assert reads == {case.tensor(n): size for n in _data_inputs(case)}
    (output,) = dag.successors(task)
    assert dag.kind(output) is NodeKind.BUFFER
    assert dag.volume(task, output) == size


@pytest.mark.slow
def test_every_task_is_one_flat_map():
    from tests.expansions.canonical_onnx import assert_flat_maps, canonical_model

    cases = [
        c
        for c in CASES
        if c.name in ("Mish_wide", "PRelu_slope_data", "Mean_three_with_scalar", "Where_data_condition")
    ]
    scopes = assert_flat_maps(canonical_model(build_model(cases), "elementwise_ops_structure").sdfg)
    assert sorted(s.label for s in scopes) == sorted(f"{c.name}_{c.op_type.lower()}_map" for c in cases)


@pytest.mark.parametrize("to", ["BFLOAT16", "STRING", "FLOAT8E4M3FN"])
def test_cast_to_a_type_dace_lacks_is_rejected_before_expansion(to):
    import dace
    import onnx
    from dace.libraries.onnx.nodes import get_onnx_node

    from dcaccel.errors import UnsupportedOpError
    from dcaccel.expansions import register
    from dcaccel.expansions.registry import implementation_of

    register()
    sdfg = dace.SDFG("cast_rejected")
    sdfg.add_array("x", [4], dace.float32)
    sdfg.add_array("y", [4], dace.float32)
    state = sdfg.add_state()
    node = get_onnx_node("Cast", 21)("cast", to=onnx.TensorProto.DataType.Value(to))
    state.add_edge(state.add_read("x"), None, node, "input", dace.Memlet("x[0:4]"))
    state.add_edge(node, "output", state.add_write("y"), None, dace.Memlet("y[0:4]"))
    before = len(state.nodes())
    with pytest.raises(UnsupportedOpError, match=f"Cast.*cast.*to={to} \\(no DaCe type\\)"):
        implementation_of(node, "canonical").expansion.check(node, state, sdfg)
    assert len(state.nodes()) == before


def test_every_listed_op_has_a_canonical_implementation():
    import dcaccel.expansions

    listed = {*ACTIVATIONS, *VARIADIC, *COMPARISONS, "PRelu", "Where", "Cast", "Sigmoid", "Mul"}
    assert {op: dcaccel.expansions.implementations(op) for op in listed} == {op: ["canonical"] for op in listed}
