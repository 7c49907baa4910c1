"""The declared data orders are what the SDFGs do.

Each order is derived from the memlets alone: the map parameters around the access, in the order the
elements stream (a task map's tasks run side by side, so its per-task parameters come first and the
task index last), and the subset of the access. The matrix's row (column) index moves at the position
of the innermost parameter it depends on; a dimension accessed as a whole range per iteration moves
innermost. Row before column is row-major, column before row column-major; a plain copy into a buffer
is ``ANY``; a write with write-conflict resolution that some parameter does not index is ``ACCUMULATED``.
The derived orders are compared with the ``consumes_a``/``consumes_b``/``produces`` declarations of
every MMM shape, single and batched, and with the marks of the im2col containers.
"""

import dace
import pytest
from dace.sdfg import nodes

from dcaccel.buffers import BufferReason, buffer_reason
from dcaccel.expansions.conv import (
    ConvGeometry,
    ConvTransposeGeometry,
    build_col2im_sdfg,
    build_im2col_sdfg,
    conv_transpose_marks,
    im2col_marks,
)
from dcaccel.expansions.gemm import EinsumProduct, Operand, build_einsum_sdfg, build_gemm_sdfg
from dcaccel.expansions.mmm import MMM, MMMOperands, Order, buffer_reason_between

OPERANDS = {
    "seed": MMMOperands.contiguous(6, 25, 576),
    "general": MMMOperands.contiguous(3, 4, 5),
    "batched": MMMOperands.contiguous(3, 4, 5, batch=(2,)),
}

SEED = ConvGeometry(1, 1, 6, 1, (28, 28), (5, 5), (24, 24), (1, 1), (1, 1), (0, 0))
GROUPED = ConvGeometry(2, 4, 6, 2, (6, 7), (3, 2), (2, 3), (2, 2), (1, 2), (1, 0))
TRANSPOSED = ConvTransposeGeometry(2, 4, 6, 2, (3, 4), (3, 2), (5, 8), (2, 2), (1, 2), (1, 0))


def _state(sdfg: dace.SDFG) -> dace.SDFGState:
    (state,) = [s for s in sdfg.states() if any(isinstance(n, nodes.MapEntry) for n in s.nodes())]
    return state


def _edge(state: dace.SDFGState, data: str, consumer: bool):
    """The edge of the one step reading (``consumer``) or writing ``data`` with a map or a copy."""
    access = [n for n in state.data_nodes() if n.data == data]
    edges = [e for n in access for e in (state.out_edges(n) if consumer else state.in_edges(n))]
    (edge,) = [e for e in edges if not isinstance(e.dst if consumer else e.src, nodes.LibraryNode)]
    return edge


def derived_order(state: dace.SDFGState, data: str, consumer: bool) -> Order:
    """The order in which the one step reading (or writing) the matrix ``data`` accesses it (module docstring)."""
    edge = _edge(state, data, consumer)
    path = state.memlet_path(edge)
    if consumer:
        scopes, memlet = [e.dst for e in path[:-1]], path[-1].data
    else:
        scopes, memlet = [e.src for e in reversed(path[1:])], path[0].data
    maps = [scope.map for scope in scopes if isinstance(scope, (nodes.MapEntry, nodes.MapExit))]
    if not maps:
        return Order.ANY
    params = [p for m in reversed(maps) for p in m.params] if len(maps) > 1 else list(maps[0].params)
    indexed = set()

    def position(begin, end) -> int:
        names = {str(s) for s in getattr(begin, "free_symbols", ())}
        indexed.update(names)
        if dace.symbolic.simplify(end - begin) != 0:
            return len(params)
        return max((params.index(p) for p in names if p in params), default=-1)

    ranges = memlet.subset.ranges
    for begin, end, _ in ranges[:-2]:
        position(begin, end)
    row, column = position(*ranges[-2][:2]), position(*ranges[-1][:2])
    if memlet.wcr is not None and not set(params) <= indexed:
        return Order.ACCUMULATED
    assert row != column, f"{data}: rows and columns move together"
    return Order.ROW if row < column else Order.COLUMN


@pytest.mark.parametrize("operands", OPERANDS.values(), ids=OPERANDS.keys())
@pytest.mark.parametrize("shape", MMM.implementations)
def test_mmm_declared_orders_are_the_memlets(shape, operands):
    expansion = MMM.implementations[shape]
    state = _state(expansion.build(operands, shape.upper(), f"mmm_{shape}"))
    derived = (derived_order(state, "_a", True), derived_order(state, "_b", True), derived_order(state, "_c", False))
    assert derived == (expansion.consumes_a, expansion.consumes_b, expansion.produces)


