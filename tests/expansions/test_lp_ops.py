"""Canonical LpPool and LpNormalization: values against onnxruntime (one compile, slow) over p, kernels, strides,
pads, dilations and axes; the tasks of each op's lowering, none opaque (fast); refusals."""

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


def _lppool(name, shape, kernel, **attributes) -> OpCase:
    return OpCase(name, "LpPool", ["x"], {"x": shape}, {}, {"kernel_shape": kernel, **attributes})


def _lpnorm(name, shape, **attributes) -> OpCase:
    return OpCase(name, "LpNormalization", ["x"], {"x": shape}, {}, attributes)


CASES = [
    _lppool("lppool_1d", (1, 2, 9), [3]),
    _lppool("lppool_2d_p1", (1, 2, 5, 5), [2, 2], p=1),
    _lppool("lppool_2d_p3", (2, 1, 4, 4), [2, 2], p=3),
    _lppool("lppool_2d_strides_pads", (1, 3, 6, 6), [3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    _lppool("lppool_2d_dilations", (1, 1, 5, 5), [2, 2], dilations=[2, 2]),
    _lppool("lppool_2d_same_upper", (1, 2, 5, 5), [2, 3], auto_pad="SAME_UPPER"),
    _lppool("lppool_2d_ceil", (1, 1, 5, 5), [2, 2], strides=[2, 2], ceil_mode=1),
    _lppool("lppool_2d_large_window", (1, 2, 6, 6), [5, 5]),  # 25 positions: the WCR reduction
    _lppool("lppool_3d", (1, 1, 3, 4, 4), [2, 2, 2]),
    _lpnorm("lpnorm_default", (2, 3, 4)),
    _lpnorm("lpnorm_p1_axis0", (3, 4), axis=0, p=1),
    _lpnorm("lpnorm_p2_middle", (2, 5, 3), axis=1, p=2),
    _lpnorm("lpnorm_size_one_axis", (3, 1), axis=-1, p=1),
    # A zero line: its norm is 0, the output 0 (onnxruntime's and ONNX's reference choice).
    OpCase("lpnorm_zero_line", "LpNormalization", ["x"], {}, {"x": np.array([[0, 0, 0], [1, 2, 2]], np.float32)}),
]


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementations (one compile)."""
    return reference_and_canonical(CASES, "test_lp_ops")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    assert_output_matches(results, case.tensor("y"), rtol=1e-5, atol=1e-6, same_dtype=True)


#: One case per op and shape of its lowering: its tasks (labels without the case's prefix).
TASKS = {
    "lppool_2d_p3": ["pool"],
    "lppool_2d_large_window": ["init_accumulator", "reduce", "output"],
    "lpnorm_p2_middle": ["init_accumulator", "reduce", "output", "normalize"],
}


@pytest.fixture(scope="module")
def dags():
    return lowered_dags([c for c in CASES if c.name in TASKS], "lp_ops_dag", group=1)


@pytest.mark.parametrize("name", TASKS)
def test_lowers_to_its_tasks_none_opaque(name, dags):
    assert_node_tasks(dags[name], name, TASKS[name])


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (_lpnorm("lpnorm_p3", (2, 3), p=3), r"LpNormalization \(node 'lpnorm_p3'\): p=3 \(1 or 2\)$"),
        (_lppool("lppool_p0", (1, 1, 4), [2], p=0), r"LpPool \(node 'lppool_p0'\): p=0 \(a positive order\)$"),
    ],
    ids=lambda v: v.name if isinstance(v, OpCase) else "",
)
def test_unsupported_order_is_refused(case, message):
    from dcaccel.errors import UnsupportedOpError

    with pytest.raises(UnsupportedOpError, match=message):
        canonical_model(build_model([case]), f"refused_{case.name}")


def test_every_op_has_a_canonical_implementation():
    import dcaccel.expansions

    assert {op: dcaccel.expansions.implementations(op) for op in ("LpPool", "LpNormalization")} == {
        "LpPool": ["canonical"],
        "LpNormalization": ["canonical"],
    }
