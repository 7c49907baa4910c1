"""ONNX Einsum: the matrix-product forms lowered as a batched MMM (mv, op, lmv), every other equation as one map
over its labels (transpose, diagonal, sum, trace, inner and outer products, three operands, the scalar, empty
dimensions, integer types).

Structure tests lower one-node models and extract their task DAGs (no compile); the numerical tests hold every
product equation once per MMM shape and every other equation once in one model, compiled once and compared with
onnxruntime.
"""

from collections import Counter

import dace
import numpy as np
import pytest
from dace.ml import ONNXModel

from dcaccel.buffers import BufferReason, buffer_reason
from dcaccel.dag import extract
from dcaccel.errors import UnsupportedOpError
from dcaccel.expansions.einsum import EinsumMap
from dcaccel.expansions.gemm import EinsumProduct, Operand, build_einsum_sdfg, einsum_product
from dcaccel.expansions.mmm import mmm_operands
from dcaccel.transforms.checks import assert_fully_lowered
from dcaccel.transforms.lower import lower
from tests.expansions.canonical_onnx import OpCase, build_model, random_feed, run_reference

SHAPES = ("mv", "op", "lmv")

# name: (equation, A shape, B shape, transposed A, transposed B)
EQUATIONS = {
    "batched": ("bij,bjk->bik", (2, 3, 4), (2, 4, 5), False, False),
    "plain": ("ij,jk->ik", (3, 4), (4, 5), False, False),
    "attention_scores": ("bhqd,bhkd->bhqk", (1, 2, 3, 4), (1, 2, 5, 4), False, True),
    "attention_values": ("bhqk,bhkd->bhqd", (2, 2, 3, 5), (2, 2, 5, 4), False, False),
    "broadcast_weight": ("bid,jd->bij", (2, 3, 4), (5, 4), False, True),
    "transposed_a_implicit": ("ki, kj", (4, 3), (4, 5), True, False),
    "ellipsis": ("...ij,...jk->...ik", (2, 3, 3, 4), (2, 3, 4, 5), False, False),
    "batch_one_inner_one": ("bij,bjk->bik", (1, 3, 1), (1, 1, 2), False, False),
    "row_vector_product": ("ij,kj->ik", (1, 4), (5, 4), False, True),
    "ellipsis_batch_of_one": ("...ij,...kj->...ik", (4, 1, 3, 5), (4, 1, 2, 5), False, True),  # a head of size 1
}


def _cases(equations: dict, shapes=SHAPES) -> list[OpCase]:
    return [
        OpCase(f"{name}_{shape}", "Einsum", ["a", "b"], inputs={"a": a, "b": b}, attributes={"equation": equation})
        for name, (equation, a, b, _, _) in equations.items()
        for shape in shapes
    ]


def _lower(cases: list[OpCase]):
    model = build_model(cases)
    choices = {case.name: case.name.rsplit("_", 1)[1] for case in cases}
    return model, lower(ONNXModel("einsum", model, onnx_simplify=False).sdfg, choices)


@pytest.mark.parametrize("name", EQUATIONS)
def test_equation_is_a_product(name):
    equation, a, b, transpose_a, transpose_b = EQUATIONS[name]
    assert einsum_product(None, equation, (len(a), len(b))) == EinsumProduct(transpose_a, transpose_b)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "name", ["batched", "attention_scores", "broadcast_weight", "transposed_a_implicit", "ellipsis_batch_of_one"]
)
def test_dag_has_one_task_per_mmm_task_and_batch_element(name, shape):
    equation, a, b, transpose_a, transpose_b = EQUATIONS[name]
    _, lowered = _lower(_cases({name: EQUATIONS[name]}, shapes=(shape,)))
    assert_fully_lowered(lowered.sdfg)
    dag = extract(lowered)
    dag.validate()
    counts = Counter(dag.label(t).rstrip("0123456789") for t in dag.tasks)
    rows, inner = (a[-1], a[-2]) if transpose_a else (a[-2], a[-1])
    columns = b[-2] if transpose_b else b[-1]
    batch = int(np.prod(np.broadcast_shapes(a[:-2], b[:-2])))
    per_product = {"mv": columns, "op": inner, "lmv": rows}[shape]
    assert counts[shape.upper()] == batch * per_product
    assert counts["TransA"] == transpose_a and counts["TransB"] == transpose_b


