"""``op``: the product as K independent outer-product tasks and a reduction, column by column.

Why column by column: the seed's table counts C as a buffer between the reduction and the bias add
(I/O 222,936 for ``conv-seed``). If the outer products and the reduction ran row by row, C would be
produced row-major, the order ``AddBias`` reads it: it would stream and be no buffer (I/O 216,024,
makespans 190,658 / 104,258 at 16 / 128 PEs under the reference edge volumes, instead of the seed's
194,113 / 107,713). Accumulating into C with write-conflict resolution over k (C written K times)
would make C a buffer, but the reduction would then write K·N·M elements into it and read them back,
far from the seed's volumes. Producing C column by column is what makes C a buffer with the seed's
volumes (N·M in, N·M out, a REORDER buffer before a row-major consumer), and it is what this shape
does: the task DAG is the seed's DAG #2 edge for edge.
"""

import dace
import dace.library
from dace import Memlet

from dcaccel.expansions.mmm.expansions.common import Batch, MMMExpansion, mmm_builder, operand_buffer, sum_code
from dcaccel.expansions.mmm.operands import MMMOperands
from dcaccel.expansions.mmm.order import Order


def build_op_sdfg(operands: MMMOperands, task_label: str = "OP", name: str = "mmm_op") -> dace.SDFG:
    """The nested SDFG of C[N×M] = A[N×K]·B[K×M] as K outer-product tasks, in one state:

    - ``_a`` and ``_b`` are copied whole into the buffers ``_a_copy`` and ``_b_copy`` (REUSE: each
      element of column k of A is re-read M times, of row k of B N times);
    - the task map ``OP`` (k < K, body over (j, i)): task k writes the outer product A[:, k] ⊗ B[k, :]
      into ``_c_partial[k]`` (N·M accesses of each operand), column by column; all tasks emit element
      (i, j) at the same time;
    - ``Reduce`` (one task, over (j, i)) sums the K partial products of every element into C, column by
      column.

    Consumes A and B in any order (both are copied into buffers first); produces C column-major (see
    the module docstring for why).

    With a batch (C[b] = A[b]·B[b]), the task map ranges over (b, k): one OP task per batch element and
    inner index, each with the accesses above; ``Reduce`` stays a single task over every batch element,
    and the operand buffers hold one matrix per batch element the operand is not broadcast over.
    """
    n, k, m, dtype = operands.n, operands.k, operands.m, operands.dtype
    batch = Batch(operands.batch)
    builder = mmm_builder(name, operands)
    a_buffer, a_copy = operand_buffer(builder, operands, "_a")
    b_buffer, b_copy = operand_buffer(builder, operands, "_b")
    partial = builder.transient("_c_partial", batch.shape(k, n, m), dtype)
    builder.task_map(
        task_label,
        batch.ranges(__k=f"0:{k}"),
        "elements",
        {"__j": f"0:{m}", "__i": f"0:{n}"},
        {
            "a": Memlet(data=a_buffer, subset=a_copy.index("__i", "__k", batch.params)),
            "b": Memlet(data=b_buffer, subset=b_copy.index("__k", "__j", batch.params)),
        },
        "c = a * b",
        {"c": Memlet(data=partial, subset=batch.index("__k", "__i", "__j"))},
    )
    builder.flat_map(
        "Reduce",
        batch.ranges(__j=f"0:{m}", __i=f"0:{n}"),
        {"p": Memlet(data=partial, subset=batch.index(f"0:{k}", "__i", "__j"))},
        sum_code(k, dtype),
        {"c": Memlet(data="_c", subset=operands.c.index("__i", "__j", batch.params))},
    )
    return builder.sdfg


@dace.library.expansion
class ExpandOP(MMMExpansion):
    """Expand an MMM node into K outer-product tasks and a reduction (see :func:`build_op_sdfg`)."""

    shape = "op"
    consumes_a = Order.ANY
    consumes_b = Order.ANY
    produces = Order.COLUMN
    build = staticmethod(build_op_sdfg)
