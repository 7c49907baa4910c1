"""The arithmetic of a task: its multiply-accumulates and its other operations (docs/dag.md, "Arithmetic").

The counts of a task's record (:class:`~dcaccel.dag.task.TaskInfo`) that hold arithmetic are defined
here, and only here:

* ``macs``: the task's multiplications. Each is one operation of a MAC unit; the
  addition or subtraction that consumes the product in the same expression is fused into it
  (``a * b + c``, ``acc = acc + a * b``, ``acc += a * b``, and ``c = a * b`` written with a sum
  write-conflict resolution are one MAC each). A product whose sum is taken elsewhere (the ``op`` shape's
  outer products, summed by a ``Reduce`` task) is a MAC of the task that multiplies, so a program's MACs
  do not depend on how its products are split into tasks;
* ``ops``: every other arithmetic operation (add, subtract, divide, max, min,
  exp, a comparison, a negation... one per operator or call; ``max(a, b, c)`` is two), including the
  operation of a write-conflict resolution that is not fused into a MAC (``m = v`` with a max WCR is one);
* ``elements``: a transfer task's elements moved between host and
  accelerator (:mod:`dcaccel.dag.placement`); a transfer has no MACs (:func:`task_arithmetic` says how
  the costs read all three).

Counts are per execution of a tasklet (its Python code read with ``ast``, never evaluated; a C++
tasklet is read by :mod:`dcaccel.dag.cpp`) times the iterations of the maps around it, exact for
concrete sizes and SymPy expressions in the program's sizes otherwise (:mod:`dcaccel.dag.scopes` does
the scope walk). Only arithmetic on data counts: data are the tasklet's connectors and the variables
assigned from them; an operation on constants, map parameters, loop variables or sizes only (index
arithmetic, e.g. the bounds check that masks a padded position) costs nothing, nor does a type cast
(``dace.float32(0)``), a subscript's index, or an assignment. A loop ``for i in
range(...)`` multiplies its body; an ``if`` statement counts its costlier branch (its test is control
flow, typically a bounds check on indices), a conditional expression ``a if c else b`` its test and its
costlier branch. An opaque task (an op without a canonical implementation, the opaque role) counts by
one rule from its ONNX op and shapes (:func:`opaque_arithmetic`). This module does not import DaCe.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import sympy

from dcaccel.dag import volume as vol
from dcaccel.dag.task import TaskInfo, TaskInfoError
from dcaccel.errors import DcaccelError

#: Calls that convert a value's type and compute nothing (DaCe's and Python's scalar types).
_CASTS = frozenset(
    {"int", "float", "double", "bool", "complex", "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16"}
    | {"uint32", "uint64", "float16", "float32", "float64", "complex64", "complex128", "bfloat16"}
)
#: Calls of several arguments that take one operation per argument after the first.
_VARIADIC = frozenset({"max", "min", "Max", "Min", "fmax", "fmin"})


@dataclass(frozen=True)
class Arithmetic:
    """Multiply-accumulates and other arithmetic operations: ints, or SymPy expressions in the sizes."""

    macs: vol.Volume = 0
    ops: vol.Volume = 0

    def __add__(self, other: Arithmetic) -> Arithmetic:
        return Arithmetic(self.macs + other.macs, self.ops + other.ops)  # ints, or SymPy as soon as one is

    def times(self, count: vol.Volume) -> Arithmetic:
        """The arithmetic of ``count`` executions."""
        return Arithmetic(self.macs * count, self.ops * count)

    def costlier(self, other: Arithmetic) -> Arithmetic:
        """Per count, the larger of the two (the costlier branch of a condition)."""
        return Arithmetic(vol.maximum(self.macs, other.macs), vol.maximum(self.ops, other.ops))

    def counts(self) -> dict[str, vol.Volume]:
        """The arithmetic as the fields ``macs`` and ``ops`` of a task's record (concrete where it can be)."""
        return {"macs": vol.concrete(self.macs), "ops": vol.concrete(self.ops)}


NONE = Arithmetic()


@dataclass(frozen=True)
class _Value:
    """What an expression costs, whether it is index arithmetic (no data operand: constants, parameters,
    sizes), and whether it is a product no addition has been fused into yet (the next addition of it is
    part of its MAC)."""

    cost: Arithmetic = NONE
    index: bool = False
    product: bool = False


_INDEX = _Value(index=True)
_DATA = _Value()


