"""The MMM node and its shapes mv / op / lmv, single and batched: structure (no compile) and numbers
(one compile for every case)."""

import math

import dace
import numpy as np
import pytest
import sympy

from dcaccel.buffers import BufferReason, buffer_reason
from dcaccel.dag import metrics
from dcaccel.dag.extract import extract
from dcaccel.dag.symbolic import symbolic_metrics
from dcaccel.errors import DcaccelError
from dcaccel.expansions.mmm import (
    MMM,
    MMMOperands,
    Order,
    buffer_reason_between,
    build_lmv_sdfg,
    build_mv_sdfg,
    build_op_sdfg,
    mmm_operands,
)
from dcaccel.transforms.checks import assert_fully_lowered
from dcaccel.transforms.lower import expand_all, simplify

BUILDERS = {"mv": build_mv_sdfg, "op": build_op_sdfg, "lmv": build_lmv_sdfg}
# (N, K, M): the seed conv's product, degenerate sizes, and a general one
SHAPES = [(6, 25, 576), (1, 4, 5), (3, 4, 1), (3, 1, 5), (1, 1, 1), (4, 3, 5)]

# Per shape: the task map's label and its task count as a function of (N, K, M), the single tasks,
# the operand buffers, and the accesses of one task to each operand.
EXPECTED = {
    "mv": {
        "task_map": "MV",
        "tasks": lambda n, k, m: m,
        "single_tasks": {"BcastA", "Gather"},
        "buffers": {"_b_copy"},
        "per_task": lambda n, k, m: {"_a_stream": n * k, "_b_copy": n * k},
    },
    "op": {
        "task_map": "OP",
        "tasks": lambda n, k, m: k,
        "single_tasks": {"Reduce"},
        "buffers": {"_a_copy", "_b_copy"},
        "per_task": lambda n, k, m: {"_a_copy": n * m, "_b_copy": n * m},
    },
    "lmv": {
        "task_map": "LMV",
        "tasks": lambda n, k, m: n,
        "single_tasks": {"BcastB", "Gather"},
        "buffers": {"_a_copy"},
        "per_task": lambda n, k, m: {"_a_copy": k * m, "_b_stream": k * m},
    },
}


def _top_level_maps(state: dace.SDFGState) -> dict[str, dace.nodes.MapEntry]:
    return {n.map.label: n for n in state.nodes() if isinstance(n, dace.nodes.MapEntry) and state.entry_node(n) is None}


def _is_task_map(state: dace.SDFGState, entry: dace.nodes.MapEntry) -> bool:
    return any(isinstance(n, dace.nodes.MapEntry) for n in state.scope_children()[entry])


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("implementation", sorted(BUILDERS))
def test_structure_follows_contract_3(implementation, shape):
    n, k, m = shape
    expected = EXPECTED[implementation]
    sdfg = BUILDERS[implementation](MMMOperands.contiguous(n, k, m))
    (state,) = sdfg.states()
    maps = _top_level_maps(state)
    assert set(maps) == {expected["task_map"], *expected["single_tasks"]}
    assert {label for label, entry in maps.items() if _is_task_map(state, entry)} == {expected["task_map"]}
    task_map = maps[expected["task_map"]]
    assert task_map.map.range.num_elements() == expected["tasks"](n, k, m)
    buffers = {name: buffer_reason(desc) for name, desc in sdfg.arrays.items() if desc.transient}
    assert {name for name, reason in buffers.items() if reason is not None} == expected["buffers"]
    assert all(buffers[name] is BufferReason.REUSE for name in expected["buffers"])
    (body,) = [child for child in state.scope_children()[task_map] if isinstance(child, dace.nodes.MapEntry)]
    per_task = {e.data.data: e.data.volume for e in state.in_edges(body)}
    assert per_task == expected["per_task"](n, k, m)


