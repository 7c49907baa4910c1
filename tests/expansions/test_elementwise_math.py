"""Canonical element-wise math ops: the inverse and hyperbolic trigonometric functions, Tan, Ceil, Floor, Round,
Sign, IsInf, IsNaN, Mod, the exponential activations (Celu, Elu, Selu), ThresholdedRelu, Shrink, Swish, Softsign,
Dropout in inference mode and BitCast.

Values against onnxruntime (all cases in one compiled SDFG at opset 26, BitCast's first; onnxruntime runs them at
opset 24, Swish's first, as it lacks kernels at 26), or ONNX's reference implementation where onnxruntime has no
kernel (:data:`ONNX_REFERENCE`).
Structure without compiling: each op lowers to one task of the task DAG, which reads its data input once per
output element and writes every output element once.
"""

import math

import numpy as np
import onnx
import pytest
from onnx import helper

from tests.expansions.canonical_onnx import (
    OpCase,
    build_model,
    lowered_dags,
    random_feed,
    run_canonical,
    run_reference,
)

F16, F32, F64, U8 = np.float16, np.float32, np.float64, np.uint8
I8, I16, I32, I64 = np.int8, np.int16, np.int32, np.int64
TO = {"FLOAT": 1, "UINT8": 2, "INT16": 5, "INT32": 6, "INT64": 7, "FLOAT16": 10, "DOUBLE": 11}
"""ONNX element types (``TensorProto.DataType``) used as BitCast's ``to``."""
OPSET = 26  # BitCast's first opset
ONNXRUNTIME_OPSET = 24  # Swish's first opset
LATE = ("Swish", "BitCast")
"""The ops of the newest opsets, lowered at :data:`OPSET` (the other task DAGs are lowered at opset 20)."""

FUNCTIONS = ("Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Cosh", "Sinh", "Tan")
ROUNDING = ("Ceil", "Floor", "Round")
ACTIVATIONS = ("Celu", "Elu", "Selu", "ThresholdedRelu", "Shrink", "Swish", "Softsign")
UNARY = (*FUNCTIONS, *ROUNDING, "Sign", *ACTIVATIONS)
SHAPES = {"2x3x4": (2, 3, 4), "7": (7,), "rank0": ()}

DOMAIN = {
    "Acos": np.tanh,
    "Asin": np.tanh,
    "Atanh": np.tanh,
    "Acosh": lambda x: 1 + np.abs(x),
    "Dropout": lambda x: np.abs(np.tanh(x)),  # its ratio in [0, 1)
}
"""Per op with a bounded domain, the map of the random (standard normal) inputs into it."""