@pytest.mark.parametrize(
    "shape, reason",
    [("mv", None), ("op", None), ("lmv", BufferReason.REUSE)],
)
def test_transposed_operand_broadcast_over_the_batch_is_reused(shape, reason):
    # bid,jd->bij: Bᵀ (4×5) is the same for both batch elements; lmv's BcastB streams it once per element
    product = EinsumProduct(transpose_a=False, transpose_b=True)
    a, b, y = Operand("Inputs__0", (2, 3, 4)), Operand("Inputs__1", (5, 4)), Operand("Output", (2, 3, 5))
    sdfg = build_einsum_sdfg(a, b, y, product, dace.float32, shape, "einsum")
    assert buffer_reason(sdfg.arrays["Inputs__1_t"]) is reason
    (state,) = sdfg.states()
    (mmm,) = [n for n in state.nodes() if isinstance(n, dace.nodes.LibraryNode)]
    assert mmm_operands(mmm, state).batch == (2,)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    ("equation", "a", "b", "y"),
    [("bij,bjk->bik", ("N", 3, 4), ("N", 4, 5), ("N", 3, 5)), ("bid,jd->bij", ("N", 3, 4), (5, 4), ("N", 3, 5))],
)
def test_product_of_a_symbolic_batch_is_one_mmm(equation, a, b, y, shape):
    """A batch of symbolic size N takes the MMM path (EinsumMap refuses symbolic sizes): an operand without the
    batch is broadcast over it; it raised a TypeError (a symbol's size converted to int)."""
    from onnx import TensorProto, helper

    values = [
        helper.make_tensor_value_info(name, TensorProto.FLOAT, s) for name, s in zip("aby", (a, b, y), strict=True)
    ]
    node = helper.make_node("Einsum", ["a", "b"], ["y"], equation=equation, name="e")
    graph = helper.make_graph([node], "einsum_symbolic", values[:2], values[2:])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)
    lowered = lower(ONNXModel("einsum_symbolic", model, onnx_simplify=False).sdfg, {"Einsum": shape})
    assert lowered.implementations == {"e": shape} and lowered.opaque == {}
    assert_fully_lowered(lowered.sdfg)


def test_transposed_operand_of_a_whole_batch_streams():
    product = EinsumProduct(transpose_a=False, transpose_b=True)
    a, b, y = Operand("Inputs__0", (2, 3, 4)), Operand("Inputs__1", (2, 5, 4)), Operand("Output", (2, 3, 5))
    sdfg = build_einsum_sdfg(a, b, y, product, dace.float32, "lmv", "einsum")
    assert buffer_reason(sdfg.arrays["Inputs__1_t"]) is None


# name: (equation, operand shapes, element type): one map over the labels (EinsumMap), under every shape alike
GENERAL = {
    "transpose": ("ij->ji", [(3, 4)], np.float32),
    "sum": ("ij->i", [(3, 4)], np.float32),
    "batch_diagonal": ("...ii ->...i", [(3, 5, 5)], np.float32),
    "scalar": ("->", [()], np.float32),
    "trace_implicit": ("ii", [(4, 4)], np.float64),
    "transpose_implicit": ("ba", [(3, 3)], np.int64),  # square: ONNX's shape inference keeps 'ba' (see below)
    "inner": ("i,i", [(5,), (5,)], np.float32),
    "outer": ("i,j->ij", [(3,), (4,)], np.float64),
    "outer_batched": ("bi,j->bij", [(2, 3), (4,)], np.float32),
    "matrix_vector": ("ij,j->i", [(3, 4), (4,)], np.float32),
    "transposed_product": ("ij,jk->ki", [(3, 4), (4, 5)], np.float32),
    "two_summed": ("ijk,jk->i", [(3, 4, 5), (4, 5)], np.float64),
    "diagonal_operand": ("ij,jj->ij", [(3, 4), (4, 4)], np.float32),
    "three_operands": ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], np.float32),
    "three_implicit": ("bi,bj,bk", [(2, 3), (2, 2), (2, 1)], np.float32),
    "ellipsis_broadcast": ("...i,...i->...", [(2, 1, 3), (2, 4, 3)], np.float32),
    "int_product": ("ij,jk->ik", [(3, 4), (4, 2)], np.int32),
    "int_sum": ("bij->b", [(2, 3, 4)], np.int64),
    "empty_inner": ("ij,jk->ik", [(3, 0), (0, 4)], np.float32),
    "empty_output": ("ij->ji", [(0, 3)], np.float32),
    "size_one": ("i,i->", [(1,), (1,)], np.float64),
    "product_fp64": ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)], np.float64),
    "inner_broadcast": ("ij,jk->ik", [(3, 1), (4, 5)], np.float32),  # j of size 1 in A: not an MMM
}