@pytest.mark.parametrize("implementation", sorted(BUILDERS))
def test_operand_buffers_are_copies_not_tasks(implementation):
    n, k, m = 3, 4, 5
    sdfg = BUILDERS[implementation](MMMOperands.contiguous(n, k, m))
    (state,) = sdfg.states()
    copies = {
        (e.src.data, e.dst.data): e.data.volume
        for e in state.edges()
        if isinstance(e.src, dace.nodes.AccessNode) and isinstance(e.dst, dace.nodes.AccessNode)
    }
    expected = {"mv": {("_b", "_b_copy"): k * m}, "op": {("_a", "_a_copy"): n * k, ("_b", "_b_copy"): k * m}}
    assert copies == expected.get(implementation, {("_a", "_a_copy"): n * k})


@pytest.mark.parametrize("implementation", sorted(BUILDERS))
def test_task_label_names_the_task_map(implementation):
    sdfg, state, node = _mmm_state((3, 4), (4, 5), (3, 5))
    node.task_label = "Projection"
    node.implementation = implementation
    expand_all(sdfg, {})
    simplify(sdfg)
    labels = {n.map.label for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.MapEntry)}
    assert "Projection" in labels
    assert not labels & {"MV", "OP", "LMV"}


def test_symbolic_sizes_give_symbolic_volumes():
    n, k, m = (dace.symbol(s) for s in "NKM")
    sdfg = build_mv_sdfg(MMMOperands.contiguous(n, k, m))
    (state,) = sdfg.states()
    task_map = _top_level_maps(state)["MV"]
    assert task_map.map.range.num_elements() == m
    (body,) = [c for c in state.scope_children()[task_map] if isinstance(c, dace.nodes.MapEntry)]
    assert {e.data.volume for e in state.in_edges(body)} == {n * k}


# Batches of the batched structure tests: one element (explicit), several, two batch dimensions.
BATCHES = [(1,), (3,), (2, 3)]


def _dag(sdfg):
    """The task DAG of a builder's SDFG (its operands are the program inputs and output), checked."""
    dag = extract(sdfg)
    dag.validate()
    return dag


def _task_volumes(dag, label_prefix: str) -> set[tuple]:
    """The distinct (in-volumes, out-volumes) of the tasks of a task map, by the prefix of their labels."""
    tasks = [t for t in dag.tasks if dag.node(t).label.rstrip("0123456789") == label_prefix]
    return {
        (
            tuple(sorted(dag.volume(p, t) for p in dag.predecessors(t))),
            tuple(dag.volume(t, q) for q in dag.successors(t)),
        )
        for t in tasks
    }


@pytest.mark.parametrize("batch", BATCHES, ids=lambda b: "x".join(map(str, b)))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("implementation", sorted(BUILDERS))
def test_batched_structure_is_the_single_one_per_batch_element(implementation, shape, batch):
    """A task per (batch element, task index) with the accesses of the single product, the other tasks
    once over the whole batch; the DAG is valid and its work and I/O are the batch size times the single
    product's."""
    n, k, m = shape
    expected = EXPECTED[implementation]
    single = BUILDERS[implementation](MMMOperands.contiguous(n, k, m))
    batched = BUILDERS[implementation](MMMOperands.contiguous(n, k, m, batch=batch))
    (state,) = batched.states()
    maps = _top_level_maps(state)
    assert set(maps) == {expected["task_map"], *expected["single_tasks"]}
    task_map = maps[expected["task_map"]]
    assert task_map.map.params[: len(batch)] == [f"__b{d}" for d in range(len(batch))]
    assert task_map.map.range.num_elements() == math.prod(batch) * expected["tasks"](n, k, m)
    (body,) = [c for c in state.scope_children()[task_map] if isinstance(c, dace.nodes.MapEntry)]
    assert {e.data.data: e.data.volume for e in state.in_edges(body)} == expected["per_task"](n, k, m)
    for name in expected["buffers"]:
        assert batched.arrays[name].shape[: len(batch)] == batch
        assert batched.arrays[name].shape[len(batch) :] == single.arrays[name].shape
    single_dag, batched_dag = _dag(single), _dag(batched)
    size = math.prod(batch)
    assert len(batched_dag.tasks) == size * expected["tasks"](n, k, m) + len(expected["single_tasks"])
    assert _task_volumes(batched_dag, expected["task_map"]) == _task_volumes(single_dag, expected["task_map"])
    assert metrics.work(batched_dag) == size * metrics.work(single_dag)
    assert metrics.io_volume(batched_dag) == size * metrics.io_volume(single_dag)