HALVES = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.4, 0.6, -1.7, 2.2, 0, -3], F32)
"""Rounding ties (to even: -2, -2, -0, 0, 2, 2) and values between."""
SPECIAL = np.array([np.inf, -np.inf, np.nan, 0, -1.5, 3e38, -3e38, 1], F32)
"""Infinities, a NaN and finite values (the largest near the end of float32's range)."""
DIVIDENDS = np.array([-4, 7, 5, 4, -7, 8, 0, -9], I32)
DIVISORS = np.array([2, -3, 8, -2, 3, 5, -4, -9], I32)
"""Every sign combination, exact multiples and a zero dividend (numpy's test of Mod)."""
EDGE_DIVIDENDS = np.array([0, -0.0, -3, 3, -1, 1, np.inf, -np.inf, 1, 1, np.nan, 1, 5.5, -5.5])
EDGE_DIVISORS = np.array([-2, 2, np.inf, np.inf, -np.inf, -np.inf, 2, 2, 0, -0.0, 2, np.nan, -2, 2])
"""The edge cases of ONNX's backend test of Mod: zeros, infinite divisors (``mod(-3, inf)`` is ``inf``), NaN."""
CASES = [
    *(OpCase(f"{op}_{label}", op, ["x"], {"x": shape}) for op in UNARY for label, shape in SHAPES.items()),
    *(OpCase(f"{op}_float16", op, ["x"], {"x": (3, 4)}, dtype=F16) for op in UNARY if op != "Celu"),
    *(OpCase(f"{op}_double", op, ["x"], {"x": (5,)}, dtype=F64) for op in UNARY if op != "Celu"),
    *(OpCase(f"{op}_special", op, ["x"], constants={"x": SPECIAL}) for op in UNARY),
    *(OpCase(f"{op}_halves", op, ["x"], constants={"x": HALVES}) for op in (*ROUNDING, "Sign")),
    OpCase("Round_halves_float16", "Round", ["x"], constants={"x": HALVES.astype(F16)}, dtype=F16),
    OpCase("Round_halves_double", "Round", ["x"], constants={"x": HALVES.astype(F64)}, dtype=F64),
    *(OpCase(f"Sign_{t.__name__}", "Sign", ["x"], {"x": (3, 4)}, dtype=t) for t in (I8, I32, I64, U8)),
    OpCase("Celu_alpha", "Celu", ["x"], {"x": (3, 4)}, attributes={"alpha": 2.0}),
    OpCase("Elu_alpha", "Elu", ["x"], {"x": (3, 4)}, attributes={"alpha": 0.5}),
    OpCase("Selu_alpha_gamma", "Selu", ["x"], {"x": (3, 4)}, attributes={"alpha": 2.0, "gamma": 3.0}),
    OpCase("ThresholdedRelu_alpha", "ThresholdedRelu", ["x"], constants={"x": HALVES}, attributes={"alpha": 0.5}),
    OpCase("Shrink_lambd_bias", "Shrink", ["x"], constants={"x": HALVES}, attributes={"lambd": 1.5, "bias": 0.5}),
    *(
        OpCase(f"Shrink_{t.__name__}", "Shrink", ["x"], {"x": (2, 5)}, attributes={"lambd": 1.5, "bias": 1.5}, dtype=t)
        for t in (I8, I32, I64, U8)
    ),
    OpCase("Swish_alpha", "Swish", ["x"], {"x": (3, 4)}, attributes={"alpha": 0.5}),
    *(
        OpCase(f"IsInf_{label}", "IsInf", ["x"], constants={"x": SPECIAL}, attributes=attributes)
        for label, attributes in {
            "both": {},
            "positive": {"detect_negative": 0},
            "negative": {"detect_positive": 0},
            "neither": {"detect_positive": 0, "detect_negative": 0},
        }.items()
    ),
    OpCase("IsInf_float16", "IsInf", ["x"], constants={"x": SPECIAL[:5].astype(F16)}, dtype=F16),
    OpCase("IsInf_double_rank0", "IsInf", ["x"], {"x": ()}, dtype=F64),
    OpCase("IsNaN_special", "IsNaN", ["x"], constants={"x": SPECIAL}),
    OpCase("IsNaN_float16", "IsNaN", ["x"], constants={"x": SPECIAL[:5].astype(F16)}, dtype=F16),
    OpCase("IsNaN_double", "IsNaN", ["x"], {"x": (2, 3)}, dtype=F64),
    *(
        OpCase(
            f"Mod_{t.__name__}_fmod{f}",
            "Mod",
            ["a", "b"],
            {"a": (2, 8)},
            {"b": DIVISORS.astype(t)},
            {"fmod": f},
            dtype=t,
        )
        for t in (I8, I32, I64)
        for f in (0, 1)
    ),
    OpCase("Mod_uint8", "Mod", ["a", "b"], {"a": (3, 1)}, {"b": np.array([3, 7, 200], U8)}, dtype=U8),
    OpCase("Mod_int32_pairs", "Mod", ["a", "b"], constants={"a": DIVIDENDS, "b": DIVISORS}, dtype=I32),
    OpCase("Mod_int32_scalar_divisor", "Mod", ["a", "b"], {"a": (4, 5)}, {"b": np.array(-3, I32)}, dtype=I32),
    OpCase("Mod_int32_rank0", "Mod", ["a", "b"], {"a": ()}, {"b": np.array([4, -4], I32)}, dtype=I32),
    OpCase("Mod_float32_fmod1", "Mod", ["a", "b"], {"a": (3, 4), "b": (4,)}, attributes={"fmod": 1}),
    OpCase("Mod_float16_fmod1", "Mod", ["a", "b"], {"a": (3, 4), "b": (3, 1)}, attributes={"fmod": 1}, dtype=F16),
    OpCase(
        "Mod_double_edges_fmod1",
        "Mod",
        ["a", "b"],
        constants={"a": EDGE_DIVIDENDS, "b": EDGE_DIVISORS},
        attributes={"fmod": 1},
        dtype=F64,
    ),
    OpCase("Mod_float32_fmod0", "Mod", ["a", "b"], {"a": (3, 4), "b": (4,)}),
    OpCase("Mod_float16_fmod0", "Mod", ["a", "b"], {"a": (3, 4), "b": (3, 1)}, dtype=F16),
    OpCase(
        "Mod_float64_edges_fmod0", "Mod", ["a", "b"], constants={"a": EDGE_DIVIDENDS, "b": EDGE_DIVISORS}, dtype=F64
    ),
    OpCase("Dropout_default", "Dropout", ["x"], {"x": (2, 3, 4)}),
    OpCase(
        "Dropout_mask_inference",
        "Dropout",
        ["x", "r", "t"],
        {"x": (3, 4)},
        {"r": np.array(0.5, F32), "t": np.array(False)},
        outputs=("y", "mask"),
    ),
    OpCase(
        "Dropout_training_zero_ratio",
        "Dropout",
        ["x", "r", "t"],
        {"x": (3, 4)},
        {"r": np.array(0, F32), "t": np.array(True)},
        outputs=("y", "mask"),
    ),
    OpCase("Dropout_ratio_data", "Dropout", ["x", "r"], {"x": (2, 5), "r": ()}, outputs=("y", "mask")),
    OpCase("Dropout_float16", "Dropout", ["x"], {"x": (2, 3)}, outputs=("y", "mask"), dtype=F16),
    *(
        OpCase(
            f"BitCast_{source.__name__}_to_{to}_rank{len(shape)}",
            "BitCast",
            ["x"],
            {"x": shape},
            attributes={"to": TO[to]},
            dtype=source,
        )
        for source, to, shape in (
            (F32, "INT32", (2, 3)),
            (F32, "INT32", ()),
            (I32, "FLOAT", (4,)),
            (F64, "INT64", (3,)),
            (I64, "DOUBLE", (3,)),
            (F16, "INT16", (2, 2)),
            (I16, "FLOAT16", (5,)),
            (I8, "UINT8", (6,)),
            (np.bool_, "UINT8", (4,)),
        )
    ),
]


