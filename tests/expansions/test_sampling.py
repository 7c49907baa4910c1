"""Canonical GridSample, RoiAlign and DeformConv: values against onnxruntime (one compile), over every mode,
padding and align_corners of GridSample (2-D and 3-D, points outside the input), RoiAlign's modes and coordinate
transformations (regions partly and wholly outside the input), DeformConv's groups, offset groups, mask, bias,
strides, pads and dilations under each MMM shape; task DAGs (none opaque), a model whose sampled inputs other ops
produce (through lowering, extraction and verification) and rejections.
"""

import numpy as np
import onnx
import pytest
from onnx import helper

from tests.expansions.canonical_onnx import (
    OpCase,
    assert_flat_maps,
    assert_output_matches,
    build_model,
    canonical_model,
    lowered_dags,
    random_feed,
    run_canonical,
    run_reference,
)

F64 = np.float64


def _grid_sample(name, x, grid, dtype=np.float32, **attributes) -> OpCase:
    return OpCase(name, "GridSample", ["x", "g"], {"x": x, "g": grid}, attributes=attributes, dtype=dtype)


GRID_SAMPLES = [
    *(
        _grid_sample(
            f"gs_{mode}_{padding}_{align}",
            (2, 3, 4, 5),
            (2, 3, 2, 2),
            mode=mode,
            padding_mode=padding,
            align_corners=align,
        )
        for mode in ("nearest", "linear", "cubic")
        for padding in ("zeros", "border", "reflection")
        for align in (0, 1)
    ),
    *(
        _grid_sample(f"gs_3d_{mode}_{padding}", (1, 2, 3, 4, 2), (1, 2, 3, 2, 3), mode=mode, padding_mode=padding)
        for mode in ("nearest", "linear")
        for padding in ("zeros", "reflection")
    ),
    _grid_sample("gs_size_one_axis", (1, 2, 1, 4), (1, 3, 3, 2), padding_mode="border", align_corners=1),
    _grid_sample("gs_one_point", (1, 1, 3, 3), (1, 1, 1, 2), mode="cubic"),
    _grid_sample("gs_reflect_onto_one_row", (1, 1, 1, 3), (1, 2, 2, 2), padding_mode="reflection", align_corners=1),
    _grid_sample("gs_no_points", (1, 2, 3, 3), (1, 0, 2, 2)),
    _grid_sample("gs_float64", (1, 2, 3, 3), (1, 2, 2, 2), F64, mode="cubic", padding_mode="reflection"),
]

ROIS = np.array(
    [[0.5, 1.0, 6.5, 8.0], [2.2, 0.3, 3.0, 1.1], [-3.0, -2.0, 4.0, 5.5], [7.0, 8.0, 14.0, 20.0], [9, 9, 30, 30]],
    np.float32,
)
"""Regions (x1, y1, x2, y2) inside the 8-wide, 10-high input, narrower than a pixel, partly and wholly outside."""


def _roi_align(name, ratio=2, **attributes) -> OpCase:
    constants = {"rois": ROIS, "batch": np.array([0, 1, 1, 0, 1], np.int64)}
    attributes = {"output_height": 3, "output_width": 4, "sampling_ratio": ratio, **attributes}
    return OpCase(name, "RoiAlign", ["x", "rois", "batch"], {"x": (2, 3, 10, 8)}, constants, attributes)


ROI_ALIGNS = [
    *(
        _roi_align(f"ra_{mode}_{transformation}", mode=mode, coordinate_transformation_mode=transformation)
        for mode in ("avg", "max")
        for transformation in ("half_pixel", "output_half_pixel")
    ),
    _roi_align("ra_ratio_one_scaled", 1, spatial_scale=0.5),
]

SHAPES = ("mv", "op", "lmv")