def _general_cases(equations: dict) -> list[OpCase]:
    return [
        OpCase(
            f"{name}_mv",
            "Einsum",
            [f"x{k}" for k in range(len(shapes))],
            inputs={f"x{k}": shape for k, shape in enumerate(shapes)},
            attributes={"equation": equation},
            dtype=dtype,
        )
        for name, (equation, shapes, dtype) in equations.items()
    ]


@pytest.mark.parametrize(
    "equation, shapes, labels, summed",
    [
        ("...ii ->...i", [(3, 5, 5)], ("...0", "i"), ()),
        ("ii", [(4, 4)], (), ("i",)),
        ("ba", [(2, 3)], ("a", "b"), ()),
        ("i,i", [(5,), (5,)], (), ("i",)),
        ("bi,bj,bk", [(2, 3), (2, 2), (2, 1)], ("i", "j", "k"), ("b",)),
        ("...i,...i->...", [(2, 1, 3), (4, 3)], ("...0", "...1"), ("i",)),
        ("->", [()], (), ()),
        ("i,i->i", [(1,), (0,)], ("i",), ()),  # 1 broadcasts against 0
    ],
)
def test_map_labels_are_the_output_then_the_summed(equation, shapes, labels, summed):
    spec = EinsumMap.of(equation, shapes)
    assert spec.output == labels and spec.summed == summed
    assert spec.out_shape == np.einsum(equation, *(np.zeros(s) for s in shapes)).shape


@pytest.mark.parametrize(
    "equation, shapes",
    [
        ("ij,jk->ik", [(3, 4), (5, 6)]),
        ("ij->ii", [(3, 3)]),
        ("ij->k", [(3, 4)]),
        ("ij", [(3,)]),
        ("i,j", [(3,)]),
        ("ij->j", [(dace.symbol("N"), 3)]),
    ],
)
def test_malformed_equations_raise(equation, shapes):
    with pytest.raises(ValueError):
        EinsumMap.of(equation, shapes)


@pytest.mark.parametrize(
    "equation, shapes, reasons",
    [
        ("ij->i", [(3, 4)], [None]),
        ("ij->ji", [(3, 4)], [BufferReason.REORDER]),
        ("ii->i", [(4, 4)], [None]),
        ("i,j->ij", [(3,), (4,)], [BufferReason.REUSE, BufferReason.REUSE]),
        ("i,j->ij", [(3,), (1,)], [None, BufferReason.REUSE]),
        ("ij,jk->ik", [(3, 0), (0, 4)], [None, None]),
    ],
)
def test_operands_read_again_or_out_of_order_come_from_buffers(equation, shapes, reasons):
    spec = EinsumMap.of(equation, shapes)
    assert [spec.reread(k) for k in range(len(shapes))] == reasons