ONNX_REFERENCE = {
    *(f"{op}_double" for op in (*FUNCTIONS, "Elu", "Selu", "ThresholdedRelu", "Softsign", "Shrink")),
    "Mod_float32_fmod0",
    "Mod_float16_fmod0",
    "Mod_float64_edges_fmod0",
    *(c.name for c in CASES if c.op_type == "BitCast"),
}
"""Cases onnxruntime has no kernel for (double; Mod's fmod=0 on floats before opset 28; BitCast), or a lossy one
(its double Shrink rounds its result to float): ONNX's reference implementation (``onnx.reference``, numpy) is
their reference.
(Celu takes float only before opset 28: its float16 and double cases are the backend tests'.)"""


def model(cases, opset: int = OPSET) -> onnx.ModelProto:
    """:func:`build_model` (at :data:`OPSET`), with the outputs ONNX's shape inference leaves untyped typed: BitCast's
    (of the type ``to``) and Dropout's mask before opset 10 (of its data's type), shaped like the input ``x``."""
    built = build_model(cases, opset)
    outputs = {o.name: o for o in built.graph.output}
    for case in cases:
        for name in case.outputs:
            output = outputs[case.tensor(name)]
            if not output.type.HasField("tensor_type"):
                element = case.attributes.get("to", helper.np_dtype_to_tensor_dtype(np.dtype(case.dtype)))
                output.CopyFrom(helper.make_tensor_value_info(output.name, element, case.inputs["x"]))
    return built


