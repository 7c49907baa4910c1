"""Canonical element-wise ops: values against onnxruntime (one compile), structure and buffer marks."""

import subprocess
import sys

import numpy as np
import pytest

from tests.expansions.canonical_onnx import (
    OpCase,
    assert_flat_maps,
    assert_output_matches,
    buffer_copies,
    build_model,
    canonical_model,
    reference_and_canonical,
)

UNARY = ("Relu", "Sigmoid", "Tanh", "Exp", "Erf", "Neg", "Reciprocal", "Identity", "Gelu")
BINARY = ("Add", "Sub", "Mul", "Div")
SHAPES = ((2, 3, 4), (1, 1, 5), (7,), ())

CASES = [
    *(OpCase(f"{op}_{'x'.join(map(str, s)) or 'scalar'}", op, ["x"], {"x": s}) for op in UNARY for s in SHAPES),
    OpCase("Sqrt", "Sqrt", ["x"], constants={"x": np.array([[0.0, 0.25], [4.0, 9.5]], np.float32)}),
    OpCase("Gelu_tanh", "Gelu", ["x"], {"x": (3, 5)}, attributes={"approximate": "tanh"}),
    *(OpCase(f"{op}_same", op, ["a", "b"], {"a": (2, 3), "b": (2, 3)}) for op in BINARY),
    *(OpCase(f"{op}_bcast", op, ["a", "b"], {"a": (2, 3, 4), "b": (3, 1)}) for op in BINARY),
    *(OpCase(f"{op}_both_bcast", op, ["a", "b"], {"a": (4, 1), "b": (1, 5)}) for op in BINARY),
    OpCase("Add_scalar_input", "Add", ["a", "b"], {"a": (2, 3), "b": ()}),
    OpCase("Mul_constant_scalar", "Mul", ["a", "k"], {"a": (2, 3)}, {"k": np.array(0.5, np.float32)}),
    OpCase("Div_constant_vector", "Div", ["a", "k"], {"a": (2, 3)}, {"k": np.array([1, 2, 4], np.float32)}),
    OpCase("Add_int", "Add", ["a", "b"], {"a": (3, 4), "b": (4,)}, dtype=np.int32),
    OpCase("Mul_int", "Mul", ["a", "b"], {"a": (3, 4), "b": (3, 4)}, dtype=np.int32),
    OpCase("Relu_int", "Relu", ["x"], {"x": (6,)}, dtype=np.int32),
    OpCase("Pow_data", "Pow", ["x", "e"], {"e": (2, 3)}, {"x": np.full((2, 3), 1.5, np.float32)}),
    OpCase("Pow_constant_two", "Pow", ["x", "e"], {"x": (2, 3)}, {"e": np.array(2.0, np.float32)}),
    OpCase("Clip_min_max", "Clip", ["x", "lo", "hi"], {"x": (3, 4), "lo": (), "hi": ()}),
    OpCase("Clip_constant", "Clip", ["x", "lo", "hi"], {"x": (3, 4)}, {"lo": np.float32(0), "hi": np.float32(6)}),
    OpCase("Clip_max_only", "Clip", ["x", "", "hi"], {"x": (5,)}, {"hi": np.float32(0.2)}),
    OpCase("Clip_none", "Clip", ["x"], {"x": (5,)}),
    OpCase("Cast_to_int", "Cast", ["x"], {"x": (2, 3)}, attributes={"to": 6}),
    OpCase("Cast_to_double", "Cast", ["x"], {"x": (2, 3)}, attributes={"to": 11}),
]


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementations (one compile)."""
    return reference_and_canonical(CASES, "test_elementwise")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    assert_output_matches(results, case.tensor("y"), rtol=1e-5, atol=1e-6, same_dtype=True)


@pytest.mark.slow
def test_every_op_is_one_flat_map_over_the_output():
    cases = [CASES[0], *[c for c in CASES if c.name in ("Add_bcast", "Clip_min_max", "Cast_to_int")]]
    imported = canonical_model(build_model(cases), "elementwise_structure")
    scopes = assert_flat_maps(imported.sdfg)
    assert sorted(s.label for s in scopes) == sorted(
        ["Relu_2x3x4_relu_map", "Add_bcast_add_map", "Clip_min_max_clip_map", "Cast_to_int_cast_map"]
    )


@pytest.mark.slow
def test_broadcast_input_made_by_another_task_is_copied_into_a_reuse_buffer():
    from dcaccel.buffers import BufferReason, buffer_reason

    relu = OpCase("bias", "Relu", ["x"], {"x": (4,)})
    model = build_model([relu, OpCase("add", "Add", ["a", "b"], {"a": (3, 4), "b": (4,)})])
    model.graph.node[1].input[1] = relu.tensor("y")  # add's b is now relu's output, a transient
    imported = canonical_model(model, "elementwise_reuse")
    scopes = assert_flat_maps(imported.sdfg)
    assert [s.label for s in scopes if s.label.startswith("add")] == ["add_add_map"]
    assert buffer_copies(imported.sdfg) == [(relu.tensor("y"), "B_copy", "reuse")]  # a plain copy, not a task
    reasons = {name: buffer_reason(d) for name, d in imported.sdfg.arrays.items() if d.transient}
    assert list(reasons.values()).count(BufferReason.REUSE) == 1


def test_program_input_broadcast_is_read_directly():
    imported = canonical_model(build_model([c for c in CASES if c.name == "Add_bcast"]), "elementwise_direct")
    assert [s.label for s in assert_flat_maps(imported.sdfg)] == ["Add_bcast_add_map"]


def test_constant_scalar_is_folded_into_the_tasklet():
    from dace.sdfg import nodes

    imported = canonical_model(build_model([c for c in CASES if c.name == "Mul_constant_scalar"]), "fold")
    (tasklet,) = [n for n, _ in imported.sdfg.all_nodes_recursive() if isinstance(n, nodes.Tasklet)]
    assert set(tasklet.in_connectors) == {"__in0"}
    assert "dace.float32(0.5)" in tasklet.code.as_string


def test_unknown_gelu_approximation_is_rejected():
    from dcaccel.errors import UnsupportedOpError

    model = build_model([OpCase("gelu", "Gelu", ["x"], {"x": (3,)}, attributes={"approximate": "tanh"})])
    model.graph.node[0].attribute[0].s = b"cubic"
    with pytest.raises(UnsupportedOpError, match="gelu.*approximate='cubic'"):
        canonical_model(model, "gelu_rejected")


@pytest.mark.parametrize(
    ("in_shape", "out_shape", "expected"),
    [
        ((3, 1), (2, 3, 4), ["i1", 0]),
        ((4,), (2, 3, 4), ["i2"]),
        ((1, 1), (1, 5), ["i0", 0]),
        ((), (2, 3), []),
        ((2, 3), (2, 3), ["i0", "i1"]),
    ],
)
def test_broadcast_indices(in_shape, out_shape, expected):
    from dcaccel.expansions.builder import broadcast_indices, index_params

    params = index_params(len(out_shape), "i")
    assert broadcast_indices(in_shape, out_shape, params) == expected


def test_every_listed_op_has_a_canonical_implementation():
    import dcaccel.expansions

    for op in (*UNARY, *BINARY, "Sqrt", "Pow", "Clip", "Cast"):
        assert dcaccel.expansions.implementations(op) == ["canonical"], op


@pytest.mark.parametrize(
    "before",
    [
        "from dace.libraries.onnx import ONNXRelu\nassert 'canonical' not in ONNXRelu.implementations\n",
        pytest.param("", marks=pytest.mark.slow),  # a fresh interpreter each (seconds): the fast subset runs the above
    ],
    ids=["dace-built-its-classes-first", "dcaccel-first"],
)
def test_register_attaches_to_every_node_class_once(before):
    code = (
        before + "import dcaccel.expansions, dcaccel.expansions.conv\n"
        "from dace.libraries.onnx.forward_implementation_abc import ONNXForward\n"
        "assert not any(c.__module__.startswith('dcaccel') for c in ONNXForward.extensions())\n"
        "dcaccel.expansions.register(); dcaccel.expansions.register()\n"
        "from dace.libraries.onnx import ONNXRelu, ONNXConv_1, ONNXConv_11\n"
        "print(ONNXRelu.implementations['canonical'].__name__, ONNXConv_1.implementations['op'].__name__,\n"
        "      ONNXConv_11.implementations['op'].__name__, len(ONNXForward.registered_implementations('Conv')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    relu, conv_1, conv_11, count = result.stdout.split()
    assert (relu, conv_1, conv_11) == (
        "ONNXRelu_14_Expansion_CanonicalRelu",
        "ONNXConv_1_Expansion_ConvIm2colOP",
        "ONNXConv_11_Expansion_ConvIm2colOP",
    )
    assert int(count) >= 4  # DaCe's own Conv implementations and dcaccel's four, each once
