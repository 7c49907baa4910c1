"""Canonical Trilu, EyeLike, DepthToSpace, SpaceToDepth and Det: values against onnxruntime (one compile, slow)
over diagonals, batches, block sizes and modes; the tasks of each op's lowering, none opaque (fast); refusals."""

import numpy as np
import pytest

from tests.expansions.canonical_onnx import (
    OpCase,
    assert_node_tasks,
    assert_output_matches,
    build_model,
    canonical_model,
    lowered_dags,
    reference_and_canonical,
)


def _trilu(name, shape, k=None, **attributes) -> OpCase:
    constants = {} if k is None else {"k": np.array(k, np.int64)}
    return OpCase(name, "Trilu", ["x", "k"] if k is not None else ["x"], {"x": shape}, constants, attributes)


def _eye(name, shape, **attributes) -> OpCase:
    return OpCase(name, "EyeLike", ["x"], {"x": shape}, {}, attributes)


def _blocks(name, op, shape, blocksize, **attributes) -> OpCase:
    return OpCase(name, op, ["x"], {"x": shape}, {}, {"blocksize": blocksize, **attributes})


# A singular matrix (its determinant 0 exactly), one that needs a row swap (a zero first pivot), and 1x1.
SINGULAR = np.array([[1, 2, 3], [2, 4, 6], [1, 0, 1]], np.float32)
SWAPPED = np.array([[0, 1, 2], [3, 0, 1], [1, 1, 0]], np.float32)

CASES = [
    _trilu("triu_default", (4, 5)),
    _trilu("triu_k2", (4, 5), 2),
    _trilu("triu_k_negative", (3, 4, 4), -1),
    _trilu("tril_default", (4, 5), upper=0),
    _trilu("tril_k_beyond", (4, 5), 7, upper=0),
    _trilu("tril_k_negative", (2, 3, 5), -2, upper=0),
    _eye("eye_square", (4, 4)),
    _eye("eye_k1_wide", (3, 5), k=1),
    _eye("eye_k_negative_int", (4, 3), k=-2, dtype=6),  # int32
    _blocks("d2s_dcr", "DepthToSpace", (1, 8, 2, 3), 2),
    _blocks("d2s_crd", "DepthToSpace", (2, 8, 2, 3), 2, mode="CRD"),
    _blocks("d2s_block3", "DepthToSpace", (1, 9, 2, 2), 3),
    _blocks("s2d_block2", "SpaceToDepth", (2, 2, 4, 6), 2),
    _blocks("s2d_block3", "SpaceToDepth", (1, 3, 6, 3), 3),
    OpCase("det_matrix", "Det", ["x"], {"x": (4, 4)}),
    OpCase("det_batch", "Det", ["x"], {"x": (2, 3, 3, 3)}),
    OpCase("det_one_by_one", "Det", ["x"], {"x": (3, 1, 1)}),
    OpCase("det_singular", "Det", ["x"], {}, {"x": SINGULAR}),
    OpCase("det_swapped", "Det", ["x"], {}, {"x": SWAPPED}),
]


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementations (one compile)."""
    return reference_and_canonical(CASES, "test_matrix_shape_ops")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    rtol = 1e-5 if case.op_type == "Det" else None  # the others copy or write constants: exact
    assert_output_matches(results, case.tensor("y"), rtol=rtol, atol=1e-5, same_dtype=True)


@pytest.mark.slow
def test_det_of_known_matrices(results):
    _, canonical = results
    assert canonical["det_singular__y"] == 0
    np.testing.assert_allclose(canonical["det_swapped__y"], np.linalg.det(SWAPPED.astype(np.float64)), rtol=1e-6)


#: One case per op: its tasks (labels without the case's prefix).
TASKS = {
    "triu_k2": ["trilu"],
    "eye_k1_wide": ["eye"],
    "d2s_crd": ["depth_to_space"],
    "s2d_block2": ["space_to_depth"],
    "det_batch": ["lu", "det"],
}


@pytest.fixture(scope="module")
def dags():
    return lowered_dags([c for c in CASES if c.name in TASKS], "matrix_shape_ops_dag", group=1)


@pytest.mark.parametrize("name", TASKS)
def test_lowers_to_its_tasks_none_opaque(name, dags):
    assert_node_tasks(dags[name], name, TASKS[name])


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (
            OpCase("trilu_data_k", "Trilu", ["x", "k"], {"x": (3, 3), "k": ()}, dtype=np.int64),
            r"Trilu \(node 'trilu_data_k'\): 'k' must be a constant \(the diagonal offset\)$",
        ),
        (
            OpCase("det_large", "Det", ["x"], {"x": (65, 65)}),
            r"Det \(node 'det_large'\): 65x65 matrices \(1 to 64 rows\)$",
        ),
    ],
    ids=lambda v: v.name if isinstance(v, OpCase) else "",
)
def test_unsupported_shapes_are_refused(case, message):
    from dcaccel.errors import UnsupportedOpError

    with pytest.raises(UnsupportedOpError, match=message):
        canonical_model(build_model([case]), f"refused_{case.name}")


def test_every_op_has_a_canonical_implementation():
    import dcaccel.expansions

    ops = ("Trilu", "EyeLike", "DepthToSpace", "SpaceToDepth", "Det")
    assert {op: dcaccel.expansions.implementations(op) for op in ops} == {op: ["canonical"] for op in ops}
