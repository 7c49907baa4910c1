"""``mv``: the product as M independent matrix-vector tasks, one per column of C."""

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


def build_mv_sdfg(operands: MMMOperands, task_label: str = "MV", name: str = "mmm_mv") -> dace.SDFG:
    """The nested SDFG of C[N×M] = A[N×K]·B[K×M] as M matrix-vector tasks, in one state:

    - ``_b`` is copied whole into the buffer ``_b_copy`` (REUSE: each column is re-read N times);
    - ``BcastA`` (one task, over (i, k)) streams A row by row into ``_a_stream``, which every task reads whole;
    - the task map ``MV`` (j < M, body over i): task j computes column j, ``_c_columns[i, j] = A[i, :]·B[:, j]``
      for i < N (N·K accesses of each operand); all tasks emit row i at the same time;
    - ``Gather`` (one task, over (i, j)) writes C row by row.

    Consumes A row by row, B in any order (it is copied into a buffer first); produces C row-major.

    With a batch (C[b] = A[b]·B[b]), the task map ranges over (b, j): one MV task per batch element and
    column, each with the accesses above; ``BcastA`` and ``Gather`` stay single tasks, over every batch
    element in turn, and ``_b_copy`` holds one B per batch element B is not broadcast over.
    """
    n, k, m, dtype = operands.n, operands.k, operands.m, operands.dtype
    batch = Batch(operands.batch)
    builder = mmm_builder(name, operands)
    b_buffer, b_copy = operand_buffer(builder, operands, "_b")
    a_stream = builder.transient("_a_stream", batch.shape(n, k), dtype)
    columns = builder.transient("_c_columns", batch.shape(n, m), dtype)
    builder.flat_map(
        "BcastA",
        batch.ranges(__i=f"0:{n}", __k=f"0:{k}"),
        {"v": Memlet(data="_a", subset=operands.a.index("__i", "__k", batch.params))},
        "out = v",
        {"out": Memlet(data=a_stream, subset=batch.index("__i", "__k"))},
    )
    builder.task_map(
        task_label,
        batch.ranges(__j=f"0:{m}"),
        "rows",
        {"__i": f"0:{n}"},
        {
            "a": Memlet(data=a_stream, subset=batch.index("__i", f"0:{k}")),
            "b": Memlet(data=b_buffer, subset=b_copy.index(f"0:{k}", "__j", batch.params)),
        },
        dot_product_code(k, dtype),
        {"c": Memlet(data=columns, subset=batch.index("__i", "__j"))},
    )
    builder.flat_map(
        "Gather",
        batch.ranges(__i=f"0:{n}", __j=f"0:{m}"),
        {"v": Memlet(data=columns, subset=batch.index("__i", "__j"))},
        "out = v",
        {"out": Memlet(data="_c", subset=operands.c.index("__i", "__j", batch.params))},
    )
    return builder.sdfg


@dace.library.expansion
class ExpandMV(MMMExpansion):
    """Expand an MMM node into M matrix-vector tasks (see :func:`build_mv_sdfg`)."""

    shape = "mv"
    consumes_a = Order.ROW
    consumes_b = Order.ANY
    produces = Order.ROW
    build = staticmethod(build_mv_sdfg)
