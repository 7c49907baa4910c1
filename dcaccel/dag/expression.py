"""Symbolic sizes read from files, parsed without evaluating them.

A DAG file writes a symbolic volume as the text of a SymPy expression (``2*Max(0, A)*Max(0, S)``).
:func:`parse_expression` reads such text with Python's ``ast`` parser and builds the SymPy objects
itself from a whitelist: integers, symbol names, ``+ - * / // **``, unary ``+``/``-``, parentheses and
the calls ``Max``, ``Min``, ``ceiling`` and ``floor`` (what DaCe's symbolic sizes contain). Nothing
is ever evaluated as Python, so a file cannot run code.

Limits keep every result small and every later evaluation quick: the text is at most
:data:`MAX_LENGTH` characters; ``Max`` and ``Min`` take at most :data:`MAX_ARGUMENTS` arguments;
every constant, given or folded, stays below :data:`MAX_CONSTANT` in magnitude; an exponent is an
integer literal of magnitude at most :data:`MAX_EXPONENT`, and so is every exponent of the result
(``N*N`` is ``N**2``, and ``(N**64)**64`` is refused); and expanded, the expression has at most
:data:`MAX_TERMS` terms (``(A + B + C + D)**64`` is refused).
"""

from __future__ import annotations

import ast
import functools
import operator

import sympy

from dcaccel.errors import DcaccelError

#: Longest expression text accepted, in characters.
MAX_LENGTH = 1_000
#: Every constant of an expression, given or computed, is smaller than this in magnitude.
MAX_CONSTANT = 2**63
#: Most arguments of one ``Max`` or ``Min``, nested ones of the same function counted (SymPy
#: compares them pairwise).
MAX_ARGUMENTS = 8
#: Largest exponent, written or in the result.
MAX_EXPONENT = 64
#: Most terms the expression may have once expanded (``(A + B + C)**2`` has 9): comparing two
#: volumes expands their difference (:meth:`TaskDAG.validate`).
MAX_TERMS = 10_000

_FUNCTIONS = {"Max": sympy.Max, "Min": sympy.Min, "ceiling": sympy.ceiling, "floor": sympy.floor}
_ARITIES = {"Max": None, "Min": None, "ceiling": 1, "floor": 1}
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: lambda a, b: sympy.floor(a / b),
}


class ExpressionError(DcaccelError):
    """Text that is not an expression of the whitelist, or that exceeds its limits."""


@functools.lru_cache(maxsize=4096)
def parse_expression(text: str) -> sympy.Expr:
    """The SymPy expression ``text`` stands for, built from the whitelist of the module docstring.

    Names become plain ``sympy.Symbol``s (no assumptions), as :meth:`TaskDAG.to_json` wrote them.
    Raises :class:`ExpressionError` (one line, without the text: the caller names the field). Results
    are cached by text (a DAG repeats its volumes; SymPy objects are immutable).
    """
    if not isinstance(text, str):
        raise ExpressionError(f"expected the text of an expression, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"longer than {MAX_LENGTH:,} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ExpressionError("not an expression (or nested too deeply)") from None
    try:
        expr = _build(tree.body)
    except RecursionError:
        raise ExpressionError("nested too deeply") from None
    if _expanded_terms(expr) > MAX_TERMS:
        raise ExpressionError(f"expands to more than {MAX_TERMS:,} terms")
    return expr


def _build(node: ast.AST) -> sympy.Expr:
    """The SymPy object of one whitelisted syntax node (anything else raises)."""
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int):
            raise ExpressionError(f"constant {value!r} is not an integer")
        return _bounded(sympy.Integer(value))
    if isinstance(node, ast.Name):
        return sympy.Symbol(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _build(node.operand)
        return _bounded(-operand if isinstance(node.op, ast.USub) else operand)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return _bounded(_build(node.left) ** _exponent(node.right))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _build(node.left), _build(node.right)
        if right == 0 and isinstance(node.op, ast.Div | ast.FloorDiv):
            raise ExpressionError("division by zero")
        return _bounded(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        name = node.func.id
        arity = _ARITIES[name]
        if node.keywords or not node.args or len(node.args) != (arity or len(node.args)):
            raise ExpressionError(f"wrong arguments to {name}")
        function = _FUNCTIONS[name]
        args = [_build(arg) for arg in node.args]
        if sum(len(arg.args) if arg.func is function else 1 for arg in args) > MAX_ARGUMENTS:
            raise ExpressionError(f"more than {MAX_ARGUMENTS} arguments to {name}")
        return _bounded(function(*args))
    if isinstance(node, ast.Call):
        raise ExpressionError(f"unknown function (allowed: {', '.join(_FUNCTIONS)})")
    raise ExpressionError(f"'{type(node).__name__}' is not allowed (only integers, names, + - * / // **, {_calls()})")


def _exponent(node: ast.AST) -> int:
    """An exponent: an integer literal (optionally negated) of magnitude at most MAX_EXPONENT."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        sign = -1 if isinstance(node.op, ast.USub) else 1
        node = node.operand
    if not (isinstance(node, ast.Constant) and type(node.value) is int and node.value <= MAX_EXPONENT):
        raise ExpressionError(f"an exponent must be an integer literal of magnitude at most {MAX_EXPONENT}")
    return sign * node.value


def _bounded(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` after checking that its constants and exponents are within the module's limits."""
    for atom in expr.atoms(sympy.Number):
        if not atom.is_Rational:
            raise ExpressionError(f"constant {atom} is not rational")
        if abs(atom.p) >= MAX_CONSTANT or atom.q >= MAX_CONSTANT:
            raise ExpressionError(f"a constant reaches 2**63 or more (limit {MAX_CONSTANT - 1:,})")
    for power in expr.atoms(sympy.Pow):
        exponent = power.exp
        if not exponent.is_Integer or abs(exponent) > MAX_EXPONENT:
            raise ExpressionError(f"exponent {exponent} exceeds {MAX_EXPONENT}")
    if expr.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
        raise ExpressionError("the expression is undefined (division by zero)")
    return expr


def _expanded_terms(expr: sympy.Basic) -> int:
    """An upper bound on the number of terms of ``sympy.expand(expr)`` (capped at MAX_TERMS + 1):
    sums add, products multiply, a power ``b**n`` raises the bound of ``b`` to ``n``; function
    arguments are expanded on their own."""
    cap = MAX_TERMS + 1
    if expr.is_Add:
        return min(cap, sum(_expanded_terms(arg) for arg in expr.args))
    if expr.is_Mul:
        total = 1
        for arg in expr.args:
            total = min(cap, total * _expanded_terms(arg))
        return total
    if expr.is_Pow:
        base = _expanded_terms(expr.base)
        return min(cap, base ** abs(int(expr.exp))) if base > 1 else 1
    return min(cap, sum(_expanded_terms(arg) for arg in expr.args)) if expr.args else 1


def _calls() -> str:
    return ", ".join(f"{name}(...)" for name in _FUNCTIONS)