@pytest.mark.parametrize(
    "geometry, has_bias", [(SEED, True), (SEED, False), (GROUPED, True)], ids=["seed", "no-bias", "grouped"]
)
@pytest.mark.parametrize("shape", MMM.implementations)
def test_im2col_marks_follow_the_derived_orders(shape, geometry, has_bias):
    state = _state(build_im2col_sdfg(geometry, dace.float32, shape, has_bias))
    product = _state(MMM.implementations[shape].build(OPERANDS["general"], shape.upper(), "mmm"))
    x_col = derived_order(state, "X_col", consumer=False)
    y_col_read = derived_order(state, "Y_col", consumer=True)
    assert (derived_order(state, "W_col", consumer=False), x_col, y_col_read) == (Order.ROW, Order.COLUMN, Order.ROW)
    marks = im2col_marks(shape, has_bias)
    assert marks["X_col"] is buffer_reason_between(x_col, derived_order(product, "_b", consumer=True))
    y_col = buffer_reason_between(derived_order(product, "_c", consumer=False), y_col_read)
    assert marks["Y_col"] is (y_col if has_bias else BufferReason.LAYER_OUTPUT)


@pytest.mark.parametrize("shape", MMM.implementations)
def test_gemm_marks_follow_the_derived_orders(shape):
    sdfg = build_gemm_sdfg(3, 4, 5, dace.float32, shape, trans_a=True, trans_b=True, c_shape=(5,))
    state = _state(sdfg)
    product = _state(MMM.implementations[shape].build(OPERANDS["general"], shape.upper(), "mmm"))
    transposed = [derived_order(state, name, consumer=False) for name in ("A_t", "B_t")]
    assert transposed == [Order.ROW, Order.ROW]
    y_mm = buffer_reason_between(derived_order(product, "_c", False), derived_order(state, "Y_mm", True))
    assert buffer_reason(sdfg.arrays["Y_mm"]) is y_mm


def _mmm_state(sdfg: dace.SDFG) -> dace.SDFGState:
    """The state holding the MMM nodes (col2im has an initialisation state before it)."""
    (state,) = [s for s in sdfg.states() if any(isinstance(n, MMM) for n in s.nodes())]
    return state


@pytest.mark.parametrize("shape", MMM.implementations)
def test_col2im_marks_follow_the_derived_orders(shape):
    state = _mmm_state(build_col2im_sdfg(TRANSPOSED, dace.float32, shape, has_bias=True))
    product = _state(MMM.implementations[shape].build(OPERANDS["general"], shape.upper(), "mmm"))
    x_col = derived_order(state, "X_col", consumer=False)
    y_col_read = derived_order(state, "Y_col", consumer=True)
    assert (derived_order(state, "W_col", consumer=False), x_col, y_col_read) == (Order.ROW, Order.ROW, Order.ROW)
    marks = conv_transpose_marks(shape)
    assert marks["X_col"] is buffer_reason_between(x_col, derived_order(product, "_b", consumer=True))
    assert marks["Y_col"] is buffer_reason_between(derived_order(product, "_c", consumer=False), y_col_read)


@pytest.mark.parametrize("shape", MMM.implementations)
def test_einsum_transposes_are_written_row_by_row(shape):
    a, b, y = Operand("Inputs__0", (2, 4, 3)), Operand("Inputs__1", (2, 5, 4)), Operand("Output", (2, 3, 5))
    sdfg = build_einsum_sdfg(a, b, y, EinsumProduct(True, True), dace.float32, shape, "einsum")
    state = _mmm_state(sdfg)
    expansion = MMM.implementations[shape]
    for name, consumed in (("Inputs__0_t", expansion.consumes_a), ("Inputs__1_t", expansion.consumes_b)):
        assert derived_order(state, name, consumer=False) is Order.ROW
        assert buffer_reason(sdfg.arrays[name]) is buffer_reason_between(Order.ROW, consumed)


def test_an_accumulating_write_is_derived_as_accumulated():
    sdfg = dace.SDFG("accumulate")
    sdfg.add_array("P", (4, 3, 5), dace.float32)
    sdfg.add_array("C", (3, 5), dace.float32)
    state = sdfg.add_state()
    state.add_mapped_tasklet(
        "Reduce",
        {"__k": "0:4", "__i": "0:3", "__j": "0:5"},
        {"__p": dace.Memlet("P[__k, __i, __j]")},
        "__c = __p",
        {"__c": dace.Memlet("C[__i, __j]", wcr="lambda a, b: a + b")},
        external_edges=True,
    )
    assert derived_order(state, "C", consumer=False) is Order.ACCUMULATED
    assert derived_order(state, "P", consumer=True) is Order.ROW
