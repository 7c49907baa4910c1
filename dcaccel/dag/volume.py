"""Arithmetic on volumes that are Python ints or SymPy expressions (sizes left symbolic).

Everything the DAG walk computes with volumes, element counts and box bounds goes through these
functions, so that the concrete walk (ints) and the closed-form walk (SymPy) apply the same rules:
products, shares of a volume, rounding, comparisons that are either decided or say they cannot be
("provably ≤"), and evaluation at given sizes or at every iteration of a map. Only expressions
built in this process (DaCe's own symbolic objects, SymPy values) are converted; text read from a
file never reaches :func:`as_expr`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

import numpy as np
import sympy

#: A volume, an element count or a bound: an int, or a SymPy expression in the program's sizes.
Volume = int | sympy.Expr

_INTEGERS = (int, np.integer)

#: Functions DaCe writes into subset and volume expressions, for evaluation with NumPy.
_NUMPY_FUNCTIONS = {
    "int_floor": np.floor_divide,
    "int_ceil": lambda a, b: -np.floor_divide(-a, b),
    "CMod": np.fmod,  # C's remainder (the sign of the dividend), as DaCe writes `%` of the program's indices
    "Min": np.minimum,
    "Max": np.maximum,
}


def is_symbolic(value) -> bool:
    """Whether ``value`` is a SymPy expression with free symbols."""
    return isinstance(value, sympy.Basic) and bool(value.free_symbols)


def as_expr(value) -> sympy.Expr:
    """``value`` (an int, a ``Fraction`` or an in-process SymPy/DaCe expression) as a SymPy expression."""
    if isinstance(value, Fraction):
        return sympy.Rational(value.numerator, value.denominator)
    if isinstance(value, _INTEGERS):
        return sympy.Integer(int(value))
    return sympy.sympify(value)


def product(values: Iterable[Volume]) -> Volume:
    """The product of ``values`` (1 for none): an int when all are ints."""
    values = list(values)
    if all(isinstance(v, _INTEGERS) for v in values):
        result = 1
        for v in values:
            result *= int(v)
        return result
    return sympy.Mul(*(as_expr(v) for v in values))


def maximum(a, b):
    """max(a, b) for numbers (ints, ``Fraction``), ``sympy.Max`` as soon as one side is symbolic."""
    if isinstance(a, int | Fraction) and isinstance(b, int | Fraction):
        return a if a >= b else b
    return sympy.Max(a, b)


def total(terms: Iterable[Volume]) -> Volume:
    """The sum of ``terms``: an int when all are ints, else a SymPy sum."""
    terms = list(terms)
    if all(isinstance(t, int) for t in terms):
        return sum(terms)
    return sympy.Add(*terms)


def ratio(num: Volume, den: Volume) -> Fraction | sympy.Expr:
    """``num / den``: an exact ``Fraction`` for ints, a SymPy expression otherwise."""
    if isinstance(num, int) and isinstance(den, int):
        return Fraction(num, den)
    return sympy.Mul(num, sympy.Pow(den, -1))


def count(begin: Volume, end: Volume, step: Volume) -> Volume:
    """The number of iterations of the inclusive range ``begin:end:step``: ⌊(end − begin)/step⌋ + 1."""
    if not any(is_symbolic(v) for v in (begin, end, step)):
        return (int(end) - int(begin)) // int(step) + 1
    return sympy.floor((as_expr(end) - begin) / step) + 1


def iterations(ranges: Sequence[tuple[Volume, Volume, Volume]]) -> Volume:
    """The number of points of a map's range (the product of :func:`count` over its dimensions)."""
    return product(count(*rng) for rng in ranges)


def summed(value, params: Sequence[sympy.Symbol], ranges: Sequence[tuple[Volume, Volume, Volume]]) -> Volume:
    """Σ of ``value`` over the points of a map's range (its ``params`` over their inclusive ``ranges``):
    ``value`` times the number of points when it does not depend on them, else a SymPy sum per parameter
    that does (innermost first); an int when concrete."""
    if value == 0:
        return 0
    if not isinstance(value, sympy.Basic) or not value.free_symbols & set(params):
        return concrete(product([concrete(value), iterations(ranges)]))
    expr = as_expr(value)
    for p, (begin, end, step) in reversed(list(zip(params, ranges, strict=True))):
        if p not in expr.free_symbols:
            expr = expr * as_expr(count(begin, end, step))
            continue
        u = sympy.Symbol(f"{p.name}_step", integer=True, nonnegative=True)
        expr = sympy.summation(expr.xreplace({p: begin + step * u}), (u, 0, sympy.floor((end - begin) / step)))
    return concrete(expr)


