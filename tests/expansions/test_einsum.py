"""ONNX Einsum of the matrix-product forms lowered as a batched MMM (mv, op, lmv).

Structure tests lower one-node models and extract their task DAGs (no compile); the numerical test holds
every equation once per MMM shape in one model, compiled once and compared with onnxruntime.
"""

from collections import Counter

import dace
import numpy as np
import pytest
from dace.ml import ONNXModel

from dcaccel.buffers import BufferReason, buffer_reason
from dcaccel.dag import extract
from dcaccel.errors import UnsupportedOpError
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


def test_transposed_operand_of_a_whole_batch_streams():
    product = EinsumProduct(transpose_a=False, transpose_b=True)
    a, b, y = Operand("Inputs__0", (2, 3, 4)), Operand("Inputs__1", (2, 5, 4)), Operand("Output", (2, 3, 5))
    sdfg = build_einsum_sdfg(a, b, y, product, dace.float32, "lmv", "einsum")
    assert buffer_reason(sdfg.arrays["Inputs__1_t"]) is None


@pytest.mark.parametrize(
    "equation, a, b",
    [
        ("ij,jk->ki", (3, 4), (4, 5)),  # the transposed product
        ("ij,kl->ijkl", (3, 4), (4, 5)),  # an outer product
        ("ijk,jk->i", (3, 4, 5), (4, 5)),  # two summed labels
        ("ij,jj->ij", (3, 4), (4, 4)),  # a diagonal
        ("ij,j->i", (3, 4), (4,)),  # a matrix-vector product
        ("bij,cjk->bcik", (2, 3, 4), (5, 4, 6)),  # batch labels not aligned from the right
        ("ij,jk->k", (3, 4), (4, 5)),  # a label summed over one operand
    ],
)
def test_other_equations_raise_naming_the_equation(equation, a, b):
    case = OpCase("bad_mv", "Einsum", ["a", "b"], inputs={"a": a, "b": b}, attributes={"equation": equation})
    with pytest.raises(UnsupportedOpError, match=f"Einsum \\(node 'bad_mv'\\): equation '{equation}'"):
        _lower([case])


def test_three_operands_raise():
    case = OpCase(
        "three_mv",
        "Einsum",
        ["a", "b", "c"],
        inputs={"a": (2, 3), "b": (3, 4), "c": (4, 5)},
        attributes={"equation": "ij,jk,kl->il"},
    )
    with pytest.raises(UnsupportedOpError, match="equation 'ij,jk,kl->il' on 3 operands"):
        _lower([case])


@pytest.fixture(scope="module")
def compiled_einsums():
    """Every equation under every shape in one lowered SDFG, compiled once; its outputs and onnxruntime's."""
    cases = _cases(EQUATIONS)
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