@pytest.mark.parametrize("implementation", sorted(BUILDERS))
def test_symbolic_batch_multiplies_the_closed_form(implementation):
    n, k, m, b = (dace.symbol(s) for s in "NKMB")
    single = symbolic_metrics(BUILDERS[implementation](MMMOperands.contiguous(n, k, m)))
    batched = symbolic_metrics(BUILDERS[implementation](MMMOperands.contiguous(n, k, m, batch=(b,))))
    batch = sympy.Symbol("B")
    task_map = single.tasks - len(EXPECTED[implementation]["single_tasks"])
    assert sympy.expand(batched.tasks - single.tasks - (batch - 1) * task_map) == 0
    assert sympy.expand(batched.work - batch * single.work) == 0
    assert sympy.expand(batched.io_volume - batch * single.io_volume) == 0


@pytest.mark.parametrize(
    "a_shape, b_shape, c_shape, axes",
    [
        # A broadcast over the batch (a plain matrix), B and C batched
        ((3, 4), (5, 4, 2), (5, 3, 2), {"_a": (None,), "_b": (0,), "_c": (0,)}),
        # numpy broadcasting of two batch dimensions: A over the second, B over the first
        ((2, 1, 3, 4), (5, 4, 2), (2, 5, 3, 2), {"_a": (0, None), "_b": (None, 0), "_c": (0, 1)}),
        # a batch of matrix-vector products (B a column vector, C a batch of columns)
        ((5, 3, 4), (4,), (5, 3), {"_a": (0,), "_b": (None,), "_c": (0,)}),
        # a leading dimension of size 1 is a window, not a batch
        ((1, 3, 4), (1, 4, 2), (1, 3, 2), {"_a": (), "_b": (), "_c": ()}),
    ],
)
def test_batch_axes_follow_numpy_broadcasting(a_shape, b_shape, c_shape, axes):
    sdfg, state, node = _mmm_state(a_shape, b_shape, c_shape)
    operands = mmm_operands(node, state)
    assert {c: operands.view(c).batch_axes for c in ("_a", "_b", "_c")} == axes
    assert operands.batch == tuple(c_shape[axis] for axis in axes["_c"])
    assert (operands.n, operands.k, operands.m) == (3, 4, 1 if len(b_shape) == 1 else 2)


def test_broadcast_operand_is_buffered_once():
    """The operand buffer holds one matrix per batch element the operand is not broadcast over."""
    sdfg, state, node = _mmm_state((2, 1, 3, 4), (5, 4, 2), (2, 5, 3, 2))
    expanded = build_op_sdfg(mmm_operands(node, state))
    assert expanded.arrays["_a_copy"].shape == (2, 3, 4)
    assert expanded.arrays["_b_copy"].shape == (5, 4, 2)
    (op_state,) = expanded.states()
    assert _top_level_maps(op_state)["OP"].map.range.num_elements() == 2 * 5 * 4


@pytest.mark.parametrize(
    "produced, consumed, reason",
    [
        (Order.COLUMN, Order.ANY, None),
        (Order.COLUMN, Order.COLUMN, None),
        (Order.COLUMN, Order.ROW, BufferReason.REORDER),
        (Order.ROW, Order.ROW, None),
        (Order.ROW, Order.COLUMN, BufferReason.REORDER),
        (Order.ACCUMULATED, Order.ROW, BufferReason.ACCUMULATE),
        (Order.ACCUMULATED, Order.ACCUMULATED, BufferReason.ACCUMULATE),
        (Order.ACCUMULATED, Order.ANY, None),
    ],
)
def test_buffer_reason_between(produced, consumed, reason):
    assert buffer_reason_between(produced, consumed) is reason


