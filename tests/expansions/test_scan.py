"""Canonical TopK, CumSum and CumProd: values against onnxruntime (one compile; TopK-1 at opset 9 in a second),
over axes (negative ones included), size-1 axes, ties, largest and smallest, exclusive and reverse sums and
products; task DAGs (one task per step, none opaque) and rejections.
"""

import numpy as np
import pytest

from tests.expansions.canonical_onnx import (
    OpCase,
    assert_flat_maps,
    assert_output_matches,
    build_model,
    canonical_model,
    lowered_dag,
    lowered_dags,
    random_feed,
    run_canonical,
    run_reference,
)

I64 = np.int64
TOPK_OUTPUTS = ("values", "indices")
TIES = np.array([[1, 3, 3, 1, 2], [0, 0, 0, 0, 0]], np.float32)
"""Rows with equal elements: the one of lower index comes first, for the largest and the smallest alike."""


def _topk(name, shape, k, dtype=np.float32, constant=None, **attributes) -> OpCase:
    inputs = {} if constant is not None else {"x": shape}
    constants = {"k": np.array([k], I64), **({"x": constant} if constant is not None else {})}
    return OpCase(name, "TopK", ["x", "k"], inputs, constants, attributes, TOPK_OUTPUTS, dtype)


def _cumsum(name, shape, axis, dtype=np.float32, op="CumSum", **attributes) -> OpCase:
    return OpCase(name, op, ["x", "axis"], {"x": shape}, {"axis": np.array(axis, I64)}, attributes, dtype=dtype)


def _cumprod(name, shape, axis, dtype=np.float32, **attributes) -> OpCase:
    return _cumsum(name, shape, axis, dtype, "CumProd", **attributes)


