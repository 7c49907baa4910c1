"""ONNX Gemm / MatMul and DaCe's MatMul (``@``) lowered through the MMM shapes mv, op, lmv."""

import dace
import numpy as np
import onnx
import onnxruntime
import pytest
from dace.ml import ONNXModel
from onnx import TensorProto, helper

from dcaccel.buffers import BufferReason, buffer_reason
from dcaccel.errors import UnsupportedOpError
from dcaccel.expansions.gemm import Operand, build_gemm_sdfg, build_matmul_sdfg
from dcaccel.expansions.mmm import mmm_operands
from dcaccel.transforms.checks import assert_fully_lowered
from dcaccel.transforms.lower import lower

SHAPES = ("mv", "op", "lmv")
OPSET = 17

# name: (op, input shapes, attributes, output shape)
CASES = {
    "linear": ("Gemm", [(3, 4), (5, 4), (5,)], {"transB": 1}, (3, 5)),
    "trans_a_alpha_beta": ("Gemm", [(4, 3), (4, 5), (3, 5)], {"transA": 1, "alpha": 0.5, "beta": 2.0}, (3, 5)),
    "no_c": ("Gemm", [(2, 4), (4, 3)], {}, (2, 3)),
    "scaled_no_c": ("Gemm", [(2, 4), (4, 3)], {"alpha": 3.0}, (2, 3)),
    "one_by_one": ("Gemm", [(1, 4), (4, 1)], {}, (1, 1)),
    "c_column_k1": ("Gemm", [(3, 1), (1, 5), (3, 1)], {"alpha": 2.0}, (3, 5)),
    "scalar_c": ("Gemm", [(2, 3), (3, 4), (1,)], {"beta": 0.5}, (2, 4)),
    "matmul_2d": ("MatMul", [(3, 4), (4, 5)], {}, (3, 5)),
    "matmul_broadcast_4d": ("MatMul", [(2, 1, 3, 4), (3, 4, 5)], {}, (2, 3, 3, 5)),
    "matmul_3d_by_2d": ("MatMul", [(2, 3, 4), (4, 5)], {}, (2, 3, 5)),
    "matmul_vector_left": ("MatMul", [(4,), (4, 5)], {}, (5,)),
    "matmul_vector_right": ("MatMul", [(3, 4), (4,)], {}, (3,)),
    "matmul_batched_vector": ("MatMul", [(2, 3, 4), (4,)], {}, (2, 3)),
    "matmul_window_attention": ("MatMul", [(4, 1, 3, 5), (4, 1, 5, 2)], {}, (4, 1, 3, 2)),  # a head of size 1
    "matmul_broadcast_both": ("MatMul", [(2, 1, 3, 4), (1, 3, 4, 5)], {}, (2, 3, 3, 5)),
    "matmul_5d_inner_one": ("MatMul", [(1, 2, 1, 3, 4), (3, 4, 5)], {}, (1, 2, 3, 3, 5)),
    "matmul_vector_batch_ones": ("MatMul", [(2, 1, 1, 3, 4), (4,)], {}, (2, 1, 1, 3)),
}


def products_model(cases: dict, shapes=SHAPES):
    """One ONNX model with a node per (case, shape) named ``<case>_<shape>``; the nodes of a case share its
    inputs. Returns the model and the choices selecting each node's shape."""
    nodes, inputs, outputs, choices = [], [], [], {}
    for case, (op, input_shapes, attributes, output_shape) in cases.items():
        names = [f"{case}_in{i}" for i in range(len(input_shapes))]
        inputs += [
            helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in zip(names, input_shapes, strict=True)
        ]
        for shape in shapes:
            outputs.append(helper.make_tensor_value_info(f"{case}_{shape}", TensorProto.FLOAT, output_shape))
            nodes.append(helper.make_node(op, names, [f"{case}_{shape}"], name=f"{case}_{shape}", **attributes))
            choices[f"{case}_{shape}"] = shape
    graph = helper.make_graph(nodes, "products", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=9)
    onnx.checker.check_model(model, full_check=True)
    return model, choices


def _state(sdfg):
    (state,) = sdfg.states()
    return state


def _top_level_labels(state) -> list[str]:
    return sorted(
        n.map.label for n in state.nodes() if isinstance(n, dace.nodes.MapEntry) and state.entry_node(n) is None
    )