def _mmm_state(a_shape, b_shape, c_shape, a_subset=None, b_subset=None, c_subset=None):
    sdfg = dace.SDFG("bad_mmm")
    for name, shape in (("A", a_shape), ("B", b_shape), ("C", c_shape)):
        sdfg.add_array(name, shape, dace.float32)
    state = sdfg.add_state()
    node = MMM("mmm_under_test")
    state.add_node(node)
    state.add_edge(state.add_read("A"), None, node, "_a", dace.Memlet(data="A", subset=a_subset or _full(a_shape)))
    state.add_edge(state.add_read("B"), None, node, "_b", dace.Memlet(data="B", subset=b_subset or _full(b_shape)))
    state.add_edge(node, "_c", state.add_write("C"), None, dace.Memlet(data="C", subset=c_subset or _full(c_shape)))
    return sdfg, state, node


def _full(shape) -> str:
    return ", ".join(f"0:{s}" for s in shape)


@pytest.mark.parametrize(
    "shapes, subsets, message",
    [
        (((3, 4), (5, 6), (3, 6)), (None, None, None), "inner dimensions differ (_a 3x4, _b 5x6, _c 3x6)"),
        (((3, 4), (4, 6), (3, 5)), (None, None, None), "output does not match the operands (_a 3x4, _b 4x6, _c 3x5)"),
        (
            ((2, 3, 4), (4, 6), (3, 6)),
            (None, None, None),
            "operand _a (A) must be a matrix, got subset sizes (2, 3, 4)",
        ),
        (((2, 3, 4), (4, 6), (3, 6)), ("1, 0:3, 0:4", None, None), None),
        (
            ((2, 3, 4), (4, 6), (3, 3, 6)),
            (None, None, None),
            "operand _a (A) must be a matrix of a batch (3,), got subset sizes (2, 3, 4)",
        ),
        (
            ((3, 3, 4), (2, 4, 6), (3, 3, 6)),
            (None, None, None),
            "operand _b (B) must be a matrix of a batch (3,), got subset sizes (2, 4, 6)",
        ),
        (((3, 3, 4), (1, 4, 6), (3, 3, 6)), (None, None, None), None),
    ],
)
def test_validate_names_node_operand_and_shapes(shapes, subsets, message):
    sdfg, state, node = _mmm_state(*shapes, *subsets)
    if message is None:
        node.validate(sdfg, state)
        return
    with pytest.raises(DcaccelError, match="MMM node 'mmm_under_test'") as error:
        node.validate(sdfg, state)
    assert message in str(error.value)


def test_validate_reports_unconnected_output():
    sdfg = dace.SDFG("unconnected")
    sdfg.add_array("A", (2, 2), dace.float32)
    state = sdfg.add_state()
    node = MMM("lonely")
    state.add_node(node)
    state.add_edge(state.add_read("A"), None, node, "_a", dace.Memlet("A[0:2, 0:2]"))
    with pytest.raises(DcaccelError, match="MMM node 'lonely': connector.s. _b, _c not connected"):
        node.validate(sdfg, state)


