"""Arithmetic of tasks (dcaccel.dag.arithmetic, dcaccel.dag.cpp; docs/dag.md, "Arithmetic"): tasklets counted
from their code, times the iterations of their maps, for canonical and opaque tasks alike.

Where the figures come from:

* ``conv-seed`` (Conv 1→6, 5×5, on 28×28): 6 filters × 25 weights × 576 output positions (24×24) =
  86,400 MACs; its bias adds one op per output element, 6 · 576 = 3,456.
* LeNet (1×28×28 input): conv1 1→6, 5×5 → 6×24×24: 6 · 25 · 576 = 86,400; conv2 6→16, 5×5 on 12×12 →
  16×8×8: 16 · 150 · 64 = 153,600; fc1 256→120: 30,720; fc2 120→84: 10,080; fc3 84→10: 840. In all
  281,640 MACs. Its other ops (``mv``): a bias add and a Relu per element of conv1 (3,456 each) and conv2
  (1,024 each), 4 max per pooled element (864 · 4, 256 · 4), bias and Relu of fc1 and fc2 (120, 84 each),
  fc3's bias (10), the softmax's max, exp(v − m) (two ops), sum and division over 10 (50): 13,908. The
  ``op`` shape multiplies in its OP tasks and adds the K products of every output in its Reduce tasks:
  281,640 more adds.
"""

from __future__ import annotations

import ast
import re

import pytest
import sympy

from dcaccel.dag.arithmetic import (
    Arithmetic,
    code_shape,
    count_statements,
    opaque_arithmetic,
    task_arithmetic,
    tasklet_arithmetic,
)
from dcaccel.dag.cpp import cpp_arithmetic
from dcaccel.dag.extract import extract
from dcaccel.dag.task import Role, TaskInfo
from dcaccel.dag.taskdag import TaskDAG
from dcaccel.errors import DcaccelError

SUM = "lambda a, b: (a + b)"

LENET_MACS = 86_400 + 153_600 + 30_720 + 10_080 + 840
LENET_OPS = 2 * 3_456 + 864 * 4 + 2 * 1_024 + 256 * 4 + 2 * 120 + 2 * 84 + 10 + 50


@pytest.mark.parametrize(
    ("code", "connectors", "wcr", "expected"),
    [
        # the mv/lmv inner product: one MAC per term, the accumulation fused
        ("acc = dace.float32(0)\nfor t in range(25):\n    acc = (acc + (a[t] * b[t]))\nc = acc", "a b c", (), (25, 0)),
        ("acc += a * b", "a b", (), (1, 0)),
        ("c = a - l * y", "a l y c", (), (1, 0)),  # a multiply-subtract
        ("c = a * b + d * e", "a b d e c", (), (2, 0)),  # two products, one addition fused
        ("c = (a + b) * d", "a b d c", (), (1, 1)),  # the addition comes first: not fused
        ("c = a * b", "a b c", (("c", SUM),), (1, 0)),  # accumulated by a sum write-conflict resolution
        ("c = a * b", "a b c", (), (1, 0)),  # the op shape's outer product: a MAC whose sum is taken elsewhere
        ("c = a", "a c", (("c", SUM),), (0, 1)),
        ("m = v", "v m", (("m", "lambda a, b: max(a, b)"),), (0, 1)),
        ("acc = dace.float32((- 3.4e38))\nacc = max(acc, w0)\nacc = max(acc, w1)\ny = acc", "w0 w1 y", (), (0, 2)),
        ("y = max(a, b, c)", "a b c y", (), (0, 2)),
        ("e = exp((v - m))", "v m e", (), (0, 2)),
        ("y = (e / s)", "e s y", (), (0, 1)),
        ("out = max(x, dace.float32(0))", "x out", (), (0, 1)),
        ("out = v", "v out", (), (0, 0)),
        ("out = ((1.0 if (i == c) else 0.0) - (l * y))", "i c l y out", (), (1, 1)),  # a comparison, a MAC
        ("out = 2.0 * 3.0 + 1", "out", (), (0, 0)),  # constants only
        ("out = -x", "x out", (), (0, 1)),
        ("for t in range(2, 11, 3):\n    s = s + x[t]", "x", (), (0, 3)),
        ("if a:\n    c = a * b + d\nelse:\n    c = a", "a b d c", (), (1, 0)),  # the costlier branch, no test
        # im2col's mask of a padded position: index arithmetic on the map's parameters costs nothing
        ("out = v if ((1 * o0 + 1 * y0 - 1 >= 0) and (1 * o0 < 16)) else dace.float32(0)", "v out", (), (0, 0)),
        ("out = dace.float64((row == col))", "out", (), (0, 0)),
    ],
)
def test_python_tasklets(code, connectors, wcr, expected):
    assert tasklet_arithmetic("t", code, frozenset(connectors.split()), wcr) == Arithmetic(*expected)


