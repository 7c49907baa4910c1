"""Canonical InstanceNormalization, GroupNormalization (opset 21) and LRN: values against onnxruntime
(one compile per opset), task structure and volumes of the extracted DAG, rejections."""

import math

import numpy as np
import onnx
import pytest
from onnx import helper

from tests.expansions.canonical_onnx import (
    OpCase,
    assert_output_matches,
    build_model,
    lowered_dag,
    opset_case_id,
    opset_cases,
    outputs_per_opset,
    task_volumes,
)


def _parameters(name, count, seed):
    rng = np.random.default_rng(seed)
    return {
        "scale": rng.standard_normal(count).astype(np.float32),
        name: rng.standard_normal(count).astype(np.float32),
    }


def _instance(name, shape, epsilon=1e-5):
    constants = _parameters("bias", shape[1], len(shape))
    attributes = {"epsilon": epsilon}
    return OpCase(name, "InstanceNormalization", ["x", "scale", "bias"], {"x": shape}, constants, attributes)


def _group(name, shape, groups, per_channel):
    constants = _parameters("bias", shape[1] if per_channel else groups, groups)
    attributes = {"num_groups": groups, "epsilon": 1e-3}
    return OpCase(name, "GroupNormalization", ["x", "scale", "bias"], {"x": shape}, constants, attributes)


def _lrn(name, shape, size, **attributes):
    return OpCase(name, "LRN", ["x"], {"x": shape}, {}, {"size": size, **attributes})


MODELS = {
    18: [  # InstanceNormalization-6, LRN-13. (GroupNormalization-18 is deprecated: ONNX's checker refuses it.)
        _instance("in_4d", (2, 3, 4, 5)),
        _instance("in_3d", (1, 2, 7), epsilon=1e-2),
        _instance("in_spatial_size_one", (2, 3, 1)),
        _lrn("lrn_size_3", (2, 5, 3, 3), 3),
        _lrn("lrn_attributes", (1, 4, 2, 3), 3, alpha=1e-2, beta=0.5, bias=2.0),  # onnxruntime refuses even sizes
        _lrn("lrn_size_one", (1, 3, 2, 2), 1),
        _lrn("lrn_window_over_all_channels", (1, 3, 2, 2), 5, alpha=0.1),
    ],
    21: [  # GroupNormalization-21 (scale and bias per channel)
        _group("gn21_two_groups", (2, 4, 3, 3), 2, per_channel=True),
        _group("gn21_group_per_channel", (1, 3, 4), 3, per_channel=True),
        _group("gn21_one_group", (2, 6, 2), 1, per_channel=True),
    ],
}


def _model(cases, opset):
    """The model of ``cases``; outputs that shape inference leaves untyped (GroupNormalization) get X's type."""
    model = build_model(cases, opset=opset)
    shapes = {case.tensor("y"): case.inputs["x"] for case in cases}
    for output in model.graph.output:
        if not output.type.HasField("tensor_type"):
            output.CopyFrom(helper.make_tensor_value_info(output.name, onnx.TensorProto.FLOAT, shapes[output.name]))
    return model


@pytest.fixture(scope="module")
def results():
    """Outputs of every case per opset, from onnxruntime and from the canonical implementations (one compile each)."""
    return outputs_per_opset(MODELS, "test_normalization", model=_model)


@pytest.mark.slow
@pytest.mark.parametrize(("opset", "case"), opset_cases(MODELS), ids=opset_case_id)
def test_matches_onnxruntime(opset, case, results):
    assert_output_matches(results[opset], case.tensor("y"), rtol=1e-4, atol=1e-5)


def _task_volumes(case, opset) -> dict[str, tuple[int, int]]:
    """Per task of the extracted DAG (label without the case's prefix): total volume in and out."""
    dag = lowered_dag(_model([case], opset), case.name)
    dag.validate()
    return task_volumes(dag, case.name)


@pytest.mark.parametrize(
    ("opset", "case", "groups"),
    [
        (18, _instance("case", (2, 3, 4)), 6),
        (18, _instance("case", (2, 3, 1)), 6),
        (21, _group("case", (2, 4, 3), 2, per_channel=True), 4),
        (21, _group("case", (2, 4, 3), 4, per_channel=True), 8),
        (21, _group("case", (1, 6), 3, per_channel=True), 3),
    ],
    ids=["instance", "instance_spatial_size_one", "group21", "group21_per_channel", "group21_rank_2"],
)
def test_moments_then_normalize(opset, case, groups):
    """mean and var read X once each (and the accumulator); normalize reads X, both moments, scale and bias."""
    size = math.prod(case.inputs["x"])
    assert _task_volumes(case, opset) == {
        "init_mean": (groups, groups),
        "init_var": (groups, groups),
        "mean": (2 * size, size),
        "var": (3 * size, size),
        "normalize": (5 * size, size),
    }


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_lrn_reads_its_window(size):
    """One task reading ``size`` channel positions per output element."""
    case = _lrn("case", (1, 3, 2, 2), size)
    assert _task_volumes(case, 18) == {"normalize": (12 * size, 12)}


@pytest.mark.parametrize(
    ("case", "opset", "detail"),
    [
        (_group("groups", (1, 4, 2), 3, per_channel=True), 21, "4 channels do not split into num_groups=3"),
        (
            OpCase(
                "stash",
                "GroupNormalization",
                ["x", "scale", "bias"],
                {"x": (1, 4, 2)},
                _parameters("bias", 4, 0),
                {"num_groups": 2, "stash_type": 0},
            ),
            21,
            "stash_type=0",
        ),
    ],
    ids=["uneven_groups", "stash_type"],
)
def test_unsupported_attributes_are_rejected(case, opset, detail):
    from dcaccel.errors import UnsupportedOpError
    from tests.expansions.canonical_onnx import canonical_model

    with pytest.raises(UnsupportedOpError, match=f"GroupNormalization.*{detail}"):
        canonical_model(_model([case], opset), f"rejected_{case.name}")