def test_output_shape_other_than_the_equations_is_refused():
    """onnx's shape inference gives 'ba' on 2 × 3 the shape 2 × 3 (its letters in order), onnxruntime and numpy
    compute the 3 × 2 transpose (implicit output letters sorted): the container cannot hold the result."""
    from dcaccel.expansions.registry import implementation_of

    (case,) = _general_cases({"wrong_shape": ("ba", [(2, 3)], np.float32)})
    sdfg = ONNXModel("einsum_shape", build_model([case]), onnx_simplify=False).sdfg
    ((node, state),) = [(n, s) for n, s in sdfg.all_nodes_recursive() if n.label == case.name]
    with pytest.raises(UnsupportedOpError, match=r"equation 'ba': output \(2, 3\), expected \(3, 2\)"):
        implementation_of(node, "mv").expansion.check(node, state, sdfg)


@pytest.mark.parametrize(
    "name, maps",
    [
        ("transpose", ["einsum"]),
        ("outer_batched", ["einsum"]),
        ("three_operands", ["init_accumulator", "reduce", "output"]),
        ("inner_broadcast", ["init_accumulator", "reduce", "output"]),
        ("scalar", ["einsum"]),
        ("empty_inner", ["zeros"]),
    ],
)
def test_other_equations_are_one_map_over_their_labels(name, maps):
    (case,) = _general_cases({name: GENERAL[name]})
    _, lowered = _lower([case])
    assert_fully_lowered(lowered.sdfg)
    dag = extract(lowered)
    dag.validate()
    assert [dag.info(t).map.removeprefix(f"{case.name}_").removesuffix("_map") for t in dag.tasks] == maps


@pytest.fixture(scope="module")
def compiled_einsums():
    """Every equation under every shape in one lowered SDFG, compiled once; its outputs and onnxruntime's."""
    cases = _cases(EQUATIONS) + _general_cases(GENERAL)
    model, lowered = _lower(cases)
    feed = random_feed(cases)
    results = lowered.sdfg.compile()(**{k: v.copy() for k, v in feed.items()})
    names = [o.name for o in model.graph.output]
    return dict(zip(names, results, strict=True)), run_reference(model, feed)


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(EQUATIONS))
def test_matches_onnxruntime(compiled_einsums, name, shape):
    outputs, reference = compiled_einsums
    expected = reference[f"{name}_{shape}__y"]
    np.testing.assert_allclose(
        np.reshape(outputs[f"{name}_{shape}__y"], expected.shape), expected, rtol=1e-5, atol=1e-5
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GENERAL))
def test_other_equations_match_onnxruntime(compiled_einsums, name):
    outputs, reference = compiled_einsums
    expected = reference[f"{name}_mv__y"]
    result = np.reshape(outputs[f"{name}_mv__y"], expected.shape)
    assert result.dtype == expected.dtype
    if np.issubdtype(expected.dtype, np.integer):
        np.testing.assert_array_equal(result, expected)
    else:
        np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("equation", "shapes", "reason"),
    [
        ("ij->ji", [(3, 4)], "reorder"),
        ("j,ij->ij", [(4,), (3, 4)], "reuse"),
        ("ij,j->ij", [(3, 4), (4,)], None),
        ("ij->i", [(3, 4)], None),
    ],
)
def test_operand_made_by_another_task_is_buffered_when_reread_or_reordered(equation, shapes, reason):
    """A Relu's output, the first operand of an Einsum, read by its map out of order (a transpose) or more than once
    (broadcast along i) is copied into a buffer first (no task); read once row-major it streams."""
    from tests.expansions.canonical_onnx import assert_flat_maps, buffer_copies, canonical_model

    others = {f"x{k}": shape for k, shape in enumerate(shapes) if k}
    einsum = OpCase("e", "Einsum", ["x0", *others], {"x0": shapes[0], **others}, attributes={"equation": equation})
    model = build_model([OpCase("pre", "Relu", ["x"], {"x": shapes[0]}), einsum])
    model.graph.node[1].input[0] = "pre__y"
    model.graph.input.remove(next(i for i in model.graph.input if i.name == "e__x0"))
    sdfg = canonical_model(model, "einsum_buffer", {"e": "mv"}).sdfg
    assert_flat_maps(sdfg)
    assert [(source, mark) for source, _, mark in buffer_copies(sdfg)] == ([("pre__y", reason)] if reason else [])