CASES = [
    _topk("topk_last_axis", (3, 5), 2),
    _topk("topk_axis0_smallest", (4, 2, 3), 3, axis=0, largest=0),
    _topk("topk_middle_negative_axis", (2, 5, 3), 4, axis=-2),
    _topk("topk_all", (6,), 6),
    _topk("topk_none", (2, 3), 0),
    _topk("topk_size_one_axis", (3, 1), 1),
    _topk("topk_unsorted", (2, 6), 3, sorted=0),
    _topk("topk_ties_largest", None, 4, constant=TIES),
    _topk("topk_ties_smallest", None, 3, constant=TIES, largest=0),
    _topk("topk_int", (3, 7), 3, I64),
    _cumsum("cumsum_last_axis", (3, 4), 1),
    _cumsum("cumsum_axis0", (5, 2), 0),
    _cumsum("cumsum_exclusive", (2, 5), -1, exclusive=1),
    _cumsum("cumsum_reverse", (2, 3, 4), -2, reverse=1),
    _cumsum("cumsum_reverse_exclusive", (2, 3, 4), 0, reverse=1, exclusive=1),
    _cumsum("cumsum_size_one", (3, 1), 1, exclusive=1),
    _cumsum("cumsum_1d_int", (7,), 0, I64),
]
CUMPROD = [
    _cumprod("cumprod_last_axis", (3, 4), 1),
    _cumprod("cumprod_exclusive", (2, 5), -1, exclusive=1),
    _cumprod("cumprod_reverse", (2, 3, 4), -2, reverse=1),
    _cumprod("cumprod_reverse_exclusive", (2, 3, 4), 0, reverse=1, exclusive=1),
    _cumprod("cumprod_size_one", (3, 1), 1, exclusive=1),
    _cumprod("cumprod_1d_int", (7,), 0, I64),
    _cumprod("cumprod_empty", (0, 3), 1),
]
"""CumProd (opset 26 on)."""
TOPK_1 = [OpCase("topk1", "TopK", ["x"], {"x": (2, 4)}, {}, {"k": 2, "axis": -1}, TOPK_OUTPUTS)]
"""TopK-1 (opset 9): ``k`` is an attribute."""


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementations (one compile per opset)."""
    reference, canonical = {}, {}
    models = ((CASES, 18, "test_scan"), (CUMPROD, 26, "test_scan_cumprod"), (TOPK_1, 9, "test_scan_topk1"))
    for cases, opset, name in models:
        model = build_model(cases, opset=opset)
        feed = random_feed(cases)
        reference.update(run_reference(model, feed))
        canonical.update(run_canonical(model, feed, name))
    return reference, canonical


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "output"),
    [(c, o) for c in CASES + CUMPROD + TOPK_1 for o in c.outputs],
    ids=lambda v: v.name if isinstance(v, OpCase) else v,
)
def test_matches_onnxruntime(case, output, results):
    if case.attributes.get("sorted", 1):
        assert_output_matches(results, case.tensor(output), rtol=1e-5, atol=1e-5, same_dtype=True)
        return
    reference, canonical = results  # unsorted: onnxruntime's order is its own, the canonical one is sorted
    name = case.tensor(output)
    assert canonical[name].dtype == reference[name].dtype
    np.testing.assert_allclose(np.sort(canonical[name]), np.sort(reference[name]), rtol=1e-5, atol=1e-5)
    if output == "values":
        assert (np.diff(canonical[name], axis=-1) <= 0).all()


@pytest.fixture(scope="module")
def dags():
    """The task DAG of every case lowered canonically (nothing compiled), by case name."""
    return lowered_dags([c for c in CASES if c.name != "topk_none"], "scan_dag")


STEPS = {"TopK": ["output", "rank", "select"], "CumSum": ["cumsum", "output"]}


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", [c for c in CASES if c.name not in ("topk_none", "cumprod_empty")], ids=lambda c: c.name
)
def test_one_task_per_step_none_opaque(case, dags):
    from dcaccel.dag.metrics import opaque_work

    dag = dags[case.name]
    assert opaque_work(dag)[0] == 0
    tasks = sorted(dag.label(t) for t in dag.tasks if dag.info(t).node == case.name)
    assert [t for t in tasks if "_init_" not in t] == [f"{case.name}_{step}_map" for step in STEPS[case.op_type]]


@pytest.mark.slow
def test_topk_compares_every_pair_and_selects_k_per_line(dags):
    """topk_last_axis: 3 lines of 5. rank: per pair of a line (5 x 5), an element of X, one of its copy and the
    rank accumulated into; select: per (output position, element) pair (2 x 5), X, the rank and the two outputs
    accumulated into; output: the two accumulators, once per output element."""
    dag = dags["topk_last_axis"]
    volumes = {
        dag.label(t).removeprefix("topk_last_axis_"): sorted(dag.volume(p, t) for p in dag.predecessors(t))
        for t in dag.tasks
        if dag.info(t).node == "topk_last_axis" and "_init_" not in dag.label(t)
    }
    assert volumes["rank_map"] == [3 * 5 * 5] * 3
    assert volumes["select_map"] == [3 * 2 * 5] * 4
    assert volumes["output_map"] == [3 * 2, 3 * 2]


@pytest.mark.slow
def test_every_task_is_one_flat_map():
    cases = [c for c in CASES if c.name in ("topk_axis0_smallest", "cumsum_reverse")]
    scopes = assert_flat_maps(canonical_model(build_model(cases), "scan_structure").sdfg)
    steps = ["init_rank", "init_values", "init_indices", "rank", "select", "output"]
    expected = [f"topk_axis0_smallest_{s}_map" for s in steps]
    expected += [f"cumsum_reverse_{s}_map" for s in ("init_sum", "cumsum", "output")]
    assert sorted(s.label for s in scopes) == sorted(expected)


def test_cumprod_lowers_to_its_steps_none_opaque():
    """cumprod_reverse: the product buffer's initialisation, the n x n product and the output, none opaque."""
    (case,) = [c for c in CUMPROD if c.name == "cumprod_reverse"]
    dag = lowered_dag(build_model([case], opset=26), "scan_cumprod_dag")
    assert not any(dag.info(t).opaque for t in dag.tasks)
    steps = ("init_product", "cumprod", "output")
    assert sorted(dag.label(t) for t in dag.tasks) == sorted(f"cumprod_reverse_{s}_map" for s in steps)


def test_an_axis_that_is_data_is_rejected():
    from dcaccel.errors import UnsupportedOpError

    case = OpCase("cumsum_data_axis", "CumSum", ["x", "axis"], {"x": (3, 4), "axis": ()}, dtype=I64)
    model = build_model([case])
    with pytest.raises(UnsupportedOpError, match=r"CumSum \(node 'cumsum_data_axis'\): 'axis' must be a constant"):
        canonical_model(model, "scan_rejected")


def test_a_rank_0_input_is_rejected():
    from dcaccel.errors import UnsupportedOpError

    case = OpCase("cumsum_rank0", "CumSum", ["x", "axis"], {"x": ()}, {"axis": np.array(0, I64)})
    with pytest.raises(UnsupportedOpError, match=r"CumSum \(node 'cumsum_rank0'\): a rank-0 input has no axis$"):
        canonical_model(build_model([case]), "scan_rank0")
