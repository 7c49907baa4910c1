"""The canonical matrix-multiply library node."""

import dace
from dace import properties
from dace.sdfg import nodes

from dcaccel.expansions.mmm.expansions import ExpandLMV, ExpandMV, ExpandOP
from dcaccel.expansions.mmm.operands import mmm_operands


@dace.library.node
class MMM(nodes.LibraryNode):
    """C[N×M] = A[N×K]·B[K×M] (connectors ``_a``, ``_b`` in, ``_c`` out) in one of three canonical shapes:

    - ``mv``: M matrix-vector tasks (one per column of C), A broadcast, B buffered, C gathered row-major;
    - ``op``: K outer-product tasks and a reduction, A and B buffered, C produced column-major;
    - ``lmv``: N left matrix-vector tasks (one per row of C), A buffered, B broadcast, C gathered
      column-major.

    Each expansion class declares the order in which it consumes its operands and produces C
    (``consumes_a``, ``consumes_b``, ``produces``), from which the operators built on MMM derive the
    buffer marks of the containers around it. An operand memlet may address a slice of a larger
    container; its last two dimensions are the matrix. The leading dimensions of ``_c`` (of size other
    than 1) are a batch, C[b] = A[b]·B[b], with A and B broadcast by numpy rules: the task map then
    ranges over (batch, task index), one task per batch element and task of the shape, and the single
    tasks of the shape run once over the whole batch (see :mod:`dcaccel.expansions.mmm.operands`).
    """

    implementations = {"mv": ExpandMV, "op": ExpandOP, "lmv": ExpandLMV}
    default_implementation = "mv"
    op_type = "MatMul"  # the op type choices name it by (``dcaccel.frontend.ops.op_type``)

    task_label = properties.Property(
        dtype=str,
        allow_none=True,
        default=None,
        desc="Label of the task map (its iterations are the tasks); None uses the shape's name: MV, OP or LMV",
    )

    def __init__(self, name, *args, task_label=None, **kwargs):
        super().__init__(name, *args, inputs={"_a", "_b"}, outputs={"_c"}, **kwargs)
        self.task_label = task_label

    def validate(self, sdfg, state):
        """Check that ``_a``, ``_b``, ``_c`` are connected matrices with matching sizes and one element type.

        Raises :class:`dcaccel.errors.DcaccelError` naming the node and the operand shapes.
        """
        mmm_operands(self, state)
