"""``op``: the product as K independent outer-product tasks and a reduction."""

import dace
from dace.transformation.transformation import ExpandTransformation

from dcaccel.expansions.mmm.expansions.common import (
    Batch,
    add_flat_map,
    add_operand_buffer,
    add_task_map,
    add_transient_matrix,
    mmm_sdfg,
    sum_code,
)
from dcaccel.expansions.mmm.operands import MMMOperands, mmm_operands
from dcaccel.expansions.mmm.order import Order


def build_op_sdfg(operands: MMMOperands, task_label: str = "OP", name: str = "mmm_op") -> dace.SDFG:
    """The nested SDFG of C[N×M] = A[N×K]·B[K×M] as K outer-product tasks, in one state:

    - ``_a`` and ``_b`` are copied whole into the buffers ``_a_copy`` and ``_b_copy`` (REUSE: each
      element of column k of A is re-read M times, of row k of B N times);
    - the task map ``OP`` (k < K): task k writes the outer product A[:, k] ⊗ B[k, :] into
      ``_c_partial[k]`` (N·M accesses of each operand), row by row;
    - ``Reduce`` (one task) sums the K partial products of every element into C.

    Consumes A and B in any order (both are copied into buffers first); produces C accumulated
    (each element is the sum of K contributions, one from each task).

    With a batch (C[b] = A[b]·B[b]), the task map ranges over (b, k): one OP task per batch element and
    inner index, each with the accesses above; ``Reduce`` stays a single task over every batch element,
    and the operand buffers hold one matrix per batch element the operand is not broadcast over.
    """
    n, k, m, dtype = operands.n, operands.k, operands.m, operands.dtype
    batch = Batch(operands.batch)
    sdfg, state = mmm_sdfg(name, operands, __file__)
    a_buffer, a_copy = add_operand_buffer(state, operands, "_a", "_a_copy")
    b_buffer, b_copy = add_operand_buffer(state, operands, "_b", "_b_copy")
    partial = state.add_access(add_transient_matrix(sdfg, "_c_partial", batch.shape(k, n, m), dtype, None))
    add_task_map(
        state,
        task_label,
        batch.ranges(__k=f"0:{k}"),
        "elements",
        {"__i": f"0:{n}", "__j": f"0:{m}"},
        {
            "__a": (a_buffer, a_copy.index("__i", "__k", batch.params)),
            "__b": (b_buffer, b_copy.index("__k", "__j", batch.params)),
        },
        "__c = __a * __b",
        {"__c": (partial, batch.index("__k", "__i", "__j"))},
    )
    add_flat_map(
        state,
        "Reduce",
        batch.ranges(__i=f"0:{n}", __j=f"0:{m}"),
        {"__p": (partial, batch.index(f"0:{k}", "__i", "__j"))},
        sum_code(k, dtype),
        {"__c": (state.add_write("_c"), operands.c.index("__i", "__j", batch.params))},
    )
    return sdfg


@dace.library.expansion
class ExpandOP(ExpandTransformation):
    """Expand an MMM node into K outer-product tasks and a reduction (see :func:`build_op_sdfg`)."""

    environments = []
    consumes_a = Order.ANY
    consumes_b = Order.ANY
    produces = Order.ACCUMULATED

    @staticmethod
    def expansion(node, parent_state, parent_sdfg):
        """Validate ``node`` and build its ``op`` nested SDFG."""
        node.validate(parent_sdfg, parent_state)
        return build_op_sdfg(mmm_operands(node, parent_state), node.task_label or "OP", f"{node.label}_op")
