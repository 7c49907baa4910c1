"""Canonical Resize: values against onnxruntime (one compile), exact coordinate maps, task structure and volumes."""

import math
from fractions import Fraction

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


def _resize(name, shape, mode, transformation, scales=None, sizes=None, nearest=None):
    attributes = {"mode": mode, "coordinate_transformation_mode": transformation}
    if nearest is not None:
        attributes["nearest_mode"] = nearest
    if scales is not None:
        return OpCase(name, "Resize", ["x", "", "s"], {"x": shape}, {"s": np.array(scales, np.float32)}, attributes)
    return OpCase(name, "Resize", ["x", "", "", "z"], {"x": shape}, {"z": np.array(sizes, np.int64)}, attributes)


CASES = [
    # what torch exports: nn.Upsample(scale_factor=2) and nn.Upsample(mode="bilinear", align_corners=False / True)
    _resize("nearest_torch", (1, 2, 3, 4), "nearest", "asymmetric", scales=(1, 1, 2, 2), nearest="floor"),
    _resize("linear_torch", (1, 2, 3, 4), "linear", "pytorch_half_pixel", scales=(1, 1, 2, 2)),
    _resize("linear_torch_corners", (1, 2, 3, 4), "linear", "align_corners", sizes=(1, 2, 7, 9)),
    _resize(
        "nearest_half_pixel", (1, 2, 3, 4), "nearest", "half_pixel", scales=(1, 1, 2, 3), nearest="round_prefer_floor"
    ),
    _resize("nearest_sizes", (1, 1, 5, 4), "nearest", "half_pixel", sizes=(1, 1, 7, 3), nearest="round_prefer_floor"),
    _resize("nearest_ceil_down", (1, 1, 6, 6), "nearest", "asymmetric", scales=(1, 1, 0.5, 0.6), nearest="ceil"),
    _resize(
        "nearest_corners", (1, 1, 3, 4), "nearest", "align_corners", sizes=(1, 1, 5, 7), nearest="round_prefer_ceil"
    ),
    _resize("nearest_tf", (1, 1, 2, 3), "nearest", "tf_half_pixel_for_nn", scales=(1, 1, 2, 1.5), nearest="floor"),
    _resize("linear_half_pixel", (1, 2, 3, 4), "linear", "half_pixel", scales=(1, 1, 2, 2)),
    _resize("linear_to_one", (1, 1, 4, 4), "linear", "pytorch_half_pixel", sizes=(1, 1, 1, 3)),
    _resize("linear_down", (1, 1, 6, 8), "linear", "half_pixel", scales=(1, 1, 0.5, 0.75)),
    _resize("linear_corners_down", (1, 1, 3, 5), "linear", "align_corners", scales=(1, 1, 1 / 3, 0.4)),
    _resize("linear_rank2", (2, 5), "linear", "asymmetric", scales=(1, 1.5)),
    _resize("identity", (1, 3, 1, 1), "linear", "half_pixel", scales=(1, 1, 1, 1)),
    _resize("size_one_up", (1, 1, 1, 1), "nearest", "asymmetric", scales=(1, 1, 3, 2), nearest="floor"),
]


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementation (one compile)."""
    return reference_and_canonical(CASES, "test_resize")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    assert_output_matches(results, case.tensor("y"), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("transformation", "size", "out_size", "scale", "rounding", "indices"),
    [
        ("asymmetric", 3, 6, Fraction(2), "floor", [0, 0, 1, 1, 2, 2]),
        ("half_pixel", 4, 12, Fraction(3), "round_prefer_floor", [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]),
        ("half_pixel", 2, 3, Fraction(3, 2), "round_prefer_floor", [0, 0, 1]),  # x = 0.5 ties go down
        ("half_pixel", 2, 3, Fraction(3, 2), "round_prefer_ceil", [0, 1, 1]),
        ("asymmetric", 6, 3, Fraction(1, 2), "ceil", [0, 2, 4]),
        ("align_corners", 3, 5, Fraction(5, 3), "round_prefer_ceil", [0, 1, 1, 2, 2]),
    ],
)
def test_nearest_index_is_the_exact_rounded_coordinate(transformation, size, out_size, scale, rounding, indices):
    from dcaccel.expansions.resize import _axis_map, _rounded

    axis = _rounded(_axis_map(transformation, size, out_size, scale), rounding)
    assert [min(max(axis.value(o).__floor__(), 0), size - 1) for o in range(out_size)] == indices


@pytest.fixture(scope="module")
def dag():
    """The task DAG of every case, lowered together (no compile)."""
    return lowered_dag(build_model(CASES), "resize_structure")


CORNERS = {
    "linear_torch": 4,
    "linear_torch_corners": 4,
    "linear_half_pixel": 4,
    "linear_to_one": 2,  # the resized length 1 reads coordinate 0 only
    "linear_down": 4,
    "linear_corners_down": 1,  # align_corners to lengths 1 and 2: coordinates 0 and 0, 4 only
    "linear_rank2": 2,  # the first axis is not resized
    "identity": 1,
}
"""Input elements one output element of a linear case reads: 2 per axis whose coordinates are not all integers."""


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_one_task_reading_its_corners_per_output(case, dag):
    labels = [dag.label(t) for t in dag.tasks]
    assert labels.count(f"{case.name}_resize_map") == 1 and len(labels) == len(CASES)
    (task,) = (t for t in dag.tasks if dag.label(t) == f"{case.name}_resize_map")
    reads = {dag.label(u): w for u, v, w in dag.edges if v == task}
    (out_shape,) = (tuple(d.dim_value for d in o.type.tensor_type.shape.dim) for o in build_model([case]).graph.output)
    assert reads == {case.tensor("x"): CORNERS.get(case.name, 1) * math.prod(out_shape)}


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (_resize("cubic", (1, 1, 2, 2), "cubic", "half_pixel", scales=(1, 1, 2, 2)), "mode='cubic'"),
        (_resize("symmetric", (1, 1, 2, 2), "linear", "half_pixel_symmetric", scales=(1, 1, 2, 2)), "half_pixel_sym"),
        (_resize("crop", (1, 1, 2, 2), "linear", "tf_crop_and_resize", scales=(1, 1, 2, 2)), "tf_crop_and_resize"),
        (  # ONNX's reference divides by the resized length 2.4 (values 1, 3.142857), onnxruntime by 2 (1, 4)
            _resize("corners_fraction", (1, 1, 2, 4), "linear", "align_corners", scales=(1, 1, 0.6, 0.6)),
            r"align_corners with scale 0\.6 on an axis of 2: the resized length 1\.2 is fractional",
        ),
    ],
    ids=["cubic", "half_pixel_symmetric", "tf_crop_and_resize", "align_corners_fractional_length"],
)
def test_unsupported_attributes_raise_before_expanding(case, message):
    with pytest.raises(UnsupportedOpError, match=message):
        canonical_model(build_model([case]), f"resize_{case.name}")
