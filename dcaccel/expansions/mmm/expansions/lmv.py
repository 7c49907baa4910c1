"""``lmv``: the product as N independent left matrix-vector tasks, one per row of C."""

import dace
import dace.library
from dace import Memlet

from dcaccel.expansions.mmm.expansions.common import (
    Batch,
    MMMExpansion,
    dot_product_code,
    mmm_builder,
    operand_buffer,
)
from dcaccel.expansions.mmm.operands import MMMOperands
from dcaccel.expansions.mmm.order import Order


def build_lmv_sdfg(operands: MMMOperands, task_label: str = "LMV", name: str = "mmm_lmv") -> dace.SDFG:
    """The nested SDFG of C[N×M] = A[N×K]·B[K×M] as N left matrix-vector tasks, in one state:

    - ``_a`` is copied whole into the buffer ``_a_copy`` (REUSE: row i is re-read M times by task i);
    - ``BcastB`` (one task, over (k, j)) streams B row by row (k-major) into ``_b_stream``, which every task
      reads whole;
    - the task map ``LMV`` (i < N, body over j): task i computes row i, ``_c_rows[i, j] = A[i, :]·B[:, j]``
      for j < M (K·M accesses of each operand); all tasks emit column j at the same time;
    - ``Gather`` (one task, over (j, i)) receives element j of every row at the same time and writes C
      column by column.

    Consumes A in any order (it is copied into a buffer first), B row by row; produces C column-major.

    With a batch (C[b] = A[b]·B[b]), the task map ranges over (b, i): one LMV task per batch element and
    row, each with the accesses above; ``BcastB`` and ``Gather`` stay single tasks, over every batch
    element in turn (C column-major within each batch element), and ``_a_copy`` holds one A per batch
    element A is not broadcast over.
    """
    n, k, m, dtype = operands.n, operands.k, operands.m, operands.dtype
    batch = Batch(operands.batch)
    builder = mmm_builder(name, operands)
    a_buffer, a_copy = operand_buffer(builder, operands, "_a")
    b_stream = builder.transient("_b_stream", batch.shape(k, m), dtype)
    rows = builder.transient("_c_rows", batch.shape(n, m), dtype)
    builder.flat_map(
        "BcastB",
        batch.ranges(__k=f"0:{k}", __j=f"0:{m}"),
        {"v": Memlet(data="_b", subset=operands.b.index("__k", "__j", batch.params))},
        "out = v",
        {"out": Memlet(data=b_stream, subset=batch.index("__k", "__j"))},
    )
    builder.task_map(
        task_label,
        batch.ranges(__i=f"0:{n}"),
        "columns",
        {"__j": f"0:{m}"},
        {
            "a": Memlet(data=a_buffer, subset=a_copy.index("__i", f"0:{k}", batch.params)),
            "b": Memlet(data=b_stream, subset=batch.index(f"0:{k}", "__j")),
        },
        dot_product_code(k, dtype),
        {"c": Memlet(data=rows, subset=batch.index("__i", "__j"))},
    )
    builder.flat_map(
        "Gather",
        batch.ranges(__j=f"0:{m}", __i=f"0:{n}"),
        {"v": Memlet(data=rows, subset=batch.index("__i", "__j"))},
        "out = v",
        {"out": Memlet(data="_c", subset=operands.c.index("__i", "__j", batch.params))},
    )
    return builder.sdfg


@dace.library.expansion
class ExpandLMV(MMMExpansion):
    """Expand an MMM node into N left matrix-vector tasks (see :func:`build_lmv_sdfg`)."""

    shape = "lmv"
    consumes_a = Order.ANY
    consumes_b = Order.ROW
    produces = Order.COLUMN
    build = staticmethod(build_lmv_sdfg)
