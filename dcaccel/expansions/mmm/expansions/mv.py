"""``mv``: the product as M independent matrix-vector tasks, one per column of C."""

import dace
from dace.transformation.transformation import ExpandTransformation

from dcaccel.expansions.mmm.expansions.common import (
    Batch,
    add_flat_map,
    add_operand_buffer,
    add_task_map,
    add_transient_matrix,
    dot_product_code,
    mmm_sdfg,
)
from dcaccel.expansions.mmm.operands import MMMOperands, mmm_operands
from dcaccel.expansions.mmm.order import Order


def build_mv_sdfg(operands: MMMOperands, task_label: str = "MV", name: str = "mmm_mv") -> dace.SDFG:
    """The nested SDFG of C[N×M] = A[N×K]·B[K×M] as M matrix-vector tasks, in one state:

    - ``_b`` is copied whole into the buffer ``_b_copy`` (REUSE: each column is re-read N times);
    - ``BcastA`` (one task) streams A row by row into ``_a_stream``, which every task reads whole;
    - the task map ``MV`` (j < M): task j computes column j, ``_c_columns[i, j] = A[i, :]·B[:, j]``
      for i < N (N·K accesses of each operand);
    - ``Gather`` (one task) writes C row by row: all tasks emit row i at the same time.

    Consumes A row by row, B in any order (it is copied into a buffer first); produces C row-major.

    With a batch (C[b] = A[b]·B[b]), the task map ranges over (b, j): one MV task per batch element and
    column, each with the accesses above; ``BcastA`` and ``Gather`` stay single tasks, over every batch
    element in turn, and ``_b_copy`` holds one B per batch element B is not broadcast over.
    """
    n, k, m, dtype = operands.n, operands.k, operands.m, operands.dtype
    batch = Batch(operands.batch)
    sdfg, state = mmm_sdfg(name, operands, __file__)
    b_buffer, b_copy = add_operand_buffer(state, operands, "_b", "_b_copy")
    a_stream = state.add_access(add_transient_matrix(sdfg, "_a_stream", batch.shape(n, k), dtype, None))
    columns = state.add_access(add_transient_matrix(sdfg, "_c_columns", batch.shape(n, m), dtype, None))
    add_flat_map(
        state,
        "BcastA",
        batch.ranges(__i=f"0:{n}", __k=f"0:{k}"),
        {"__in": (state.add_read("_a"), operands.a.index("__i", "__k", batch.params))},
        "__out = __in",
        {"__out": (a_stream, batch.index("__i", "__k"))},
    )
    add_task_map(
        state,
        task_label,
        batch.ranges(__j=f"0:{m}"),
        "rows",
        {"__i": f"0:{n}"},
        {
            "__a": (a_stream, batch.index("__i", f"0:{k}")),
            "__b": (b_buffer, b_copy.index(f"0:{k}", "__j", batch.params)),
        },
        dot_product_code(k, dtype),
        {"__c": (columns, batch.index("__i", "__j"))},
    )
    add_flat_map(
        state,
        "Gather",
        batch.ranges(__i=f"0:{n}", __j=f"0:{m}"),
        {"__in": (columns, batch.index("__i", "__j"))},
        "__out = __in",
        {"__out": (state.add_write("_c"), operands.c.index("__i", "__j", batch.params))},
    )
    return sdfg


@dace.library.expansion
class ExpandMV(ExpandTransformation):
    """Expand an MMM node into M matrix-vector tasks (see :func:`build_mv_sdfg`)."""

    environments = []
    consumes_a = Order.ROW
    consumes_b = Order.ANY
    produces = Order.ROW

    @staticmethod
    def expansion(node, parent_state, parent_sdfg):
        """Validate ``node`` and build its ``mv`` nested SDFG."""
        node.validate(parent_sdfg, parent_state)
        return build_mv_sdfg(mmm_operands(node, parent_state), node.task_label or "MV", f"{node.label}_mv")
