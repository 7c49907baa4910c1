"""Canonical Softmax: values against onnxruntime (one compile), steps, buffer marks, axes per opset."""

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

LARGE = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -1001.0]], np.float32)

CASES = [
    OpCase("last_axis", "Softmax", ["x"], {"x": (2, 3, 4)}, attributes={"axis": -1}),
    OpCase("first_axis", "Softmax", ["x"], {"x": (2, 3, 4)}, attributes={"axis": 0}),
    OpCase("middle_axis", "Softmax", ["x"], {"x": (2, 3, 4)}, attributes={"axis": 1}),
    OpCase("vector", "Softmax", ["x"], {"x": (10,)}),
    OpCase("size_one_axis", "Softmax", ["x"], {"x": (3, 1)}),
    OpCase("single_element", "Softmax", ["x"], {"x": (1, 1, 1)}),
    OpCase("large_values", "Softmax", ["x"], constants={"x": LARGE}),
]


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementation (one compile)."""
    return reference_and_canonical(CASES, "test_softmax")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    assert_output_matches(results, case.tensor("y"), rtol=1e-5, atol=1e-7, finite=True)


def _softmax_sdfg(input_from_relu: bool):
    cases = [OpCase("sm", "Softmax", ["x"], {"x": (4, 6)})]
    model = build_model(cases)
    if input_from_relu:
        model = build_model([OpCase("pre", "Relu", ["x"], {"x": (4, 6)}), *cases])
        model.graph.node[1].input[0] = "pre__y"
        del model.graph.input[1]
    return canonical_model(model, "softmax_structure").sdfg


def test_four_flat_steps_after_two_initialisations():
    scopes = assert_flat_maps(_softmax_sdfg(input_from_relu=False))
    labels = [s.label for s in scopes]
    assert sorted(labels[:2]) == ["sm_init_row_max_map", "sm_init_row_sum_map"]
    assert labels[2:] == ["sm_max_map", "sm_exp_map", "sm_sum_map", "sm_div_map"]
    assert scopes[0].state != scopes[2].state  # initialisation precedes the compute state


def test_reused_transients_are_reuse_buffers():
    from dcaccel.buffers import BufferReason, buffer_reason

    sdfg = _softmax_sdfg(input_from_relu=False)
    assert_flat_maps(sdfg)  # inlines the expansion: its transients become the program's
    marks = {name: buffer_reason(desc) for name, desc in sdfg.arrays.items() if desc.transient}
    reuse = sorted(name for name, reason in marks.items() if reason is BufferReason.REUSE)
    assert sorted(name.rstrip("_0123456789") for name in reuse) == ["exps", "row_max", "row_sum"]


@pytest.mark.slow
def test_input_made_by_another_task_is_copied_into_a_buffer_first():
    sdfg = _softmax_sdfg(input_from_relu=True)
    labels = [s.label for s in assert_flat_maps(sdfg)]
    assert "pre_relu_map" in labels and not any("copy" in label for label in labels)
    assert buffer_copies(sdfg) == [("pre__y", "input_copy", "reuse")]


@pytest.mark.parametrize(
    ("opset", "axis", "rank", "expected"),
    [(13, 1, 3, [1]), (13, -1, 3, [2]), (11, 1, 3, [1, 2]), (11, 0, 2, [0, 1]), (1, -1, 4, [3])],
)
def test_softmax_axes_per_opset(opset, axis, rank, expected):
    from dace.libraries.onnx import get_onnx_node

    from dcaccel.expansions.softmax import softmax_axes

    node = get_onnx_node("Softmax", opset)("softmax", axis=axis)
    assert softmax_axes(node, rank) == expected
