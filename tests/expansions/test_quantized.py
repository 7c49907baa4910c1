"""Quantized and integer ops (``dcaccel.expansions.quantized``): QuantizeLinear, DequantizeLinear, MatMulInteger,
QLinearMatMul, ConvInteger, QLinearConv.

Values: every case in one model at opset 21, compiled once with the canonical implementations (the products
under the MMM shape each case names), against onnxruntime; where onnxruntime has no kernel for the case (a
per-channel ConvInteger weight zero point, a per-row MatMulInteger zero point of A: ``IsScalarOr1ElementVector``
fails) against onnx's reference implementation, and where neither implements the schema (the per-row zero point
of A) against numpy. Structure without compiling: every op lowers with no opaque task, its tasks named after the
steps of the module docstring, the product one MMM in the chosen shape.
"""

import numpy as np
import pytest

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


def _qmm(name, a_shape, b_shape, dtype=U8, b_scale=0.03, b_zero=None) -> OpCase:
    """A QLinearMatMul case: a data, the rest constant (b's scale and zero point per tensor or per column)."""
    middle = 0 if dtype is I8 else 128
    constants = {
        "as": np.array(0.02, F32),
        "az": np.array(middle - 3, dtype),
        "b": _levels(dtype, b_shape, 2),
        "bs": np.asarray(b_scale, F32),
        "bz": np.asarray(middle + 5 if b_zero is None else b_zero, dtype),
        "ys": np.array(0.4, F32),
        "yz": np.array(middle + 1, dtype),
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
]

SHAPE = {
    c.name: c.name.rsplit("_", 1)[1] if c.name.endswith(SHAPES) else "mv"
    for c in CASES
    if c.op_type in {"MatMulInteger", "QLinearMatMul", "ConvInteger", "QLinearConv"}
}
"""The MMM shape of each product case: the one its name ends with, else ``mv``."""

ONNX_REFERENCE = {"ci_per_channel_w"}
"""Cases onnxruntime has no kernel for, checked against onnx's reference implementation."""

NUMPY_REFERENCE = {"mmi_per_row_a", "mmi_batched_broadcast"}
"""Checked against numpy: a per-row zero point of A, which neither onnxruntime nor onnx's reference implements
(``(4,)`` against A (4, 3) broadcasts along the columns there), and uint8 · int8 over the whole ranges, where
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


def _numpy_reference(case: OpCase, inputs) -> np.ndarray:
    """MatMulInteger by the schema: A minus its zero point (per tensor, or per row for a vector), B minus its
    zero point (per tensor or per column), multiplied in int32."""
    a = inputs[case.tensor("A")].astype(I32)
    zero_a = case.constants.get("az", np.array(0)).astype(I32)
    a = a - (zero_a[:, None] if zero_a.ndim == 1 else zero_a)
    return a @ (case.constants["B"].astype(I32) - case.constants.get("bz", np.array(0)).astype(I32))


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
    return {case.name: (reference[case.tensor("y")], canonical[case.tensor("y")]) for case in CASES}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_reference(case, results):
    expected, actual = results[case.name]
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual, expected)
