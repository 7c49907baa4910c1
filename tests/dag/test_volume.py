"""Volume arithmetic on ints and SymPy expressions (dcaccel.dag.volume)."""

from fractions import Fraction

import numpy as np
import pytest
import sympy
from dace.symbolic import CMod

from dcaccel.dag import volume as vol

N, K = sympy.symbols("N K", integer=True, positive=True)
J = sympy.Symbol("j", integer=True, nonnegative=True)


@pytest.mark.parametrize(
    ("values", "expected"), [([], 1), ([3, 4], 12), ([0, 5], 0), ([N, 2], 2 * N), ([np.int64(2), 3], 6)]
)
def test_product(values, expected):
    result = vol.product(values)
    assert result == expected
    assert isinstance(result, int) == all(isinstance(v, int | np.integer) for v in values)


@pytest.mark.parametrize(
    ("rng", "expected"), [((0, 9, 1), 10), ((0, 9, 3), 4), ((5, 5, 1), 1), ((0, N - 1, 1), N), ((1, N, 2), None)]
)
def test_count(rng, expected):
    result = vol.count(*rng)
    if expected is None:
        assert result == sympy.floor((N - 1) / 2) + 1
    else:
        assert result == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (7, 7),
        (Fraction(5, 2), 3),
        (Fraction(1, 3), 1),
        (Fraction(0), 0),
        (Fraction(8, 4), 2),
        (sympy.Rational(7, 2), 4),
    ],
)
def test_rounded_half_up_and_positive_to_one(value, expected):
    result = vol.rounded(value)
    assert result == expected and type(result) is int


def test_rounded_keeps_symbolic_values():
    assert vol.rounded(N * K / K) == N


@pytest.mark.parametrize(
    ("volume", "part", "whole", "expected"),
    [(10, 1, 2, Fraction(5)), (3, 1, 2, Fraction(3, 2)), (4, 1, 0, Fraction(0)), (N, 1, 2, N / 2), (N, 1, 0, 0)],
)
def test_share(volume, part, whole, expected):
    assert vol.share(volume, part, whole) == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(3, 4, True), (4, 3, False), (3, 3, True), (N, N * K, True), (N * K, N, False), (N, K, False), (J, J + 1, True)],
)
def test_provably_le(a, b, expected):
    """True only when it holds for every size; False when it fails or cannot be proven (N <= K)."""
    assert vol.provably_le(a, b) is expected


@pytest.mark.parametrize(
    ("relation", "expected"),
    [
        (sympy.Gt(N, 0), True),
        (sympy.Lt(N, 0), False),
        (sympy.Gt(N, K), None),
        (sympy.true, True),
        (sympy.Eq(J, J), True),
    ],
)
def test_decide(relation, expected):
    assert vol.decide(relation) is expected


@pytest.mark.parametrize(("a", "b", "expected"), [(2, 3, 3), (Fraction(1, 2), 1, 1), (N, 3, sympy.Max(N, 3))])
def test_maximum(a, b, expected):
    assert vol.maximum(a, b) == expected


@pytest.mark.parametrize(("terms", "expected"), [([], 0), ([1, 2], 3), ([N, 2], N + 2)])
def test_total(terms, expected):
    assert vol.total(terms) == expected


@pytest.mark.parametrize(
    ("value", "values", "expected"), [(N * K, {"N": 2, "K": 3}, 6), (N * K, {"N": 2}, 2 * K), (5, {}, 5)]
)
def test_evaluate(value, values, expected):
    result = vol.evaluate(value, values)
    assert result == expected and (type(result) is int) == (not vol.is_symbolic(expected))


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (J + 1, [1, 2, 3]),
        (sympy.Integer(4), [4, 4, 4]),
        (sympy.Min(J, 1), [0, 1, 1]),
        (CMod(sympy.Symbol("j", integer=True) + 4, 3), [1, 2, 0]),  # `%` of an index as DaCe writes it
    ],
)
def test_at_points_is_vectorised(expr, expected):
    (param,) = expr.free_symbols or {J}
    values = vol.at_points(expr, [param], np.array([[0], [1], [2]]))
    assert values.dtype == np.int64 and values.tolist() == expected


def test_at_points_keeps_sizes_symbolic():
    values = vol.at_points(J * N, [J], np.array([[1], [2]]))
    assert values.dtype == object and values.tolist() == [N, 2 * N]


@pytest.mark.parametrize(("a", "b"), [(3, 3), (N * 2, 2 * N)])
def test_key_identifies_equal_volumes(a, b):
    assert vol.key(a) == vol.key(b)