def _mmm_nodes(sdfg):
    return [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.LibraryNode)]


@pytest.mark.parametrize(
    "case, labels",
    [
        ("linear", ["AddBias", "BcastA", "Gather", "MV", "TransB"]),
        ("trans_a_alpha_beta", ["AddBias", "BcastA", "Gather", "MV", "TransA"]),
        ("no_c", ["BcastA", "Gather", "MV"]),
        ("c_column_k1", ["AddBias", "BcastA", "Gather", "MV"]),
        ("scaled_no_c", ["BcastA", "Gather", "MV", "Scale"]),
    ],
)
def test_gemm_structure(case, labels):
    model, choices = products_model({case: CASES[case]}, shapes=("mv",))
    lowered = lower(ONNXModel(case, model).sdfg, choices)
    assert_fully_lowered(lowered.sdfg)
    assert _top_level_labels(_state(lowered.sdfg)) == labels


@pytest.mark.parametrize("shape, reason", [("mv", None), ("op", BufferReason.REORDER), ("lmv", BufferReason.REORDER)])
def test_gemm_product_mark_follows_the_mmm_order(shape, reason):
    sdfg = build_gemm_sdfg(3, 4, 5, dace.float32, shape, trans_b=True, c_shape=(5,))
    assert buffer_reason(sdfg.arrays["Y_mm"]) is reason
    assert buffer_reason(sdfg.arrays["B_t"]) is None  # written row by row: every shape can stream it


def test_gemm_without_epilogue_writes_the_output_directly():
    sdfg = build_gemm_sdfg(3, 4, 5, dace.float32, "op")
    assert sorted(sdfg.arrays) == ["A", "B", "Y"]
    (mmm,) = _mmm_nodes(sdfg)
    assert [e.dst.data for e in _state(sdfg).out_edges(mmm)] == ["Y"]


@pytest.mark.parametrize(
    "a, b, y, batch",
    [
        ((2, 1, 3, 4), (3, 4, 5), (2, 3, 3, 5), (2, 3)),
        ((2, 3, 4), (4, 5), (2, 3, 5), (2,)),
        ((3, 4), (4,), (3,), ()),
        ((4,), (2, 4, 5), (2, 5), (2,)),
        ((1, 3, 4), (1, 4, 5), (1, 3, 5), ()),
        ((4, 1, 3, 5), (4, 1, 5, 2), (4, 1, 3, 2), (4,)),
        ((2, 1, 3, 4), (1, 3, 4, 5), (2, 3, 3, 5), (2, 3)),
        ((1, 2, 1, 3, 4), (3, 4, 5), (1, 2, 3, 3, 5), (2, 3)),
        ((2, 1, 1, 3, 4), (4,), (2, 1, 1, 3), (2,)),
    ],
)
def test_matmul_is_one_batched_mmm(a, b, y, batch):
    sdfg = build_matmul_sdfg(Operand("A", a), Operand("B", b), Operand("Y", y), dace.float32, "lmv")
    (mmm,) = _mmm_nodes(sdfg)
    assert mmm_operands(mmm, _state(sdfg)).batch == batch
    sdfg.validate()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "case, products",
    [("matmul_window_attention", 4), ("matmul_broadcast_both", 6), ("matmul_5d_inner_one", 6)],
)
def test_matmul_over_several_batch_dimensions_has_one_product_per_batch_index(case, products, shape):
    from collections import Counter

    from dcaccel.dag import extract
    from dcaccel.dag.metrics import opaque_work

    model, choices = products_model({case: CASES[case]}, shapes=(shape,))
    lowered = lower(ONNXModel(case, model).sdfg, choices)
    assert_fully_lowered(lowered.sdfg)
    dag = extract(lowered)
    dag.validate()
    assert opaque_work(dag)[0] == 0
    counts = Counter(dag.label(t).rstrip("0123456789") for t in dag.tasks)
    (*_, n, k), (*_, m) = CASES[case][1]
    assert counts[shape.upper()] == products * {"mv": m, "op": k, "lmv": n}[shape]


N, K, M, BATCH = (dace.symbol(s) for s in ("N", "K", "M", "BATCH"))


