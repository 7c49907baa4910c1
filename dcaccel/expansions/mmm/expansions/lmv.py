"""``lmv``: the product as N independent left matrix-vector tasks, one per row of C."""

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


def build_lmv_sdfg(operands: MMMOperands, task_label: str = "LMV", name: str = "mmm_lmv") -> dace.SDFG:
    """The nested SDFG of C[N×M] = A[N×K]·B[K×M] as N left matrix-vector tasks, in one state:

    - ``_a`` is copied whole into the buffer ``_a_copy`` (REUSE: row i is re-read M times by task i);
    - ``BcastB`` (one task) streams B row by row (k-major) into ``_b_stream``, which every task reads whole;
    - the task map ``LMV`` (i < N): task i computes row i, ``_c_rows[i, j] = A[i, :]·B[:, j]`` for
      j < M (K·M accesses of each operand);
    - ``Gather`` (one task) receives element j of every row at the same time and writes C column by column.

    Consumes A in any order (it is copied into a buffer first), B row by row; produces C column-major.

    With a batch (C[b] = A[b]·B[b]), the task map ranges over (b, i): one LMV task per batch element and
    row, each with the accesses above; ``BcastB`` and ``Gather`` stay single tasks, over every batch
    element in turn (C column-major within each batch element), and ``_a_copy`` holds one A per batch
    element A is not broadcast over.
    """
    n, k, m, dtype = operands.n, operands.k, operands.m, operands.dtype
    batch = Batch(operands.batch)
    sdfg, state = mmm_sdfg(name, operands, __file__)
    a_buffer, a_copy = add_operand_buffer(state, operands, "_a", "_a_copy")
    b_stream = state.add_access(add_transient_matrix(sdfg, "_b_stream", batch.shape(k, m), dtype, None))
    rows = state.add_access(add_transient_matrix(sdfg, "_c_rows", batch.shape(n, m), dtype, None))
    add_flat_map(
        state,
        "BcastB",
        batch.ranges(__k=f"0:{k}", __j=f"0:{m}"),
        {"__in": (state.add_read("_b"), operands.b.index("__k", "__j", batch.params))},
        "__out = __in",
        {"__out": (b_stream, batch.index("__k", "__j"))},
    )
    add_task_map(
        state,
        task_label,
        batch.ranges(__i=f"0:{n}"),
        "columns",
        {"__j": f"0:{m}"},
        {
            "__a": (a_buffer, a_copy.index("__i", f"0:{k}", batch.params)),
            "__b": (b_stream, batch.index(f"0:{k}", "__j")),
        },
        dot_product_code(k, dtype),
        {"__c": (rows, batch.index("__i", "__j"))},
    )
    add_flat_map(
        state,
        "Gather",
        batch.ranges(__j=f"0:{m}", __i=f"0:{n}"),
        {"__in": (rows, batch.index("__i", "__j"))},
        "__out = __in",
        {"__out": (state.add_write("_c"), operands.c.index("__i", "__j", batch.params))},
    )
    return sdfg


@dace.library.expansion
class ExpandLMV(ExpandTransformation):
    """Expand an MMM node into N left matrix-vector tasks (see :func:`build_lmv_sdfg`)."""

    environments = []
    consumes_a = Order.ANY
    consumes_b = Order.ROW
    produces = Order.COLUMN

    @staticmethod
    def expansion(node, parent_state, parent_sdfg):
        """Validate ``node`` and build its ``lmv`` nested SDFG."""
        node.validate(parent_sdfg, parent_state)
        return build_lmv_sdfg(mmm_operands(node, parent_state), node.task_label or "LMV", f"{node.label}_lmv")