def share(volume: Volume, part: Volume, whole: Volume) -> Fraction | sympy.Expr:
    """``volume · part / whole`` (0 when ``whole`` is 0): the accesses that fall on ``part`` of ``whole``
    elements. An exact ``Fraction`` for ints, a SymPy expression otherwise."""
    if any(isinstance(v, sympy.Basic) for v in (volume, part, whole)):
        if whole == 0:
            return sympy.Integer(0)
        return as_expr(volume) * part / whole
    if whole == 0:
        return Fraction(0)
    return Fraction(int(volume) * int(part), int(whole))


def rounded(value) -> Volume:
    """A volume as a Python int when concrete (a fraction rounded half up, a positive one to at least 1),
    else a simplified SymPy expression."""
    if type(value) is int:
        return value
    if isinstance(value, _INTEGERS):
        return int(value)
    if isinstance(value, Fraction):
        if value.denominator == 1:
            return int(value)
        return max(1, int(value + Fraction(1, 2))) if value > 0 else 0
    expr = as_expr(value)
    if expr.is_Integer:
        return int(expr)
    if expr.is_Rational:
        return rounded(Fraction(int(expr.p), int(expr.q)))
    return sympy.simplify(expr)


def concrete(value) -> Volume:
    """``value`` as an int when it has no free symbol, else unchanged."""
    if isinstance(value, sympy.Basic) and value.is_Integer:
        return int(value)
    return value


def decide(relation) -> bool | None:
    """The truth of ``relation`` (a SymPy relational or boolean) when SymPy proves it either way, else None."""
    relation = as_expr(relation)
    if relation is sympy.true or relation is sympy.false:
        return bool(relation)
    if isinstance(relation, sympy.core.relational.Relational):
        difference = sympy.simplify(relation.lhs - relation.rhs)
        simplified = relation.func(difference, 0)
        if simplified is sympy.true or simplified is sympy.false:
            return bool(simplified)
    return None


def provably_le(a: Volume, b: Volume) -> bool:
    """Whether ``a ≤ b`` holds for every value of the sizes (False when it fails or cannot be proven)."""
    if not (isinstance(a, sympy.Basic) or isinstance(b, sympy.Basic)):
        return a <= b
    return decide(sympy.Le(as_expr(a), as_expr(b))) is True


def key(value) -> int | str:
    """A volume as an int, or the canonical text of a symbolic one (to compare and count volumes)."""
    if type(value) is int:
        return value
    value = rounded(value)
    return value if isinstance(value, int) else sympy.srepr(value)


def evaluate(value, values: Mapping[str, int]) -> Volume:
    """``value`` with the symbols named in ``values`` substituted: an int when none remains."""
    if not isinstance(value, sympy.Basic):
        return value
    substitution = {s: sympy.Integer(values[s.name]) for s in value.free_symbols if s.name in values}
    result = value.xreplace(substitution).doit()
    return int(result) if result.is_Integer else sympy.simplify(result)


def at_points(expr: sympy.Expr, params: Sequence[sympy.Symbol], points: np.ndarray) -> np.ndarray:
    """``expr`` at every row of ``points`` (values of ``params``): int64 when the result is concrete,
    else an object array of SymPy expressions."""
    n = points.shape[0]
    expr = as_expr(expr)
    if not expr.free_symbols - set(params):
        if not expr.free_symbols:
            return np.full(n, int(expr), dtype=np.int64)
        function = sympy.lambdify(params, expr, modules=[_NUMPY_FUNCTIONS, "numpy"])
        values = np.asarray(function(*points.T))
        return np.broadcast_to(values, (n,)).astype(np.int64)
    return np.array(
        [expr.xreplace(dict(zip(params, map(sympy.Integer, point), strict=True))) for point in points], dtype=object
    )