@dace.program
def blas_products(
    A: dace.float64[N, K],
    B: dace.float64[K, M],
    x: dace.float64[K],
    P: dace.float64[BATCH, N, K],
    Q: dace.float64[BATCH, K, M],
    C: dace.float64[N, M],
    y: dace.float64[N],
    Z: dace.float64[BATCH, N, M],
    U: dace.float64[BATCH, N, M],
):
    C[:] = A @ B
    y[:] = A @ x
    Z[:] = P @ Q
    U[:] = A @ Q


@pytest.mark.parametrize("shape", [s if s == "op" else pytest.param(s, marks=pytest.mark.slow) for s in SHAPES])
def test_program_products_lower_to_mmm(shape):
    lowered = lower(blas_products.to_sdfg(), {"MatMul": shape})
    assert_fully_lowered(lowered.sdfg)
    assert set(lowered.implementations.values()) == {shape}
    task_map = {"mv": "MV", "op": "OP", "lmv": "LMV"}[shape]
    ranges = [
        str(n.map.range[0][1])
        for n, _ in lowered.sdfg.all_nodes_recursive()
        if isinstance(n, dace.nodes.MapEntry) and n.map.label == task_map
    ]
    # C and y: a task map over the task index; Z and U (A broadcast): over the symbolic batch first
    assert ranges.count("BATCH - 1") == 2 and len(ranges) == 4


def test_program_dot_product_is_unsupported():
    sdfg = dace.SDFG("dot")
    sdfg.add_array("a", (4,), dace.float64)
    sdfg.add_array("b", (4,), dace.float64)
    sdfg.add_array("c", (1,), dace.float64)
    state = sdfg.add_state()
    node = dace.libraries.blas.MatMul("dot_product")
    state.add_node(node)
    state.add_edge(state.add_read("a"), None, node, "_a", dace.Memlet("a[0:4]"))
    state.add_edge(state.add_read("b"), None, node, "_b", dace.Memlet("b[0:4]"))
    state.add_edge(node, "_c", state.add_write("c"), None, dace.Memlet("c[0]"))
    with pytest.raises(UnsupportedOpError, match="MatMul \\(node 'dot_product'\\): a dot product of two vectors"):
        lower(sdfg)


@pytest.fixture(scope="module")
def compiled_products():
    """Every case under every shape in one lowered SDFG, compiled once; its outputs and onnxruntime's."""
    model, choices = products_model(CASES)
    lowered = lower(ONNXModel("products", model).sdfg, choices)
    rng = np.random.default_rng(2)
    feeds = {
        i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in model.graph.input
    }
    results = lowered.sdfg.compile()(**{k: v.copy() for k, v in feeds.items()})
    names = [o.name for o in model.graph.output]
    reference = onnxruntime.InferenceSession(model.SerializeToString()).run(names, feeds)
    return dict(zip(names, results, strict=True)), dict(zip(names, reference, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_onnx_products_match_onnxruntime(compiled_products, case, shape):
    outputs, reference = compiled_products
    expected = reference[f"{case}_{shape}"]
    np.testing.assert_allclose(np.reshape(outputs[f"{case}_{shape}"], expected.shape), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_program_products_match_numpy(shape):
    """One compile per shape, run with a batch of one and of three elements."""
    program = lower(blas_products.to_sdfg(), {"MatMul": shape}).sdfg.compile()
    rng = np.random.default_rng(3)
    n, k, m = 3, 4, 2
    for batch in (1, 3):
        inputs = {
            "A": rng.standard_normal((n, k)),
            "B": rng.standard_normal((k, m)),
            "x": rng.standard_normal(k),
            "P": rng.standard_normal((batch, n, k)),
            "Q": rng.standard_normal((batch, k, m)),
        }
        outputs = {"C": np.zeros((n, m)), "y": np.zeros(n), "Z": np.zeros((batch, n, m)), "U": np.zeros((batch, n, m))}
        program(**inputs, **outputs, N=n, K=k, M=m, BATCH=batch)
        np.testing.assert_allclose(outputs["C"], inputs["A"] @ inputs["B"])
        np.testing.assert_allclose(outputs["y"], inputs["A"] @ inputs["x"])
        np.testing.assert_allclose(outputs["Z"], inputs["P"] @ inputs["Q"])
        np.testing.assert_allclose(outputs["U"], inputs["A"] @ inputs["Q"])
