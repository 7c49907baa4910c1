"""Canonical implementations of operators.

One module per op family, each listing its implementations in ``IMPLEMENTATIONS``; the canonical
matrix-multiply node and its shapes live in :mod:`dcaccel.expansions.mmm`, the SDFG builder they all
use in :mod:`dcaccel.expansions.builder`. Importing this package imports none of the op modules:
:func:`register` registers every implementation on DaCe's ONNX ops and library nodes (see
:mod:`dcaccel.expansions.registry`).
"""

from dcaccel.expansions.registry import implementations, register, supported_ops

__all__ = ["implementations", "register", "supported_ops"]