class _Counter:
    """Counts the arithmetic of one execution of a tasklet's Python code (see the module docstring);
    ``data`` are its connectors."""

    def __init__(self, label: str, data: Iterable[str] = ()):
        self.label = label
        self.data = set(data)  # the names holding data: connectors, and variables assigned data
        self.products: dict[str, bool] = {}  # variable -> whether its last value is a product not yet fused

    def fail(self, what: str) -> DcaccelError:
        return DcaccelError(f"extract: tasklet '{self.label}': {what} has no countable arithmetic")

    # -- statements
    def block(self, statements: Sequence[ast.stmt]) -> Arithmetic:
        cost = NONE
        for statement in statements:
            cost = cost + self.statement(statement)
        return cost

    def statement(self, node: ast.stmt) -> Arithmetic:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            value = self.expr(node.value) if node.value is not None else _INDEX
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                self.assign(target, value)
            return value.cost
        if isinstance(node, ast.AugAssign):
            value = self.binary(node.op, self.expr(node.target), self.expr(node.value))
            self.assign(node.target, value)
            return value.cost
        if isinstance(node, ast.Expr):
            return self.expr(node.value).cost
        if isinstance(node, ast.For) and not node.orelse:
            return self.block(node.body).times(self.trips(node))
        if isinstance(node, ast.If):  # its test is control flow (typically a bounds check on indices)
            return self.block(node.body).costlier(self.block(node.orelse))
        if isinstance(node, ast.Pass):
            return NONE
        raise self.fail(f"a '{type(node).__name__}' statement")

    def assign(self, target: ast.expr, value: _Value) -> None:
        """A variable holds data once data is assigned to it, index values otherwise."""
        if isinstance(target, ast.Name):
            self.products[target.id] = value.product
            if value.index and target.id not in self.data:
                return
            self.data.add(target.id)

    def trips(self, loop: ast.For) -> vol.Volume:
        """The iterations of ``for ... in range(...)`` (bounds: integers or size symbols)."""
        call = loop.iter
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "range"):
            raise self.fail("a loop over anything but range(...)")
        if not 1 <= len(call.args) <= 3 or call.keywords:
            raise self.fail("range() with other than 1 to 3 arguments")
        bounds = [_bound(arg, self) for arg in call.args]
        start, stop, step = [0, *bounds, 1][-3:] if len(bounds) == 1 else [*bounds, 1][:3]
        if any(vol.is_symbolic(v) for v in (start, stop, step)):
            return sympy.Max(0, sympy.ceiling((vol.as_expr(stop) - start) / step))
        return max(0, -(-(int(stop) - int(start)) // int(step)))

    # -- expressions
    def expr(self, node: ast.expr) -> _Value:
        if isinstance(node, ast.Constant):
            return _INDEX
        if isinstance(node, ast.Name):
            return _Value(product=self.products.get(node.id, False)) if node.id in self.data else _INDEX
        if isinstance(node, ast.Subscript):  # an element of a connector (its index is address arithmetic)
            return self.expr(node.value)
        if isinstance(node, ast.Attribute):
            return _INDEX
        if isinstance(node, ast.BinOp):
            return self.binary(node.op, self.expr(node.left), self.expr(node.right))
        if isinstance(node, ast.UnaryOp):
            operand = self.expr(node.operand)
            if operand.index or isinstance(node.op, ast.UAdd):
                return _Value(operand.cost, operand.index)
            return _Value(operand.cost + Arithmetic(ops=1))
        if isinstance(node, ast.Compare | ast.BoolOp):
            parts = [node.left, *node.comparators] if isinstance(node, ast.Compare) else node.values
            return self.operation([self.expr(part) for part in parts], len(parts) - 1)
        if isinstance(node, ast.IfExp):
            test, body, orelse = self.expr(node.test), self.expr(node.body), self.expr(node.orelse)
            index = test.index and body.index and orelse.index
            return _Value(test.cost + body.cost.costlier(orelse.cost), index)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Tuple | ast.List):
            return self.operation([self.expr(element) for element in node.elts], 0)
        raise self.fail(f"a '{type(node).__name__}' expression")

    def call(self, node: ast.Call) -> _Value:
        name = _call_name(node)
        if name is None or node.keywords:
            raise self.fail("a call of an unnamed function or with keywords")
        arguments = [self.expr(argument) for argument in node.args]
        if name in _CASTS:
            return self.operation(arguments, 0)
        return self.operation(arguments, max(1, len(arguments) - 1) if name in _VARIADIC else 1)

    def operation(self, operands: list[_Value], count: int) -> _Value:
        """``count`` operations on ``operands`` (none when all of them are index values)."""
        cost = NONE
        for operand in operands:
            cost = cost + operand.cost
        if all(operand.index for operand in operands):
            return _Value(cost, index=True)
        return _Value(cost + Arithmetic(ops=count))

    def binary(self, op: ast.operator, left: _Value, right: _Value) -> _Value:
        if isinstance(op, ast.MatMult):
            raise self.fail("a matrix product '@'")
        cost = left.cost + right.cost
        if left.index and right.index:
            return _Value(cost, index=True)
        if isinstance(op, ast.Mult):
            return _Value(cost + Arithmetic(macs=1), product=True)
        if isinstance(op, ast.Add | ast.Sub) and (left.product or right.product):
            return _Value(cost)  # the addition of a product is part of its MAC
        return _Value(cost + Arithmetic(ops=1))


def _bound(node: ast.expr, counter: _Counter) -> vol.Volume:
    """A loop bound: an integer, a size symbol, or +, -, * and // of those (built without evaluating)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return sympy.Symbol(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -vol.as_expr(_bound(node.operand, counter))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult | ast.FloorDiv):
        left, right = vol.as_expr(_bound(node.left, counter)), vol.as_expr(_bound(node.right, counter))
        result = {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right}.get(type(node.op))
        return vol.concrete(sympy.floor(left / right) if result is None else result)
    raise counter.fail("a loop bound other than integers and sizes")


@lru_cache(maxsize=4096)
def tasklet_arithmetic(
    label: str, code: str, connectors: frozenset[str], wcr: tuple[tuple[str, str], ...] = ()
) -> Arithmetic:
    """The arithmetic of one execution of a Python tasklet of ``code`` with ``connectors`` whose outputs are
    written with the write-conflict resolutions ``wcr`` ((connector, lambda code), ...); loop bounds that
    are sizes stay symbols of their name. Cached by content: tasklets repeat across scopes and programs."""
    try:
        tree = ast.parse(code)
    except SyntaxError as err:
        raise _Counter(label).fail(f"code that is not Python ({err.msg})") from None
    return count_statements(label, tree.body, connectors, wcr)


@dataclass(frozen=True)
class CodeShape:
    """What a tasklet's code is made of, as a compiler meets it: ``trips``, the iterations of each of its
    ``for ... in range(...)`` loops in the order they appear (integers, or SymPy expressions of the sizes; a
    bound that is a loop variable of an enclosing loop is a symbol of its name), ``calls``, the names of the
    functions it calls that compute (not ``range``, not a type cast; None for a call of an unnamed
    function), and ``branches``, whether it has an ``if`` statement (a conditional expression
    ``a if c else b`` is none)."""

    trips: tuple[vol.Volume, ...]
    calls: frozenset[str | None]
    branches: bool


@lru_cache(maxsize=4096)
def code_shape(label: str, code: str) -> CodeShape:
    """The :class:`CodeShape` of the Python tasklet ``label`` (``code``). Code that is not Python, or a ``for``
    loop over anything but ``range(...)``, is refused as :func:`tasklet_arithmetic` refuses it; the other
    statements that function refuses (``while``, ``with``...) are not looked at here. Cached by content."""
    try:
        tree = ast.parse(code)
    except SyntaxError as err:
        raise _Counter(label).fail(f"code that is not Python ({err.msg})") from None
    counter = _Counter(label)
    nodes = list(ast.walk(tree))
    loops = sorted(
        (node for node in nodes if isinstance(node, ast.For)), key=lambda node: (node.lineno, node.col_offset)
    )
    trips = tuple(counter.trips(node) for node in loops)
    calls = {_call_name(node) for node in nodes if isinstance(node, ast.Call)}
    branches = any(isinstance(node, ast.If) for node in nodes)
    return CodeShape(trips, frozenset(calls - _CASTS - {"range"}), branches)


def _call_name(node: ast.Call) -> str | None:
    """The name a call calls by: ``f`` of ``f(...)`` and of ``module.f(...)`` (None for anything else)."""
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)


def count_statements(
    label: str, statements: Sequence[ast.stmt], connectors: frozenset[str], wcr: tuple[tuple[str, str], ...]
) -> Arithmetic:
    """The arithmetic of one execution of the tasklet ``label`` whose code is ``statements`` (Python ``ast``)
    and whose outputs are written with the write-conflict resolutions ``wcr``."""
    counter = _Counter(label, connectors)
    cost = counter.block(statements)
    for connector, function in wcr:
        parsed = _lambda(function)
        if parsed is None:
            raise counter.fail(f"write-conflict resolution '{function}'")
        body, arguments = parsed
        if isinstance(body, ast.BinOp) and isinstance(body.op, ast.Add) and counter.products.get(connector, False):
            continue  # c = a * b accumulated with a sum: the addition is part of the MAC
        cost = cost + _Counter(label, arguments).expr(body).cost
    return cost


@lru_cache(maxsize=256)
def _lambda(function: str) -> tuple[ast.expr, tuple[str, ...]] | None:
    """The body and the arguments of a write-conflict resolution ``lambda a, b: ...`` (None if it is not one)."""
    try:
        node = ast.parse(function, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Lambda):
        return None
    return node.body, tuple(argument.arg for argument in node.args.args)


#: Ops whose opaque arithmetic is MACs from shapes: op -> the input connectors the count reads.
_MAC_OPS = {"Conv": ("X", "W"), "Gemm": ("A", "B"), "MatMul": ("A", "B")}


def opaque_arithmetic(
    op: str | None, label: str, inputs: Mapping[str, Sequence], outputs: Mapping[str, Sequence]
) -> Arithmetic:
    """The arithmetic of an opaque task standing for the ONNX op ``op`` from the shapes of its tensors
    (``inputs``/``outputs``: connector -> shape; the ONNX names): one rule for every op.

    * ``Conv``: a MAC per output element and weight of its filter, |Y| · |W| / W.shape[0]; ``Gemm``: |Y| · K,
      K = |A| / Y.shape[0] (A is M × K or, transposed, K × M); ``MatMul``: |Y| · A.shape[-1]. Their bias
      (``B`` of Conv, ``C`` of Gemm) adds one op per output element, as the canonical ``AddBias`` does.
    * Every other op: one op per element of its outputs.
    """
    produced = vol.total([vol.product(shape) for shape in outputs.values()])
    if op not in _MAC_OPS:
        return Arithmetic(ops=produced)
    needed = _MAC_OPS[op]
    if any(name not in inputs for name in needed) or list(outputs) != ["Y"]:
        raise DcaccelError(
            f"extract: opaque {op} '{label}' lacks the ONNX connectors {', '.join(needed)} -> Y; "
            f"has {', '.join(inputs)} -> {', '.join(outputs)}"
        )
    y = outputs["Y"]
    if op == "Conv":
        weight = inputs["W"]
        reduced = vol.as_expr(vol.product(weight)) / weight[0]
    elif op == "Gemm":
        reduced = vol.as_expr(vol.product(inputs["A"])) / y[0]
    else:
        reduced = inputs["A"][-1]
    bias = {"Conv": "B", "Gemm": "C"}.get(op)
    macs = vol.concrete(sympy.simplify(vol.as_expr(produced) * reduced))
    return Arithmetic(macs, produced if bias in inputs else 0)


def task_arithmetic(info: TaskInfo, first_in: int) -> tuple[int, int]:
    """(MACs, operations) of a task (its record ``info``) as the costs read them: its ``macs``, and the
    operations its unit performs, one per slot of the unit's MAC rate and one MAC's energy each: its MACs
    plus its ``ops``. A transfer task has no MACs; its operations are its ``elements`` (a link unit's
    operation is one element moved, :mod:`dcaccel.architecture.links`). A task without counts (a DAG file,
    a generated DAG) is the canonical model's: one MAC per element of its first in-edge (``first_in``). A
    count still symbolic (a DAG file whose volumes are numbers but whose counts are not) is refused in one line
    naming the node."""
    if info.macs is not None:
        macs = _counted(info, "macs")
        return macs, macs + (_counted(info, "ops") if info.ops is not None else 0)
    if info.elements is not None:
        return 0, _counted(info, "elements")
    return first_in, first_in


def _counted(info: TaskInfo, name: str) -> int:
    """The count ``name`` of ``info`` as an int; a symbolic one raises :class:`TaskInfoError`."""
    count = getattr(info, name)
    if isinstance(count, sympy.Basic) and not count.is_Integer:
        symbols = ", ".join(sorted(map(str, count.free_symbols)))
        task = f"the task of {info.op or 'an op'} node '{info.node}'" if info.node else "a task"
        raise TaskInfoError(f"{task}: {name} {count} needs values for {symbols} (TaskDAG.evaluate at the sizes)")
    return int(count)
