"""The MMM node and its shapes mv / op / lmv: structure (no compile) and numbers (one compile)."""

import dace
import numpy as np
import pytest

from dcaccel.buffers import BufferReason, buffer_reason
from dcaccel.errors import DcaccelError
from dcaccel.expansions.mmm import (
    MMM,
    ExpandLMV,
    ExpandMV,
    ExpandOP,
    MMMOperands,
    Order,
    buffer_reason_between,
    build_lmv_sdfg,
    build_mv_sdfg,
    build_op_sdfg,
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


def test_declared_orders():
    assert (ExpandMV.consumes_a, ExpandMV.consumes_b, ExpandMV.produces) == (Order.ROW, Order.ANY, Order.ROW)
    assert (ExpandOP.consumes_a, ExpandOP.consumes_b, ExpandOP.produces) == (Order.ANY, Order.ANY, Order.ACCUMULATED)
    assert (ExpandLMV.consumes_a, ExpandLMV.consumes_b, ExpandLMV.produces) == (Order.ANY, Order.ROW, Order.COLUMN)
    assert MMM.implementations == {"mv": ExpandMV, "op": ExpandOP, "lmv": ExpandLMV}


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


# One SDFG holds one MMM node per (shape, size): a single compile checks them all. The last size
# multiplies slices of 3-D containers (one group / batch element), as the conv and MatMul do.
COMPILED_SIZES = [(1, 4, 5), (3, 4, 1), (3, 1, 5), (1, 1, 1), (4, 3, 5)]
SLICED = (2, 3, 4)  # A[1] of [2, N, K], B[1] of [2, K, M], C[1] of [2, N, M] with (N, K, M) = SLICED


def _products_sdfg():
    sdfg = dace.SDFG("mmm_products")
    state = sdfg.add_state()
    for implementation in sorted(BUILDERS):
        for index, (n, k, m) in enumerate(COMPILED_SIZES):
            names = [f"{operand}_{implementation}_{index}" for operand in "ABC"]
            for name, shape in zip(names, ((n, k), (k, m), (n, m)), strict=True):
                sdfg.add_array(name, shape, dace.float32)
            node = MMM(f"mmm_{implementation}_{index}")
            node.implementation = implementation
            state.add_node(node)
            a, b, c = names
            state.add_edge(state.add_read(a), None, node, "_a", dace.Memlet.from_array(a, sdfg.arrays[a]))
            state.add_edge(state.add_read(b), None, node, "_b", dace.Memlet.from_array(b, sdfg.arrays[b]))
            state.add_edge(node, "_c", state.add_write(c), None, dace.Memlet.from_array(c, sdfg.arrays[c]))
        n, k, m = SLICED
        names = [f"{operand}_{implementation}_sliced" for operand in "ABC"]
        for name, shape in zip(names, ((2, n, k), (2, k, m), (2, n, m)), strict=True):
            sdfg.add_array(name, shape, dace.float32)
        node = MMM(f"mmm_{implementation}_sliced")
        node.implementation = implementation
        state.add_node(node)
        a, b, c = names
        state.add_edge(state.add_read(a), None, node, "_a", dace.Memlet(f"{a}[1, 0:{n}, 0:{k}]"))
        state.add_edge(state.add_read(b), None, node, "_b", dace.Memlet(f"{b}[1, 0:{k}, 0:{m}]"))
        state.add_edge(node, "_c", state.add_write(c), None, dace.Memlet(f"{c}[1, 0:{n}, 0:{m}]"))
    return sdfg


@pytest.fixture(scope="module")
def products():
    """The lowered product SDFG, compiled once, with its outputs on seeded random inputs."""
    sdfg = _products_sdfg()
    expand_all(sdfg, {})
    simplify(sdfg)
    assert_fully_lowered(sdfg)
    rng = np.random.default_rng(0)
    arguments = {
        name: rng.standard_normal(desc.shape).astype(np.float32)
        if not name.startswith("C_")
        else np.zeros(desc.shape, np.float32)
        for name, desc in sdfg.arrays.items()
        if not desc.transient
    }
    inputs = {name: value.copy() for name, value in arguments.items()}
    sdfg.compile()(**arguments)
    return inputs, arguments


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(COMPILED_SIZES)), ids=["x".join(map(str, s)) for s in COMPILED_SIZES])
@pytest.mark.parametrize("implementation", sorted(BUILDERS))
def test_product_matches_numpy(products, implementation, index):
    inputs, outputs = products
    a, b = inputs[f"A_{implementation}_{index}"], inputs[f"B_{implementation}_{index}"]
    np.testing.assert_allclose(outputs[f"C_{implementation}_{index}"], a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("implementation", sorted(BUILDERS))
def test_product_of_slices_matches_numpy(products, implementation):
    inputs, outputs = products
    a, b = inputs[f"A_{implementation}_sliced"], inputs[f"B_{implementation}_sliced"]
    c = outputs[f"C_{implementation}_sliced"]
    np.testing.assert_allclose(c[1], a[1] @ b[1], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(c[0], 0)