def test_a_loop_bound_that_is_a_size_stays_symbolic():
    code = "acc = 0.0\nfor t in range(A):\n    acc = acc + a[t] * b[t]\nc = acc"
    counted = tasklet_arithmetic("t", code, frozenset("abc"))
    assert counted.ops == 0
    assert counted.macs.xreplace({sympy.Symbol("A"): 7}) == 7


@pytest.mark.parametrize(
    ("code", "trips", "calls"),
    [
        ("c = a * b", (), set()),
        # a dot product of 16, its sum started from a cast
        ("s = dace.float32(0)\nfor t in range(16):\n    s = s + a[t] * b[t]\nc = s", (16,), set()),
        # loops in the order they appear, nested or not; bounds that are a size (N = 10) and the enclosing
        # loop's variable (i = 3)
        (
            "for i in range(4):\n    for j in range(5):\n        c = c + a\nfor k in range(6):\n    c = c + a",
            (4, 5, 6),
            set(),
        ),
        ("for i in range(2, N):\n    for j in range(i):\n        c = c + a", (8, 3), set()),
        # the functions that compute, by name, with or without their module; a call of no name
        ("c = math.exp(a) + max(a, b) + float(b)", (), {"exp", "max"}),
        ("c = f(a)(b)", (), {"f", None}),
    ],
)
def test_the_shape_of_a_tasklets_code(code, trips, calls):
    shape = code_shape("t", code)
    values = {sympy.Symbol("N"): 10, sympy.Symbol("i"): 3}
    assert tuple(sympy.sympify(trip).subs(values) for trip in shape.trips) == trips
    assert shape.calls == calls
    assert not shape.branches
    indented = code.replace("\n", "\n    ")
    assert code_shape("t", f"if a > 0:\n    {indented}").branches


@pytest.mark.parametrize(
    ("code", "message"), [("for t in items:\n    s = s + t", "loop over anything but range"), ("c = (", "not Python")]
)
def test_a_shape_that_cannot_be_read_is_refused_naming_the_tasklet(code, message):
    with pytest.raises(DcaccelError, match=f"^extract: tasklet 'odd': .*{message}"):
        code_shape("odd", code)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("while x:\n    x = x - 1", "'While' statement"),
        ("for t in items:\n    s = s + t", "loop over anything but range"),
        ("c = a @ b", "matrix product"),
        ("c = (", "not Python"),
    ],
)
def test_what_cannot_be_counted_is_refused_naming_the_tasklet(code, message):
    with pytest.raises(DcaccelError, match=f"^extract: tasklet 'odd': .*{message}"):
        tasklet_arithmetic("odd", code, frozenset("abcx"))


#: The direct convolution's C++ tasklet (dcaccel.expansions.conv) for a 5×5 filter with padding 2.
DIRECT = """float __acc = 0;
for (long __c = 0; __c < 2; ++__c)
for (long __y0 = 0; __y0 < 5; ++__y0)
for (long __y1 = 0; __y1 < 5; ++__y1)
{
    const long __p0 = __o0 + __y0 * 1 - 2;
    const long __p1 = __o1 + __y1 * 1 - 2;
    if (__p0 >= 0 && __p0 < 28 && __p1 >= 0 && __p1 < 28)
        __acc += __w[__c * 25 + __y0 * 5 + __y1] * __x[__c * 784 + __p0 * 28 + __p1];
}
__out = __acc;"""


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (DIRECT, (50, 0)),  # a MAC per weight; index arithmetic and the bounds check cost nothing
        ("__out = -std::numeric_limits<float>::infinity();", (0, 0)),  # an identity is a constant
        ("__out = std::numeric_limits<float>::lowest();", (0, 0)),
        ("double s = 0;\nfor (int i = 1; i <= 4; i++) { s += __a[i] / __b; }\n__out = s > 0 ? s : -s;", (0, 10)),
        ("__out = (float)__a * __b + __c;", (1, 0)),
    ],
)
def test_cpp_tasklets(code, expected):
    assert cpp_arithmetic("t", code, frozenset({"__w", "__x", "__a", "__b", "__c", "__out"})) == Arithmetic(*expected)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("for (long i = 0; i < 4; i += 2) { __s += __a[i]; }", "step is not one"),
        ("while (x) { x--; }", "expected ';'"),
        ("__out = __a # __b;", "'# __b;'"),
    ],
)
def test_cpp_outside_the_subset_is_refused(code, message):
    with pytest.raises(DcaccelError, match=f"^extract: tasklet 'c': C\\+\\+ .*{message}"):
        cpp_arithmetic("c", code, frozenset({"__a", "__s", "x"}))


