"""The safe parser of symbolic sizes: what it builds, what it refuses, and that it never runs code."""

from __future__ import annotations

import pytest
import sympy

from dcaccel.dag.expression import MAX_LENGTH, ExpressionError, parse_expression

A, K, M, N, S = sympy.symbols("A K M N S")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("42", sympy.Integer(42)),
        ("N", N),
        ("K*M*N", K * M * N),
        ("Max(0, M)*Max(0, N)", sympy.Max(0, M) * sympy.Max(0, N)),
        ("2*A**2*S", 2 * A**2 * S),
        ("floor(M)", sympy.floor(M)),
        ("ceiling(N/2)", sympy.ceiling(N / 2)),
        ("N//2", sympy.floor(N / 2)),
        ("-3 + N", N - 3),
        ("+N - -2", N + 2),
        ("Min(N, M, 4)", sympy.Min(N, M, 4)),
        ("(N + 1)*(N - 1)", (N + 1) * (N - 1)),
        ("N**-1", 1 / N),
        ("2**62", sympy.Integer(2**62)),
        ("  N ", N),
        ("Max(3, 5)", sympy.Integer(5)),
    ],
)
def test_builds_the_expression(text, expected):
    assert parse_expression(text) == expected


def test_names_are_plain_symbols():
    # "I", "E" and "pi" are names in a DAG file, not SymPy's constants
    assert parse_expression("I + E + pi").free_symbols == set(sympy.symbols("I E pi"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("().__class__.__base__.__subclasses__()", "unknown function"),
        ("__import__('os').system('touch pwned')", "unknown function"),
        ("N.__class__", "'Attribute' is not allowed"),
        ("N[0]", "'Subscript' is not allowed"),
        ("lambda: 1", "'Lambda' is not allowed"),
        ("[N]", "'List' is not allowed"),
        ("N if M else K", "'IfExp' is not allowed"),
        ("N < M", "'Compare' is not allowed"),
        ("N % 2", "'BinOp' is not allowed"),
        ("N @ M", "'BinOp' is not allowed"),
        ("sympify('N')", "unknown function"),
        ("'N'", "constant 'N' is not an integer"),
        ("1.5", "constant 1.5 is not an integer"),
        ("True", "constant True is not an integer"),
        ("1j", "is not an integer"),
        ("9**9**9", "exponent must be an integer literal"),
        ("2**N", "exponent must be an integer literal"),
        ("N**65", "exponent must be an integer literal of magnitude at most 64"),
        ("(N**64)**64", "exponent 4096 exceeds 64"),
        ("*".join(["N"] * 65), "exponent 65 exceeds 64"),
        ("2**63", "a constant reaches 2\\*\\*63"),
        ("-(2**62)*2", "a constant reaches 2\\*\\*63"),
        ("N*2**62*4", "a constant reaches 2\\*\\*63"),
        ("(A + K + M + N)**64", "expands to more than 10,000 terms"),
        ("N/0", "division by zero"),
        ("0**-1", "undefined"),
        ("Max()", "wrong arguments to Max"),
        ("floor(N, M)", "wrong arguments to floor"),
        ("Max(N, key=M)", "wrong arguments to Max"),
        ("Max(" + ", ".join(f"x{i}" for i in range(9)) + ")", "more than 8 arguments to Max"),
        ("Max(Max(a, b, c, d, e), f, g, h, i)", "more than 8 arguments to Max"),
        ("", "not an expression"),
        ("N +", "not an expression"),
        ("N; import os", "not an expression"),
        ("(" * 300 + "N" + ")" * 300, "not an expression"),
        ("N" * (MAX_LENGTH + 1), "longer than 1,000 characters"),
    ],
    ids=lambda value: value[:40],
)
def test_refuses(text, message):
    with pytest.raises(ExpressionError, match=message) as caught:
        parse_expression(text)
    assert "\n" not in str(caught.value)


def test_refuses_non_text():
    with pytest.raises(ExpressionError, match="expected the text of an expression, got int"):
        parse_expression(3)
