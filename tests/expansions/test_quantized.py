"""Quantized and integer ops (``dcaccel.expansions.quantized``): QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv.

Values: every case in one model at opset 21, compiled once with the canonical implementations (the products
under the MMM shape each case names), against onnxruntime; against onnx's reference implementation where
onnxruntime has no kernel (a per-channel ConvInteger weight zero point: ``IsScalarOr1ElementVector`` fails), and
against numpy where neither implements the schema (a per-row MatMulInteger zero point of A) or onnxruntime's
uint8 · int8 kernel saturates (:data:`NUMPY_REFERENCE`). Structure without compiling: every op lowers with no
opaque task, its tasks named after the steps of the module docstring, the product one MMM in the chosen shape.
End to end: a QDQ network loaded with ``dcaccel.load``, lowered under each shape and verified exactly.
"""

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from dcaccel.errors import UnsupportedOpError
from tests.expansions.canonical_onnx import OpCase, build_model, run_canonical, run_reference

U8, I8, U16, I16, I32 = np.uint8, np.int8, np.uint16, np.int16, np.int32
F16, F32 = np.float16, np.float32
OPSET = 21  # int16/uint16 quantization and block_size
SHAPES = ("mv", "op", "lmv")


def _q(name, x_shape, scale, zero=None, dtype=F32, **attributes) -> OpCase:
    """A QuantizeLinear case of data ``x`` (``dtype``) with constant scale and zero point."""
    constants = {"s": np.asarray(scale, F32 if dtype is not F16 else F16)}
    if zero is not None:
        constants["z"] = zero
    inputs = ["x", "s", *(["z"] if zero is not None else [])]
    return OpCase(name, "QuantizeLinear", inputs, {"x": x_shape}, constants, attributes, dtype=dtype)


def _dq(name, x_shape, dtype, scale, zero=None, **attributes) -> OpCase:
    """A DequantizeLinear case of data ``x`` (``dtype``) with constant scale and zero point."""
    constants = {"s": np.asarray(scale)}
    if zero is not None:
        constants["z"] = zero
    inputs = ["x", "s", *(["z"] if zero is not None else [])]
    return OpCase(name, "DequantizeLinear", inputs, {"x": x_shape}, constants, attributes, dtype=dtype)


def _levels(dtype, shape, seed: int) -> np.ndarray:
    """Constant quantized values over the whole range of ``dtype``."""
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max, shape, endpoint=True, dtype=dtype)


def _mmi(name, a_shape, b_shape, dtypes=(U8, U8), a_zero=None, b_zero=None) -> OpCase:
    """A MatMulInteger case: A data, B and the zero points constant."""
    constants = {"B": _levels(dtypes[1], b_shape, 1)}
    constants.update({k: v for k, v in (("az", a_zero), ("bz", b_zero)) if v is not None})
    inputs = ["A", "B", "az" if a_zero is not None else "", "bz" if b_zero is not None else ""]
    while inputs[-1] == "":
        inputs.pop()
    return OpCase(name, "MatMulInteger", inputs, {"A": a_shape}, constants, dtype=dtypes[0])


def _qmm(name, a_shape, b_shape, dtype=U8, b_scale=0.03, b_zero=None, **per_row) -> OpCase:
    """A QLinearMatMul case: a data, the rest constant (b's scale and zero point per tensor or per column;
    ``per_row`` replaces a's and y's scales and zero points, ``as``, ``az``, ``ys``, ``yz``)."""
    middle = 0 if dtype is I8 else 128
    constants = {
        "as": np.array(0.02, F32),
        "az": np.array(middle - 3, dtype),
        "b": _levels(dtype, b_shape, 2),
        "bs": np.asarray(b_scale, F32),
        "bz": np.asarray(middle + 5 if b_zero is None else b_zero, dtype),
        "ys": np.array(0.4, F32),
        "yz": np.array(middle + 1, dtype),
        **per_row,
    }
    inputs = ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]
    return OpCase(name, "QLinearMatMul", inputs, {"a": a_shape}, constants, dtype=dtype)


