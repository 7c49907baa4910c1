"""Canonical Pad: values against onnxruntime (one compile), task structure and volumes, rejected attributes."""

import math

import numpy as np
import pytest

from dcaccel.errors import UnsupportedOpError
from tests.expansions.canonical_onnx import (
    OpCase,
    assert_output_matches,
    build_model,
    canonical_model,
    lowered_dag,
    reference_and_canonical,
)


def _ints(*values):
    return np.array(values, np.int64)


def _pad(name, shape, pads, mode="constant", axes=None, value=None):
    """A Pad case; ``value`` a number (a constant input) or "data" (a graph input)."""
    inputs, constants, node_inputs = {"x": shape}, {"p": _ints(*pads)}, ["x", "p"]
    if value == "data":
        inputs["v"] = ()
        node_inputs.append("v")
    elif value is not None:
        constants["v"] = np.array(value, np.float32)
        node_inputs.append("v")
    if axes is not None:
        node_inputs += [""] * (3 - len(node_inputs)) + ["a"]
        constants["a"] = _ints(*axes)
    return OpCase(name, "Pad", node_inputs, inputs, constants, {"mode": mode})


CASES = [
    _pad("constant", (2, 3, 4), (0, 1, 2, 0, 2, 1)),
    _pad("constant_value", (3, 4), (1, 0, 0, 2), value=1.5),
    _pad("constant_data_value", (3, 4), (1, 0, 0, 2), value="data"),
    _pad("constant_axes", (2, 3, 4), (1, 2, 0, 3), axes=(-1, 0)),
    _pad("constant_crop", (4, 5), (-1, 2, 1, -2)),
    _pad("zero_pads", (1, 3), (0, 0, 0, 0)),
    _pad("size_one_dims", (1, 1, 1), (2, 0, 1, 0, 3, 2)),
    _pad("reflect", (1, 2, 4, 5), (0, 0, 2, 1, 0, 0, 3, 4), "reflect"),
    _pad("reflect_crop", (3, 5), (-1, 2, 0, 1), "reflect"),
    _pad("edge", (1, 2, 4, 5), (0, 0, 2, 1, 0, 0, 3, 4), "edge"),
    _pad("edge_size_one", (1, 1, 3), (0, 2, 0, 0, 3, 1), "edge"),
]


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementation (one compile)."""
    return reference_and_canonical(CASES, "test_pad")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    assert_output_matches(results, case.tensor("y"))


@pytest.fixture(scope="module")
def dag():
    """The task DAG of every case, lowered together (no compile)."""
    return lowered_dag(build_model(CASES), "pad_structure")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_one_task_reading_one_element_per_output(case, dag):
    """Each Pad is one task; it reads one (possibly clamped or mirrored) input element per output element."""
    labels = [dag.label(t) for t in dag.tasks]
    assert labels.count(f"{case.name}_pad_map") == 1
    assert len(labels) == len(CASES)
    (task,) = (t for t in dag.tasks if dag.label(t) == f"{case.name}_pad_map")
    reads = {dag.label(u): w for u, v, w in dag.edges if v == task}
    assert reads[case.tensor("x")] == math.prod(_out_shape(case))


def _out_shape(case) -> tuple[int, ...]:
    model = build_model([case])
    return tuple(d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim)


@pytest.mark.parametrize(
    ("pads", "buffered"),
    [((0, 1, 0, 0), True), ((-1, 0, 0, -1), False), ((0, 0, 0, 0), False)],
    ids=["positive pad", "crop", "zero pads"],
)
def test_input_of_a_task_is_buffered_only_when_reread(pads, buffered):
    from tests.expansions.canonical_onnx import assert_flat_maps, buffer_copies

    model = build_model([OpCase("pre", "Relu", ["x"], {"x": (3, 4)}), _pad("p", (3, 4), pads)])
    model.graph.node[1].input[0] = "pre__y"
    del model.graph.input[1]
    sdfg = canonical_model(model, "pad_buffer").sdfg
    assert [s.label for s in assert_flat_maps(sdfg)] == ["pre_relu_map", "p_pad_map"]
    copies = buffer_copies(sdfg)
    assert copies == ([("pre__y", "data_copy", "reuse")] if buffered else [])


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (_pad("wrap", (3, 4), (0, 1, 0, 1), "wrap"), "mode='wrap'"),
        (_pad("reflect_far", (3, 4), (0, 4, 0, 0), "reflect"), "beyond one reflection"),
    ],
    ids=["wrap", "reflect beyond the input"],
)
def test_unsupported_attributes_raise_before_expanding(case, message):
    with pytest.raises(UnsupportedOpError, match=message):
        canonical_model(build_model([case]), f"pad_{case.name}")


def test_data_pads_are_rejected():
    from onnx import TensorProto, helper

    node = helper.make_node("Pad", ["x", "pads"], ["y"], name="pad")
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
            helper.make_tensor_value_info("pads", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    with pytest.raises(UnsupportedOpError, match="Pad.*'pads' must be a constant"):
        canonical_model(model, "pad_data")
