"""What the MMM shapes share beyond the generic builder: the batch indices, the builder with the operand
containers, the operand buffers and the tasklet code of dot products and sums."""

from collections.abc import Callable
from dataclasses import dataclass

import dace
from dace.transformation.transformation import ExpandTransformation

from dcaccel.buffers import BufferReason
from dcaccel.expansions.builder import ExpansionBuilder
from dcaccel.expansions.mmm.operands import CONNECTORS, MatrixView, MMMOperands, mmm_operands
from dcaccel.expansions.mmm.order import Order


@dataclass(frozen=True)
class Batch:
    """The batch dimensions of a product (sizes, possibly none) as map parameters ``__b0, __b1, ...``,
    which come first in every map range and every subset of a per-batch-element transient."""

    sizes: tuple

    @property
    def params(self) -> list[str]:
        return [f"__b{d}" for d in range(len(self.sizes))]

    def ranges(self, **inner: str) -> dict[str, str]:
        """Map ranges over the batch, then over ``inner`` (parameter -> range)."""
        return {**{p: f"0:{size}" for p, size in zip(self.params, self.sizes, strict=True)}, **inner}

    def shape(self, *inner) -> tuple:
        """The shape of a transient holding one ``inner``-shaped array per batch element."""
        return (*self.sizes, *inner)

    def index(self, *inner: str) -> str:
        """The subset of batch element (``__b0``, ...) and ``inner`` in a transient of :meth:`shape`."""
        return ", ".join([*self.params, *inner])


def mmm_builder(name: str, operands: MMMOperands) -> ExpansionBuilder:
    """A builder whose SDFG has the non-transient operand containers ``_a``, ``_b``, ``_c`` of ``operands``.

    The shapes re-read their operands from buffers of their own whoever produces them (the seed's DAGs
    #1-#3), so ``_a`` and ``_b`` count as streamed (see :func:`operand_buffer`).
    """
    builder = ExpansionBuilder(name)
    for connector in CONNECTORS:
        view = operands.view(connector)
        desc = dace.data.Array(view.dtype, view.shape, strides=view.strides)
        builder.argument(connector, desc, streamed=connector != "_c")
    return builder


def operand_buffer(builder: ExpansionBuilder, operands: MMMOperands, operand: str) -> tuple[str, MatrixView]:
    """Copy the matrices on ``operand`` whole into a new REUSE buffer ``<operand>_copy`` (the tasks re-read
    it): one rows × columns matrix per batch element the operand is not broadcast over. The copy is a plain
    copy between containers, not a task (the operand-buffer rule of :mod:`dcaccel.expansions.builder`).
    Returns the buffer and its view (indexed like the operand)."""
    view = operands.view(operand)
    compact = view.compact(operands.batch)
    buffer = builder.transient(f"{operand}_copy", compact.shape, view.dtype, BufferReason.REUSE)
    builder.copy(operand, view.whole(operands.batch), buffer, compact.whole(operands.batch))
    return buffer, compact


def dot_product_code(length, dtype: dace.typeclass) -> str:
    """Tasklet code for ``c = Σ_t a[t]·b[t]`` over ``t < length`` (``a``, ``b`` are vector connectors,
    scalars when ``length`` is 1)."""
    if length == 1:
        return "c = a * b"
    return (
        f"__acc = dace.{dtype.to_string()}(0)\n"
        f"for __t in range({length}):\n"
        "    __acc = __acc + a[__t] * b[__t]\n"
        "c = __acc"
    )


def sum_code(length, dtype: dace.typeclass) -> str:
    """Tasklet code for ``c = Σ_t p[t]`` over ``t < length`` (``p`` is a vector connector, a scalar when
    ``length`` is 1)."""
    if length == 1:
        return "c = p"
    return f"__acc = dace.{dtype.to_string()}(0)\nfor __t in range({length}):\n    __acc = __acc + p[__t]\nc = __acc"


class MMMExpansion(ExpandTransformation):
    """An MMM shape: the orders in which it consumes A and B and produces C, and its SDFG builder.

    Subclasses set ``shape`` (the implementation name), ``consumes_a``, ``consumes_b``, ``produces`` and
    ``build`` (operands, task label, SDFG name -> SDFG); the task map is labelled with the node's
    ``task_label``, else the shape's name in capitals.
    """

    environments = []
    shape: str
    consumes_a: Order
    consumes_b: Order
    produces: Order
    build: Callable[[MMMOperands, str, str], dace.SDFG]

    @staticmethod
    def check(node, state, sdfg) -> None:
        """Raise :class:`~dcaccel.errors.DcaccelError` unless ``node``'s operands make a product."""
        mmm_operands(node, state)

    @classmethod
    def expansion(cls, node, parent_state, parent_sdfg):
        """Validate ``node`` and build its nested SDFG in this shape."""
        node.validate(parent_sdfg, parent_state)
        operands = mmm_operands(node, parent_state)
        return cls.build(operands, node.task_label or cls.shape.upper(), f"{node.label}_{cls.shape}")