def _conv_integer(name, x_shape, w_shape, dtype=U8, x_zero=None, w_zero=None, **attributes) -> OpCase:
    """A ConvInteger case: x data, w and the zero points constant."""
    constants = {"w": _levels(dtype, w_shape, 3)}
    constants.update({k: v for k, v in (("xz", x_zero), ("wz", w_zero)) if v is not None})
    inputs = ["x", "w", "xz" if x_zero is not None else "", "wz" if w_zero is not None else ""]
    while inputs[-1] == "":
        inputs.pop()
    return OpCase(name, "ConvInteger", inputs, {"x": x_shape}, constants, attributes, dtype=dtype)


def _qconv(name, x_shape, w_shape, dtype=U8, w_scale=0.01, bias=None, **attributes) -> OpCase:
    """A QLinearConv case: x data, the rest constant (w's scale per tensor or per output channel)."""
    middle = 0 if dtype is I8 else 128
    constants = {
        "xs": np.array(0.05, F32),
        "xz": np.array(middle + 2, dtype),
        "w": _levels(dtype, w_shape, 4),
        "ws": np.asarray(w_scale, F32),
        "wz": np.array(middle - 1, dtype),
        "ys": np.array(1.5, F32),
        "yz": np.array(middle - 4, dtype),
    }
    inputs = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if bias is not None:
        constants["B"] = np.asarray(bias, I32)
        inputs.append("B")
    return OpCase(name, "QLinearConv", inputs, {"x": x_shape}, constants, attributes, dtype=dtype)


TIES = np.array([0.25, 0.75, -0.25, -0.75, 1.25, 2.5, -2.5, 1e6, -1e6, 63.75, 64.25], F32)
"""x / 0.5 = ±0.5, ±1.5, 2.5, ±5 (ties round to even), ±2e6 (saturate), 127.5 and 128.5 (around int8's top)."""

DYNAMIC = {
    "positive": np.array([0.5, 2.0, 7.25, 3.0], F32),
    "negative": np.array([[-0.5, -2.0], [-7.25, -3.0]], F32),
    "zeros": np.zeros((2, 3), F32),
    "rank0": np.array(-1.5, F32),
}
"""DynamicQuantizeLinear's inputs whose range is one-sided or empty (scale 1, as onnxruntime has it)."""

DYNAMIC_OUTPUTS = ("y", "y_scale", "y_zero_point")