def feed(cases, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs (standard normal, small integers), mapped into the domain of the op where it is bounded."""
    values = random_feed(cases, seed)
    for case in cases:
        for name in case.inputs:
            if case.op_type in DOMAIN:
                values[case.tensor(name)] = np.asarray(DOMAIN[case.op_type](values[case.tensor(name)]), case.dtype)
    return values


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime (ONNX's reference implementation for :data:`ONNX_REFERENCE`) and
    from the canonical implementations (one compile)."""
    from onnx.reference import ReferenceEvaluator

    inputs = feed(CASES)
    by_onnxruntime = build_model([c for c in CASES if c.name not in ONNX_REFERENCE], ONNXRUNTIME_OPSET)
    by_onnx = model([c for c in CASES if c.name in ONNX_REFERENCE])
    reference = run_reference(by_onnxruntime, {i.name: inputs[i.name] for i in by_onnxruntime.graph.input})
    names = [o.name for o in by_onnx.graph.output]
    with np.errstate(divide="ignore", invalid="ignore"):
        values = ReferenceEvaluator(by_onnx).run(names, {i.name: inputs[i.name] for i in by_onnx.graph.input})
    reference |= dict(zip(names, values, strict=True))
    return reference, run_canonical(model(CASES), inputs, "test_elementwise_math")


TOLERANCE = {F16: (2e-3, 1e-3), F32: (1e-5, 1e-6), F64: (1e-12, 1e-14)}
"""(rtol, atol) per floating-point type."""


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    reference, canonical = results
    for output in case.outputs:
        name = case.tensor(output)
        actual, expected = canonical[name], reference[name]
        assert actual.shape == expected.shape
        assert actual.dtype == expected.dtype
        if expected.dtype.kind != "f":
            np.testing.assert_array_equal(actual, expected)
        else:
            rtol, atol = TOLERANCE[expected.dtype.type]
            np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def _value_inputs(case: OpCase) -> list[str]:
    """The inputs the output is computed from: all, except Dropout's ratio and training_mode."""
    return case.node_inputs[:1] if case.op_type == "Dropout" else list(case.node_inputs)


def _data_inputs(case: OpCase) -> list[str]:
    """The value inputs read as data: graph inputs and constants of more than one element (a single-element
    constant is folded into the tasklet)."""
    return [n for n in _value_inputs(case) if n in case.inputs or np.size(case.constants[n]) > 1]


def _output_size(case: OpCase) -> int:
    shapes = [case.inputs[n] if n in case.inputs else np.shape(case.constants[n]) for n in _value_inputs(case)]
    return math.prod(np.broadcast_shapes(*shapes))


#: The fast subset's cases of the task-DAG test: one per op, the one reading the most inputs as data and writing
#: the most outputs; the full suite checks every case.
FAST_CASES = {
    max((c for c in CASES if c.op_type == op), key=lambda c: (len(_data_inputs(c)), len(c.outputs))).name
    for op in dict.fromkeys(c.op_type for c in CASES)
}
AT_OPSET_20 = [c for c in CASES if c.op_type not in LATE]


@pytest.fixture(scope="module")
def dags():
    """The task DAG of every case but those of :data:`LATE` lowered canonically (symbolic: nothing compiled), by case
    name, one case at a time."""
    return lowered_dags(AT_OPSET_20, "elementwise_math_dag", group=1)


def assert_one_flat_map_task(dag, case: OpCase) -> None:
    """``case``'s node is one task of ``dag`` reading each data input once per output element and writing every
    element of each output once into a buffer; no opaque task."""
    from dcaccel.dag import NodeKind
    from dcaccel.dag.metrics import opaque_work

    assert opaque_work(dag)[0] == 0
    (task,) = [t for t in dag.tasks if dag.info(t).node == case.name]
    assert dag.info(task).op == case.op_type
    size = _output_size(case)
    reads = {dag.info(p).container: dag.volume(p, task) for p in dag.predecessors(task)}
    assert reads == {case.tensor(n): size for n in _data_inputs(case)}
    outputs = list(dag.successors(task))
    assert [dag.volume(task, o) for o in outputs] == [size] * len(case.outputs)
    assert all(dag.kind(o) is NodeKind.BUFFER for o in outputs)


@pytest.mark.parametrize(
    "case",
    [c if c.name in FAST_CASES else pytest.param(c, marks=pytest.mark.slow) for c in AT_OPSET_20],
    ids=lambda c: c.name,
)
def test_one_task_per_op_with_the_volumes_of_a_flat_map(case, dags):
    assert_one_flat_map_task(dags[case.name], case)


@pytest.mark.parametrize("case", [c for c in CASES if c.name in FAST_CASES and c.op_type in LATE], ids=lambda c: c.name)
def test_one_task_per_op_of_the_newest_opsets(case):
    from dace.ml import ONNXModel

    from dcaccel.dag import extract
    from dcaccel.transforms.lower import lower

    imported = ONNXModel(f"elementwise_math_{case.name}", model([case]), onnx_simplify=False)
    assert_one_flat_map_task(extract(lower(imported.sdfg)), case)


REFUSED = [
    (
        OpCase("Dropout_training", "Dropout", ["x", "r", "t"], {"x": (3,)}, {"r": HALVES[3], "t": np.array(True)}),
        "training_mode=True with a ratio other than a constant 0",
        OPSET,
    ),
    (
        OpCase("Dropout_training_default_ratio", "Dropout", ["x", "", "t"], {"x": (3,)}, {"t": np.array(True)}),
        "training_mode=True with a ratio other than a constant 0",
        OPSET,
    ),
    (
        OpCase("Dropout_training_data", "Dropout", ["x", "", "t"], {"t": ()}, {"x": HALVES}, dtype=np.bool_),
        "training_mode not a constant",
        OPSET,
    ),
    (
        OpCase("Dropout_float_mask", "Dropout", ["x"], {"x": (3,)}, outputs=("y", "mask")),
        "a mask of the data's type",
        9,
    ),
    (
        OpCase("Mod_fmod2", "Mod", ["a", "b"], {"a": (3,), "b": (3,)}, attributes={"fmod": 2}, dtype=I32),
        "fmod=2",
        OPSET,
    ),
]
"""Cases the canonical implementation refuses, with the attribute, input or output its one-line message names, and
their opset."""


@pytest.mark.parametrize(("case", "named", "opset"), REFUSED, ids=lambda c: getattr(c, "name", ""))
def test_refused_in_one_line_before_expansion(case, named, opset):
    from dace.libraries.onnx.nodes.onnx_op import ONNXOp
    from dace.ml import ONNXModel

    from dcaccel.errors import UnsupportedOpError
    from dcaccel.expansions import register
    from dcaccel.expansions.registry import implementation_of

    register()
    imported = ONNXModel(f"refused_{case.name}", model([case], opset), onnx_simplify=False)
    ((node, state),) = [(n, s) for n, s in imported.sdfg.all_nodes_recursive() if isinstance(n, ONNXOp)]
    with pytest.raises(UnsupportedOpError, match=f"{case.op_type} \\(node '{case.name}'\\): {named}") as refusal:
        implementation_of(node, "canonical").expansion.check(node, state, state.sdfg)
    assert "\n" not in str(refusal.value)


def test_every_op_has_a_canonical_implementation():
    import dcaccel.expansions

    ops = {c.op_type for c in CASES}
    assert len(ops) == 25
    assert {op: dcaccel.expansions.implementations(op) for op in ops} == {op: ["canonical"] for op in ops}
