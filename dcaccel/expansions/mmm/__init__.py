"""The canonical matrix-multiply node ``MMM`` and its shapes ``mv``, ``op``, ``lmv``.

``node.py`` holds the library node, ``expansions/`` one module per shape (each with a builder that
returns the nested SDFG, testable alone), ``order.py`` the data orders the shapes declare and the
buffer rule derived from them, ``operands.py`` how the operands are read from the memlets.
"""

from dcaccel.expansions.implementation import Implementation
from dcaccel.expansions.mmm.expansions import (
    ExpandLMV,
    ExpandMV,
    ExpandOP,
    build_lmv_sdfg,
    build_mv_sdfg,
    build_op_sdfg,
)
from dcaccel.expansions.mmm.node import MMM
from dcaccel.expansions.mmm.operands import MMMOperands, mmm_operands
from dcaccel.expansions.mmm.order import Order, buffer_reason_between

IMPLEMENTATIONS = tuple(
    Implementation("MatMul", name, expansion, MMM) for name, expansion in MMM.implementations.items()
)
"""The shapes, for :mod:`dcaccel.expansions.registry` (the node class declares them itself)."""

__all__ = [
    "MMM",
    "ExpandLMV",
    "ExpandMV",
    "ExpandOP",
    "IMPLEMENTATIONS",
    "MMMOperands",
    "Order",
    "buffer_reason_between",
    "build_lmv_sdfg",
    "build_mv_sdfg",
    "build_op_sdfg",
    "mmm_operands",
]
