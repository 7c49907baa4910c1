"""Numerical verification against onnxruntime and Python references: pass and fail paths."""

import importlib.util
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

import dcaccel
from dcaccel import workloads
from dcaccel.errors import DcaccelError
from dcaccel.frontend import load
from dcaccel.verification import compare, verify


def test_dcaccel_verify_is_the_function():
    assert dcaccel.verify is verify


@pytest.mark.parametrize(
    ("actual", "expected", "abs_error", "rel_error", "passed"),
    [
        ([1.0, 2.0], [1.0, 2.0], 0.0, 0.0, True),
        ([1.0, 2.0001], [1.0, 2.0], 1e-4, 5e-5, True),
        ([1.0, 2.01], [1.0, 2.0], 1e-2, 5e-3, False),
        ([0.0, 1e-6], [0.0, 0.0], 1e-6, 0.0, True),
        ([0.0, 1e-4], [0.0, 0.0], 1e-4, 0.0, False),
        ([], [], 0.0, 0.0, True),
    ],
)
def test_compare(actual, expected, abs_error, rel_error, passed):
    check = compare("y", np.array(actual), np.array(expected), rtol=1e-4, atol=1e-5)
    assert check.max_abs_error == pytest.approx(abs_error, rel=1e-6, abs=1e-12)
    assert check.max_rel_error == pytest.approx(rel_error, rel=1e-4, abs=1e-12)
    assert check.passed is passed


def test_compare_nan_and_shape_mismatch():
    assert not compare("y", np.array([np.nan]), np.array([1.0]), 1e-4, 1e-5).passed
    mismatch = compare("y", np.zeros((2, 3)), np.zeros((3, 2)), 1e-4, 1e-5)
    assert not mismatch.passed and mismatch.max_abs_error == float("inf")


def test_sdfg_without_reference(mmm):
    with pytest.raises(DcaccelError, match=r"^workload 'bare' has no reference to verify against"):
        verify(load(mmm.sdfg, symbols=mmm.symbols, name="bare"))


def test_python_reference_with_wrong_arity(mmm):
    two_values = replace(mmm, reference=lambda A, B: (A @ B, A))
    with pytest.raises(DcaccelError, match=r"returns 2 values for 1 outputs"):
        verify(two_values)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["conv_seed", "lenet", "mmm"])
def test_verify_passes(name, request):
    workload = request.getfixturevalue(name)
    report = verify(workload, seed=3)
    assert report.passed
    assert report.reference == ("python" if name == "mmm" else "onnxruntime")
    assert [check.output for check in report.outputs] == [spec.name for spec in workload.outputs]
    assert all(check.max_abs_error < 1e-5 for check in report.outputs)


@pytest.mark.slow
@pytest.mark.parametrize("scale", [1.01, 2.0])
def test_verify_fails_on_a_perturbed_weight(conv_seed, scale):
    weights = dict(conv_seed.weights)
    weights["weight"] = weights["weight"] * np.float32(scale)
    report = verify(replace(conv_seed, weights=weights))
    assert not report.passed
    assert report.outputs[0].max_abs_error > 1e-4


@pytest.mark.slow
def test_verify_fails_on_a_wrong_reference(mmm):
    report = verify(replace(mmm, reference=lambda A, B: A @ B + 1))
    assert not report.passed
    assert report.outputs[0].max_abs_error == pytest.approx(1.0, rel=1e-5)


@pytest.mark.slow
def test_verify_lowered_against_the_unlowered_sdfg(mmm):
    bare = load(mmm.sdfg, symbols=mmm.symbols, name="bare")
    report = verify(bare, lowered=SimpleNamespace(sdfg=mmm.sdfg))
    assert report.passed and report.program == "lowered" and report.reference == "unlowered SDFG"


@pytest.mark.slow
def test_pusch_mimo_matches_numpy():
    """The explicit Cholesky solve of the program, compiled, equals numpy's solver on realistic inputs."""
    workload = workloads.get("pusch-mimo", S=3, A=4, L=3)
    inputs = workload.random_inputs(seed=5)
    H, R, y = inputs["H"], inputs["R"], inputs["y"]
    expected = np.stack(
        [np.linalg.solve(H[s].T @ R[s] @ H[s] + np.eye(3), H[s].T @ R[s] @ y[s]) for s in range(H.shape[0])]
    )
    (output,) = workload.run(inputs).values()
    np.testing.assert_allclose(output, expected, rtol=1e-10, atol=1e-12)
    assert verify(workload, inputs=inputs).passed


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("dcaccel.transforms.lower") is None, reason="lower() not available")
@pytest.mark.parametrize("shape", ["mv", "op", "lmv"])
def test_verify_lowered_conv_seed(conv_seed, shape):
    report = verify(conv_seed, conv_seed.lower({"Conv": shape}))
    assert report.program == "lowered" and report.reference == "onnxruntime"
    assert report.passed, report


@pytest.mark.slow
def test_a_changed_sdfg_is_compiled_again(conv_seed):
    """Programs are cached by SDFG content: changing AddBias's ``+`` into ``-`` after a run must show."""
    from dace.properties import CodeBlock
    from dace.sdfg.nodes import Tasklet

    lowered = conv_seed.lower({"Conv": "mv"})
    assert verify(conv_seed, lowered).passed
    (add_bias,) = [n for n, _ in lowered.sdfg.all_nodes_recursive() if isinstance(n, Tasklet) and n.label == "AddBias"]
    add_bias.code = CodeBlock(add_bias.code.as_string.replace("+", "-"))
    report = verify(conv_seed, lowered)
    assert not report.passed
    assert report.outputs[0].max_abs_error > 1e-2
