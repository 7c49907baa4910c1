"""Symbolic shapes: evaluation and binding symbols from arrays."""

import re

import numpy as np
import pytest

import dcaccel
from dcaccel.errors import DcaccelError, ShapeError
from dcaccel.frontend.shapes import bind_symbols, concrete_shape, dimension_str, positive_size
from dcaccel.frontend.workload import TensorSpec


@pytest.mark.parametrize(
    ("shape", "symbols", "expected"),
    [
        ((2, 3), {}, (2, 3)),
        (("N", "K"), {"N": 4, "K": 0}, (4, 0)),
        (("N + 1", "2*N"), {"N": 3}, (4, 6)),
        ((), {}, ()),
    ],
)
def test_concrete_shape(shape, symbols, expected):
    assert concrete_shape("t", shape, symbols) == expected


def test_concrete_shape_names_dimension_and_tensor():
    with pytest.raises(DcaccelError, match=r"^tensor 'A': dimension 'M' has no value"):
        concrete_shape("A", ("N", "M"), {"N": 2})


@pytest.mark.parametrize(("dim", "expected"), [(3, 3), (np.int64(2), 2), ("N", "N"), ("N*2", "2*N")])
def test_dimension_str(dim, expected):
    assert dimension_str(dim) == expected


SPECS = [TensorSpec("A", ("N", "K"), np.float32), TensorSpec("B", ("K", 3), np.float32)]


@pytest.mark.parametrize(("n", "k"), [(2, 5), (1, 1), (0, 4)])
def test_bind_symbols_from_arrays(n, k):
    arrays = {"A": np.zeros((n, k)), "B": np.zeros((k, 3))}
    assert bind_symbols(SPECS, arrays, {"N": 99, "Q": 1}) == {"N": n, "K": k, "Q": 1}


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"A": np.zeros((2, 5)), "B": np.zeros((4, 3))}, r"tensor 'B': expected shape \(5, 3\), got \(4, 3\)"),
        ({"A": np.zeros((2, 5)), "B": np.zeros((5, 2))}, r"tensor 'B': expected shape \(5, 3\), got \(5, 2\)"),
        ({"A": np.zeros(2), "B": np.zeros((5, 3))}, r"tensor 'A': expected shape \('N', 'K'\), got \(2,\)"),
    ],
)
def test_bind_symbols_shape_errors(arrays, message):
    with pytest.raises(ShapeError, match=f"^{message}$"):
        bind_symbols(SPECS, arrays, {})


@pytest.mark.parametrize(
    ("arrays", "message"),
    [({"A": np.zeros((1, 1))}, r"missing \['B'\]"), ({"A": 0, "B": 0, "C": 0}, r"unknown \['C'\]")],
)
def test_bind_symbols_input_names(arrays, message):
    with pytest.raises(DcaccelError, match=message):
        bind_symbols(SPECS, arrays, {})


@pytest.mark.parametrize("value", [1, 7, np.int64(3)])
def test_positive_size(value):
    assert positive_size("symbol 'N'", value) == value and type(positive_size("symbol 'N'", value)) is int


@pytest.mark.parametrize("value", [0, -1, 2.5, 3.0, "abc", "4", True, None])
def test_not_a_positive_size(value):
    with pytest.raises(DcaccelError, match=rf"^symbol 'N': expected a positive integer, got {re.escape(repr(value))}$"):
        positive_size("symbol 'N'", value)


@pytest.mark.parametrize("symbols", [{"batch": -1}, {"batch": "abc"}, {"batch": 2.5}, {"batch": 0}])
def test_load_refuses_bad_symbols(symbols):
    from dcaccel.workloads.mmm import mmm

    with pytest.raises(DcaccelError, match=r"^symbol 'batch': expected a positive integer, got"):
        dcaccel.load(mmm, symbols=symbols)


def test_load_refuses_symbols_that_are_no_mapping():
    with pytest.raises(DcaccelError, match=r"^symbols: expected a mapping from names to sizes, got a list$"):
        dcaccel.load("model.onnx", symbols=[("N", 2)])