CASES = [
    _q("q_tensor", (2, 3, 4), 0.05, np.array(128, U8)),
    _q("q_no_zero_point", (5,), 0.02),
    _q("q_axis", (2, 3, 4), [0.1, 0.05, 0.2], np.array([-3, 0, 7], I8), axis=1),
    _q("q_axis_negative", (3, 4), [0.1, 0.05, 0.2, 0.02], np.array([1, 0, 250, 9], U8), axis=-1),
    _q("q_rank0", (), 0.1, np.array(-2, I8)),
    OpCase("q_ties", "QuantizeLinear", ["x", "s", "z"], constants={"x": TIES, "s": np.array(0.5, F32), "z": I8(0)}),
    _q("q_int16", (6,), 0.001, np.array(-10, I16)),
    _q("q_uint16", (6,), 0.0001, np.array(30000, U16)),
    _q("q_blocked", (3, 4), np.full((3, 2), 0.05), np.array([[1, 2], [3, 4], [5, 6]], U8), axis=1, block_size=2),
    _q(
        "q_blocked_remainder",
        (5, 2),
        np.linspace(0.02, 0.1, 6).reshape(3, 2),
        _levels(I8, (3, 2), 5),
        axis=0,
        block_size=2,
    ),
    _q("q_float16", (3, 4), [0.05], np.array([3], U8), dtype=F16),
    _dq("dq_tensor", (2, 3, 4), U8, np.array(0.05, F32), np.array(128, U8)),
    _dq("dq_axis", (2, 3, 4), I8, np.array([0.1, 0.05, 0.2], F32), np.array([-3, 0, 7], I8), axis=1),
    _dq("dq_int32", (5,), I32, np.array(0.5, F32)),
    _dq("dq_rank0", (), I8, np.array(0.25, F32), np.array(-1, I8)),
    _dq("dq_int16", (6,), I16, np.array(0.001, F32), np.array(-10, I16)),
    _dq("dq_uint16", (6,), U16, np.array(0.0001, F32), np.array(30000, U16)),
    _dq("dq_blocked", (1, 4, 3, 2), U8, np.full((1, 2, 3, 2), 0.1, F32), _levels(U8, (1, 2, 3, 2), 6), block_size=2),
    _dq("dq_blocked_remainder", (2, 5), I8, np.linspace(0.1, 0.6, 6, dtype=F32).reshape(2, 3), axis=1, block_size=2),
    _dq("dq_float16", (3, 4), U8, np.array([0.1], F16), np.array([3], U8)),
    *(_mmi(f"mmi_{shape}", (4, 3), (3, 5), a_zero=np.array(12, U8), b_zero=np.array(200, U8)) for shape in SHAPES),
    _mmi("mmi_per_column_b", (4, 3), (3, 5), b_zero=np.array([1, 50, 100, 150, 255], U8)),
    _mmi("mmi_per_row_a", (4, 3), (3, 5), a_zero=np.array([1, 2, 3, 4], U8)),
    _mmi("mmi_batched", (2, 4, 3), (3, 5), (I8, I8), np.array(-5, I8), np.array(7, I8)),
    _mmi("mmi_batched_broadcast", (2, 1, 4, 3), (3, 3, 5), (U8, I8), np.array(9, U8), np.array(-2, I8)),
    _mmi("mmi_vector_a", (3,), (3, 5)),
    _mmi("mmi_vector_b", (4, 3), (3,), a_zero=np.array(128, U8)),
    *(_qmm(f"qmm_{shape}", (4, 3), (3, 5)) for shape in SHAPES),
    _qmm("qmm_batched_int8", (2, 4, 3), (2, 3, 5), I8),
    _qmm("qmm_per_column_b", (4, 3), (3, 5), b_scale=np.linspace(0.01, 0.05, 5, dtype=F32)),
    _qmm(
        "qmm_per_row",
        (4, 3),
        (3, 5),
        b_zero=np.array([1, 50, 100, 150, 255], U8),
        **{"as": np.array([0.01, 0.02, 0.03, 0.04], F32), "az": np.array([0, 100, 128, 255], U8)},
        **{"ys": np.array([0.2, 0.4, 0.6, 0.8], F32), "yz": np.array([10, 128, 200, 0], U8)},
    ),
    *(_conv_integer(f"ci_{s}", (1, 2, 5, 5), (3, 2, 3, 3), x_zero=U8(5), w_zero=U8(9), pads=[1] * 4) for s in SHAPES),
    _conv_integer("ci_per_channel_w", (1, 2, 5, 5), (3, 2, 2, 2), x_zero=U8(5), w_zero=np.array([1, 2, 3], U8)),
    _conv_integer("ci_1d_dilated", (2, 3, 7), (2, 3, 2), I8, dilations=[2]),
    _conv_integer(
        "ci_same_strided", (1, 4, 6, 6), (4, 2, 3, 3), I8, I8(-3), I8(4), strides=[2, 2], auto_pad="SAME_UPPER", group=2
    ),
    *(
        _qconv(f"qconv_{s}", (1, 2, 5, 5), (3, 2, 3, 3), w_scale=[0.01, 0.02, 0.03], bias=[5, -500, 900], pads=[1] * 4)
        for s in SHAPES
    ),
    _qconv("qconv_int8_groups", (2, 4, 6, 6), (4, 2, 3, 3), I8, strides=[2, 2], group=2),
    *(
        OpCase(f"dyn_{label}", "DynamicQuantizeLinear", ["x"], constants={"x": x}, outputs=DYNAMIC_OUTPUTS)
        for label, x in DYNAMIC.items()
    ),
    OpCase("dyn_data", "DynamicQuantizeLinear", ["x"], {"x": (3, 4)}, outputs=DYNAMIC_OUTPUTS),
]

SHAPE = {
    c.name: c.name.rsplit("_", 1)[1] if c.name.endswith(SHAPES) else "mv"
    for c in CASES
    if c.op_type in {"MatMulInteger", "QLinearMatMul", "ConvInteger", "QLinearConv"}
}
"""The MMM shape of each product case: the one its name ends with, else ``mv``."""

ONNX_REFERENCE = {"ci_per_channel_w"}
"""Cases onnxruntime has no kernel for, checked against onnx's reference implementation."""