def test_count_statements_reads_an_ast():
    tree = ast.parse("c = a * b")
    assert count_statements("t", tree.body, frozenset("abc"), (("c", SUM),)) == Arithmetic(1, 0)


@pytest.mark.parametrize(
    ("op", "inputs", "outputs", "expected"),
    [
        # 6 filters of 1×5×5 over 24×24 outputs, plus the bias
        ("Conv", {"X": [1, 1, 28, 28], "W": [6, 1, 5, 5], "B": [6]}, {"Y": [1, 6, 24, 24]}, (86_400, 3_456)),
        ("Conv", {"X": [1, 4, 8, 8], "W": [8, 2, 3, 3]}, {"Y": [1, 8, 6, 6]}, (288 * 18, 0)),  # 2 groups
        ("Gemm", {"A": [1, 256], "B": [120, 256], "C": [120]}, {"Y": [1, 120]}, (30_720, 120)),
        ("Gemm", {"A": [256, 3], "B": [256, 120]}, {"Y": [3, 120]}, (360 * 256, 0)),  # A transposed
        ("MatMul", {"A": [2, 4, 6], "B": [6, 5]}, {"Y": [2, 4, 5]}, (40 * 6, 0)),
        ("LogSoftmax", {"input": [4, 6]}, {"output": [4, 6]}, (0, 24)),
        (None, {"a": [10]}, {"c": [10], "d": [2]}, (0, 12)),
    ],
)
def test_opaque_rule(op, inputs, outputs, expected):
    assert opaque_arithmetic(op, "n", inputs, outputs) == Arithmetic(*expected)


def test_opaque_rule_is_symbolic_for_symbolic_shapes():
    m, k, n = sympy.symbols("M K N", positive=True, integer=True)
    counted = opaque_arithmetic("MatMul", "mm", {"A": [m, k], "B": [k, n]}, {"Y": [m, n]})
    assert counted == Arithmetic(m * n * k, 0)


def test_opaque_mac_op_without_its_connectors_is_refused():
    with pytest.raises(DcaccelError, match="^extract: opaque Conv 'c' lacks the ONNX connectors X, W -> Y"):
        opaque_arithmetic("Conv", "c", {"input": [1, 1, 4, 4]}, {"Y": [1, 1, 2, 2]})


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        (TaskInfo(macs=40, ops=8), (40, 48)),
        (TaskInfo(macs=0, ops=8), (0, 8)),
        (TaskInfo(role=Role.TRANSFER, elements=12), (0, 12)),  # no MACs, its link unit's operations are elements
        (TaskInfo(), (5, 5)),  # a task without counts: the canonical model's one MAC per element read
    ],
)
def test_task_arithmetic_as_the_costs_read_it(info, expected):
    assert task_arithmetic(info, 5) == expected


def _totals(dag) -> tuple[int, int]:
    return sum(dag.info(v).macs for v in dag.tasks), sum(dag.info(v).ops for v in dag.tasks)


@pytest.mark.parametrize("granularity", ["task", "coarse", "tiles=4"])
@pytest.mark.parametrize(("shape", "ops"), [("mv", 3_456), ("op", 3_456 + 86_400), ("lmv", 3_456), ("direct", 3_456)])
def test_conv_seed_macs_under_every_implementation(conv_seed, shape, ops, granularity):
    dag = extract(conv_seed.lower({"Conv": shape}), granularity=granularity)
    assert _totals(dag) == (86_400, ops)


