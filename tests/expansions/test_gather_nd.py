"""Canonical GatherND, ReverseSequence, TensorScatter and Scatter: values against onnxruntime (one compile per
opset, slow) over index tuple lengths, batch_dims, negative indices, sequence lengths, write indices and modes;
the tasks of each op's lowering, none opaque (fast); refusals."""

import numpy as np
import pytest

from tests.expansions.canonical_onnx import (
    OpCase,
    assert_node_tasks,
    assert_output_matches,
    build_model,
    canonical_model,
    lowered_dag,
    opset_case_id,
    opset_cases,
    outputs_per_opset,
)

I64 = np.int64


def _gather_nd(name, shape, indices, batch_dims=0) -> OpCase:
    constants = {"indices": np.array(indices, I64)}
    return OpCase(name, "GatherND", ["x", "indices"], {"x": shape}, constants, {"batch_dims": batch_dims})


def _reverse(name, shape, lengths, **attributes) -> OpCase:
    constants = {"lengths": np.array(lengths, I64)}
    return OpCase(name, "ReverseSequence", ["x", "lengths"], {"x": shape}, constants, attributes)


def _tensor_scatter(name, shape, update, writes=None, **attributes) -> OpCase:
    constants = {} if writes is None else {"writes": np.array(writes, I64)}
    inputs = ["x", "update", "writes"] if writes is not None else ["x", "update"]
    return OpCase(name, "TensorScatter", inputs, {"x": shape, "update": update}, constants, attributes)


CASES_24 = [
    _gather_nd("gathernd_elements", (2, 2), [[0, 0], [1, 1]]),
    _gather_nd("gathernd_rows", (2, 2), [[1], [0]]),
    _gather_nd("gathernd_nested", (2, 2, 2), [[[0, 1]], [[1, 0]]]),
    _gather_nd("gathernd_negative", (3, 4), [[-1, -4], [0, 3], [-2, 1]]),
    _gather_nd("gathernd_batch1", (2, 3, 4), [[1], [2]], batch_dims=1),
    _gather_nd("gathernd_batch1_pairs", (2, 3, 4), [[[1, 2], [0, -1]], [[2, 0], [1, 1]]], batch_dims=1),
    _reverse("reverse_time_major", (4, 3), [4, 2, 1], batch_axis=1, time_axis=0),
    _reverse("reverse_batch_major", (3, 5, 2), [1, 5, 3], batch_axis=0, time_axis=1),
    _tensor_scatter("tensorscatter_linear", (2, 1, 5, 3), (2, 1, 2, 3), [0, 3]),
    _tensor_scatter("tensorscatter_circular", (2, 1, 5, 3), (2, 1, 3, 3), [3, 4], mode="circular"),
    _tensor_scatter("tensorscatter_no_writes", (3, 4, 2), (3, 2, 2), axis=1),
    _tensor_scatter("tensorscatter_last_axis", (2, 3, 6), (2, 3, 1), [5, 0], axis=-1),
]

CASES_10 = [
    OpCase(
        "scatter_axis1",
        "Scatter",
        ["x", "indices", "updates"],
        {"x": (3, 5), "updates": (3, 2)},
        {"indices": np.array([[1, 3], [0, 4], [2, 2]], I64)},
        {"axis": 1},
    ),
    OpCase(
        "scatter_default_axis",
        "Scatter",
        ["x", "indices", "updates"],
        {"x": (3, 3), "updates": (2, 3)},
        {"indices": np.array([[1, 0, 2], [0, 2, 1]], I64)},
    ),
]

MODELS = {24: CASES_24, 10: CASES_10}


@pytest.fixture(scope="module")
def results():
    """Outputs of every case per opset, from onnxruntime and from the canonical implementations (one compile each)."""
    return outputs_per_opset(MODELS, "test_gather_nd")


@pytest.mark.slow
@pytest.mark.parametrize(("opset", "case"), opset_cases(MODELS), ids=opset_case_id)
def test_matches_onnxruntime(opset, case, results):
    assert_output_matches(results[opset], case.tensor("y"), same_dtype=True)  # elements moved: exact


#: One case per op: its tasks (labels without the case's prefix).
TASKS = {
    "gathernd_negative": ["offset", "gather_nd"],
    "reverse_batch_major": ["reverse_sequence"],
    "tensorscatter_circular": ["tensor_scatter"],
}


@pytest.mark.parametrize("name", TASKS)
def test_lowers_to_its_tasks_none_opaque(name):
    (case,) = [c for c in CASES_24 if c.name == name]
    assert_node_tasks(lowered_dag(build_model([case], opset=24), f"{name}_dag"), name, TASKS[name])


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (
            _tensor_scatter("tensorscatter_mode", (2, 3), (2, 1), axis=1, mode="sliding"),
            r"TensorScatter \(node 'tensorscatter_mode'\): mode='sliding'$",
        ),
        (
            _reverse("reverse_same_axes", (3, 3), [1, 2, 3], batch_axis=0, time_axis=0),
            r"ReverseSequence \(node 'reverse_same_axes'\): batch_axis=0, time_axis=0 for rank 2$",
        ),
    ],
    ids=lambda v: v.name if isinstance(v, OpCase) else "",
)
def test_unsupported_attributes_are_refused(case, message):
    from dcaccel.errors import UnsupportedOpError

    with pytest.raises(UnsupportedOpError, match=message):
        canonical_model(build_model([case], opset=24), f"refused_{case.name}")


def test_batch_dims_output_is_shaped_by_onnx_inference():
    """onnxruntime's shape inference (DaCe's importer's) shapes GatherND's output as if batch_dims were 0 ([2, 3, 4]
    here); the import takes ONNX's [2, 4] (``frontend.shapes``)."""
    from dcaccel.frontend.shapes import infer_onnx_shapes

    (case,) = [c for c in CASES_24 if c.name == "gathernd_batch1"]
    (output,) = infer_onnx_shapes(build_model([case], opset=24)).graph.output
    assert [d.dim_value for d in output.type.tensor_type.shape.dim] == [2, 4]


def test_batch_dims_output_read_by_another_node_is_refused():
    """onnxruntime's inference shaped the Relu reading GatherND's output from its wrong [2, 3, 4]."""
    from onnx import helper

    from dcaccel.errors import UnsupportedOpError
    from dcaccel.frontend.shapes import infer_onnx_shapes

    (case,) = [c for c in CASES_24 if c.name == "gathernd_batch1"]
    model = build_model([case], opset=24)
    gathered = model.graph.output[0].name
    model.graph.node.append(helper.make_node("Relu", [gathered], ["relu"], name="relu"))
    model.graph.output[0].name = "relu"
    model.graph.output[0].type.tensor_type.ClearField("shape")
    message = r"GatherND \(node 'gathernd_batch1'\): onnxruntime's .* gives .* \[2, 3, 4\], not \[2, 4\]"
    with pytest.raises(UnsupportedOpError, match=message):
        infer_onnx_shapes(model)


def test_every_op_has_a_canonical_implementation():
    import dcaccel.expansions

    ops = ("GatherND", "ReverseSequence", "TensorScatter", "Scatter")
    assert {op: dcaccel.expansions.implementations(op) for op in ops} == {op: ["canonical"] for op in ops}