NUMPY_REFERENCE = {"mmi_per_row_a", "mmi_batched_broadcast", "qmm_per_row"}
"""Checked against numpy: a per-row zero point of A (and QLinearMatMul's per-row scales of A and y), which neither
onnxruntime nor onnx's reference implements (``(4,)`` against A (4, 3) broadcasts along the columns there), and
uint8 · int8 over the whole ranges, where
onnxruntime's x86 kernel saturates the int16 sums of pairs of products (``vpmaddubsw``: 2 · 255 · 127 > 32767)."""


def feed(cases, seed: int = 0) -> dict[str, np.ndarray]:
    """Random data: quantized integers over their whole range (int32 within ±10^6), floats N(0, 3²)."""
    rng = np.random.default_rng(seed)
    values = {}
    for case in cases:
        for name, shape in case.inputs.items():
            if np.issubdtype(case.dtype, np.integer):
                low, high = (
                    (-(10**6), 10**6) if case.dtype is I32 else (np.iinfo(case.dtype).min, np.iinfo(case.dtype).max)
                )
                value = rng.integers(low, high, shape, endpoint=True)
            else:
                value = 3 * rng.standard_normal(shape)
            values[case.tensor(name)] = np.asarray(value, case.dtype)
    return values


def _per_row(value: np.ndarray) -> np.ndarray:
    """A parameter per row (a vector) as a column, per tensor as it is."""
    return value[:, None] if value.ndim == 1 else value


def _numpy_reference(case: OpCase, inputs) -> np.ndarray:
    """MatMulInteger by the schema: A minus its zero point (per tensor, or per row for a vector), B minus its
    zero point (per tensor or per column), multiplied in int32; QLinearMatMul then requantizes as onnxruntime
    does, rint(float32(acc) · (s_a · s_b / s_y)) + y_zero_point in float32, saturated (scales of A and y per
    row)."""
    a_name, b_name = ("A", "B") if case.op_type == "MatMulInteger" else ("a", "b")
    constants = case.constants
    a = inputs[case.tensor(a_name)].astype(I32) - _per_row(constants.get("az", np.array(0)).astype(I32))
    acc = a @ (constants[b_name].astype(I32) - constants.get("bz", np.array(0)).astype(I32))
    if case.op_type == "MatMulInteger":
        return acc
    multiplier = _per_row(constants["as"]) * constants["bs"] / _per_row(constants["ys"])
    value = np.rint(acc.astype(F32) * multiplier) + _per_row(constants["yz"]).astype(F32)
    info = np.iinfo(constants["yz"].dtype)
    return np.clip(value, info.min, info.max).astype(constants["yz"].dtype)


@pytest.fixture(scope="module")
def results():
    """Per case: (reference, canonical output); all cases compiled once, the references as the module docstring
    says."""
    from onnx.reference import ReferenceEvaluator

    inputs = feed(CASES)
    canonical = run_canonical(build_model(CASES, OPSET), inputs, "test_quantized", SHAPE)

    def of(cases) -> tuple:
        names = {c.name for c in cases}
        return build_model(cases, OPSET), {k: v for k, v in inputs.items() if k.split("__")[0] in names}

    reference = run_reference(*of([c for c in CASES if c.name not in ONNX_REFERENCE | NUMPY_REFERENCE]))
    model, onnx_feed = of([c for c in CASES if c.name in ONNX_REFERENCE])
    outputs = ReferenceEvaluator(model).run(None, onnx_feed)
    reference.update(zip([o.name for o in model.graph.output], outputs, strict=True))
    reference.update({c.tensor("y"): _numpy_reference(c, inputs) for c in CASES if c.name in NUMPY_REFERENCE})
    return {case.tensor(name): (reference[case.tensor(name)], canonical[case.tensor(name)]) for case, name in OUTPUTS}


OUTPUTS = [(case, name) for case in CASES for name in case.outputs]


@pytest.mark.slow
@pytest.mark.parametrize(("case", "output"), OUTPUTS, ids=[case.tensor(name) for case, name in OUTPUTS])
def test_matches_reference(case, output, results):
    expected, actual = results[case.tensor(output)]
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual, expected)


