"""Canonical BatchNormalization and LayerNormalization: values against onnxruntime (one compile), steps, marks."""

import numpy as np
import pytest

from tests.expansions.canonical_onnx import (
    OpCase,
    assert_flat_maps,
    assert_output_matches,
    batchnorm_case,
    build_model,
    canonical_model,
    reference_and_canonical,
)


def _batchnorm(name, shape, epsilon=1e-5):
    return batchnorm_case(name, shape, len(shape), epsilon=epsilon)


def _layernorm(name, shape, axis, scale_shape, bias=True, statistics=False):
    rng = np.random.default_rng(axis + 7)
    constants = {"scale": rng.standard_normal(scale_shape).astype(np.float32)}
    if bias:
        constants["bias"] = rng.standard_normal(scale_shape).astype(np.float32)
    outputs = ("y", "mean", "inv_std") if statistics else ("y",)
    inputs = ["x", "scale", "bias"] if bias else ["x", "scale"]
    return OpCase(name, "LayerNormalization", inputs, {"x": shape}, constants, {"axis": axis}, outputs)


CASES = [
    _batchnorm("bn_4d", (2, 3, 4, 5)),
    _batchnorm("bn_2d", (4, 3)),
    _batchnorm("bn_single_channel", (1, 1, 2, 2), epsilon=1e-2),
    _layernorm("ln_last_axis", (2, 3, 4), -1, (4,)),
    _layernorm("ln_axis_1", (2, 3, 4), 1, (3, 4), statistics=True),
    _layernorm("ln_all_axes", (2, 3), 0, (2, 3), bias=False),
    _layernorm("ln_broadcast_scale", (2, 3, 4), 1, (1, 4)),
    _layernorm("ln_size_one", (3, 1), -1, (1,), statistics=True),
]


@pytest.fixture(scope="module")
def results():
    """Outputs of every case, from onnxruntime and from the canonical implementations (one compile)."""
    return reference_and_canonical(CASES, "test_normalization")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "output"),
    [(c, o) for c in CASES for o in c.outputs],
    ids=lambda v: v.name if isinstance(v, OpCase) else v,
)
def test_matches_onnxruntime(case, output, results):
    assert_output_matches(results, case.tensor(output), rtol=1e-4, atol=1e-5)


def test_batchnorm_is_one_flat_map():
    sdfg = canonical_model(build_model([CASES[0]]), "bn_structure").sdfg
    assert [s.label for s in assert_flat_maps(sdfg)] == ["bn_4d_normalize_map"]


@pytest.mark.slow
def test_layernorm_steps_and_reuse_buffers():
    from dcaccel.buffers import BufferReason, buffer_reason

    case = next(c for c in CASES if c.name == "ln_axis_1")
    sdfg = canonical_model(build_model([case]), "ln_structure").sdfg
    labels = [s.label for s in assert_flat_maps(sdfg)]
    assert sorted(labels[:2]) == ["ln_axis_1_init_mean_map", "ln_axis_1_init_var_map"]
    steps = ["mean", "var", "normalize", "mean_out", "inv_std_dev_out"]
    assert sorted(labels[2:]) == sorted(f"ln_axis_1_{step}_map" for step in steps)
    position = {label.removeprefix("ln_axis_1_").removesuffix("_map"): k for k, label in enumerate(labels)}
    assert position["mean"] < position["var"] < position["normalize"]
    assert position["mean"] < position["mean_out"] and position["var"] < position["inv_std_dev_out"]
    reuse = [name for name, d in sdfg.arrays.items() if d.transient and buffer_reason(d) is BufferReason.REUSE]
    assert sorted(name.rstrip("_0123456789") for name in reuse) == ["mean", "var"]


@pytest.mark.slow
def test_batchnorm_training_mode_is_rejected():
    from dcaccel.errors import UnsupportedOpError

    case = _batchnorm("bn", (2, 3))
    training = OpCase(
        case.name,
        case.op_type,
        case.node_inputs,
        case.inputs,
        case.constants,
        {"training_mode": 1},
        ("y", "running_mean", "running_var"),
    )
    with pytest.raises(UnsupportedOpError, match="BatchNormalization.*training"):
        canonical_model(build_model([training]), "bn_training")
