"""The order in which a canonical task consumes or produces a matrix, and what it implies for buffers.

A container streams from its producer to its consumer only when the consumer reads it in the order
the producer writes it. The MMM expansions declare their orders as data (class attributes
``consumes_a``, ``consumes_b``, ``produces``); the operators built on top of them (im2col
convolution, Gemm, MatMul) derive the buffer marks of the containers around the MMM from these
orders with :func:`buffer_reason_between`.
"""

from enum import StrEnum

from dcaccel.buffers import BufferReason


class Order(StrEnum):
    """Order of the elements of a matrix as a task reads or writes them."""

    ANY = "any"  # read in any order: the consumer copies the matrix into its own buffer first
    ROW = "row"  # row by row (row-major)
    COLUMN = "column"  # column by column (column-major)
    ACCUMULATED = "accumulated"  # written several times (partial sums accumulated into it)


def buffer_reason_between(produced: Order, consumed: Order) -> BufferReason | None:
    """Why a container written in order ``produced`` and read in order ``consumed`` must be a buffer.

    None when it streams: the consumer takes any order (it copies the data into a buffer of its
    own) or the same order as the producer writes. A container accumulated into must be complete
    before it is read (ACCUMULATE); any other mismatch is a reordering (REORDER).
    """
    if consumed is Order.ANY or (consumed is produced and produced is not Order.ACCUMULATED):
        return None
    if produced is Order.ACCUMULATED:
        return BufferReason.ACCUMULATE
    return BufferReason.REORDER