def test_conv_seed_mv_tasks_one_by_one(conv_seed):
    """Each MV task is one column: the 6 filters' 25 MACs; AddBias adds 3,456 biases; copies compute nothing."""
    dag = extract(conv_seed.lower({"Conv": "mv"}))
    counts = {}
    for v in dag.tasks:
        info = dag.info(v)
        counts.setdefault(info.map, set()).add((info.macs, info.ops))
    assert counts["MV"] == {(150, 0)}
    assert counts["AddBias"] == {(0, 3_456)}
    assert counts["Gather"] == counts["Xr"] == {(0, 0)}


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["mv", "op", "lmv"])
def test_lenet_macs_are_its_layers(lenet, shape):
    dag = extract(lenet.lower({"Conv": shape, "Gemm": shape}))
    assert _totals(dag) == (LENET_MACS, LENET_OPS + (LENET_MACS if shape == "op" else 0))
    per_node: dict[str, int] = {}
    for v in dag.tasks:
        info = dag.info(v)
        per_node[info.node] = per_node.get(info.node, 0) + info.macs
    assert {node: macs for node, macs in per_node.items() if macs} == {
        "conv1": 86_400,
        "conv2": 153_600,
        "fc1": 30_720,
        "fc2": 10_080,
        "fc3": 840,
    }


@pytest.mark.slow
def test_symbolic_sizes_give_closed_forms(mmm):
    """mmm (A: N×K, B: K×M) at coarse granularity with every size symbolic: N·K·M MACs under each shape."""
    n, k, m = sympy.symbols("N K M")
    for shape in ("mv", "op", "lmv"):
        dag = extract(mmm.lower({"MatMul": shape}), granularity="coarse", symbols={})
        macs = sympy.Add(*(sympy.sympify(dag.info(v).macs) for v in dag.tasks))
        assert sympy.simplify(macs.xreplace({s: sympy.Symbol(s.name) for s in macs.free_symbols}) - n * k * m) == 0
        evaluated = dag.evaluate(N=3, K=4, M=5)
        assert sum(evaluated.info(v).macs for v in evaluated.tasks) == 60


def test_tasks_of_a_family_get_their_own_symbolic_counts(mmm):
    """mmm with K = 4, M = 5 and N symbolic: each of the 5 MV tasks makes 4·N MACs, each of the 4 OP tasks
    5·N (one product per element of its N×M slice), Reduce adds them (4·5·N ops, K terms per output)."""
    n = sympy.Symbol("N")
    mv = extract(mmm.lower({"MatMul": "mv"}), symbols={"M": 5, "K": 4})
    assert [mv.info(v).macs for v in mv.tasks if mv.node(v).info.map == "MV"] == [4 * n] * 5
    op = extract(mmm.lower({"MatMul": "op"}), symbols={"M": 5, "K": 4})
    assert [(op.info(v).macs, op.info(v).ops) for v in op.tasks] == [(5 * n, 0)] * 4 + [(0, 20 * n)]
    for dag in (mv, op):
        evaluated = dag.evaluate(N=3)
        assert sum(evaluated.info(v).macs for v in evaluated.tasks) == 3 * 4 * 5


def test_dag_files_hold_counts_as_integers_or_expressions(mmm):
    """A DAG file keeps the counts (symbolic ones as text, read back by the safe parser); a count that is
    not an integer >= 0 or an expression is refused naming the node."""
    dag = extract(mmm.lower({"MatMul": "mv"}), symbols={"M": 5, "K": 4})
    again = TaskDAG.from_json(dag.to_json())
    assert [again.info(v).macs for v in again.tasks] == [dag.info(v).macs for v in dag.tasks]
    assert sum(again.evaluate(N=2).info(v).macs for v in again.tasks) == 2 * 4 * 5
    data = dag.to_json()
    for bad, message in ((-1, "must be an integer >= 0"), (1.5, "must be an integer >= 0"), ("N +", "'N +': not an")):
        data["nodes"][2]["info"]["macs"] = bad
        with pytest.raises(
            DcaccelError, match=f"^JSON data is not a DAG .*node 2: 'info' field 'macs' .*{re.escape(message)}"
        ):
            TaskDAG.from_json(data)


def test_a_loop_in_a_nested_sdfg_multiplies_its_body():
    """A map body with a loop stays a nested SDFG (as a per-subcarrier solver does); DaCe's frontend writes
    s = s + a·a as two tasklets (the product, then its sum): per row 8 MACs and 8 adds, 4 rows."""
    import dace

    @dace.program
    def row_norms(A: dace.float32[4, 8], B: dace.float32[4]):
        for i in dace.map[0:4]:
            s = dace.float32(0)
            for j in range(8):
                s = s + A[i, j] * A[i, j]
            B[i] = s

    dag = extract(row_norms.to_sdfg(simplify=True))
    assert [(dag.info(v).macs, dag.info(v).ops) for v in dag.tasks] == [(32, 32)]
