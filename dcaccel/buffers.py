"""Buffer marks: which data containers of an SDFG are buffer nodes of the canonical model.

A buffer is a container whose data cannot flow through as a stream: it is reused (read more
often than written), reordered (read in another order than written), accumulated into, or a
program input/output. The mark is explicit metadata on the data descriptor, stored in its
``location`` dictionary (a DaCe property that survives copies, inlining and JSON round-trips).
It is never derived from the container's name.
"""

from enum import StrEnum

import dace

_KEY = "dcaccel.buffer"


class BufferReason(StrEnum):
    """Why a container is a buffer node."""

    REUSE = "reuse"  # read more often than written (e.g. an MMM operand re-read per task)
    REORDER = "reorder"  # read in another order than written (e.g. im2col columns read by rows)
    ACCUMULATE = "accumulate"  # written more than once (a reduction target)
    PROGRAM_IO = "program-io"  # a program input or output
    WEIGHTS = "weights"  # constant parameters laid out ahead of execution (e.g. reshaped weights)
    LAYER_OUTPUT = "layer-output"  # an operator's result, materialised before the next operator reads it


def mark_buffer(desc: dace.data.Data, reason: BufferReason) -> None:
    """Mark ``desc`` as a buffer node for ``reason``."""
    desc.location[_KEY] = BufferReason(reason).value


def unmark_buffer(desc: dace.data.Data) -> None:
    """Remove a buffer mark (the container then streams)."""
    desc.location.pop(_KEY, None)


def buffer_reason(desc: dace.data.Data) -> BufferReason | None:
    """The reason ``desc`` is a buffer node, or None if it streams."""
    value = desc.location.get(_KEY)
    return None if value is None else BufferReason(value)


def is_buffer(desc: dace.data.Data) -> bool:
    """Whether ``desc`` carries a buffer mark."""
    return _KEY in desc.location