LOWERED = {"q_axis": "canonical", "dq_blocked": "canonical", "mmi_mv": "mv", "qmm_op": "op", "ci_lmv": "lmv"}
LOWERED.update(qconv_lmv="lmv", dyn_data="canonical")
"""One case per op, lowered (not compiled) under the implementation named."""

TASKS = {
    "q_axis": {"Quantize": 1},
    "dyn_data": {"init_x_min": 1, "init_x_max": 1, "MinMax": 1, "Parameters": 1, "Quantize": 1},
    "dq_blocked": {"Dequantize": 1},
    "mmi_mv": {"ShiftA": 1, "ShiftB": 1, "BcastA": 1, "MV": 5, "Gather": 1},
    "qmm_op": {"ShiftA": 1, "ShiftB": 1, "OP": 3, "Reduce": 1, "Requantize": 1},
    "ci_lmv": {"ShiftX": 1, "ShiftW": 1, "Wr": 1, "Xr": 1, "BcastB": 1, "LMV": 3, "Gather": 1, "ReshapeOut": 1},
    "qconv_lmv": {
        **{"ShiftX": 1, "ShiftW": 1, "Wr": 1, "Xr": 1, "BcastB": 1, "LMV": 3, "Gather": 1},
        **{"AddBias": 1, "ReshapeOut": 1, "Requantize": 1},
    },
}
"""The tasks of each lowered case, by map label: the element-wise ops one flat map (DynamicQuantizeLinear the
initialisation of its range, its reduction, its parameters and the quantization); the products their shifts,
the MMM's tasks (mv: one per column of the product, the 5 columns of B; op: one per inner
index, 3; lmv: one per row, 3 filters), the im2col's tasks for the convolutions, and ``Requantize``."""


@pytest.fixture(scope="module")
def dag():
    """The task DAG of the cases of :data:`LOWERED` in one model (nothing compiled)."""
    from dace.ml import ONNXModel

    from dcaccel.dag import extract
    from dcaccel.transforms.lower import lower

    cases = [c for c in CASES if c.name in LOWERED]
    sdfg = ONNXModel("quantized_dag", build_model(cases, OPSET), onnx_simplify=False).sdfg
    return extract(lower(sdfg, LOWERED))


@pytest.mark.parametrize("name", LOWERED)
def test_lowers_to_the_tasks_of_its_steps_and_none_opaque(name, dag):
    from collections import Counter

    dag.validate()
    ours = [t for t in dag.tasks if dag.info(t).node == name]
    assert {dag.info(t).implementation for t in ours} == {LOWERED[name]}
    assert not any(dag.info(t).opaque for t in ours)
    labels = Counter(dag.info(t).map.removeprefix(f"{name}_").removesuffix("_map") for t in ours)
    assert labels == TASKS[name]


def test_quantize_reads_x_once_and_its_parameters_once_per_element(dag):
    """q_axis: x (2, 3, 4) read once per element, the per-axis scale and zero point (3 constants each) once per
    element of x; y written once per element."""
    (task,) = [t for t in dag.tasks if dag.info(t).node == "q_axis"]
    reads = {dag.info(p).container: dag.volume(p, task) for p in dag.predecessors(task)}
    assert reads == {"q_axis__x": 24, "q_axis__s": 24, "q_axis__z": 24}
    (output,) = dag.successors(task)
    assert dag.volume(task, output) == 24


REFUSED = {
    "quantize_int32": (
        OpCase("quantize_int32", "QuantizeLinear", ["x", "s"], {"x": (4,)}, {"s": np.array(2.0, F32)}, dtype=I32),
        "input 'x' of type int32 (float16, float32, float64; float8, int4, int2 and float4 are not lowered)",
    ),
    "quantize_output_dtype": (
        _q("quantize_output_dtype", (4,), 0.5, output_dtype=5),
        "output_dtype INT16, but the import typed y uint8 (ignoring it)",
    ),
    "dequantize_scale_length": (
        _dq("dequantize_scale_length", (2, 3), U8, np.array([0.1, 0.2], F32), axis=0, block_size=2),
        "a scale of shape (2,) for blocks of 2 along 0",
    ),
    "conv_x_zero_vector": (
        _conv_integer("conv_x_zero_vector", (1, 2, 4, 4), (3, 2, 3, 3), x_zero=np.array([1, 2], U8)),
        "'x_zero_point' of shape (2,) (one element only)",
    ),
    "matmul_zero_length": (
        _mmi("matmul_zero_length", (4, 3), (3, 5), a_zero=np.array([1, 2, 3], U8)),
        "'a_zero_point' of shape (3,) for axis -2 of (4, 3)",
    ),
}
"""Cases refused in one line: the node's check names the input, attribute or shape it does not lower."""