def _deform_conv(name, x, w, out, groups=1, offset_groups=1, mask=False, bias=False, **attributes) -> OpCase:
    taps = int(np.prod(w[2:]))
    inputs = {"x": x, "w": w, "offset": (x[0], 2 * offset_groups * taps, *out)}
    names = ["x", "w", "offset", "b" if bias else "", "mask" if mask else ""]
    if bias:
        inputs["b"] = (w[0],)
    if mask:
        inputs["mask"] = (x[0], offset_groups * taps, *out)
    attributes = {"group": groups, "offset_group": offset_groups, **attributes}
    return OpCase(name, "DeformConv", [n for n in names if n] if not mask else names, inputs, attributes=attributes)


DEFORM_CONVS = [
    case
    for shape in SHAPES
    for case in (
        _deform_conv(f"dc_basic_{shape}", (1, 1, 4, 5), (2, 1, 2, 2), (3, 4)),
        _deform_conv(f"dc_groups_mask_bias_{shape}", (2, 4, 5, 4), (4, 2, 3, 3), (3, 2), 2, 2, True, True),
        _deform_conv(
            f"dc_stride_pad_dilation_{shape}",
            (1, 2, 6, 7),
            (3, 2, 2, 3),
            (4, 3),
            1,
            2,
            bias=True,
            strides=[2, 2],
            pads=[1, 1, 2, 0],
            dilations=[2, 1],
        ),
    )
]

CASES = [*GRID_SAMPLES, *ROI_ALIGNS, *DEFORM_CONVS]


