"""Numerical smoke tests: the seed convolution lowered with each MMM shape is compiled once and computes what
onnxruntime computes on seeded random inputs. ``pytest -m "not slow"`` compiles one shape (``mv``), the full
suite all three; the exhaustive numerical tests (every op, every workload) are marked slow."""

import pytest

from dcaccel.verification import verify


@pytest.mark.parametrize(
    "shape", ["mv", pytest.param("op", marks=pytest.mark.slow), pytest.param("lmv", marks=pytest.mark.slow)]
)
def test_lowered_conv_seed_matches_onnxruntime(conv_seed, shape):
    lowered = conv_seed.lower({"Conv": shape})
    report = verify(conv_seed, lowered, seed=1)
    assert (report.program, report.reference) == ("lowered", "onnxruntime")
    (check,) = report.outputs
    assert check.shape == (1, 6, 24, 24)
    assert check.passed, check
    assert check.max_abs_error < 1e-5