@pytest.fixture(scope="module")
def refused_model():
    from dace.ml import ONNXModel

    return ONNXModel(
        "quantized_refused", build_model([c for c, _ in REFUSED.values()], OPSET), onnx_simplify=False
    ).sdfg


@pytest.mark.parametrize("name", REFUSED)
def test_refused_in_one_line(name, refused_model):
    from dcaccel.expansions.registry import implementation_of, node_implementations

    ((node, state),) = [(n, s) for n, s in refused_model.all_nodes_recursive() if n.label == name]
    implementation = implementation_of(node, node_implementations(node)[0])
    with pytest.raises(UnsupportedOpError) as refusal:
        implementation.expansion.check(node, state, refused_model)
    op = REFUSED[name][0].op_type
    assert str(refusal.value) == f"unsupported op {op} (node '{name}'): {REFUSED[name][1]}"


def _quantized_network() -> onnx.ModelProto:
    """x → QuantizeLinear → QLinearConv (3 → 4 channels, 3 × 3, padded, per-channel w_scale, int32 bias) →
    Reshape → QLinearMatMul (144 → 5) → DequantizeLinear: a network as a QDQ export leaves it, opset 13."""
    rng = np.random.default_rng(7)
    constants = {
        "xs": np.array(0.05, F32),
        "xz": np.array(128, U8),
        "w": rng.integers(0, 256, (4, 3, 3, 3), dtype=U8),
        "ws": np.array([0.01, 0.02, 0.03, 0.04], F32),
        "wz": np.array(127, U8),
        "ys": np.array(0.5, F32),
        "yz": np.array(100, U8),
        "B": np.array([10, -10, 0, 500], I32),
        "m": rng.integers(0, 256, (4 * 6 * 6, 5), dtype=U8),
        "ms": np.array(0.02, F32),
        "mz": np.array(120, U8),
        "os": np.array(0.3, F32),
        "oz": np.array(128, U8),
        "shape": np.array([1, -1], np.int64),
    }
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="quantize"),
        helper.make_node(
            "QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz", "B"], ["yq"], name="qconv", pads=[1] * 4
        ),
        helper.make_node("Reshape", ["yq", "shape"], ["flat"], name="flatten"),
        helper.make_node("QLinearMatMul", ["flat", "ys", "yz", "m", "ms", "mz", "os", "oz"], ["oq"], name="qmm"),
        helper.make_node("DequantizeLinear", ["oq", "os", "oz"], ["out"], name="dequantize"),
    ]
    graph = helper.make_graph(
        nodes,
        "qdq",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, (1, 3, 6, 6))],
        [helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, (1, 5))],
        [numpy_helper.from_array(value, name) for name, value in constants.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)


@pytest.mark.slow
def test_quantized_network_lowers_under_every_shape_and_verifies_exactly():
    """Loaded as a model (constants folded), lowered under each MMM shape with no opaque task, the ``mv`` lowering
    compiled: its output equals onnxruntime's exactly."""
    import dcaccel
    from dcaccel.dag import extract
    from dcaccel.transforms.lower import lower

    workload = dcaccel.load(_quantized_network())
    lowered = {shape: lower(workload, {"QLinearConv": shape, "QLinearMatMul": shape}) for shape in SHAPES}
    for shape, program in lowered.items():
        dag = extract(program)
        assert not program.opaque
        assert {dag.info(t).implementation for t in dag.tasks if dag.info(t).node in ("qconv", "qmm")} == {shape}
    inputs = {"x": (3 * np.random.default_rng(0).standard_normal((1, 3, 6, 6))).astype(F32)}
    report = dcaccel.verify(workload, lowered["mv"], inputs=inputs, rtol=0, atol=0)
    assert all(check.passed for check in report.outputs)