def _shape(case: OpCase) -> str:
    return case.name.rsplit("_", 1)[1] if case.op_type == "DeformConv" else "canonical"


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementations (one compile)."""
    model = build_model(CASES)
    feed = random_feed(CASES)
    reference = run_reference(model, feed)
    canonical = run_canonical(model, feed, "test_sampling", {c.name: _shape(c) for c in DEFORM_CONVS})
    return reference, canonical


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(case, results):
    rtol = 1e-10 if case.dtype == F64 else 1e-5
    assert_output_matches(results, case.tensor("y"), rtol=rtol, atol=rtol, same_dtype=True)


LOWERED = [GRID_SAMPLES[0], ROI_ALIGNS[0], DEFORM_CONVS[0]]


@pytest.fixture(scope="module")
def dags():
    """The task DAG of one case per op lowered canonically (nothing compiled), by case name."""
    return lowered_dags(LOWERED, "sampling_dag")


@pytest.mark.slow
@pytest.mark.parametrize(
    "case, tasks",
    [
        (LOWERED[0], ["gs_nearest_zeros_0_grid_sample_map", "gs_nearest_zeros_0_taps_map"]),
        (
            LOWERED[1],
            [f"ra_avg_half_pixel_{step}_map" for step in ("columns", "roi_align", "rows", "taps")],
        ),
    ],
    ids=lambda c: getattr(c, "name", ""),
)
def test_taps_then_the_weighted_sum_none_opaque(case, tasks, dags):
    from dcaccel.dag.metrics import opaque_work

    dag = dags[case.name]
    assert opaque_work(dag)[0] == 0
    assert sorted(dag.label(t) for t in dag.tasks if dag.info(t).node == case.name) == tasks


@pytest.mark.slow
def test_a_deformable_convolution_is_sampled_columns_and_an_mmm(dags):
    from dcaccel.dag.metrics import opaque_work

    dag = dags[LOWERED[2].name]
    assert opaque_work(dag)[0] == 0
    labels = [dag.label(t) for t in dag.tasks if dag.info(t).node == LOWERED[2].name]
    assert sum("taps" in label for label in labels) == 1  # the bilinear taps of every kernel tap
    assert sum("Xr" in label for label in labels) == 1  # the sampled im2col: one task
    assert sum("ReshapeOut" in label for label in labels) == 1
    assert sum("MV" in label for label in labels) > 1  # the MMM's tasks, as a convolution's


@pytest.mark.parametrize(
    "case, message",
    [
        (_roi_align("ra_adaptive", 0), r"RoiAlign \(node 'ra_adaptive'\): sampling_ratio=0"),
        (
            _deform_conv("dc_3d_mv", (1, 1, 3, 3, 3), (1, 1, 2, 2, 2), (2, 2, 2)),
            r"DeformConv \(node 'dc_3d_mv'\): X \(1, 1, 3, 3, 3\) with W \(1, 1, 2, 2, 2\) \(supported: 2-D\)",
        ),
        (
            _grid_sample("gs_half", (1, 1, 2, 2), (1, 1, 1, 2), np.float16),
            r"GridSample \(node 'gs_half'\): X of element type float16",
        ),
    ],
    ids=lambda c: getattr(c, "name", ""),
)
def test_what_it_cannot_lower_is_refused_in_one_line(case, message):
    from dcaccel.errors import UnsupportedOpError

    with pytest.raises(UnsupportedOpError, match=message):
        canonical_model(build_model([case]), f"sampling_{case.name}", {case.name: _shape(case)})


def _chained_model() -> onnx.ModelProto:
    """GridSample, DeformConv and RoiAlign reading inputs other ops produce (Relu, Tanh, Sigmoid), each followed by
    a Relu: the operand buffers, and a task DAG whose every task reads equal volumes."""
    rng = np.random.default_rng(1)

    def value(name, shape):
        return helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape)

    nodes = [
        helper.make_node("Relu", ["x"], ["xr"]),
        helper.make_node("Tanh", ["g"], ["gt"]),
        helper.make_node("GridSample", ["xr", "gt"], ["gs"], mode="cubic", padding_mode="reflection"),
        helper.make_node("Relu", ["gs"], ["y1"]),
        helper.make_node("Sigmoid", ["off"], ["offs"]),
        helper.make_node("DeformConv", ["xr", "w", "offs", "", "m"], ["dc"], name="deform"),
        helper.make_node("Relu", ["dc"], ["y2"]),
        helper.make_node(
            "RoiAlign", ["xr", "rois", "bi"], ["ra"], output_height=2, output_width=3, sampling_ratio=2, mode="max"
        ),
        helper.make_node("Relu", ["ra"], ["y3"]),
    ]
    weights = [
        onnx.numpy_helper.from_array(rng.standard_normal((2, 3, 2, 2)).astype(np.float32), "w"),
        onnx.numpy_helper.from_array(np.array([[0, 0, 3, 4], [1.5, 0.5, 5, 3]], np.float32), "rois"),
        onnx.numpy_helper.from_array(np.array([1, 0], np.int64), "bi"),
    ]
    inputs = [value("x", [2, 3, 5, 6]), value("g", [2, 4, 3, 2]), value("off", [2, 8, 4, 5]), value("m", [2, 4, 4, 5])]
    outputs = [value("y1", [2, 3, 4, 3]), value("y2", [2, 2, 4, 5]), value("y3", [2, 3, 2, 3])]
    graph = helper.make_graph(nodes, "chained", inputs, outputs, weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_produced_inputs_lower_to_a_valid_dag_and_verify(shape):
    from dcaccel.dag import extract
    from dcaccel.dag.metrics import opaque_work
    from dcaccel.frontend.onnx_import import from_onnx
    from dcaccel.transforms.lower import lower
    from dcaccel.verification import verify

    workload = from_onnx(_chained_model(), name=f"sampling_chained_{shape}")
    lowered = lower(workload, {"deform": shape})
    assert opaque_work(extract(lowered.sdfg))[0] == 0  # extract validates the DAG contract
    report = verify(workload, lowered)
    assert all(check.passed for check in report.outputs), report


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_opset_16_names_its_modes_otherwise(mode):
    case = _grid_sample(f"gs16_{mode}", (1, 2, 3, 3), (1, 2, 2, 2), mode=mode)
    scopes = assert_flat_maps(canonical_model(build_model([case], opset=16), f"sampling_{case.name}").sdfg)
    assert sorted(s.label for s in scopes) == [f"{case.name}_grid_sample_map", f"{case.name}_taps_map"]