# One SDFG holds one MMM node per (shape, case): a single compile checks them all. "sliced" multiplies
# slices of 3-D containers (one group / batch element), as the convolution does; the batched cases have a
# batch of symbolic size B1 = 1 or B3 = 3, or broadcast (numpy rules), or multiply a batch by a vector.
COMPILED_SIZES = [(1, 4, 5), (3, 4, 1), (3, 1, 5), (1, 1, 1), (4, 3, 5)]
BATCH_SIZES = {"B1": 1, "B3": 3}
B1, B3 = (dace.symbol(name) for name in BATCH_SIZES)
# case: (A shape, B shape, C shape, subsets of A, B, C or None for the whole containers)
COMPILED_CASES = {
    **{f"{n}x{k}x{m}": ((n, k), (k, m), (n, m), None) for n, k, m in COMPILED_SIZES},
    "sliced": ((2, 2, 3), (2, 3, 4), (2, 2, 4), ("1, 0:2, 0:3", "1, 0:3, 0:4", "1, 0:2, 0:4")),
    **{f"batch1_{n}x{k}x{m}": ((B1, n, k), (B1, k, m), (B1, n, m), None) for n, k, m in COMPILED_SIZES},
    **{f"batch3_{n}x{k}x{m}": ((B3, n, k), (B3, k, m), (B3, n, m), None) for n, k, m in COMPILED_SIZES},
    "broadcast_a": ((3, 4), (B3, 4, 2), (B3, 3, 2), None),
    "broadcast_4d": ((2, 1, 3, 4), (B3, 4, 2), (2, B3, 3, 2), None),
    "batched_vector": ((B3, 3, 4), (4,), (B3, 3), None),
}


def _products_sdfg():
    sdfg = dace.SDFG("mmm_products")
    state = sdfg.add_state()
    for implementation in sorted(BUILDERS):
        for case, (*shapes, subsets) in COMPILED_CASES.items():
            names = [f"{operand}_{implementation}_{case}" for operand in "ABC"]
            for name, shape in zip(names, shapes, strict=True):
                sdfg.add_array(name, shape, dace.float32)
            node = MMM(f"mmm_{implementation}_{case}")
            node.implementation = implementation
            state.add_node(node)
            a, b, c = (
                dace.Memlet(f"{name}[{subset}]") if subset else dace.Memlet.from_array(name, sdfg.arrays[name])
                for name, subset in zip(names, subsets or (None,) * 3, strict=True)
            )
            state.add_edge(state.add_read(names[0]), None, node, "_a", a)
            state.add_edge(state.add_read(names[1]), None, node, "_b", b)
            state.add_edge(node, "_c", state.add_write(names[2]), None, c)
    return sdfg


@pytest.fixture(scope="module")
def products():
    """The lowered product SDFG, compiled once, with its outputs on seeded random inputs."""
    sdfg = _products_sdfg()
    expand_all(sdfg, {})
    simplify(sdfg)
    assert_fully_lowered(sdfg)
    rng = np.random.default_rng(0)
    arguments = {}
    for name, desc in sdfg.arrays.items():
        if desc.transient:
            continue
        shape = tuple(int(dace.symbolic.evaluate(size, BATCH_SIZES)) for size in desc.shape)
        outputs = name.startswith("C_")
        arguments[name] = np.zeros(shape, np.float32) if outputs else rng.standard_normal(shape).astype(np.float32)
    inputs = {name: value.copy() for name, value in arguments.items()}
    sdfg.compile()(**arguments, **BATCH_SIZES)
    return inputs, arguments


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(set(COMPILED_CASES) - {"sliced"}))
@pytest.mark.parametrize("implementation", sorted(BUILDERS))
def test_product_matches_numpy(products, implementation, case):
    inputs, outputs = products
    a, b = inputs[f"A_{implementation}_{case}"], inputs[f"B_{implementation}_{case}"]
    np.testing.assert_allclose(outputs[f"C_{implementation}_{case}"], np.matmul(a, b), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("implementation", sorted(BUILDERS))
def test_product_of_slices_matches_numpy(products, implementation):
    inputs, outputs = products
    a, b = inputs[f"A_{implementation}_sliced"], inputs[f"B_{implementation}_sliced"]
    c = outputs[f"C_{implementation}_sliced"]
    np.testing.assert_allclose(c[1], a[1] @ b[1], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(c[0], 0)
