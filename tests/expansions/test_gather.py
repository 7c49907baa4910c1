"""Canonical GatherElements, ScatterElements and ScatterND: values against onnxruntime (one compile), over
axes (negative ones included), size-1 dimensions, negative and repeated indices and every reduction; task
DAGs (one task per gather, two per scatter, none opaque) and rejections.
"""

import numpy as np
import pytest

from tests.expansions.canonical_onnx import (
    OpCase,
    assert_flat_maps,
    assert_output_matches,
    build_model,
    canonical_model,
    lowered_dags,
    reference_and_canonical,
)

I64, I32 = np.int64, np.int32


def _indices(values) -> np.ndarray:
    return np.array(values, I64)


def _gather(name, shape, indices, axis, dtype=np.float32) -> OpCase:
    return OpCase(name, "GatherElements", ["d", "i"], {"d": shape}, {"i": indices}, {"axis": axis}, dtype=dtype)


def _scatter(name, op, shape, indices, updates_shape, dtype=np.float32, **attributes) -> OpCase:
    inputs = {"d": shape, "u": updates_shape}
    return OpCase(name, op, ["d", "i", "u"], inputs, {"i": indices}, attributes, dtype=dtype)


CASES = [
    _gather("ge_axis0", (3, 4), _indices([[2, -1, 0, 1], [0, 0, 2, -3]]), 0),
    _gather("ge_last_axis_negative", (2, 3, 4), _indices([[[3, 0], [1, -4], [2, 2]]]), -1),
    _gather("ge_middle_axis", (2, 3, 2), _indices([[[2, 1]], [[0, -1]]]), 1),
    _gather("ge_size_one_axis", (3, 1), _indices([[0], [-1], [0]]), 1),
    _gather("ge_1d_int", (5,), _indices([4, 0, -2, 4, 1, 1, 3]), 0, I32),
    _gather("ge_indices_int32", (3, 3), np.array([[1, 2, 0]], I32), 0),
    *(
        _scatter(
            f"se_{reduction}",
            "ScatterElements",
            (3, 4),
            _indices([[2, 1, 0, 1], [2, 0, 2, -2]]),
            (2, 4),
            axis=0,
            reduction=reduction,
        )
        for reduction in ("none", "add", "mul", "max", "min")
    ),
    _scatter(
        "se_last_axis",
        "ScatterElements",
        (2, 3, 4),
        _indices([[[3, 0], [-1, 2], [1, 1]]] * 2),
        (2, 3, 2),
        axis=-1,
        reduction="add",
    ),
    _scatter("se_size_one", "ScatterElements", (1, 1), _indices([[0]]), (1, 1), axis=1),
    _scatter("se_1d_int", "ScatterElements", (6,), _indices([5, -6, 2]), (3,), I32, axis=0, reduction="add"),
    _scatter("snd_slices", "ScatterND", (4, 3, 2), _indices([[2], [-1]]), (2, 3, 2)),
    _scatter("snd_elements", "ScatterND", (4, 3, 2), _indices([[2, 1, 0], [0, -1, 1], [3, 0, 1]]), (3,)),
    _scatter("snd_rows_mul", "ScatterND", (4, 3, 2), _indices([[2, 1], [0, -1], [2, 1]]), (3, 2), reduction="mul"),
    _scatter("snd_batched_add", "ScatterND", (5, 2), _indices([[[1], [4]], [[1], [0]]]), (2, 2, 2), reduction="add"),
    _scatter("snd_max", "ScatterND", (3, 3), _indices([[0, 0], [0, 0], [2, 1]]), (3,), reduction="max"),
    _scatter("snd_min_int", "ScatterND", (3, 3), _indices([[1], [1]]), (2, 3), I32, reduction="min"),
]


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementations (one compile)."""
    return reference_and_canonical(CASES, "test_gather")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    assert_output_matches(results, case.tensor("y"), rtol=1e-6, same_dtype=True)


@pytest.fixture(scope="module")
def dags():
    """The task DAG of every case lowered canonically (nothing compiled), by case name."""
    return lowered_dags(CASES, "gather_dag")


STEPS = {"GatherElements": ["gather_elements"], "ScatterElements": ["copy", "scatter"]}
STEPS["ScatterND"] = ["copy", "offset", "scatter"]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_one_task_per_step_none_opaque(case, dags):
    from dcaccel.dag.metrics import opaque_work

    dag = dags[case.name]
    assert opaque_work(dag)[0] == 0
    tasks = sorted(dag.label(t) for t in dag.tasks if dag.info(t).node == case.name)
    assert tasks == [f"{case.name}_{step}_map" for step in STEPS[case.op_type]]


@pytest.mark.parametrize(
    "name, reads",
    [
        ("se_add", {"i": 8, "y": 8, "u": 8}),  # an index, the element it updates, the update: per update
        ("snd_rows_mul", {"offset": 6, "y": 6, "u": 6}),  # the offset of the row, re-read per element of it
    ],
)
@pytest.mark.slow
def test_scatter_reads_one_index_one_element_and_one_update_per_update(name, reads, dags):
    case = next(c for c in CASES if c.name == name)
    dag = dags[name]
    (scatter,) = [t for t in dag.tasks if dag.label(t) == f"{name}_scatter_map"]
    found = {dag.info(p).container: dag.volume(p, scatter) for p in dag.predecessors(scatter)}
    offsets = [c for c in found if c.endswith("offset")]  # inlining may prefix the transient's name
    assert found == {(case.tensor(n) if n != "offset" else offsets[0]): v for n, v in reads.items()}
    assert [dag.volume(scatter, s) for s in dag.successors(scatter)] == [reads["u"]]


@pytest.mark.slow
def test_every_task_is_one_flat_map():
    cases = [c for c in CASES if c.name in ("ge_middle_axis", "se_add", "snd_batched_add")]
    scopes = assert_flat_maps(canonical_model(build_model(cases), "gather_structure").sdfg)
    assert sorted(s.label for s in scopes) == sorted(
        [
            "ge_middle_axis_gather_elements_map",
            "se_add_copy_map",
            "se_add_scatter_map",
            "snd_batched_add_copy_map",
            "snd_batched_add_offset_map",
            "snd_batched_add_scatter_map",
        ]
    )


def test_an_unknown_reduction_is_rejected():
    from dcaccel.errors import UnsupportedOpError

    case = _scatter("se_mean", "ScatterElements", (3,), _indices([0]), (1,), axis=0, reduction="mean")
    with pytest.raises(UnsupportedOpError, match=r"ScatterElements \(node 'se_mean'\): reduction='mean'"):
        canonical_model(build_model([case]), "gather_rejected")
