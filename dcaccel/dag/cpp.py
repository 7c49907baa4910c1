"""The arithmetic of a C++ tasklet: its code read as the Python ``ast`` that :mod:`dcaccel.dag.arithmetic`
counts (the code is parsed, never compiled or evaluated).

The C++ of tasklets is a small subset, and only that subset is read: blocks, declarations (``float acc =
0;``), assignments (``=``, ``+=``...), ``for (long i = a; i < b; ++i)`` loops with integer or size bounds,
``if``/``else``, and expressions of numbers, names, calls, subscripts, unary, binary and conditional
operators. A declaration of an integer variable (``const long p = y + o * 2;``) is index arithmetic and
costs nothing, as a subscript's index does. Anything else raises :class:`~dcaccel.errors.DcaccelError`
naming the tasklet.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache

from dcaccel.dag.arithmetic import Arithmetic, count_statements
from dcaccel.errors import DcaccelError

_TOKEN = re.compile(
    r"\s*(?:(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[fFlLuU]*)"
    r"|(?P<name>[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*(?:<[\w\s,:]*>)?)*)"
    r"|(?P<op>\+\+|--|[-+*/%&|^]=|<=|>=|==|!=|&&|\|\||->|[-+*/%<>=!~?:;,(){}\[\].]))"
)
#: Type names a declaration or a cast starts with; the integer ones declare index variables.
_INTEGER_TYPES = frozenset({"int", "long", "short", "char", "unsigned", "signed", "size_t", "bool", "int64_t"})
_TYPES = _INTEGER_TYPES | {"float", "double", "auto", "const", "dace::float32", "dace::float64"}
_AUGMENTED = {"+=": ast.Add, "-=": ast.Sub, "*=": ast.Mult, "/=": ast.Div, "%=": ast.Mod}
_BINARY = [
    ({"||": ast.Or}, "bool"),
    ({"&&": ast.And}, "bool"),
    ({"==": ast.Eq, "!=": ast.NotEq}, "compare"),
    ({"<": ast.Lt, ">": ast.Gt, "<=": ast.LtE, ">=": ast.GtE}, "compare"),
    ({"+": ast.Add, "-": ast.Sub}, "binary"),
    ({"*": ast.Mult, "/": ast.Div, "%": ast.Mod}, "binary"),
]
_UNARY = {"-": ast.USub, "+": ast.UAdd, "!": ast.Not, "~": ast.Invert}


class _Parser:
    """Recursive descent over the tokens of one tasklet's C++ code, producing Python statements."""

    def __init__(self, label: str, code: str):
        self.label = label
        self.tokens: list[str] = []
        position = 0
        code = code.strip()
        while position < len(code):
            match = _TOKEN.match(code, position)
            if match is None or match.end() == position:
                raise self.fail(f"'{code[position:].lstrip()[:20]}'")
            self.tokens.append(match.group().strip())
            position = match.end()
        self.at = 0

    def fail(self, what: str) -> DcaccelError:
        return DcaccelError(f"extract: tasklet '{self.label}': C++ {what} has no countable arithmetic")

    def peek(self, ahead: int = 0) -> str | None:
        index = self.at + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise self.fail(f"code (expected '{expected}', found '{token}')")
        self.at += 1
        return token

    # -- statements
    def program(self) -> list[ast.stmt]:
        statements = []
        while self.peek() is not None:
            statements.extend(self.statement())
        return statements

    def statement(self) -> list[ast.stmt]:
        token = self.peek()
        if token == "{":
            self.take("{")
            body = []
            while self.peek() != "}":
                body.extend(self.statement())
            self.take("}")
            return body
        if token == ";":
            self.take(";")
            return []
        if token == "for":
            return [self.loop()]
        if token == "if":
            self.take("if")
            self.take("(")
            test = self.expression()
            self.take(")")
            body = self.statement() or [ast.Pass()]
            orelse = []
            if self.peek() == "else":
                self.take("else")
                orelse = self.statement()
            return [ast.If(test, body, orelse)]
        statement = self.simple()
        self.take(";")
        return [statement] if statement is not None else []

    def simple(self) -> ast.stmt | None:
        """A declaration, assignment or expression (without its ``;``); None for an index declaration."""
        types = []
        while self.peek() in _TYPES and self.peek(1) not in ("(", None):
            types.append(self.take())
        if types:
            name = self.take()
            value = None
            if self.peek() == "=":
                self.take("=")
                value = self.expression()
            if _INTEGER_TYPES & set(types) or value is None:
                return None
            return ast.Assign([ast.Name(name, ast.Store())], value)
        target = self.expression()
        token = self.peek()
        if token == "=":
            self.take()
            return ast.Assign([target], self.expression())
        if token in _AUGMENTED:
            self.take()
            return ast.AugAssign(target, _AUGMENTED[token](), self.expression())
        if token in ("++", "--"):
            self.take()
            return ast.AugAssign(target, ast.Add() if token == "++" else ast.Sub(), ast.Constant(1))
        return ast.Expr(target)

    def loop(self) -> ast.For:
        """``for (T i = a; i < b; ++i)`` (or ``<=``, ``i++``, ``i += 1``) as ``for i in range(a, b)``."""
        self.take("for")
        self.take("(")
        while self.peek() in _TYPES:
            self.take()
        variable = self.take()
        self.take("=")
        start = self.expression()
        self.take(";")
        if self.take() != variable or self.peek() not in ("<", "<="):
            raise self.fail(f"loop over '{variable}' whose condition is not '{variable} < bound'")
        inclusive = self.take() == "<="
        stop = self.expression()
        if inclusive:
            stop = ast.BinOp(stop, ast.Add(), ast.Constant(1))
        self.take(";")
        update = [self.take() for _ in range(3 if self.peek(1) == "+=" else 2)]
        if update not in ([variable, "++"], ["++", variable], [variable, "+=", "1"]):
            raise self.fail(f"loop over '{variable}' whose step is not one")
        self.take(")")
        body = self.statement() or [ast.Pass()]
        return ast.For(ast.Name(variable, ast.Store()), ast.Call(ast.Name("range"), [start, stop], []), body, [])

    # -- expressions
    def expression(self) -> ast.expr:
        test = self.binary(0)
        if self.peek() != "?":
            return test
        self.take("?")
        body = self.expression()
        self.take(":")
        return ast.IfExp(test, body, self.expression())

    def binary(self, level: int) -> ast.expr:
        if level == len(_BINARY):
            return self.unary()
        operators, kind = _BINARY[level]
        left = self.binary(level + 1)
        while self.peek() in operators:
            op = operators[self.take()]()
            right = self.binary(level + 1)
            if kind == "bool":
                left = ast.BoolOp(op, [left, right])
            elif kind == "compare":
                left = ast.Compare(left, [op], [right])
            else:
                left = ast.BinOp(left, op, right)
        return left

    def unary(self) -> ast.expr:
        token = self.peek()
        if token in _UNARY:
            self.take()
            return ast.UnaryOp(_UNARY[token](), self.unary())
        if token == "(" and self.peek(1) in _TYPES and self.peek(2) == ")":
            self.at += 3
            return self.unary()  # a cast
        return self.postfix(self.primary())

    def primary(self) -> ast.expr:
        token = self.take()
        if token == "(":
            inner = self.expression()
            self.take(")")
            return inner
        if token[0].isdigit() or token[0] == ".":
            return ast.Constant(int(token) if token.isdigit() else 0.0)
        if token[0].isalpha() or token[0] == "_":
            return ast.Name(token.split("::")[-1].strip().split("<")[0])
        raise self.fail(f"token '{token}'")

    def postfix(self, node: ast.expr) -> ast.expr:
        while self.peek() in ("(", "[", ".", "->"):
            token = self.take()
            if token == "(":
                arguments = []
                while self.peek() != ")":
                    arguments.append(self.expression())
                    if self.peek() == ",":
                        self.take(",")
                self.take(")")
                node = ast.Call(node, arguments, [])
            elif token == "[":
                node = ast.Subscript(node, self.expression())
                self.take("]")
            else:
                node = ast.Attribute(node, self.take())
        return node


@lru_cache(maxsize=1024)
def cpp_arithmetic(
    label: str, code: str, connectors: frozenset[str], wcr: tuple[tuple[str, str], ...] = ()
) -> Arithmetic:
    """The arithmetic of one execution of a C++ tasklet of ``code`` (see the module docstring and
    :func:`dcaccel.dag.arithmetic.tasklet_arithmetic`, whose rules apply to the statements read)."""
    return count_statements(label, _Parser(label, code).program(), connectors, wcr)
